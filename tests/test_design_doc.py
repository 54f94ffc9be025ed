"""docs/design.md describes the package as it is: every module is in its module table, every
module the table names exists, and every module opens with a docstring saying its job."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python"


def _module_table() -> str:
    text = (ROOT / "docs" / "design.md").read_text()
    start = text.index("Which module keeps which invariant")
    return text[start:text.index("## 6. On-store format", start)]


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _names(path: Path) -> list[str]:
    """How the table may name a module: its path under ``python/`` (``read/planner.py``), or its
    package folder (``demo/``) for a package's ``__init__.py`` and the demo's modules."""
    rel = path.relative_to(PACKAGE)
    names = [f"`{rel.as_posix()}`"]
    if rel.parent != Path(".") and (path.name == "__init__.py" or rel.parts[0] == "demo"):
        names.append(f"`{rel.parent.as_posix()}/`")
    return names


def test_every_module_is_in_the_design_module_table() -> None:
    table = _module_table()
    missing = [path.relative_to(PACKAGE).as_posix() for path in _modules()
               if not any(n in table for n in _names(path))]
    assert not missing, f"add these modules to docs/design.md §5's module table: {missing}"


def test_every_module_the_design_table_names_exists() -> None:
    named = set(re.findall(r"`((?:[a-z]+/)*[a-z_]+\.py)`", _module_table()))
    gone = [n for n in sorted(named) if not n.startswith("tests/") and not (PACKAGE / n).exists()]
    assert not gone, f"docs/design.md §5 names modules that do not exist: {gone}"


def test_every_module_opens_with_a_docstring_saying_its_job() -> None:
    bare = [p.relative_to(PACKAGE).as_posix() for p in _modules()
            if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert not bare, f"modules without a docstring saying their job: {bare}"


def test_readme_links_the_design() -> None:
    assert "](docs/design.md)" in (ROOT / "README.md").read_text()
