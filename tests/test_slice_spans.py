"""Self-contained slices of shared files (format v5): a slice's bytes are a Parquet
file of their own, so reading one segment fetches about its own bytes in one store call; an
outer footer keeps the whole object one Parquet file (python/chunkfile/footer_shift.py).
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.chunkfile import footer_shift
from pyspark_tstream.chunkfile.footer import footer_of
from pyspark_tstream.errors import CorruptMetadataError
from pyspark_tstream.journal import entry as entries_mod
from pyspark_tstream.journal import features
from pyspark_tstream.journal.entries import Chunk, Entry
from pyspark_tstream.journal.packing import pack, unpack
from pyspark_tstream.read.reading import read_table
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import Store
from pyspark_tstream.write import shared
from pyspark_tstream.write.spec import ChunkInfo
from test_wide_writes import SCHEMA, _task, _vals, _write


@pytest.fixture(autouse=True)
def _self_contained(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about self-contained slices: no shared file is small enough to be one
    row group (test_row_range_slices.py covers those)."""
    monkeypatch.setattr(shared, "ROW_RANGE_ROWS", 0)

EVERYTHING = (0, 1 << 62)


class Counted:
    """Counts a store's reads (calls and bytes), as bench_wide_write.py's ``ByteCount``."""

    def __init__(self, store: Store) -> None:
        self.calls = self.bytes = 0
        for name in ("read", "read_many", "read_range"):
            setattr(store, name, self._counted(getattr(store, name)))

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **kw: Any) -> Any:
            out = fn(*a, **kw)
            self.calls += 1
            self.bytes += sum(len(b) for b in (out if isinstance(out, list) else [out]))
            return out
        return wrapped


def _wide(url: str, tasks: int = 2, rows: int = 4000, segments: int = 16) -> tuple[Stream, list[Chunk]]:
    s = Stream.create(url, schema=SCHEMA, segments=segments)
    s.commit(_write(s, tasks=tasks, rows=rows))
    return s, Stream.open(url).plan(*EVERYTHING)


def _slices(chunks: list[Chunk], path: str) -> list[Chunk]:
    return sorted((c for c in chunks if c.path == path), key=lambda c: c.offset)


# -- reads ------------------------------------------------------------------------------------

def test_a_slice_read_fetches_its_span_alone_in_one_call(url: str) -> None:
    # slices of ~500 rows, ~5 kB (the benchmark's are ~9 kB); a slice's own footer is ~850 bytes
    _, chunks = _wide(url, rows=8000)
    assert all(c.shared and c.span is not None for c in chunks)
    path = chunks[0].path
    mine = _slices(chunks, path)
    assert len(mine) == 16
    for c in mine:
        store = Store(url)
        counted = Counted(store)
        got = read_table(store, SCHEMA, [c], *EVERYTHING)
        assert got.num_rows == c.rows and set(got.column("_segment").to_pylist()) == {c.seg}
        assert counted.calls == 1, c
        assert counted.bytes == c.span_bytes <= 1.5 * c.bytes, c  # its span, ~its bytes
        assert counted.bytes < c.file_bytes / 8


def test_adjacent_spans_of_one_file_are_one_read(url: str) -> None:
    _, chunks = _wide(url)
    mine = _slices(chunks, chunks[0].path)[3:6]  # three consecutive segments' slices
    assert mine[0].span[1] == mine[1].span[0] and mine[1].span[1] == mine[2].span[0]
    store = Store(url)
    counted = Counted(store)
    got = read_table(store, SCHEMA, mine, *EVERYTHING)
    assert counted.calls == 1 and counted.bytes == mine[2].span[1] - mine[0].span[0]
    assert got.num_rows == sum(c.rows for c in mine)
    whole = Stream.open(url).read()
    want = whole.filter(pa.compute.is_in(whole.column("_segment"), pa.array([c.seg for c in mine])))
    assert _vals(got) == [v for v in _vals(want) if v in set(got.column("val").to_pylist())]
    assert sorted(got.column("_seq").to_pylist()) == sorted(
        x for c in mine for x in range(c.seq, c.seq + c.rows))


def test_spans_a_little_apart_are_one_read_and_far_apart_two(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark_tstream.read import ranged

    _, chunks = _wide(url)
    mine = _slices(chunks, chunks[0].path)
    pair = [mine[2], mine[5]]  # two slices between them
    for gap, calls in ((1 << 20, 1), (0, 2)):
        monkeypatch.setattr(ranged, "SPAN_GAP", gap)
        store = Store(url)
        counted = Counted(store)
        got = read_table(store, SCHEMA, pair, *EVERYTHING)
        assert counted.calls == calls and got.num_rows == pair[0].rows + pair[1].rows
        assert counted.bytes == (pair[1].span[1] - pair[0].span[0] if calls == 1 else
                                 pair[0].span_bytes + pair[1].span_bytes)


def test_a_read_of_every_segment_reads_each_file_whole_and_projects(url: str) -> None:
    _, chunks = _wide(url, tasks=3, rows=900)
    store = Store(url)
    counted = Counted(store)
    got = read_table(store, SCHEMA, chunks, *EVERYTHING)
    assert counted.calls == 1  # three whole files, one batched call
    assert _vals(got) == sorted(v for t in range(3) for v in _task(t, 900).column("val").to_pylist())



def test_the_sweep_reads_spans_of_some_segments_with_a_projection(url: str) -> None:
    from pyspark_tstream.read.sweep import sweep

    _, chunks = _wide(url, tasks=3, rows=900)
    segs = sorted({c.seg for c in chunks})[2:5]
    mine = [c for c in chunks if c.seg in segs]
    store = Store(url)
    counted = Counted(store)
    schema = pa.schema([SCHEMA.field("val")])
    got = pa.concat_tables(sweep(store, schema, mine, *EVERYTHING, columns=["val"], window_rows=7))
    assert counted.calls == 3  # a file each: its three adjacent spans in one read
    assert got.column_names[0] == "val" and "key" not in got.column_names
    want = read_table(Store(url), SCHEMA, mine, *EVERYTHING)
    assert got.column("val").to_pylist() == want.column("val").to_pylist()  # same records, same order


def test_a_damaged_span_fails_as_a_corrupt_chunk(url: str) -> None:
    from pyspark_tstream.errors import CorruptChunkError

    s, chunks = _wide(url)
    c = _slices(chunks, chunks[0].path)[2]
    data = bytearray(s.store.read(c.path))
    data[c.span[1] - 4:c.span[1]] = b"XXXX"  # its own footer's magic
    s.store.delete([c.path])
    s.store.write(c.path, bytes(data))
    with pytest.raises(CorruptChunkError):
        read_table(Store(url), SCHEMA, [c], *EVERYTHING)


# -- the whole object -----------------------------------------------------------------------

def test_the_whole_shared_file_is_its_slices_in_order(url: str) -> None:
    s, chunks = _wide(url, tasks=1, rows=3000)
    (path,) = {c.path for c in chunks}
    obj = s.store.read(path)
    mine = _slices(chunks, path)
    whole = pq.ParquetFile(pa.BufferReader(obj))
    spans = [pq.ParquetFile(pa.BufferReader(obj[c.span[0]:c.span[1]])) for c in mine]
    assert whole.read().equals(pa.concat_tables([f.read() for f in spans]))
    assert whole.metadata.num_rows == sum(c.rows for c in mine) and len(obj) == mine[0].file_bytes
    # the outer footer names each slice's row groups where they are: slice k's column chunks
    # at its own offsets plus its span's start
    g = 0
    for c, f in zip(mine, spans):
        assert c.offset == sum(x.rows for x in mine if x.offset < c.offset)
        for k in range(f.metadata.num_row_groups):
            inner, outer = f.metadata.row_group(k), whole.metadata.row_group(g)
            assert outer.num_rows == inner.num_rows
            for i in range(inner.num_columns):
                assert outer.column(i).data_page_offset == inner.column(i).data_page_offset + c.span[0]
            g += 1
        # bytes: the compressed size of its row groups; span: those plus its footer
        assert c.bytes == sum(f.metadata.row_group(k).column(i).total_compressed_size
                              for k in range(f.metadata.num_row_groups) for i in range(f.metadata.num_columns))
        assert c.bytes < c.span_bytes < c.bytes + 2048
    assert g == whole.metadata.num_row_groups
    # ordinals, where written (pyarrow 26 writes none), are positions in the whole file
    assert _ordinals(footer_of(obj)) in ([], list(range(g)))


@pytest.mark.slow  # 8-14 s of Spark jobs (CI runs it in the slow set)
@pytest.mark.spark
def test_spark_reads_a_wide_stream_every_row_once(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F
    from pyspark_tstream import read_native

    url = f"file://{tmp_path}/s"
    s, chunks = _wide(url, tasks=3, rows=1500, segments=8)
    want = sorted(v for t in range(3) for v in _task(t, 1500).column("val").to_pylist())
    path = chunks[0].path
    # Spark's own Parquet scan of one shared file: every row, row_index k = row k of its slices
    obj = s.store.read(path)
    mine = _slices(chunks, path)
    expected = pa.concat_tables([pq.read_table(pa.BufferReader(obj[c.span[0]:c.span[1]])) for c in mine])
    df = spark.read.parquet(s.store.uri(path)).select("val", F.col("_metadata.row_index").alias("i"))
    got = sorted((r["i"], r["val"]) for r in df.collect())
    assert got == list(enumerate(expected.column("val").to_pylist()))
    # both reads of the stream: every row once, the same rows
    python = spark.read.format("tstream").load(url)
    native = read_native(spark, url)
    cols = ["val", "_segment", "_seq", "_tso"]
    rows_python = sorted(tuple(r) for r in python.select(*cols).collect())
    assert sorted(tuple(r) for r in native.select(*cols).collect()) == rows_python
    assert sorted(r[0] for r in rows_python) == want


# -- compaction, fsck, re-routing on v5 files -------------------------------------------------

def test_compaction_and_fsck_of_v5_shared_files(url: str) -> None:
    s, chunks = _wide(url, tasks=3, rows=600, segments=4)
    assert all(c.span is not None for c in chunks)
    want = _vals(s.read())
    assert not Stream.open(url).verify().problems
    s.compact(full=True)
    assert not any(c.shared for c in Stream.open(url).plan(*EVERYTHING))
    assert _vals(Stream.open(url).read()) == want
    s.vacuum(grace_ms=0)
    assert not Stream.open(url).verify().problems


def test_fsck_checks_the_judged_slice_s_span_against_the_outer_footer(url: str) -> None:
    from pyspark_tstream.read.file_checks import file_problem

    s, chunks = _wide(url, tasks=1, rows=600, segments=4)
    last = _slices(chunks, chunks[0].path)[-1]
    assert file_problem(s.store, last, last.file_bytes) is None
    moved = replace(last, span_start=last.span_start + 64, span_bytes=last.span_bytes - 64)
    assert "outside the span" in file_problem(s.store, moved, last.file_bytes)


def test_fsck_finds_a_shared_file_cut_short(url: str) -> None:
    s, chunks = _wide(url, tasks=1, rows=600, segments=4)
    path = chunks[0].path
    data = s.store.read(path)
    s.store.delete([path])
    s.store.write(path, data[:-100])
    assert any(p.kind == "chunk" for p in Stream.open(url).verify().problems)


# -- older and newer formats ------------------------------------------------------------------

def _as_v4_file(store: Store, infos: list[ChunkInfo]) -> list[ChunkInfo]:
    """``infos`` with each shared file rewritten as format v4 wrote it (one writer, each slice
    in row groups of its own, one footer) and the slices without spans."""
    out = []
    for path in dict.fromkeys(c.path for c in infos):
        mine = [c for c in infos if c.path == path]
        if not mine[0].file_bytes:
            out += mine
            continue
        table = pq.read_table(pa.BufferReader(store.read(path)))
        sink = io.BytesIO()
        with pq.ParquetWriter(sink, table.schema) as w:
            for c in sorted(mine, key=lambda c: c.offset):
                w.write_table(table.slice(c.offset, c.rows))
        data = sink.getvalue()
        meta = pq.ParquetFile(pa.BufferReader(data)).metadata
        assert meta.num_row_groups == len(mine)
        store.delete([path])
        store.write(path, data)
        for g, c in enumerate(sorted(mine, key=lambda c: c.offset)):
            rg = meta.row_group(g)
            out.append(replace(c, file_bytes=len(data), span_start=0, span_bytes=0,
                               bytes=sum(rg.column(i).total_compressed_size for i in range(rg.num_columns))))
    return out


def test_a_version_4_stream_of_shared_files_still_reads(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entries_mod, "FORMAT_VERSION", 4)
    s = Stream.create(url, schema=SCHEMA, segments=8)
    infos = _as_v4_file(s.store, _write(s, tasks=2, rows=2000))
    s.commit(infos)
    assert json.loads(s.store.read(layout.HEAD))["v"] == 4
    monkeypatch.undo()
    chunks = Stream.open(url).plan(*EVERYTHING)
    assert all(c.shared and c.span is None for c in chunks)
    want = sorted(v for t in range(2) for v in _task(t, 2000).column("val").to_pylist())
    assert _vals(Stream.open(url).read()) == want
    one = [c for c in chunks if c.seg == chunks[0].seg]
    store = Store(url)
    counted = Counted(store)
    got = read_table(store, SCHEMA, one, *EVERYTHING)  # the v4 way: footer, then its row groups
    assert got.num_rows == sum(c.rows for c in one) and counted.calls == 2 * len({c.path for c in one})
    s = Stream.open(url)
    s.commit(_write(s, tasks=1, rows=500, first_seed=7))  # a v5 commit after v4 ones
    assert _vals(Stream.open(url).read()) == sorted(want + _task(7, 500).column("val").to_pylist())
    assert not Stream.open(url).verify().problems


def test_a_version_6_entry_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A version-5 reader refuses a version-6 entry (as it shipped: journal entries 1 to 5 known)."""
    known = features.VERSIONS[entries_mod.ENTRY]
    monkeypatch.setitem(features.VERSIONS, entries_mod.ENTRY, {v: f for v, f in known.items() if v <= 5})
    chunk = Chunk(seg=1, path="data/1/w-a-b.parquet", rows=3, bytes=100, seq=0, floor=1, lo=5, hi=9,
                  offset=0, file_bytes=500, span_start=0, span_bytes=300)
    d = {**Entry(pos=1, op="append", wall=1, state=None, chunks=[chunk]).delta_json(), "v": 6}  # type: ignore[arg-type]
    with pytest.raises(CorruptMetadataError, match="version 6.*upgrade pyspark-tstream"):
        Entry.decode_delta(json.dumps(d).encode(), path="mem://x")
    back = Entry.decode_delta(json.dumps({**d, "v": 5}).encode(), path="mem://x")
    assert back["chunks"] == [chunk.to_json()]


# -- the journal ------------------------------------------------------------------------------

def _chunks(spans: bool) -> list[Chunk]:
    out = []
    for t in range(3):
        at = 0
        for seg in range(10):
            b = 2000 + 37 * seg + t
            sb = b + 700 + seg if spans else 0
            out.append(Chunk(seg=seg, path=f"data/0/w-t{t}.parquet", rows=50 + seg, bytes=b, seq=t * 100,
                             floor=1, lo=1000 + t, hi=2000 + seg, offset=sum(50 + k for k in range(seg)),
                             file_bytes=60_000, span_start=at if spans else 0, span_bytes=sb))
            at += sb
    return out


@pytest.mark.parametrize("spans", [True, False])
def test_packed_chunks_keep_their_spans(spans: bool) -> None:
    chunks = _chunks(spans)
    stored = [c.to_json() for c in chunks]
    assert all(len(c) == (14 if spans else 12) for c in stored)  # no span: a v4 list
    text = pack(stored)
    assert [Chunk.from_json(c) for c in unpack(text)] == chunks
    import base64
    import zlib
    doc = json.loads(zlib.decompress(base64.b64decode(text)))
    assert ("sb" in doc) == spans  # a pack without spans is a v4 pack
    if spans:
        assert set(doc["ss"]) == {0} and max(doc["sb"]) < 1000  # delta-coded: spans follow each other


def test_a_span_past_its_file_is_corrupt_metadata() -> None:
    chunk = Chunk(seg=1, path="data/1/w-a-b.parquet", rows=3, bytes=100, seq=0, floor=1, lo=5, hi=9,
                  file_bytes=500, span_start=300, span_bytes=300)
    d = {**Entry(pos=1, op="append", wall=1, state=None, chunks=[chunk]).delta_json(), "v": 5}  # type: ignore[arg-type]
    with pytest.raises(CorruptMetadataError):
        Entry.decode_delta(json.dumps(d).encode(), path="mem://x")


# -- the footer shifter ---------------------------------------------------------------------

def _parquet(**kw: Any) -> bytes:
    t = pa.table({"v": list(range(300)), "s": [f"x{i % 7}" for i in range(300)], "d": [i / 3 for i in range(300)],
                  "b": [i % 3 == 0 for i in range(300)], "l": [[i, i + 1] for i in range(300)],
                  "ts": pa.array(range(300), pa.timestamp("ms", tz="UTC"))})
    sink = io.BytesIO()
    pq.write_table(t, sink, row_group_size=100, **kw)
    return sink.getvalue()


def _ordinals(footer: bytes) -> list[int]:
    """The row-group ordinals (``RowGroup`` field 7) a footer records, where the join finds them."""
    return [(z >> 1) ^ -(z & 1) for z, _ in (footer_shift._varint(footer, a) for a, _, _ in
                                              footer_shift._Scan(footer, 0).ordinals)]


def _offsets(path: Path) -> list[tuple[Any, ...]]:
    """The file offsets each column chunk of a Parquet file records, as DuckDB reads its footer."""
    import duckdb

    return duckdb.sql(f"""select file_offset, data_page_offset, dictionary_page_offset, index_page_offset,
                          column_index_offset, offset_index_offset from parquet_metadata('{path}')
                          order by row_group_id, column_id""").fetchall()


FOOTERS = {"statistics and dictionaries": {}, "neither": {"write_statistics": False, "use_dictionary": False},
           "some statistics": {"write_statistics": ["v"]}, "page index": {"write_page_index": True},
           "sorting columns": {"sorting_columns": [pq.SortingColumn(0)]}}


@pytest.mark.parametrize("kw", FOOTERS.values(), ids=FOOTERS.keys())
def test_a_joined_footer_moves_every_offset(kw: dict[str, Any], tmp_path: Path) -> None:
    data = _parquet(**kw)
    delta = 1_000_003
    assert footer_shift.join([(footer_of(data), 0)]) == footer_of(data)  # a footer alone at 0: unchanged
    moved = footer_shift.join([(footer_of(data), delta)])
    a = pq.ParquetFile(pa.BufferReader(data)).metadata
    b = pq.ParquetFile(pa.BufferReader(b"PAR1" + footer_shift.tail(moved))).metadata
    assert a.num_row_groups == b.num_row_groups == 3
    for g in range(3):
        for i in range(a.num_columns):
            x, y = a.row_group(g).column(i).to_dict(), b.row_group(g).column(i).to_dict()
            for k in ("data_page_offset", "dictionary_page_offset", "index_page_offset", "file_offset"):
                if x.get(k):
                    assert y[k] == x[k] + delta, (k, x, y)
            assert {k: v for k, v in x.items() if "offset" not in k} == \
                {k: v for k, v in y.items() if "offset" not in k}
    # the raw fields too (page index offsets, which pyarrow does not show), as DuckDB reads them
    (tmp_path / "a.parquet").write_bytes(data)
    (tmp_path / "b.parquet").write_bytes(b"PAR1" + footer_shift.tail(moved))
    for old, new in zip(_offsets(tmp_path / "a.parquet"), _offsets(tmp_path / "b.parquet"), strict=True):
        assert new == tuple(None if v is None else v + delta for v in old), (old, new)


def _polars_parquet(rows: int) -> bytes:
    """A Parquet file whose row groups carry ordinals (polars writes them; pyarrow does not)."""
    import polars as pl

    sink = io.BytesIO()
    pl.DataFrame({"v": list(range(rows)), "s": [f"x{i % 7}" for i in range(rows)]}).write_parquet(
        sink, row_group_size=100)
    return sink.getvalue()


def test_joined_footers_read_as_one_file() -> None:
    parts = [_parquet(), _parquet(write_statistics=False)]
    obj = parts[0] + parts[1]
    footers = [(footer_of(parts[0]), 0), (footer_of(parts[1]), len(parts[0]))]
    whole = obj + footer_shift.tail(footer_shift.join(footers))
    got = pq.read_table(pa.BufferReader(whole))
    assert got.equals(pa.concat_tables([pq.read_table(pa.BufferReader(p)) for p in parts]))
    other = io.BytesIO()
    pq.write_table(pa.table({"x": [1]}), other)
    with pytest.raises(ValueError, match="different Parquet schemas"):
        footer_shift.join(footers + [(footer_of(other.getvalue()), len(obj))])
    with pytest.raises(ValueError):
        footer_shift.join([(footers[0][0][:-3], 0)])
    assert struct.unpack("<I", whole[-8:-4])[0] < 20_000


def test_joined_footers_renumber_row_group_ordinals() -> None:
    parts = [_polars_parquet(300), _polars_parquet(250)]
    assert [_ordinals(footer_of(p)) for p in parts] == [[0, 1, 2], [0, 1, 2]]
    footers = [(footer_of(parts[0]), 0), (footer_of(parts[1]), len(parts[0]))]
    joined = footer_shift.join(footers)
    assert _ordinals(joined) == list(range(6))
    got = pq.read_table(pa.BufferReader(parts[0] + parts[1] + footer_shift.tail(joined)))
    assert got.equals(pa.concat_tables([pq.read_table(pa.BufferReader(p)) for p in parts]))
