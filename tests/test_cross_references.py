"""Docstrings and docs name things that exist: every Sphinx role in the package's docstrings
(``:func:`~pyspark_tstream.read.planner.plan```, ``:meth:`refresh```) resolves to an object, and
every repository path in ``docs/*.md``, the README and docstrings is a file there.
A module moved or an object renamed otherwise leaves references behind that nothing reads."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pyspark_tstream"
#: Where the package's modules live: the core under ``python/``, the Spark adapters at the root.
SOURCES = {ROOT / "python": PACKAGE, **{ROOT / a: f"{PACKAGE}.{a}" for a in ("datasource", "sink", "conf")}}
ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc|obj):`([^`]+)`")
_MISSING = object()


def _modules() -> list[tuple[str, Path]]:
    """``(dotted name, file)`` of every module of the package (``__main__`` is not imported:
    it runs the demo)."""
    out = []
    for folder, prefix in SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if parts and parts[-1] == "__main__":
                continue
            out.append((".".join([prefix, *parts]), path))
    return out


def _chain(obj: Any, names: list[str]) -> Any:
    """``obj.<names...>``; an attribute a class only annotates (a dataclass field without a
    default) counts as there."""
    for i, name in enumerate(names):
        found = getattr(obj, name, _MISSING)
        if found is _MISSING:
            annotated = isinstance(obj, type) and any(name in getattr(c, "__annotations__", {}) for c in obj.__mro__)
            return True if annotated and i == len(names) - 1 else _MISSING
        obj = found
    return obj


def _absolute(name: str) -> Any:
    """The object a fully qualified name names: its longest importable module prefix, then
    attributes."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        return _chain(module, parts[i:])
    return _MISSING


def _resolves(target: str, module: Any, scopes: list[Any], all_names: list[str]) -> bool:
    """Whether ``target`` names an object the way Sphinx's Python domain looks it up: in the
    enclosing classes, the module, absolutely, or (a leading ``.``) by its suffix anywhere."""
    target = target.split("<")[-1].rstrip(">").lstrip("~").removesuffix("()")
    if target.startswith("."):
        suffix = target.lstrip(".")
        return any(_absolute(f"{m}.{suffix}") is not _MISSING or m.endswith(f".{suffix}") for m in all_names)
    parts = target.split(".")
    for scope in [*reversed(scopes), module]:
        if _chain(scope, parts) is not _MISSING:
            return True
    return _absolute(target) is not _MISSING or hasattr(builtins, target)


def _docstrings(tree: ast.Module) -> list[tuple[list[str], str]]:
    """``(enclosing class names, docstring)`` of the module, each class and each function."""
    out: list[tuple[list[str], str]] = []

    def visit(node: ast.AST, classes: list[str]) -> None:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = [*classes, node.name] if isinstance(node, ast.ClassDef) else classes
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((inner, doc))
            for child in node.body:
                visit(child, inner)

    visit(tree, [])
    return out


def test_every_sphinx_role_in_a_docstring_resolves() -> None:
    modules = _modules()
    names = [name for name, _ in modules]
    broken = []
    for name, path in modules:
        module = importlib.import_module(name)
        for classes, doc in _docstrings(ast.parse(path.read_text())):
            scopes = [module]
            for cls in classes:
                scopes.append(getattr(scopes[-1], cls, _MISSING))
            scopes = [s for s in scopes[1:] if s is not _MISSING]
            for target in ROLE.findall(doc):
                if not _resolves(target, module, scopes, names):
                    broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, "docstrings name objects that do not exist:\n" + "\n".join(broken)


#: A repository path: a file under one of the repository's top folders (not part of a longer path).
REPO_PATH = re.compile(r"(?<![\w/.-])((?:python|datasource|sink|conf|tests|docs|notebooks)/"
                       r"[\w./-]*\w\.(?:py|md|ipynb|cfg))\b")


def _texts() -> list[Path]:
    """The docs pages, the README, and every module of the package and of the tests."""
    tests = sorted((ROOT / "tests").rglob("*.py"))
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", *(path for _, path in _modules()), *tests]


@pytest.mark.parametrize("path", _texts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_paths_in_docs_and_docstrings_name_files_that_exist(path: Path) -> None:
    """A path in a docs page or a docstring (``python/read/planner.py``, ``sink/writer.py``)
    names a file of the repository as it is laid out now."""
    text = path.read_text()
    if path.suffix == ".py":
        text = "\n".join(doc for _, doc in _docstrings(ast.parse(text)))
    gone = sorted({p for p in REPO_PATH.findall(text) if not (ROOT / p).exists()})
    assert not gone, f"{path.relative_to(ROOT)} names files that do not exist: {gone}"
