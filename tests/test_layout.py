"""Every store path is built in ``store/layout.py``, and the paths are the on-store format.

(a) Each layout function gives the exact strings of docs/protocol.md's tree (§1): changing one
changes the format streams already hold. (b) No other module of the package holds a piece of
that tree in its code (string constants that are not docstrings), so a reader of
``store/layout.py`` sees the whole layout.
"""

from __future__ import annotations

import ast
import re

import pytest
from helpers import CORE_DIR, ROOT
from pyspark_tstream.store import layout

#: Every folder setup.cfg maps into the package: the core and the Spark adapters at the root.
SOURCES = (CORE_DIR, ROOT / "datasource", ROOT / "sink", ROOT / "conf")


def test_metadata_paths_are_the_documented_ones() -> None:
    assert layout.META == "_tstream"
    assert layout.HEAD == "_tstream/head.json"
    assert layout.ANCHOR == "_tstream/anchor.json"
    assert layout.entry(0) == "_tstream/journal/000000/000000000000.json"
    assert layout.entry(1_234_567) == "_tstream/journal/000012/000001234567.json"
    assert layout.journal_folder("000012") == "_tstream/journal/000012"
    assert layout.index_node(2, 7) == "_tstream/index/2/000000000007.json"
    assert layout.sealed_folder(3) == "_tstream/sealed/000003"
    assert layout.sealed_version(3, 12) == "_tstream/sealed/000003/00000012.json"
    assert layout.sealed_head(3) == "_tstream/sealed/000003/head.json"
    assert layout.epoch_record(5) == "_tstream/epochs/000000/000000000005.json"
    assert layout.epoch_record(100_001) == "_tstream/epochs/000001/000000100001.json"
    assert layout.epoch_chunk(2) == "_tstream/epochs/chunks/000000000002.json"
    assert layout.group_folder("g1") == "_tstream/groups/g1"
    assert layout.group_version("g1", 4) == "_tstream/groups/g1/log/000000/000000000004.json"
    assert layout.group_head("g1") == "_tstream/groups/g1/head.json"
    assert layout.macro_segment_folder(7) == "_tstream/macros/7"
    assert layout.macro_bucket_folder(7, 1) == "_tstream/macros/7/000001"
    assert layout.macro_version(7, 1, 9) == "_tstream/macros/7/000001/00000009.json"
    assert layout.macro_head(7, 1) == "_tstream/macros/7/000001/head.json"
    assert layout.manifest("data/7/m-" + "a" * 32 + ".parquet") == "_tstream/compact/m-" + "a" * 32 + ".json"
    assert layout.manifest_file("m-x.json") == "_tstream/compact/m-x.json"
    assert layout.commit_request(12, "ab12") == "_tstream/requests/000000000012-ab12.json"
    assert layout.request_name("000000000012-ab12.json") == (12, "ab12")
    assert layout.write_created("ab12") == "_tstream/write-created/ab12.json"
    assert layout.request_name("head.json") is None and layout.request_name("12-a-b.json") is None
    for folder, name in [(layout.JOURNAL, "journal"), (layout.INDEX, "index"), (layout.SEALED, "sealed"),
                         (layout.EPOCHS, "epochs"), (layout.GROUPS, "groups"), (layout.MACROS, "macros"),
                         (layout.MANIFESTS, "compact"), (layout.WRITE_CREATED, "write-created")]:
        assert folder == f"_tstream/{name}"
    assert layout.FOLDER_SPAN == 100_000
    assert layout.numbered("f", 99_999) == "f/000000/000000099999.json"


def test_data_paths_are_the_documented_ones() -> None:
    uid = "0123456789abcdef" * 2
    assert layout.DATA == "data"
    assert layout.data_folder(4) == "data/4"
    assert layout.data_folder("4") == "data/4"
    assert layout.data_file("4", "x.parquet") == "data/4/x.parquet"
    assert layout.data_chunk(4, "w", "p0a1", uid) == f"data/4/w-p0a1-{uid}.parquet"
    assert layout.reroute_chunk(4, uid) == f"data/4/reroute-{uid}.parquet"
    assert layout.macro_chunk(4, uid) == f"data/4/m-{uid}.parquet"


def test_parsers_and_predicates() -> None:
    assert layout.numbered_name("000000000042.json") == 42
    assert layout.numbered_name("head.json") is None
    assert layout.numbered_name(".000000000042.json.tmp") is None
    assert layout.numbered_name("000000000042") is None
    assert layout.stream_url("s3://b/s/_tstream/groups/g/head.json") == "s3://b/s"
    assert layout.stream_url("file:///d/s/data/0/x.parquet") == "file:///d/s/data/0/x.parquet"
    assert layout.macro_bucket_of("memory://s/_tstream/macros/7/000003/00000001.json") == (7, 3)
    assert layout.macro_bucket_of("memory://s/_tstream/macros/7/head.json") is None
    assert layout.macro_bucket_of("memory://s/_tstream/sealed/000000/head.json") is None
    assert layout.is_data_file(layout.macro_chunk(3, "u"))
    assert layout.is_data_file(layout.data_chunk(3, "w", "t", "u"))
    for bad in (layout.HEAD, "data/../_tstream/head.json", "data/3/x.json", "/data/3/x.parquet", "datax/3/y.parquet"):
        assert not layout.is_data_file(bad), bad


# -- (b) the source scan ----------------------------------------------------------------------------
#: Pieces of the tree, as old code spelled them (the metadata folder, the top folders, hint and
#: anchor names, the group log folder, the data file prefixes).
FORBIDDEN = re.compile(
    r"(^|/)_tstream(/|$)"
    r"|(^|/)data/"
    r"|head\.json|anchor\.json"
    r"|/log(/|$)"
    r"|(^|/)(journal|index|sealed|epochs|groups|macros|compact|chunks)/"
    r"|/(journal|index|sealed|epochs|groups|macros|compact|chunks)$"
    r"|reroute-"
    r"|(^|/)m-")


def _docstrings(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
    return out


def path_pieces(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every string constant in ``source``'s code (docstrings excepted; the
    literal parts of f-strings included) that holds a piece of the store's tree."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            and FORBIDDEN.search(node.value)]


@pytest.mark.parametrize("text", [
    'META = "_tstream"', 'x = f"{META}/head.json"', 'u = p.split("/_tstream/")[0]', 'r.startswith("data/")',
    'rel = f"data/{n}/m-{u}.parquet"', 'rel = f"data/{n}/reroute-{u}.parquet"', 'R = f"{META}/macros"',
    'f = f"{folder}/log"', 'E = f"{EPOCHS}/chunks/{k:012d}.json"', 'S = "sealed/"', 'a = "_tstream/anchor.json"',
])
def test_the_scan_sees_path_pieces(text: str) -> None:
    assert path_pieces(text), text


@pytest.mark.parametrize("text", [
    '"""Docstring naming _tstream/head.json and data/<n>/m-<uuid>.parquet."""',
    'log = logging.getLogger("pyspark_tstream")', 'RAW = "__tstream_raw_tso"', 'd = {"macros": [], "sealed": 1}',
    'x = "a-b"', 'op = "compact"',
])
def test_the_scan_passes_other_strings(text: str) -> None:
    assert not path_pieces(text), text


def test_no_module_but_layout_spells_a_store_path() -> None:
    found = {}
    for path in sorted(p for folder in SOURCES for p in folder.rglob("*.py")):
        rel = path.relative_to(CORE_DIR if path.is_relative_to(CORE_DIR) else ROOT).as_posix()
        if rel == "store/layout.py":
            continue
        if pieces := path_pieces(path.read_text()):
            found[rel] = pieces
    assert not found, f"store paths spelled outside store/layout.py (build them there): {found}"


def test_layout_holds_the_pieces_it_keeps() -> None:
    """The scan is not vacuous: the layout module itself is full of them."""
    assert len(path_pieces((CORE_DIR / "store" / "layout.py").read_text())) >= 10
