"""Schema changes under live readers, Spark-free: the change records a mergeSchema commit leaves,
where a query's batches end (read/schema_guard.py), the schema history, and type widening.

The Spark query that fails and restarts is in test_schema_change_spark.py.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark_tstream.api.results import SchemaChange
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import app as cli
from pyspark_tstream.errors import SchemaChangedError, SchemaMismatchError
from pyspark_tstream.journal.state import StreamState
from pyspark_tstream.read.reading import read_table
from pyspark_tstream.read.schema_guard import SchemaGuard
from pyspark_tstream.schema import SYSTEM_COLUMNS, decode_schema


def _query(url: str, *columns: str) -> SchemaGuard:
    """The guard of a query whose Spark schema has ``columns`` (plus the system columns)."""
    return SchemaGuard(url, [*columns, *SYSTEM_COLUMNS])


def _delivered(s: Stream, lo: int, hi: int, pos: int, columns: list[str]) -> list[dict]:
    """What a batch ``(lo, hi]`` planned at ``pos`` delivers to a query with ``columns``."""
    chunks = s.reading.plan(lo, hi, last_pos=pos)
    table = read_table(s.store, decode_schema(s.state.schema), chunks, lo, hi)
    return table.select(columns).to_pylist()


def _widened(url: str) -> Stream:
    """ids 0..9 with column a, then 10..14 with a new column b (mergeSchema), then 15..19 with b."""
    s = Stream.create(url, schema=pa.schema([("id", pa.int64()), ("a", pa.string())]))
    s.append(pa.table({"id": list(range(10)), "a": [f"a{i}" for i in range(10)]}))
    s.append(pa.table({"id": list(range(10, 15)), "a": ["x"] * 5, "b": list(range(10, 15))}), merge_schema=True)
    s.append(pa.table({"id": list(range(15, 20)), "a": ["y"] * 5, "b": list(range(15, 20))}))
    return s


def test_merge_schema_commit_records_the_change(url: str) -> None:
    s = Stream.create(url, schema=pa.schema([("id", pa.int64())]))
    s.append(pa.table({"id": [1, 2]}))
    tick = s.refresh().tick
    ack = s.append(pa.table({"id": [3], "b": ["x"]}), merge_schema=True)
    (change,) = s.refresh().schema_changes
    assert change.pos == ack.pos and change.columns == ("b",)
    assert change.tick == tick < ack.first_tso  # the tick before it: every record it wrote lies above
    s.append(pa.table({"id": [4], "b": ["y"]}), merge_schema=True)  # nothing new: no record
    s.append(pa.table({"id": [5]}))  # fewer columns: none either
    assert len(s.refresh().schema_changes) == 1


def test_batches_end_before_the_change_then_fail_and_restart_reads_the_rest(url: str) -> None:
    s = _widened(url)
    state = s.refresh()
    old = _query(s.url, "id", "a")
    tick, pos = old.limit(state, 0, state.tick, state.pos)
    assert pos == 1 and tick < state.tick  # ends at the position before the mergeSchema commit
    first = _delivered(s, 0, tick, pos, ["id", "a"])
    assert [r["id"] for r in first] == list(range(10))
    with pytest.raises(SchemaChangedError) as e:
        old.limit(state, tick, state.tick, state.pos)  # the next batch: nothing left before the change
    assert e.value.condition == "TSTREAM_SCHEMA_CHANGED" and e.value.columns == ["b"] and e.value.pos == 2
    assert "['b']" in str(e.value) and "restart the query from the same checkpoint" in str(e.value)
    # restarted: Spark's schema has b; the query reads on from the same offset
    new = _query(s.url, "id", "a", "b")
    assert new.limit(state, tick, state.tick, state.pos) == (state.tick, state.pos)
    rest = _delivered(s, tick, state.tick, state.pos, ["id", "a", "b"])
    assert sorted(r["id"] for r in first + rest) == list(range(20))  # every record once
    assert all(r["b"] == r["id"] for r in rest)


def test_planned_batch_crossing_the_change_fails_before_reading(url: str) -> None:
    s = _widened(url)
    state = s.refresh()
    old = _query(s.url, "id", "a")
    (change,) = state.schema_changes
    old.check(state, 0, change.tick, change.pos - 1)  # up to the change: fine
    with pytest.raises(SchemaChangedError):
        old.check(state, 0, state.tick, state.pos)
    _query(s.url, "id", "a", "b").check(state, 0, state.tick, state.pos)


def test_a_change_beyond_the_batch_end_does_not_stop_it(url: str) -> None:
    """Trigger.AvailableNow fixes its end position first: a later change is not in its batches."""
    s = Stream.create(url, schema=pa.schema([("id", pa.int64())]))
    s.append(pa.table({"id": [1, 2]}))
    end = s.refresh()
    s.append(pa.table({"id": [3], "b": [3]}), merge_schema=True)
    state = s.refresh()
    assert _query(s.url, "id").limit(state, 0, end.tick, end.pos) == (end.tick, end.pos)


def test_change_without_a_record_fails_at_once(url: str) -> None:
    """A column an older tstream added (no change record) has no known position: stop now."""
    s = _widened(url)
    d = s.refresh().to_json()
    d.pop("schema_changes")
    older = StreamState.from_json(d)
    with pytest.raises(SchemaChangedError) as e:
        _query(s.url, "id", "a").limit(older, 0, older.tick, older.pos)
    assert e.value.pos is None and "older pyspark-tstream" in str(e.value)
    assert _query(s.url, "id", "a", "b").limit(older, 0, older.tick, older.pos) == (older.tick, older.pos)


def test_state_without_changes_keeps_its_old_form(url: str) -> None:
    s = Stream.create(url, schema=pa.schema([("id", pa.int64())]))
    s.append(pa.table({"id": [1]}))
    d = s.refresh().to_json()
    assert "schema_changes" not in d  # written only when a change happened: old streams unchanged
    assert StreamState.from_json(d).schema_changes == []
    assert s.schema_history() == [SchemaChange(None, None, ("id int64",))]


def test_schema_history_in_info_and_cli(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = _widened(url)
    s.append(pa.table({"id": [20], "c": [1.5], "d": [True]}), merge_schema=True)
    history = s.schema_history()
    assert [(h.position, h.columns) for h in history] == [
        (None, ("id int64", "a string")), (2, ("b int64",)), (4, ("c double", "d bool"))]
    assert (history[1].time or "").endswith("Z")
    assert list(s.info().schema_history) == history
    assert cli.main(["info", url]) == 0
    out = capsys.readouterr().out
    table = out[out.index("schema changes\n"):].splitlines()
    assert table[1].split()[0] == "position" and table[2].split()[0] == "2" and table[2].endswith("b int64")
    assert table[3].split()[0] == "4" and table[3].endswith("c double, d bool")
    assert cli.main(["info", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema_history"][2]["columns"] == ["c double", "d bool"]


def test_narrower_types_are_written_into_wider_columns(url: str) -> None:
    """The stream never changes a column's type; int → long and float → double data fit it."""
    s = Stream.create(url, schema=pa.schema([("n", pa.int64()), ("x", pa.float64())]))
    s.append(pa.table({"n": pa.array([1], pa.int32()), "x": pa.array([0.5], pa.float32())}))
    assert s.schema == pa.schema([("n", pa.int64()), ("x", pa.float64())])
    assert s.read().select(["n", "x"]).to_pylist() == [{"n": 1, "x": 0.5}]
    assert s.refresh().schema_changes == []


def test_wider_types_into_narrower_columns(url: str) -> None:
    s = Stream.create(url, schema=pa.schema([("n", pa.int32()), ("x", pa.float32())]))
    with pytest.raises(SchemaMismatchError, match=r"x \(float in the stream, double in the data\)"):
        s.append(pa.table({"n": pa.array([1], pa.int32()), "x": pa.array([0.5], pa.float64())}))
    s.append(pa.table({"n": pa.array([7], pa.int64())}))  # long values that fit an int are written
    with pytest.raises(SchemaMismatchError, match=r"column n: values of type int64 do not fit the stream.s int32"):
        s.append(pa.table({"n": pa.array([2**40], pa.int64())}))
    assert s.read().column("n").to_pylist() == [7]


def test_batch_read_stops_at_a_widening_after_spark_took_its_schema(url: str) -> None:
    """spark.read asks for the schema, then for a reader: a widening between the two is not read."""
    from pyspark_tstream.conf.options import SourceOptions
    from pyspark_tstream.datasource.batch_reader import TStreamBatchReader
    from pyspark_tstream.datasource.partitions import read_partition
    from pyspark_tstream.spark.arrow import spark_schema as to_spark

    s = _widened(url)
    spark_schema = to_spark(pa.schema([("id", pa.int64()), ("a", pa.string())]))  # taken before b came
    reader = TStreamBatchReader(SourceOptions.from_options({"path": url}), spark_schema, Stream.open(url))
    (change,) = s.refresh().schema_changes
    assert reader.hi == change.tick
    assert sorted(r["id"] for p in reader.partitions() for b in read_partition(p) for r in b.to_pylist()) \
        == list(range(10))
