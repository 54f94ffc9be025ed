"""docs/design.md describes the package as it is: every module is in its module table, every
module the table names exists, and every module opens with a docstring saying its job."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import CORE_DIR, ROOT

#: The design card's folders that hold the package: the core, and the Spark adapters at the root.
ADAPTERS = ("datasource", "sink", "conf")


def _module_table() -> str:
    text = (ROOT / "docs" / "design.md").read_text()
    start = text.index("Which module keeps which invariant")
    return text[start:text.index("## 6. On-store format", start)]


def _modules() -> list[Path]:
    return sorted([*CORE_DIR.rglob("*.py"), *(p for a in ADAPTERS for p in (ROOT / a).rglob("*.py"))])


def _rel(path: Path) -> Path:
    """A module's name in the table: its path under ``python/`` for the core
    (``read/planner.py``), under the repository root for an adapter (``sink/writer.py``)."""
    return path.relative_to(CORE_DIR if path.is_relative_to(CORE_DIR) else ROOT)


def _exists(name: str) -> bool:
    return (ROOT / name if name.split("/")[0] in ADAPTERS else CORE_DIR / name).exists()


def _names(path: Path) -> list[str]:
    """How the table may name a module: its path (``_rel``), or its package folder (``demo/``)
    for a package's ``__init__.py`` and the demo's modules."""
    rel = _rel(path)
    names = [f"`{rel.as_posix()}`"]
    if rel.parent != Path(".") and (path.name == "__init__.py" or rel.parts[0] == "demo"):
        names.append(f"`{rel.parent.as_posix()}/`")
    return names


def test_every_module_is_in_the_design_module_table() -> None:
    table = _module_table()
    missing = [_rel(path).as_posix() for path in _modules()
               if not any(n in table for n in _names(path))]
    assert not missing, f"add these modules to docs/design.md §5's module table: {missing}"


def test_every_module_the_design_table_names_exists() -> None:
    named = set(re.findall(r"`((?:[a-z]+/)*[a-z_]+\.py)`", _module_table()))
    gone = [n for n in sorted(named) if not n.startswith("tests/") and not _exists(n)]
    assert not gone, f"docs/design.md §5 names modules that do not exist: {gone}"


def test_every_module_opens_with_a_docstring_saying_its_job() -> None:
    bare = [_rel(p).as_posix() for p in _modules()
            if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert not bare, f"modules without a docstring saying their job: {bare}"


def test_readme_links_the_design() -> None:
    assert "](docs/design.md)" in (ROOT / "README.md").read_text()
