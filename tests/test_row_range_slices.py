"""A small shared file is one row group, each slice a row range of it (python/write/shared.py).

An append of a few hundred records to many segments used to write a row group per segment
(~4 rows each), and Parquet's fixed cost per row group made its reads several times those of
the same rows in one segment. Every test here writes the same records twice, as row-range
slices and as self-contained (format-v5) slices, and checks that each read, check and
rewrite gives the same answer on both.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.read.file_checks import slice_problem
from pyspark_tstream.read.reading import read_table
from pyspark_tstream.write import shared

SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("val", pa.int64())])
SEGMENTS = 16
APPENDS, ROWS = 4, 256
SYSTEM = ["_segment", "_seq", "_tso", "_timestamp"]


def _batch(i: int, rows: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(i)
    return pa.table({"key": [f"k{int(k)}" for k in rng.integers(0, 500, rows)],
                     "ts": [T0 + i * 10_000 + j for j in range(rows)],
                     "val": [i * 100_000 + j for j in range(rows)]}, schema=SCHEMA)


def _fill(url: str, monkeypatch: pytest.MonkeyPatch, *, row_range_rows: int, batches: int = APPENDS,
          rows: int = ROWS) -> Stream:
    with monkeypatch.context() as m:
        m.setattr(shared, "ROW_RANGE_ROWS", row_range_rows)
        s = Stream.create(url, schema=SCHEMA, segments=SEGMENTS, compaction="off")
        for i in range(batches):
            s.append(_batch(i, rows), key="key", timestamp="ts")
    return Stream.open(url)


@pytest.fixture
def pair(url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Stream, Stream]:
    """(row-range slices, self-contained slices) of the same records."""
    return (_fill(url, monkeypatch, row_range_rows=shared.ROW_RANGE_ROWS),
            _fill(f"{url}-spans", monkeypatch, row_range_rows=0))


def _same(a: pa.Table, b: pa.Table) -> None:
    cols = ["key", "ts", "val", "_segment", "_seq"]
    assert a.num_rows == b.num_rows
    assert a.select(cols).sort_by([("_segment", "ascending"), ("_seq", "ascending")]).equals(
        b.select(cols).sort_by([("_segment", "ascending"), ("_seq", "ascending")]))


def _files(s: Stream) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for c in s.plan(0, 1 << 62):
        out.setdefault(c.path, []).append(c)
    return out


def test_a_small_append_is_one_row_group_of_row_range_slices(pair: tuple[Stream, Stream]) -> None:
    rows, spans = pair
    files = _files(rows)
    assert len(files) == APPENDS
    for path, slices in files.items():
        assert len(slices) > SEGMENTS // 2 and all(c.shared and c.span is None for c in slices)
        meta = pq.ParquetFile(io.BytesIO(rows.store.read(path))).metadata
        assert meta.num_row_groups == 1 and meta.num_rows == ROWS
        ranges = sorted((c.offset, c.offset + c.rows) for c in slices)
        assert ranges[0][0] == 0 and ranges[-1][1] == ROWS
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # they tile the file
    assert all(c.span is not None for c in spans.plan(0, 1 << 62))


def test_records_order_and_system_columns_match_self_contained_slices(pair: tuple[Stream, Stream]) -> None:
    rows, spans = pair
    got, want = rows.read(), spans.read()
    assert got.num_rows == APPENDS * ROWS
    _same(got, want)
    assert got.column("_tso").to_pylist() == sorted(got.column("_tso").to_pylist())
    for seg in set(got.column("_segment").to_pylist()):
        mine = got.filter(pa.compute.equal(got["_segment"], seg)).sort_by("_seq")
        seqs, vals = mine.column("_seq").to_pylist(), mine.column("val").to_pylist()
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap, no repeat
        assert vals == sorted(vals)  # the order the writer stamped them
    for col in SYSTEM:
        assert col in got.column_names


def test_cuts_limits_and_time_bounds_across_row_range_files(pair: tuple[Stream, Stream]) -> None:
    rows, spans = pair
    start, end = T0 + 10_000 + 100, T0 + 30_000 + 50  # inside the second and the fourth append
    _same(rows.read(start, end), spans.read(start, end))
    assert rows.read(start, end).num_rows == ROWS - 100 + ROWS + 50
    cut = rows.cut_at(T0 + 20_000 + 128)  # from the middle of the third append, per segment
    _same(rows.read(cut), spans.read(spans.cut_at(T0 + 20_000 + 128)))
    assert rows.read(cut).num_rows == 2 * ROWS - 128
    _same(rows.read(rows.cut_at(T0 + 10_000), cut), spans.read(spans.cut_at(T0 + 10_000), spans.cut_at(T0 + 20_128)))
    _same(rows.read(limit=300), spans.read(limit=300))
    assert rows.read(limit=300).num_rows == 300
    _same(rows.read(tail=77), spans.read(tail=77))
    batches = list(rows.to_reader(start, end, system_columns=True, batch_rows=100))
    _same(pa.Table.from_batches(batches), spans.read(start, end))


def test_a_one_segment_read_of_a_row_range_file(pair: tuple[Stream, Stream]) -> None:
    rows, spans = pair
    chunks = rows.plan(0, 1 << 62)
    seg = chunks[0].seg
    got = read_table(rows.store, SCHEMA, [c for c in chunks if c.seg == seg], 0, 1 << 62)
    want = read_table(spans.store, SCHEMA, [c for c in spans.plan(0, 1 << 62) if c.seg == seg], 0, 1 << 62)
    assert got.num_rows == want.num_rows > 0 and set(got.column("_segment").to_pylist()) == {seg}
    _same(got, want)


def test_fsck_is_clean_and_catches_a_swapped_row_range_file(pair: tuple[Stream, Stream]) -> None:
    rows, _ = pair
    assert not rows.verify().problems and not rows.verify(footers_only=True).problems
    (first, a), (second, b) = list(_files(rows).items())[:2]
    meta_a = pq.ParquetFile(io.BytesIO(rows.store.read(first))).metadata
    # the footer of another append's file, judged for this file's slices: other times
    assert any(slice_problem(meta_a, c, b) for c in b)
    assert not any(slice_problem(meta_a, c, a) for c in a)
    rows.store.write(second, rows.store.read(first))
    for report in (Stream.open(rows.url).verify(footers_only=True), Stream.open(rows.url).verify()):
        assert any(second in p.path for p in report.problems), report.problems


def test_compaction_of_row_range_slices(pair: tuple[Stream, Stream]) -> None:
    rows, spans = pair
    before = rows.read()
    rows.compact(full=True)
    after = Stream.open(rows.url)
    assert not any(c.shared for c in after.plan(0, 1 << 62))
    _same(after.read(), before)
    _same(after.read(), spans.read())
    assert not after.verify().problems


def test_an_append_past_the_limit_keeps_self_contained_slices(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a 768-row append outgrows a 300-row limit in the middle of a segment's rows: what was held
    # is written as self-contained slices, and so is the rest
    big = _fill(url, monkeypatch, row_range_rows=300, batches=1, rows=768)
    assert all(c.span is not None for c in big.plan(0, 1 << 62))
    _same(big.read(), _fill(f"{url}-spans", monkeypatch, row_range_rows=0, batches=1, rows=768).read())
    assert not big.verify().problems
