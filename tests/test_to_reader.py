"""``Stream.to_reader``: a stream as a ``pyarrow.RecordBatchReader`` for DuckDB, Polars and pandas.

Same records and order as ``Stream.read`` for every range form (times, ago, cuts, tail, limit),
across segments, writer lanes and compacted macro-chunks; only the projected columns decoded;
batches produced lazily in bounded memory; the README's recipes run as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import README
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import ConfigError
from pyspark_tstream.schema import RAW_TSO, SYSTEM_COLUMNS
from pyspark_tstream.timestamps import now_ms
from pyspark_tstream.write.writing import write_batches

#: Two clusters of records ten and six hours before this module is imported: an ago bound of
#: eight hours falls between them however long a run takes to reach these tests (pytest imports
#: every module when it collects: offsets of minutes fail a run that takes longer).
EARLY = now_ms() - 10 * 3_600_000
LATE = now_ms() - 6 * 3_600_000


def _batch(b: int, n: int = 400, t0: int = EARLY) -> pa.Table:
    return pa.table({"key": [f"k{i % 13}" for i in range(n)], "v": np.arange(b * n, b * n + n),
                     "t": t0 + (b % 8) * 4_000 + np.arange(n) * 10, "pad": [f"payload-{b}-{i}" * 4 for i in range(n)]})


def _overlapping_stream(url: str, **config: Any) -> Stream:
    """Three segments, 16 commits in two clusters of time: many chunks that overlap in time."""
    s = Stream.create(url, segments=3, **config)
    for b in range(16):
        s.append(_batch(b, t0=EARLY if b < 8 else LATE), key="key", timestamp="t")
    return s


def _lanes(url: str) -> Stream:
    """Writer lanes: four tasks write shuffled shares of each commit, so chunks of one segment
    overlap in time (what the Spark sink writes from an unordered batch)."""
    s = Stream.create(url, segments=2, compaction="off")
    rng = np.random.default_rng(7)
    for b in (0, 1, 2, 3, 8, 9):
        table = _batch(b, n=800, t0=EARLY if b < 8 else LATE)
        shuffled = table.take(pa.array(rng.permutation(table.num_rows)))
        spec = s.write_spec(table.schema, key="key", timestamp="t")
        chunks = [c for i in range(4) for c in write_batches(spec, [shuffled.slice(i * 200, 200)], task=f"p{i}")]
        s.commit(chunks, schema=table.schema)
    return s


def _compacted(s: Stream, *, lanes: bool = False) -> Stream:
    """``s`` with its chunks merged into macro-chunks: reads go through views of them (merged
    writer lanes give views whose ``_tso`` is not sorted along the rows)."""
    s.compact()
    views = s.plan(s.state.head_tso, s.state.tick)
    assert views and all(c.floor == 0 for c in views)
    assert any(not c.sorted for c in views) == lanes
    return s


SHAPES = {
    "segments": _overlapping_stream,
    "compacted": lambda url: _compacted(_overlapping_stream(url, compaction="off")),
    "lanes": _lanes,
    "lanes-compacted": lambda url: _compacted(_lanes(url), lanes=True),
}


def _ranges(s: Stream) -> dict[str, dict[str, Any]]:
    mid = EARLY + 3 * 4_000 + 1_234
    cut = s.cut_at(mid)
    return {
        "all": {},
        "epoch-ms": {"start": mid, "end": LATE + 2 * 4_000},
        "iso-and-datetime": {"start": datetime.fromtimestamp(mid / 1000, tz=UTC).isoformat(),
                             "end": datetime.fromtimestamp((LATE + 5_000) / 1000, tz=UTC)},
        "ago": {"start": "-8h"},
        "ago-end": {"end": "-8h"},
        "start-cut": {"start": cut},
        "end-cut": {"end": cut},
        "cut-to-time": {"start": cut, "end": LATE + 9_000},
        "tail": {"tail": 777},
        "tail-to-time": {"tail": 3_000, "end": LATE + 9_000},
        "limit": {"limit": 1_001},
        "start-and-limit": {"start": mid, "limit": 333},
    }


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_same_records_and_order_as_read_for_every_range_form(url: str, shape: str) -> None:
    s = SHAPES[shape](url)
    for name, kw in _ranges(s).items():
        want = s.read(**kw)
        reader = s.to_reader(**kw, system_columns=True, batch_rows=500)
        assert isinstance(reader, pa.RecordBatchReader)
        got = reader.read_all()
        assert got.schema == want.schema, name
        assert got.equals(want), f"{shape}: {name}: {got.num_rows} rows, read gives {want.num_rows}"
        assert 0 < want.num_rows < 6_400 or name == "all", name
        projected = s.to_reader(**kw, columns=["v", "key"], batch_rows=500).read_all()
        assert projected.equals(want.select(["v", "key"])), name


def test_projection_decodes_only_the_columns_asked_for(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s = _overlapping_stream(url)
    decoded: list[str] = []
    for method in ("read_row_group", "read_row_groups"):
        real = getattr(pq.ParquetFile, method)

        def spy(self: pq.ParquetFile, *args: Any, _real: Any = real, **kw: Any) -> pa.Table:
            table = _real(self, *args, **kw)
            decoded.extend(table.column_names)
            return table

        monkeypatch.setattr(pq.ParquetFile, method, spy)
    everything = s.to_reader().read_all()
    assert {"pad", "key", "v", "t"} <= set(decoded)  # the spy sees what a full read decodes
    decoded.clear()
    got = s.to_reader(columns=["v"], system_columns=["_tso"]).read_all()
    assert set(decoded) == {"v", RAW_TSO}
    assert got.column_names == ["v", "_tso"] and got.num_rows == everything.num_rows
    decoded.clear()
    only_system = s.to_reader(columns=[], system_columns=["_seq", "_segment"]).read_all()
    assert set(decoded) == {RAW_TSO} and only_system.column_names == ["_seq", "_segment"]
    assert only_system.num_rows == everything.num_rows


def test_default_is_user_columns_and_system_columns_on_request(url: str) -> None:
    s = _overlapping_stream(url)
    assert s.to_reader().schema.names == ["key", "v", "t", "pad"]
    assert s.to_reader(system_columns=True).schema.names == ["key", "v", "t", "pad", *SYSTEM_COLUMNS]
    reader = s.to_reader(columns=["t", "key"], system_columns=["_timestamp"])
    assert reader.schema.names == ["t", "key", "_timestamp"]
    got = reader.read_all()
    assert got["t"].to_pylist() == s.read()["t"].to_pylist()
    # whole batches, not one per window of time they were read in
    assert [b.num_rows for b in s.to_reader(batch_rows=10_000)] == [6_400]


def test_bounded_memory_many_batches(url: str) -> None:
    s = Stream.create(url, segments=2, compaction="off")
    for b in range(40):
        s.append(pa.table({"key": [f"k{i % 5}" for i in range(1_000)], "t": EARLY + b * 1_000 + np.arange(1_000),
                           "payload": [f"{b:04d}{i:06d}" * 40 for i in range(1_000)]}), key="key", timestamp="t")
    whole = s.read()
    whole_bytes = whole.nbytes
    rows = whole.num_rows
    del whole
    base = pa.total_allocated_bytes()
    peak, batches, seen = 0, 0, 0
    for batch in s.to_reader(batch_rows=1_000):
        peak = max(peak, pa.total_allocated_bytes() - base)
        batches += 1
        seen += batch.num_rows
        assert batch.num_rows <= 1_000
    assert seen == rows == 40_000 and batches >= 40
    assert whole_bytes > 15_000_000
    assert peak < whole_bytes / 8, f"peak {peak:,} bytes while reading a {whole_bytes:,}-byte range"


def test_planned_once_read_lazily(url: str) -> None:
    s = _overlapping_stream(url)
    before = s.read()
    reader = s.to_reader(system_columns=True)
    s.append(_batch(99, t0=LATE + 200_000), key="key", timestamp="t")  # after the reader was made
    assert reader.read_all().equals(before)
    assert s.read().num_rows == before.num_rows + 400


def test_bad_columns_fail_naming_them(url: str) -> None:
    s = _overlapping_stream(url)
    with pytest.raises(ConfigError, match=r"no column 'nope'; its columns are key, v, t, pad") as e:
        s.to_reader(columns=["v", "nope"])
    assert e.value.option == "columns" and e.value.value == "nope"
    with pytest.raises(ConfigError, match=r"'_tso' is a system column; ask for it with system_columns=\['_tso'\]"):
        s.to_reader(columns=["_tso"])
    with pytest.raises(ConfigError, match=r"'_offset' is not a system column.*_timestamp, _tso, _segment, _seq"):
        s.to_reader(system_columns=["_offset"])
    with pytest.raises(ConfigError, match="names a column twice"):
        s.to_reader(columns=["v", "v"])
    with pytest.raises(ConfigError, match="give one of them"):
        s.to_reader(start=EARLY, tail=5)
    with pytest.raises(ConfigError, match="batch_rows=0"):
        s.to_reader(batch_rows=0)
    with pytest.raises(ConfigError, match="is not a stream cut"):
        s.to_reader(start={"a": "b"})


def test_empty_ranges_give_an_empty_reader_with_the_schema(url: str) -> None:
    fresh = Stream.create(url, segments=2)
    assert fresh.to_reader().read_all().num_rows == 0
    assert fresh.to_reader(system_columns=["_tso"]).schema.names == ["_tso"]
    s = Stream.open(url)
    s.append(_batch(0), key="key", timestamp="t")
    for kw in ({"start": EARLY + 10_000_000}, {"start": EARLY + 50, "end": EARLY + 50}, {"end": EARLY - 1},
               {"limit": 0}, {"tail": 0}):
        reader = s.to_reader(**kw, columns=["v"], system_columns=["_timestamp"])
        got = reader.read_all()
        assert got.num_rows == 0 and got.schema.names == ["v", "_timestamp"], kw
        assert got.schema.field("v").type == pa.int64()
        assert s.read(**kw).num_rows == 0, kw


# -- the README's recipes ------------------------------------------------------------------------

def _readme_recipes() -> str:
    text = README.read_text()
    section = text.split("## Reading a stream outside Spark", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1
    return blocks[0]


@pytest.fixture
def readme_stream(tmp_path: Path) -> Iterator[str]:
    """The stream the README's Python API block leaves at ``{base}/py``."""
    s = Stream.create(f"file://{tmp_path}/py", segments=4)
    s.append([{"device": "a", "temp": 21.5, "t": 1_767_225_600_000}], key="device", timestamp="t")
    s.append(pa.table({"device": ["b"], "temp": [19.0], "t": [1_767_225_601_000]}), key="device", timestamp="t")
    yield str(tmp_path)


def test_readme_recipes_run_as_written(readme_stream: str) -> None:
    code = _readme_recipes()
    for recipe in ("duckdb.sql(", "from reader", "pl.from_arrow(", ".read_pandas()"):
        assert recipe in code
    namespace: dict[str, Any] = {"Stream": Stream, "base": readme_stream}
    exec(compile(code, "README.md: Reading a stream outside Spark", "exec"), namespace)  # noqa: S102
    assert namespace["top"] == [("a", 21.5), ("b", 19.0)]
    df = namespace["df"]
    assert df["device"].to_list() == ["a", "b"] and str(df.schema["_timestamp"]).startswith("Datetime")
    assert namespace["pdf"]["temp"].tolist() == [21.5, 19.0]


def test_duckdb_streams_a_large_reader(url: str) -> None:
    """DuckDB aggregates a many-batch reader (projected) to the same answer as the whole table."""
    import duckdb

    s = _overlapping_stream(url)
    reader = s.to_reader(columns=["key", "v"], batch_rows=256)  # noqa: F841 (scanned by name)
    got = duckdb.sql("select key, count(*) as n, sum(v) as total from reader group by key order by key").fetchall()
    whole = s.read()
    want = sorted((k, whole["key"].to_pylist().count(k),
                   sum(v for kk, v in zip(whole["key"].to_pylist(), whole["v"].to_pylist()) if kk == k))
                  for k in set(whole["key"].to_pylist()))
    assert got == want



def test_a_reader_consumed_after_compaction_and_vacuum_reads_from_the_macro_chunks(url: str) -> None:
    """A lazy reader plans when it is made and reads as it is consumed. Consumed past the grace
    period, after a compaction replaced its planned files and a vacuum deleted them, it reads
    the same records from the macro-chunks (as Spark tasks and read() do), each once; before,
    it failed with "named by the journal is missing"."""
    from compaction_streams import fill_stream, small_chunks_exist

    s = fill_stream(url, appends=40)
    expected = s.read()
    ids = sorted(zip(expected["_segment"].to_pylist(), expected["_seq"].to_pylist()))
    fresh = s.to_reader(system_columns=True, batch_rows=16)
    partly = s.to_reader(system_columns=True, batch_rows=16)
    first = partly.read_next_batch()  # some records read before the files went
    assert 0 < first.num_rows < len(ids)
    s.compact()
    assert s.vacuum(grace_ms=0).replaced > 0 and not any(small_chunks_exist(s))
    for reader, head in ((fresh, []), (partly, [first])):
        got = pa.Table.from_batches([*head, *reader])
        assert got.num_rows == len(ids)
        assert sorted(zip(got["_segment"].to_pylist(), got["_seq"].to_pylist())) == ids
        assert got["_tso"].to_pylist() == expected["_tso"].to_pylist()  # still in read order
