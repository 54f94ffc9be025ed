"""Every example in README.md runs: Python blocks in order in one namespace (with ``spark``),
then the Python blocks of ``docs/*.md`` (examples moved out of the README) in that namespace,
the CLI block through bash. The first bash block (install + run) is what CI and
``tests/test_demo.py`` run; ``text`` blocks are illustrations with placeholders."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import README

DOCS = README.parent / "docs"
# the README's and docs' examples run in the slow set: each shows behaviour other tests pin
pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _blocks(lang: str, path: Path = README) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(), flags=re.S)


def test_readme_python_examples_run(spark: Any) -> None:
    blocks = _blocks("python")
    assert len(blocks) >= 3
    # the reference pages' examples (scaling, compaction, fsck/repair) build on the README's
    # namespace (``base``, ``pa``, ``Stream``), so they run after it
    docs = [(f"docs/{p.name}", code) for p in sorted(DOCS.glob("*.md")) for code in _blocks("python", p)]
    assert len(docs) >= 3
    namespace: dict[str, Any] = {"spark": spark}
    for i, code in enumerate(blocks):
        exec(compile(code, f"README.md python block {i + 1}", "exec"), namespace)  # noqa: S102
    for i, (name, code) in enumerate(docs):
        exec(compile(code, f"{name} python block (docs block {i + 1})", "exec"), namespace)  # noqa: S102


def test_readme_cli_example_runs(tmp_path: Path) -> None:
    blocks = _blocks("bash")
    assert "pip install" in blocks[0]
    # the README's fixed /tmp path, made private to this run: parallel runs on one machine
    # (CI jobs, several checkouts) must not create, read and delete each other's stream
    cli = blocks[1].replace("/tmp/tstream-readme-cli", str(tmp_path / "tstream-readme-cli"))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", cli], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert '"device": "d2"' in proc.stdout or "d2" in proc.stdout
