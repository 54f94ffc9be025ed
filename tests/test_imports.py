"""The package has no import cycles, and its Spark-free core imports no Spark.

Every ``import`` of a module counts, wherever it stands (module level or inside a function):
an import hidden in a function still ties the two modules together, it only defers the
failure. Imports under ``if TYPE_CHECKING:`` are for type checkers only and do not count. The
modules are found through ``setup.cfg``'s ``package_dir``, so a new package folder is covered.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pyspark_tstream"


def _package_dirs() -> dict[str, Path]:
    """Package name -> folder, from ``setup.cfg``."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    out = {}
    for line in cfg["options"]["package_dir"].strip().splitlines():
        package, _, folder = (part.strip() for part in line.partition("="))
        out[package] = ROOT / folder
    return out


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of the package."""
    out: dict[str, Path] = {}
    for package, folder in _package_dirs().items():
        for path in sorted(folder.glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement outside ``if TYPE_CHECKING:`` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            visit(child)

    visit(tree)
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    """The package modules an import statement loads."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            parts = module.split(".") if is_package else module.split(".")[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [base] + [f"{base}.{a.name}" for a in node.names]
    out = set()
    for name in names:
        # importing a.b.c loads a and a.b too; only the deepest known module is a real edge
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.stem == "__init__"
        graph[name] = set().union(*(_targets(name, is_package, n, known) for n in _imports(tree)))
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert {f"{PACKAGE}.stream", f"{PACKAGE}.cli", f"{PACKAGE}.datasource.source", f"{PACKAGE}.sink.writer",
            f"{PACKAGE}.conf.keys"} <= set(graph)
    assert f"{PACKAGE}.journal" in graph[f"{PACKAGE}.stream"]


def test_no_import_cycles() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles (each list imports itself around): " + "; ".join(
        " <-> ".join(c) for c in cycles)


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]


def test_the_core_imports_no_spark() -> None:
    """``python/`` is the Spark-free core: no module in it imports pyspark (the demo lives apart)."""
    core = _package_dirs()[PACKAGE]
    offenders = []
    for name, path in _modules().items():
        if path.parent != core or name == PACKAGE:
            continue  # adapters may use Spark; __init__ exposes DefaultSource (guarded) for discovery
        for node in _imports(ast.parse(path.read_text())):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m == "pyspark" or m.startswith("pyspark.") for m in mods):
                offenders.append(f"{name} (line {node.lineno})")
    assert not offenders, f"Spark imports in the Spark-free core: {offenders}"
