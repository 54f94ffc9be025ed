"""Page checksums (python/chunkfile/checksums.py): a byte changed inside a data page of a chunk
file is a :class:`CorruptChunkError` naming the file for every read, and a problem fsck lists,
never a wrong value. Each case first shows that the damaged page still decodes, silently, as
other values when its CRC is not checked: what a read returned before page checksums.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import CorruptChunkError
from pyspark_tstream.journal.entries import Chunk
from pyspark_tstream.read.ranged import wants_spans
from pyspark_tstream.read.reading import ReadTask, read_table, read_task
from pyspark_tstream.write import shared
from pyspark_tstream.write.writing import write_batches

#: The logic here sits above the store: its memory:// cases run by default, its file:// cases
#: in the slow set (tests/test_storage.py pins the file store's own primitives by default).
pytestmark = pytest.mark.slow_on_file

T0 = 1_700_000_000_000
#: Random doubles: neither dictionary- nor delta-encoded, so their pages hold the values plain
#: (compressed or not), and a changed byte is another value.
SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("x", pa.float64())])
EVERYTHING = (0, 1 << 62)


def _rows(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"key": [f"k{i}" for i in rng.integers(0, 50, n)], "ts": T0 + seed * 100_000 + np.arange(n),
                     "x": rng.random(n)}, schema=SCHEMA)


def _flip(s: Stream, path: str, row: int = 0) -> pa.ChunkedArray:
    """Change one byte in the middle of column ``x``'s pages in the row group holding ``row``
    of the file ``path``; returns the column as decoded without CRC checks, before the change."""
    data = s.store.read(path)
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    at, g = 0, 0
    while at + meta.row_group(g).num_rows <= row:
        at += meta.row_group(g).num_rows
        g += 1
    col = meta.row_group(g).column(meta.schema.to_arrow_schema().get_field_index("x"))
    assert not col.has_dictionary_page
    where = col.data_page_offset + col.total_compressed_size // 2
    before = pq.read_table(pa.BufferReader(data), columns=["x"])["x"]
    s.store.write(path, data[:where] + bytes([data[where] ^ 0x5A]) + data[where + 1:])
    return before


def _unchecked_x(s: Stream, path: str) -> pa.ChunkedArray:
    return pq.read_table(pa.BufferReader(s.store.read(path)), columns=["x"])["x"]


def _every_read_fails(s: Stream, path: str) -> None:
    uri = s.store.uri(path)
    s = Stream.open(s.url)
    reads: dict[str, Any] = {
        "read": lambda: s.read(),
        "to_reader": lambda: s.to_reader().read_all(),
        "read_task": lambda: list(read_task(s.store, s.schema, ReadTask(tuple(s.plan(*EVERYTHING)), *EVERYTHING))),
    }
    for name, read in reads.items():
        with pytest.raises(CorruptChunkError, match="damaged page") as err:
            read()
        assert err.value.path == uri, name
        assert "tstream fsck" in str(err.value), name


def _chunk_problem(s: Stream, path: str) -> None:
    report = Stream.open(s.url).verify()
    assert [p.path for p in report.problems if p.kind == "chunk"] == [s.store.uri(path)], report.summary()
    assert "damaged page" in report.problems[0].message and "column 'x'" in report.problems[0].message


def test_a_damaged_page_of_a_chunk_fails_every_read_and_fsck_lists_it(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=1)
    s.append(_rows(1, 5000), key="key", timestamp="ts")
    assert s.verify().ok
    before = s.read()
    (chunk,) = s.plan(*EVERYTHING)
    saved = s.store.read(chunk.path)
    clean = _flip(s, chunk.path)
    damaged = _unchecked_x(s, chunk.path)
    assert len(damaged) == len(clean) and not damaged.equals(clean)  # decodes, as other values
    _every_read_fails(s, chunk.path)
    _chunk_problem(s, chunk.path)
    s.store.write(chunk.path, saved)  # the remedy fsck names: the file put back
    assert Stream.open(url).verify().ok
    assert Stream.open(url).read().equals(before)


def test_a_damaged_macro_chunk_is_caught_and_repair_reads_around_it(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=1, compaction="off")
    for b in range(6):
        s.append(_rows(b, 2000), key="key", timestamp="ts")
    before = s.read()
    s.compact()
    (macro,) = {c.path for c in Stream.open(url).plan(*EVERYTHING)}
    clean = _flip(s, macro, row=5000)
    assert not _unchecked_x(s, macro).equals(clean)
    _every_read_fails(s, macro)
    # the small chunks it replaced are still there: repair plans reads around it
    report = Stream.open(url).verify()
    assert not report.ok and all(p.repairable for p in report.problems), report.summary()
    Stream.open(url).repair()
    assert Stream.open(url).verify().ok
    assert Stream.open(url).read().equals(before)


def test_a_damaged_page_of_a_slice_of_a_shared_file_is_caught(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "ROW_RANGE_ROWS", 0)  # self-contained slices (spans), not one row group
    s = Stream.create(url, schema=SCHEMA, segments=8)
    spec = s.write_spec(SCHEMA, key="key", timestamp="ts")
    s.commit([c for t in range(2) for c in write_batches(spec, [_rows(t, 2000)], task=f"t{t}")])
    slices: list[Chunk] = [c for c in Stream.open(url).plan(*EVERYTHING) if c.span is not None]
    victim = max(slices, key=lambda c: c.rows)
    clean = _flip(s, victim.path, row=victim.offset)
    assert not _unchecked_x(s, victim.path).equals(clean)
    _every_read_fails(s, victim.path)
    assert wants_spans([victim])  # read alone, the slice is fetched as its own Parquet file
    with pytest.raises(CorruptChunkError, match="damaged page") as err:
        read_table(s.store, SCHEMA, [victim], *EVERYTHING)
    assert err.value.path == s.store.uri(victim.path)
    report = Stream.open(url).verify()
    assert s.store.uri(victim.path) in {p.path for p in report.problems}, report.summary()
    assert any("damaged page" in p.message for p in report.problems)


@pytest.mark.spark
@pytest.mark.slow  # Spark's own reader: the Python paths' checks above run by default
def test_read_native_fails_on_a_damaged_page(spark: Any, tmp_path: Any) -> None:
    """Spark's Parquet reader checks page CRCs only when asked (without it this read returned
    the damaged values)."""
    from py4j.protocol import Py4JJavaError
    from pyspark_tstream import read_native

    url = f"file://{tmp_path}/s"
    s = Stream.create(url, schema=SCHEMA, segments=1)
    s.append(_rows(1, 5000), key="key", timestamp="ts")
    (chunk,) = s.plan(*EVERYTHING)
    _flip(s, chunk.path)
    with pytest.raises(Py4JJavaError, match="CRC checksum verification failed"):
        read_native(spark, url).select("x").collect()
