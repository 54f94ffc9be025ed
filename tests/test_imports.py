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

import pytest
from helpers import ROOT

PACKAGE = "pyspark_tstream"


def _package_dirs() -> dict[str, Path]:
    """Package name -> folder, from ``setup.cfg``'s ``package_dir``."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    out = {}
    for line in cfg["options"]["package_dir"].strip().splitlines():
        package, _, folder = (part.strip() for part in line.partition("="))
        out[package] = ROOT / folder
    return out


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of the package, subpackages included."""
    out: dict[str, Path] = {}
    for package, folder in _package_dirs().items():
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
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
        subs = [f"{base}.{a.name}" for a in node.names]
        # ``from pkg import module`` loads pkg's __init__ too, but the edge that matters is to the
        # module; the package itself counts only where a name is one of its attributes
        names = subs if all(s in known for s in subs) else [base] + subs
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
    assert {f"{PACKAGE}.api.stream", f"{PACKAGE}.cli.app", f"{PACKAGE}.datasource.source",
            f"{PACKAGE}.sink.writer", f"{PACKAGE}.keys", f"{PACKAGE}.store.layout"} <= set(graph)
    assert f"{PACKAGE}.journal.journal" in graph[f"{PACKAGE}.api.stream"]


def test_no_import_cycles() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles (each list imports itself around): " + "; ".join(
        " <-> ".join(c) for c in cycles)


def _unit(module: str) -> str:
    """The unit a module belongs to in the package graph: its subpackage (``pyspark_tstream.read``),
    or the module itself where it sits directly in the package (``pyspark_tstream.errors``)."""
    parts = module.split(".")
    if len(parts) == 1:
        return module
    sub = ".".join(parts[:2])
    dirs = _package_dirs()
    return sub if sub in dirs or (dirs[PACKAGE] / parts[1]).is_dir() else module


def package_graph() -> dict[str, set[str]]:
    """Import edges between subpackages (and the modules directly in the package)."""
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        unit = _unit(module)
        graph.setdefault(unit, set()).update(_unit(t) for t in targets if _unit(t) != unit)
    return graph


def test_no_import_cycles_between_packages() -> None:
    graph = package_graph()
    assert f"{PACKAGE}.store" in graph[f"{PACKAGE}.journal"]
    cycles = find_cycles(graph)
    assert not cycles, "import cycles between packages: " + "; ".join(" <-> ".join(c) for c in cycles)


#: The layers, bottom first: a unit imports only units of lower layers, never one beside or above
#: it. ``pyspark_tstream`` is the package's own ``__init__`` (the facade Spark's discovery loads).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "keys", "units", "policytext", "arrow_arrays", "version", "exits", "codec"),
    ("timestamps", "schema", "upkeep_mode"),
    ("store",),
    ("journal",),
    ("maps", "epochs", "chunkfile"),
    ("write", "read"),
    ("compaction",),
    ("maintain",),
    ("api",),
    ("conf",),
    ("cli", "spark"),
    ("sink",),
    ("datasource",),
    ("pyspark_tstream", "demo"),
)


def _layer_of() -> dict[str, int]:
    return {(name if name == PACKAGE else f"{PACKAGE}.{name}"): rank
            for rank, names in enumerate(LAYERS) for name in names}


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Edges that go sideways or up the layers, and units no layer names."""
    rank = _layer_of()
    out = [f"{unit} is in no layer (add it to LAYERS)" for unit in sorted(graph) if unit not in rank]
    for unit in sorted(graph):
        for target in sorted(graph[unit]):
            if unit in rank and target in rank and rank[target] >= rank[unit]:
                out.append(f"{unit} (layer {rank[unit]}) imports {target} (layer {rank[target]})")
    return out


def test_each_package_imports_only_layers_below_it() -> None:
    """The layering holds: store <- journal <- maps/epochs/chunkfile <- write/read <- compaction
    <- maintain <- api <- conf <- cli/spark <- sink <- datasource; a package never reaches
    sideways or back up."""
    problems = layer_violations(package_graph())
    assert not problems, "layering broken: " + "; ".join(problems)


def test_a_sideways_or_upward_import_is_a_layer_violation() -> None:
    """The layer check is not vacuous: read importing write (sideways) or the store importing the
    journal (up) is refused, and so is a package no layer names."""
    graph = package_graph()
    graph[f"{PACKAGE}.read"].add(f"{PACKAGE}.write")
    graph[f"{PACKAGE}.store"].add(f"{PACKAGE}.journal")
    graph[f"{PACKAGE}.newthing"] = set()
    problems = layer_violations(graph)
    assert any("read (layer 5) imports pyspark_tstream.write" in p for p in problems)
    assert any("store (layer 2) imports pyspark_tstream.journal" in p for p in problems)
    assert any("newthing is in no layer" in p for p in problems)


def test_the_repository_root_is_the_design_cards_layout() -> None:
    """The card fixes the top level: the core in python/, the thin Spark adapters in datasource/,
    sink/ and conf/ at the root, mapped into one package by setup.cfg."""
    for name in ("python", "datasource", "sink", "conf", "tests", "notebooks"):
        assert (ROOT / name).is_dir(), f"{name}/ is missing at the repository root"
    for name in ("setup.cfg", "README.md"):
        assert (ROOT / name).is_file(), f"{name} is missing at the repository root"
    dirs = _package_dirs()
    assert dirs[PACKAGE] == ROOT / "python"
    for adapter in ("datasource", "sink", "conf"):
        assert dirs[f"{PACKAGE}.{adapter}"] == ROOT / adapter
        assert (ROOT / adapter / "__init__.py").is_file()
        assert not (ROOT / "python" / adapter).exists(), f"python/{adapter} shadows {adapter}/"
    assert {f"{PACKAGE}.datasource.source", f"{PACKAGE}.sink.writer", f"{PACKAGE}.conf.options"} <= set(_modules())


def test_a_package_cycle_is_found() -> None:
    """The package check is not vacuous: an edge from the store back up to the API closes a cycle."""
    graph = package_graph()
    graph[f"{PACKAGE}.store"].add(f"{PACKAGE}.api")
    assert any(f"{PACKAGE}.store" in c and f"{PACKAGE}.api" in c for c in find_cycles(graph))


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]


def test_the_package_is_small_modules_in_subpackages() -> None:
    """At most 15 modules sit directly in ``python/``, none over 600 lines, and every package
    folder is listed in ``setup.cfg`` (a strict editable install or a wheel leaves out the rest)."""
    core = _package_dirs()[PACKAGE]
    flat = sorted(p.name for p in core.glob("*.py"))
    assert len(flat) <= 15, f"{len(flat)} modules directly in python/: {flat}"
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text().splitlines())) > 600}
    assert not long, f"modules over 600 lines (split them by job): {long}"
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    folders = {".".join([package, *p.parent.relative_to(folder).parts])
               for package, folder in _package_dirs().items() for p in folder.rglob("__init__.py")}
    assert listed == folders, f"setup.cfg packages differ from the folders: {sorted(listed ^ folders)}"


#: Subpackages that may import pyspark: the Spark adapters and the demo.
SPARK_PACKAGES = ("spark", "datasource", "sink", "demo")


def test_the_core_imports_no_spark() -> None:
    """Everything but the Spark adapters is the Spark-free core: no module in it imports pyspark."""
    offenders = []
    for name, path in _modules().items():
        parts = name.split(".")
        if name == PACKAGE or (len(parts) > 1 and parts[1] in SPARK_PACKAGES):
            continue  # adapters may use Spark; __init__ exposes DefaultSource (guarded) for discovery
        for node in _imports(ast.parse(path.read_text())):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m == "pyspark" or m.startswith("pyspark.") for m in mods):
                offenders.append(f"{name} (line {node.lineno})")
    assert not offenders, f"Spark imports in the Spark-free core: {offenders}"


def test_the_core_needs_nothing_from_the_adapters() -> None:
    """The core (and the option parsing) imports none of the Spark adapter packages."""
    graph = package_graph()
    spark = {f"{PACKAGE}.{p}" for p in SPARK_PACKAGES}
    offenders = {unit: sorted(graph[unit] & spark) for unit in graph
                 if unit not in spark and unit != PACKAGE and graph[unit] & spark}
    assert not offenders, f"core packages importing Spark adapters: {offenders}"


def test_the_core_runs_without_pyspark() -> None:
    """PySpark is the ``spark`` extra: with it hidden, a process creates, appends, reads, runs
    ``to_reader``, the metadata tables and ``tstream info``, never importing pyspark; importing
    the Spark adapters then names the install command (tests/spark_free.py, which CI also runs in
    a fresh venv without the extra)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "spark_free.py"), "--block"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pip install 'pyspark-tstream[spark]'" in proc.stdout


def test_pyspark_is_an_extra_not_a_requirement() -> None:
    """``install_requires`` names no PySpark; the ``spark`` extra does, and the test extra brings
    Spark Connect's."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    required = cfg["options"]["install_requires"]
    extras = cfg["options.extras_require"]
    assert "pyspark" not in required
    assert "pyspark>=4.0" in extras["spark"].split() and "pyspark[connect]>=4.0" in extras["test"].split()


def test_an_old_pyspark_is_named_with_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PySpark older than 4.0 (no Python Data Source API) is refused with the install command."""
    import pyspark
    from pyspark_tstream.spark.requirement import require_pyspark

    monkeypatch.setattr(pyspark, "__version__", "3.5.1")
    with pytest.raises(ModuleNotFoundError, match=r"needs PySpark >= 4.0; this environment has 3.5.1: "
                                                  r"pip install 'pyspark-tstream\[spark\]'"):
        require_pyspark()
