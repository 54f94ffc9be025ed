"""PySpark version compatibility without a Spark session: feature detection, its README table,
the fallbacks' logic (Rows → Arrow, read limits without ``latestOffset(start, limit)``) and the
filter-pushdown caller shim. The Spark-facing behaviour on each version runs in the CI matrix
(``.ci/matrix``) through the ``spark`` tests."""

from __future__ import annotations

import re
import time
import types
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
from helpers import README
from pyspark_tstream.spark import compat

VERSIONS = ["4.0", "4.1", "4.2", "4.3"]


def _running() -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", pyspark.__version__).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


@pytest.mark.parametrize("name", sorted(compat.FEATURES))
def test_each_feature_is_detected_on_the_versions_that_have_it(name: str) -> None:
    """A PySpark at or above a feature's first version must offer it: if detection (or the API)
    breaks, tstream would fall back silently — this fails instead."""
    f = compat.FEATURES[name]
    assert f.present == (_running() >= f.since), (
        f"PySpark {pyspark.__version__}: {name} ({f.api}) detected={f.present}, expected since "
        f"{f.since[0]}.{f.since[1]}")


def _readme_table() -> dict[str, dict[str, str]]:
    text = README.read_text()
    start = text.index("### PySpark versions")
    rows: dict[str, dict[str, str]] = {}
    header: list[str] = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header:
            header = cells
            continue
        name = re.search(r"`([a-z_]+)`", cells[0])
        assert name, f"README feature row without a `feature_name`: {line}"
        rows[name.group(1)] = dict(zip(header, cells))
    return rows


def test_readme_feature_table_agrees_with_detection() -> None:
    table = _readme_table()
    assert set(table) == set(compat.FEATURES), "README's PySpark table and compat.FEATURES name different features"
    for name, f in compat.FEATURES.items():
        row = table[name]
        for v in VERSIONS:
            has = tuple(int(x) for x in v.split(".")) >= f.since
            assert row[v] == ("yes" if has else "no"), f"README says {name} on {v}: {row[v]!r}"
        fallback = row["without it"]
        if f.since > (4, 0):
            assert fallback and fallback != "—", f"README gives no fallback for {name}"
            assert fallback == f.fallback, f"README and compat.py describe {name}'s fallback differently"


def test_arrow_schema_has_utc_timestamps_on_this_pyspark() -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    s = compat.arrow_schema(StructType([StructField("t", TimestampType()), StructField("s", StringType()),
                                        StructField("n", LongType(), False)]))
    assert s == pa.schema([pa.field("t", pa.timestamp("us", tz="UTC")), pa.field("s", pa.string()),
                           pa.field("n", pa.int64(), False)])


# -- the filter-pushdown caller shim ----------------------------------------------------------------

def _asks_for_reader() -> bool:
    return compat.called_for_filter_pushdown()  # as DataSource.reader calls it


def _asks_for_stream_writer() -> bool:
    return compat.called_for_stream_commit()  # as DataSource.streamWriter calls it


def _call_from_module(name: str, ask: Any = _asks_for_reader) -> bool:
    mod = types.ModuleType(name)
    mod.__dict__["reader"] = ask
    exec("def _main():\n    return reader()\n", mod.__dict__)  # noqa: S102 - a caller in a named module
    return mod._main()


def test_pushdown_shim_recognizes_the_pushdown_worker_only() -> None:
    assert _call_from_module(compat.PUSHDOWN_WORKER) == compat.has("filter_pushdown")
    assert _call_from_module("pyspark.sql.worker.plan_data_source_read") is False
    assert _asks_for_reader() is False


def test_pushdown_shim_is_guarded_by_version_and_by_frame_introspection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without filter pushdown (PySpark 4.0) or without ``sys._getframe`` (not CPython) the shim
    answers False even from the pushdown worker: the plain reader, always correct."""
    import sys

    f = compat.FEATURES["filter_pushdown"]
    with monkeypatch.context() as m:
        m.setitem(compat.FEATURES, "filter_pushdown", compat.Feature(f.name, f.since, f.api, f.fallback, False))
        assert _call_from_module(compat.PUSHDOWN_WORKER) is False
    with monkeypatch.context() as m:
        m.delattr(sys, "_getframe")
        assert _call_from_module(compat.PUSHDOWN_WORKER) is False


def test_stream_commit_shim_recognizes_the_sink_commit_runner_only() -> None:
    """A micro-batch's commit asks ``streamWriter`` for a fresh writer from PySpark's runner
    (it is then patient with the store: the query reached it when it started)."""
    import importlib
    import inspect

    runner = importlib.import_module(compat.STREAM_COMMIT_WORKER)  # this PySpark has it, by this name
    assert "data_source.streamWriter(" in inspect.getsource(runner)
    assert _call_from_module(compat.STREAM_COMMIT_WORKER, _asks_for_stream_writer) is True
    assert _call_from_module("pyspark.sql.worker.write_into_data_source", _asks_for_stream_writer) is False
    assert _asks_for_stream_writer() is False


def test_the_caller_sniffing_lives_in_compat_only() -> None:
    """One shim: no other adapter module looks at frames."""
    root = Path(compat.__file__).resolve().parent
    sniffing = [p.name for folder in (root, root.parent / "datasource", root.parent / "sink")
                for p in sorted(folder.glob("*.py"))
                if "_getframe" in p.read_text() and p.name != "compat.py"]
    assert sniffing == []


# -- the typed Spark boundary -----------------------------------------------------------------------

def _adapter_modules() -> list[types.ModuleType]:
    import importlib
    import pkgutil

    import pyspark_tstream.datasource
    import pyspark_tstream.sink

    return [importlib.import_module(f"{pkg.__name__}.{m.name}")
            for pkg in (pyspark_tstream.datasource, pyspark_tstream.sink)
            for m in pkgutil.iter_modules(pkg.__path__)]


def _type_checking_names(module: types.ModuleType) -> tuple[dict[str, Any], set[str]]:
    """The names a module imports under ``if TYPE_CHECKING:``, imported for real, and the names
    this PySpark does not have (an older one lacks e.g. ``ReadLimit``: only those may not resolve)."""
    import ast

    tree = ast.parse(Path(module.__file__ or "").read_text())
    found: dict[str, Any] = {}
    absent: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                try:
                    exec(compile(ast.Module(body=[stmt], type_ignores=[]), module.__file__ or "", "exec"),  # noqa: S102
                         {"__name__": module.__name__, "__package__": module.__package__}, found)
                except ImportError:
                    assert isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("pyspark."), (
                        f"{module.__name__}: {ast.unparse(stmt)} fails")
                    absent |= {a.asname or a.name for a in stmt.names}
    return found, absent


def test_every_annotation_at_the_spark_boundary_names_a_real_type() -> None:
    """The adapters' type hints (Spark types under ``TYPE_CHECKING``) resolve against the running
    PySpark: a misspelt or moved Spark type fails here, not only in a type checker."""
    import inspect
    import typing

    checked = 0
    for module in _adapter_modules():
        only_typed, absent = _type_checking_names(module)
        names = {**vars(module), **only_typed}
        for _, obj in inspect.getmembers(module, lambda o: inspect.isfunction(o) or inspect.isclass(o)):
            if obj.__module__ != module.__name__:
                continue
            members = [obj] + ([v for v in vars(obj).values() if inspect.isfunction(v)]
                               + [v.__func__ for v in vars(obj).values() if isinstance(v, (classmethod, staticmethod))]
                               + [v.fget for v in vars(obj).values() if isinstance(v, property)]
                               if inspect.isclass(obj) else [])
            for member in members:
                try:
                    hints = typing.get_type_hints(member, globalns=names)
                except NameError as e:  # a Spark type this PySpark predates
                    assert e.name in absent, f"{module.__name__}.{member.__qualname__}: {e}"
                    continue
                public = not member.__name__.startswith("_") or member.__name__ == "__init__"
                if public and inspect.isfunction(member):
                    params = [p for p in inspect.signature(member).parameters if p not in ("self", "cls")]
                    missing = [p for p in params + ["return"] if p not in hints]
                    assert not missing, f"{module.__name__}.{member.__qualname__}: no type hint for {missing}"
                checked += 1
    assert checked > 40


# -- PySpark 4.0's stream sink hands Rows -----------------------------------------------------------

def test_rows_become_the_querys_arrow_schema_in_any_local_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import Row
    from pyspark.sql.types import (
        ArrayType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )
    from pyspark_tstream.spark.arrow import rows_to_batch

    monkeypatch.setenv("TZ", "America/New_York")  # PySpark makes naive local datetimes from TIMESTAMPs
    time.tzset()
    try:
        inner = StructType([StructField("at", TimestampType()), StructField("n", LongType())])
        struct = StructType([StructField("id", LongType(), False), StructField("name", StringType()),
                             StructField("t", TimestampType()), StructField("tags", ArrayType(StringType())),
                             StructField("m", MapType(StringType(), LongType())), StructField("inner", inner)])
        micros = 1_700_000_000_123_456
        t = TimestampType().fromInternal(micros)  # what a Row from Spark carries
        rows = [Row(id=1, name="a", t=t, tags=["x", "y"], m={"k": 2}, inner=Row(at=t, n=3)),
                Row(id=2, name=None, t=None, tags=None, m=None, inner=None)]
        batch = rows_to_batch(rows, compat.arrow_schema(struct))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    expected = datetime.fromtimestamp(micros / 1e6, tz=timezone.utc)
    got = batch.to_pylist()
    assert got[0]["t"] == expected and got[0]["inner"] == {"at": expected, "n": 3}
    assert got[0]["tags"] == ["x", "y"] and got[0]["m"] == [("k", 2)] and got[0]["name"] == "a"
    assert got[1] == {"id": 2, "name": None, "t": None, "tags": None, "m": None, "inner": None}
    assert batch.schema == compat.arrow_schema(struct)


def test_a_sink_task_gathers_rows_into_batches_and_passes_arrow_through() -> None:
    """PySpark 4.0 hands a stream writer Rows one by one: they become batches of
    ``ROWS_PER_BATCH`` with every value in order; Arrow batches (4.1+) pass as they are."""
    from pyspark.sql import Row
    from pyspark_tstream.sink.writer import ROWS_PER_BATCH, _to_batches

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    n = 2 * ROWS_PER_BATCH + 1
    batches = list(_to_batches(iter(Row(id=i, name=None if i % 7 == 0 else f"n{i}") for i in range(n)), schema))
    assert [b.num_rows for b in batches] == [ROWS_PER_BATCH, ROWS_PER_BATCH, 1]
    table = pa.Table.from_batches(batches)
    assert table.schema == schema and table["id"].to_pylist() == list(range(n))
    assert table["name"].to_pylist() == [None if i % 7 == 0 else f"n{i}" for i in range(n)]
    arrow = [pa.record_batch({"id": [1, 2]}), pa.record_batch({"id": [3]})]
    assert list(_to_batches(iter(arrow), schema)) == arrow
    assert list(_to_batches(iter([]), schema)) == []


def test_gathering_rows_pauses_the_cyclic_gc_only_while_it_holds_them() -> None:
    """The collector is paused while a batch's Rows live (it would scan them over and over),
    on again between batches and after an error, and left off if it was off."""
    import gc

    from pyspark.sql import Row
    from pyspark_tstream.sink.writer import _to_batches

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    seen = []

    def rows() -> Any:
        for i in range(3):
            seen.append(gc.isenabled())
            yield Row(id=i)

    batches = _to_batches(rows(), schema)
    assert next(batches).num_rows == 3 and gc.isenabled()
    assert seen[1:] == [False, False]  # the first Row is read before Rows are known to come
    with pytest.raises(pa.ArrowInvalid):  # pa.array's own error for a value the column cannot take
        list(_to_batches(iter([Row(id=1), Row(id="x")]), pa.schema([pa.field("id", pa.int64())])))
    assert gc.isenabled()
    gc.disable()
    try:
        list(_to_batches(rows(), schema))
        assert not gc.isenabled()
    finally:
        gc.enable()


_AWARE = datetime(2023, 11, 5, 5, 30, 0, 123_456, tzinfo=timezone.utc)
_FLAT = [
    ([1, None, -(2**63), 2**63 - 1], pa.int64()), ([7, -8, None], pa.int8()), ([None, 2**64 - 1, 0], pa.uint64()),
    ([1.5, None, float("nan"), float("inf"), 3], pa.float64()), ([0.25, None], pa.float32()),
    ([True, None, False, True, True, False, False, False, True], pa.bool_()), ([False] * 20, pa.bool_()),
    (["a", "", None, "ünïcode ✓", "x" * 300], pa.string()), ([b"\x00\xff", None, bytearray(b"ab"), b""], pa.binary()),
    ([date(1969, 12, 31), None, date(2024, 2, 29), date(1, 1, 1)], pa.date32()),
    ([_AWARE, None, datetime(1901, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc)], pa.timestamp("us", tz="UTC")),
    ([datetime(2024, 1, 2, 3, 4, 5, 6), None], pa.timestamp("us")),
    ([None, None], pa.string()), ([], pa.int64()), (["a", "b"], pa.string()),
    ([Decimal("1.25"), None], pa.decimal128(5, 2)),  # not built from buffers: pa.array's
]


@pytest.mark.parametrize("values,t", _FLAT, ids=[f"{t}-{i}" for i, (_, t) in enumerate(_FLAT)])
def test_rows_values_become_the_array_pa_array_makes(values: list[Any], t: pa.DataType) -> None:
    from pyspark_tstream.arrow_arrays import from_pylist

    got, want = from_pylist(values, t), pa.array(values, type=t)
    got.validate(full=True)
    assert got.type == t and got.null_count == want.null_count == sum(v is None for v in values)
    assert repr(got.to_pylist()) == repr(want.to_pylist())  # repr: nan equals nan


def test_naive_timestamps_are_local_time_for_a_zoned_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """Instants around a daylight-saving change, handed over as PySpark does, come back exact."""
    from pyspark_tstream.arrow_arrays import from_pylist

    instants = [_AWARE] + [datetime(2024, 3, 10, 6, tzinfo=timezone.utc) + timedelta(microseconds=i * 3_700_001)
                           for i in range(2_000)]  # 01:00-03:02 New York time, across the skipped hour
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        naive = [t.astimezone().replace(tzinfo=None) for t in instants] + [None]  # what PySpark hands over
        got = from_pylist(naive, pa.timestamp("us", tz="UTC"))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert got.to_pylist() == instants + [None]


@pytest.mark.parametrize("values,t", [([1.5], pa.int64()), (["1"], pa.float64()), ([1], pa.string()),
                                      (["x"], pa.binary()), ([2**63], pa.int64()), ([1], pa.bool_()),
                                      ([date(2024, 1, 1)], pa.timestamp("us", tz="UTC"))])
def test_values_a_type_cannot_take_get_pa_arrays_answer(values: list[Any], t: pa.DataType) -> None:
    """Where numpy would convert silently (a float truncated, a string parsed), pa.array decides."""
    from pyspark_tstream.arrow_arrays import from_pylist

    try:
        want: Any = pa.array(values, type=t)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        with pytest.raises(type(e)):
            from_pylist(values, t)
        return
    assert from_pylist(values, t).equals(want)


# -- read limits without latestOffset(start, limit) -----------------------------------------------

def _old_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make this PySpark look like 4.0/4.1 to the reader (no-op there)."""
    f = compat.FEATURES["read_limits"]
    monkeypatch.setitem(compat.FEATURES, "read_limits", compat.Feature(f.name, f.since, f.api, f.fallback, False))


def _reader(url: str, **opts: str) -> Any:
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.conf.options import SourceOptions
    from pyspark_tstream.datasource.stream_reader import TStreamStreamReader
    from pyspark_tstream.spark.arrow import spark_schema

    options = SourceOptions.from_options({"path": url, **opts})
    stream = Stream.open(url)
    return TStreamStreamReader(options, spark_schema(stream.schema), stream)


def _read_ids(reader: Any, start: dict, end: dict) -> list[int]:
    ids: list[int] = []
    for p in reader.partitions(start, end):
        for b in reader.read(p):
            ids += b.column("id").to_pylist()
    return ids


def test_without_latest_offset_limit_batches_reach_the_tick_exactly_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """PySpark < 4.2 calls latestOffset() with no start and no limit: on a fresh query before
    initialOffset(), on a restart after planning (last, last) (measured on 4.0 and 4.1). Read
    limits then do not apply, with a warning; batches end on the tick and cover each record once."""
    from pyspark_tstream.api.stream import Stream

    _old_spark(monkeypatch)
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2)

    def add(b: int) -> None:
        s.append(pa.table({"id": list(range(b * 100, b * 100 + 100)), "k": [f"k{i % 5}" for i in range(100)]}),
                 key="k")

    for b in range(3):
        add(b)
    got: list[list[int]] = []
    with caplog.at_level("WARNING", logger="pyspark_tstream"):
        r = _reader(url, maxRecordsPerTrigger="50")
    assert "maxRecordsPerTrigger" in caplog.text and "4.2" in caplog.text
    end = r.latestOffset()  # fresh query: Spark asks for the end first ...
    start = r.initialOffset()  # ... then for the start of batch 0
    got.append(_read_ids(r, start, end))
    add(3)
    start, end = end, r.latestOffset()
    got.append(_read_ids(r, start, end))
    add(4)
    r = _reader(url, maxRecordsPerTrigger="50")  # restart: Spark plans (last, last), then asks
    assert _read_ids(r, end, end) == []
    start, end = end, r.latestOffset()
    got.append(_read_ids(r, start, end))
    assert r.latestOffset() == end  # nothing new: no batch
    assert [sorted(g) for g in got] == [list(range(300)), list(range(300, 400)), list(range(400, 500))]
    assert end["tso"] == Stream.open(url).state.tick



@pytest.mark.slow
@pytest.mark.spark
def test_register_twice_on_a_session_that_discovered_tstream(spark: Any, tmp_path: Path) -> None:
    """PySpark 4.0 refuses to re-register a discovered name; register() must not."""
    from pyspark_tstream import register

    register(spark)
    register(spark)
    url = f"file://{tmp_path}/s"
    spark.range(3).write.format("tstream").mode("append").save(url)
    assert spark.read.format("tstream").load(url).count() == 3
