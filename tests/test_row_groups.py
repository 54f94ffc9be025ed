"""Reads decode a chunk file one row group at a time (python/read/reading.py ``FileRows``).

The records must be exactly those of decoding the whole file (``decode_file`` +
``chunk_records``, kept as the reference), for plain chunks, views of macro-chunks, unsorted
views, ranges and cuts that start and end inside row groups; and a read must decode only the
row groups its kept rows are in, one at a time. Local chunk files are memory-mapped.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ORDER, T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.compaction import compact as compaction_mod
from pyspark_tstream.errors import CorruptChunkError
from pyspark_tstream.journal.entries import Chunk
from pyspark_tstream.read import reading
from pyspark_tstream.read.reading import chunk_records, decode_file, fetch_files, read_table
from pyspark_tstream.schema import RAW_TSO
from pyspark_tstream.store.storage import Store
from pyspark_tstream.write import writing


def _reference(store: Store, schema: pa.Schema, chunks: list[Chunk], lo: int, hi: int,
               starts: dict[int, int] | None = None, ends: dict[int, int] | None = None) -> pa.Table:
    """The records as decoding each whole file gives them (the path before row groups)."""
    starts, ends = starts or {}, ends or {}
    parts = []
    for views, data in fetch_files(store, chunks):
        table, base = decode_file(store, views[0], data, views)
        for c in views:
            part = chunk_records(table, c, lo, hi, schema, starts.get(c.seg), ends.get(c.seg), base)
            if part is not None:
                parts.append(part)
    return pa.concat_tables(parts).sort_by(ORDER) if parts else None


def _grouped(store: Store, schema: pa.Schema, chunks: list[Chunk], lo: int, hi: int,
             starts: dict[int, int] | None = None, ends: dict[int, int] | None = None) -> pa.Table:
    parts = [p for _, p in reading._records(store, schema, chunks, lo, hi, starts or {}, ends or {})]
    return pa.concat_tables(parts).sort_by(ORDER) if parts else None


@pytest.fixture
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Row groups of a few rows, so every chunk and macro-chunk has many."""
    monkeypatch.setattr(writing, "ROW_GROUP_ROWS", 7)
    monkeypatch.setattr(compaction_mod, "MACRO_ROW_GROUP", 11)


def _fill(url: str, appends: int = 12, rows: int = 30) -> Stream:
    s = Stream.create(url, segments=2, compaction="off")
    rng = np.random.default_rng(7)
    for b in range(appends):
        # unordered client times (some equal): stamping moves some records within a chunk
        t = (T0 + b * 1000 + rng.integers(0, 50, rows)).tolist()
        s.append(pa.table({"k": [f"k{(b * 7 + i) % 5}" for i in range(rows)], "b": [b] * rows,
                           "s": [f"row-{b}-{i}" for i in range(rows)], "t": t}), key="k", timestamp="t")
    return s


def _groups(s: Stream, chunk: Chunk) -> int:
    return pq.ParquetFile(s.store.full(chunk.path)).num_row_groups


@pytest.mark.parametrize("compacted", [False, True])
def test_row_group_reads_equal_whole_file_reads(tmp_path: Path, small_groups: None, compacted: bool) -> None:
    s = _fill(f"file://{tmp_path}/s")
    if compacted:
        s.compact()
    st = s.refresh()
    chunks = s.plan(st.head_tso, st.tick)
    assert all(_groups(s, c) > 1 for c in chunks)
    if compacted:
        assert all(c.floor == 0 for c in chunks), "expected macro-chunks"
        # a plan starting from journal positions in the middle names views inside them
        mid = s.plan(st.head_tso, st.tick, first_pos=4, last_pos=10)
        chunks = mid + chunks
        assert any(c.offset > 0 for c in chunks), "expected views of macro-chunks"
    lo0, top = st.head_tso, st.tick  # everything: (truncation head, tick]
    tsos = np.sort(read_table(s.store, s.schema, chunks, lo0, top)["_tso"].to_numpy())
    n = len(tsos)
    assert n == 12 * 30 + (sum(c.rows for c in mid) if compacted else 0)  # views read rows again
    # whole range, ranges starting and ending inside row groups, an empty range
    ranges = [(lo0, top), (int(tsos[8]), int(tsos[n - 9])), (int(tsos[40]), int(tsos[41])),
              (int(tsos[-1]), top)]
    for lo, hi in ranges:
        want = _reference(s.store, s.schema, chunks, lo, hi)
        got = _grouped(s.store, s.schema, chunks, lo, hi)
        if want is None:
            assert got is None
            continue
        assert got.equals(want), (lo, hi)
    # cuts by _seq in the middle of row groups
    starts, ends = {0: 13, 1: 5}, {0: 200, 1: 150}
    want = _reference(s.store, s.schema, chunks, lo0, top, starts, ends)
    got = _grouped(s.store, s.schema, chunks, lo0, top, starts, ends)
    assert got.equals(want) and got.num_rows < n
    # the public read: one table in read order, same records
    table = read_table(s.store, s.schema, chunks, lo0, top)
    assert table.sort_by(ORDER).equals(_reference(s.store, s.schema, chunks, lo0, top))
    assert np.all(np.diff(table["_tso"].to_numpy()) >= 0)


def _file_with_groups(tmp_path: Path, rows: int = 40, group: int = 8) -> tuple[Store, str]:
    store = Store(f"file://{tmp_path}/raw")
    tsos = np.arange(rows, dtype=np.int64) * 10 + 10
    table = pa.table({"v": np.arange(rows, dtype=np.int64), RAW_TSO: tsos})
    os.makedirs(tmp_path / "raw", exist_ok=True)
    pq.write_table(table, tmp_path / "raw" / "f.parquet", row_group_size=group)
    return store, "f.parquet"


def test_unsorted_views_across_row_groups_equal_the_mask_read(tmp_path: Path) -> None:
    store, path = _file_with_groups(tmp_path)
    # rewrite the raw column out of order (lanes merged): kept rows scattered over groups
    rng = np.random.default_rng(3)
    raw = rng.permutation(np.arange(40, dtype=np.int64) * 10 + 10)
    pq.write_table(pa.table({"v": np.arange(40, dtype=np.int64), RAW_TSO: raw}),
                   store.full(path), row_group_size=8)
    schema = pa.schema([pa.field("v", pa.int64())])
    views = [Chunk(seg=3, path=path, rows=25, bytes=1, seq=100, floor=0, lo=10, hi=400, offset=5, sorted=False),
             Chunk(seg=3, path=path, rows=10, bytes=1, seq=125, floor=0, lo=10, hi=400, offset=30, sorted=False)]
    for lo, hi, first, end in [(0, 1000, None, None), (95, 305, None, None), (0, 1000, 104, 131), (95, 99, None, None)]:
        starts = {3: first} if first else {}
        ends = {3: end} if end else {}
        want = _reference(store, schema, views, lo, hi, starts, ends)
        got = _grouped(store, schema, views, lo, hi, starts, ends)
        assert (got is None and want is None) or got.equals(want), (lo, hi, first, end)


def test_a_read_decodes_only_its_row_groups_once_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, path = _file_with_groups(tmp_path)  # 5 groups of 8 rows, _tso 10, 20, ..., 400
    schema = pa.schema([pa.field("v", pa.int64())])
    decoded: list[int] = []  # row groups whose user columns were decoded
    calls: list[list[int]] = []
    real = pq.ParquetFile.read_row_groups

    def counting(self: pq.ParquetFile, groups: list[int], columns: list[str] | None = None,
                 **kwargs: object) -> pa.Table:
        if columns is None or "v" in columns:
            decoded.extend(groups)
            calls.append(list(groups))
        return real(self, groups, columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", counting)
    whole = Chunk(seg=0, path=path, rows=40, bytes=1, seq=0, floor=1, lo=10, hi=400)
    # rows 26..29 (_tso 270..300) lie in group 3 only
    got = _grouped(store, schema, [whole], 260, 300)
    assert got["v"].to_pylist() == [26, 27, 28, 29]
    assert decoded == [3]
    decoded.clear()
    # two views of one macro-chunk sharing group 2: every group decoded once
    views = [Chunk(seg=0, path=path, rows=20, bytes=1, seq=0, floor=0, lo=10, hi=200, offset=0),
             Chunk(seg=0, path=path, rows=20, bytes=1, seq=20, floor=0, lo=210, hi=400, offset=20)]
    got = _grouped(store, schema, views, 0, 1000)
    assert got["v"].to_pylist() == list(range(40))
    assert decoded == [0, 1, 2, 3, 4]
    # a small file's views: its groups decoded in one call, not one per group or view
    assert calls[-1] == [0, 1, 2, 3, 4] and len(calls) == 2


def test_short_or_garbage_files_still_fail_with_the_chunk_named(tmp_path: Path) -> None:
    store, path = _file_with_groups(tmp_path)
    schema = pa.schema([pa.field("v", pa.int64())])
    too_long = Chunk(seg=0, path=path, rows=41, bytes=1, seq=0, floor=1, lo=10, hi=400)
    with pytest.raises(Exception, match=r"has 40 rows, the journal says 41.*fsck"):
        _grouped(store, schema, [too_long], 0, 1000)
    (tmp_path / "raw" / "f.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(Exception, match=r"f\.parquet is corrupt.*fsck"):
        _grouped(store, schema, [too_long], 0, 1000)


def test_null_raw_timestamps_fail_with_the_chunk_named(tmp_path: Path) -> None:
    store, path = _file_with_groups(tmp_path)
    raw = pa.array([None if i == 13 else i * 10 + 10 for i in range(40)], pa.int64())
    pq.write_table(pa.table({"v": np.arange(40, dtype=np.int64), RAW_TSO: raw}), tmp_path / "raw" / path,
                   row_group_size=8)
    schema = pa.schema([pa.field("v", pa.int64())])
    chunk = Chunk(seg=0, path=path, rows=40, bytes=1, seq=0, floor=1, lo=10, hi=400)
    for read in (lambda: _grouped(store, schema, [chunk], 0, 1000),  # a task's read
                 lambda: reading.chunks_tsos(store, [chunk]),  # a planner's cut inside the chunk
                 lambda: _reference(store, schema, [chunk], 0, 1000)):  # the whole-file decode
        with pytest.raises(CorruptChunkError, match=r"f\.parquet is corrupt \(1 null value.*fsck"):
            read()


def test_local_chunk_reads_are_memory_mapped(tmp_path: Path) -> None:
    store = Store(f"file://{tmp_path}/m")
    store.write("a.bin", b"abc" * 1000)
    store.write("empty.bin", b"")
    mapped = store.read_many(["a.bin", "empty.bin"], mapped=True)
    assert bytes(mapped[0]) == b"abc" * 1000 and bytes(mapped[1]) == b""
    assert not isinstance(mapped[0], bytes)  # a mapping, not a copy
    assert store.read_many(["a.bin"]) == [b"abc" * 1000]
    with pytest.raises(FileNotFoundError, match="missing.bin"):
        store.read_many(["missing.bin"], mapped=True)
    mem = Store(f"memory://rg-{os.getpid()}-{id(tmp_path)}/m")
    mem.write("a.bin", b"xyz")
    assert mem.read_many(["a.bin"], mapped=True) == [b"xyz"]


def test_files_that_cannot_be_mapped_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem without mmap (some FUSE mounts fail with ENODEV) still serves chunk reads."""
    import errno

    from pyspark_tstream.store import localfs

    def no_mmap(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENODEV, "No such device")

    monkeypatch.setattr(localfs.mmap, "mmap", no_mmap)
    store = Store(f"file://{tmp_path}/m")
    store.write("a.bin", b"abc" * 1000)
    assert store.read_many(["a.bin"], mapped=True) == [b"abc" * 1000]
    stream = _fill(f"file://{tmp_path}/s", appends=3)
    got = stream.read().sort_by(ORDER)
    assert got.num_rows == 90
    assert sorted(got.column("s").to_pylist()) == sorted(f"row-{b}-{i}" for b in range(3) for i in range(30))


def test_dictionary_columns_decode_through_their_dictionary_only_where_no_page_fell_back(tmp_path: Path) -> None:
    """String columns whose dictionary holds every value are read as indices plus a take.

    Same values and types as the plain decode; a column whose writer fell back to plain pages
    (its dictionary outgrew DICTIONARY_PAGE_BYTES) and a nested column are decoded plainly.
    """
    from pyspark_tstream.chunkfile.dictionary_pages import DICTIONARY_PAGE_BYTES, dictionary_read_columns

    rows = 40_000
    ids = np.arange(rows)
    table = pa.table({
        "k": pa.array([None if i % 11 == 0 else f"key-{i % 7}" for i in ids]),  # 7 values and nulls
        "ls": pa.array([f"large-{i % 3}" for i in ids], pa.large_string()),
        "bin": pa.array([b"\x00\x01" * (i % 2 + 1) for i in ids], pa.binary()),
        "many": pa.array([f"{i:040d}" for i in ids]),  # 40k distinct 40-byte values: 1.76 MB dictionary
        "plain": pa.array([f"p{i}" for i in ids]),  # not dictionary-encoded at all
        "nested": pa.array([[f"n{i % 2}"] for i in ids]),
        RAW_TSO: pa.array(ids * 10 + 10, pa.int64()),
    })
    store = Store(f"file://{tmp_path}/raw")
    os.makedirs(tmp_path / "raw")
    pq.write_table(table, tmp_path / "raw" / "f.parquet", row_group_size=rows,
                   use_dictionary=["k", "ls", "bin", "many", "nested"], dictionary_pagesize_limit=DICTIONARY_PAGE_BYTES)
    meta = pq.ParquetFile(tmp_path / "raw" / "f.parquet").metadata.row_group(0)
    many = meta.column(table.schema.get_field_index("many"))
    assert many.has_dictionary_page and many.total_uncompressed_size > DICTIONARY_PAGE_BYTES  # it fell back
    schema = pa.schema([f for f in table.schema if f.name != RAW_TSO])
    assert dictionary_read_columns(meta, table.schema) == ["k", "ls", "bin"]

    chunk = Chunk(seg=0, path="f.parquet", rows=rows, bytes=1, seq=0, floor=1, lo=10, hi=rows * 10)
    [(views, data)] = list(fetch_files(store, [chunk]))
    file_rows = reading.FileRows(store, views, data)
    got = pa.concat_tables(file_rows.records(chunk, 0, rows * 10, schema, None, None))
    assert list(file_rows._by_dictionary) == [("k", "ls", "bin")]  # the dictionary path was taken
    want = _reference(store, schema, [chunk], 0, rows * 10)
    assert got.schema == want.schema and got.schema.field("ls").type == pa.large_string()
    assert got.equals(want)
    assert got["k"].to_pylist()[:12] == [None if i % 11 == 0 else f"key-{i % 7}" for i in range(12)]
