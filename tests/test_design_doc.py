"""docs/design.md describes the package as it is: every module is in its module table, every
module the table names exists, and every module opens with a docstring saying its job."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("python", "datasource", "sink", "conf", "demo")


def _module_table() -> str:
    text = (ROOT / "docs" / "design.md").read_text()
    start = text.index("Which module keeps which invariant")
    return text[start:text.index("## 6. On-store format", start)]


def _modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).glob("*.py"))


def test_every_module_is_in_the_design_module_table() -> None:
    table = _module_table()
    missing = []
    for path in _modules():
        folder = path.parent.name
        names = [f"`{path.name}`"] if folder == "python" else [f"`{folder}/{path.name}`", f"`{folder}/`"]
        if not any(n in table for n in names):
            missing.append(f"{folder}/{path.name}")
    assert not missing, f"add these modules to docs/design.md §5's module table: {missing}"


def test_every_module_the_design_table_names_exists() -> None:
    named = set(re.findall(r"`((?:[a-z]+/)?[a-z_]+\.py)`", _module_table()))
    gone = [n for n in sorted(named) if not (ROOT / (n if "/" in n else f"python/{n}")).exists()]
    assert not gone, f"docs/design.md §5 names modules that do not exist: {gone}"


def test_every_module_opens_with_a_docstring_saying_its_job() -> None:
    bare = [f"{p.parent.name}/{p.name}" for p in _modules()
            if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert not bare, f"modules without a docstring saying their job: {bare}"


def test_readme_links_the_design() -> None:
    assert "](docs/design.md)" in (ROOT / "README.md").read_text()
