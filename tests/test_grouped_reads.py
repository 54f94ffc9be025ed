"""A read of fresh data decodes each shared file once, and a read task takes whole shared files.

Since format v5 an append writes one shared file with a slice per segment. A read that needs
several slices of one file decodes their row groups in one call and cuts every slice's records
from it (python/read/grouped.py); read tasks take all the slices a read needs of a file
(python/read/tasks.py). These tests pin that it returns exactly what reading each slice on its
own returned (the reference: ``decode_file`` + ``chunk_records`` per slice): records, system
columns, a segment's order, subsets of a file's slices, cuts inside slices, across files; and
what it costs: one decode call and one store read per file.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import ORDER, T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal.entries import Chunk
from pyspark_tstream.read.reading import ReadTask, chunk_records, decode_file, fetch_files, read_table, read_task
from pyspark_tstream.read.tasks import file_units, plan_tasks
from pyspark_tstream.store.storage import Store

SEGMENTS = 8
APPENDS = 6
ROWS = 64


def _stream(appends: int = APPENDS) -> Stream:
    """``appends`` appends of ``ROWS`` records over ``SEGMENTS`` segments (keyed), compaction off:
    one shared file per append, one slice per segment."""
    s = Stream.create(f"memory://grouped-{uuid.uuid4().hex[:8]}/s", segments=SEGMENTS, compaction="off")
    rng = np.random.default_rng(5)
    for b in range(appends):
        s.append(pa.table({"k": [f"key{int(i)}" for i in rng.integers(0, 50, ROWS)],
                           "v": np.arange(b * ROWS, (b + 1) * ROWS, dtype=np.int64),
                           "t": T0 + np.arange(b * ROWS, (b + 1) * ROWS, dtype=np.int64)}), key="k", timestamp="t")
    return Stream.open(s.store.url)


def _chunks(s: Stream) -> list[Chunk]:
    return list(s.plan(s.state.head_tso, s.state.tick))


def _reference(store: Store, schema: pa.Schema, chunks: Sequence[Chunk], lo: int, hi: int,
               starts: dict[int, int] | None = None, ends: dict[int, int] | None = None) -> pa.Table:
    """Each slice decoded and selected on its own (the per-slice path), in (segment, seq) order."""
    parts = []
    for views, data in fetch_files(store, chunks):
        table, base = decode_file(store, views[0], data, views)
        for c in views:
            part = chunk_records(table, c, lo, hi, schema, (starts or {}).get(c.seg), (ends or {}).get(c.seg), base)
            if part is not None:
                parts.append(part)
    return pa.concat_tables(parts).sort_by(ORDER)


def test_fresh_data_is_shared_files_of_many_slices() -> None:
    chunks = _chunks(_stream())
    # a small shared file is one row group, each slice a row range of it (write/shared.py)
    assert all(c.shared and c.span is None for c in chunks)
    assert len({c.path for c in chunks}) == APPENDS and len(chunks) > 3 * APPENDS


def test_a_read_of_every_slice_returns_what_each_slice_read_alone_returns() -> None:
    s = _stream()
    chunks, lo, hi = _chunks(s), s.state.head_tso, s.state.tick
    want = _reference(s.store, s.schema, chunks, lo, hi)
    got = read_table(s.store, s.schema, chunks, lo, hi)
    assert got.num_rows == APPENDS * ROWS
    assert got.sort_by(ORDER).equals(want)  # records and system columns
    assert np.all(np.diff(got["_tso"].to_numpy()) > 0)  # read order
    assert s.read().equals(got)
    assert s.to_reader(system_columns=True).read_all().equals(got)


def test_a_subset_of_a_files_slices_returns_exactly_those() -> None:
    s = _stream()
    chunks, lo, hi = _chunks(s), s.state.head_tso, s.state.tick
    first = chunks[0].path
    of_file = [c for c in chunks if c.path == first]
    for subset in (of_file[:1], of_file[1::2], of_file[2:] + [c for c in chunks if c.path != first][:3]):
        got = read_table(s.store, s.schema, subset, lo, hi).sort_by(ORDER)
        assert got.equals(_reference(s.store, s.schema, subset, lo, hi))
        assert got.num_rows == sum(c.rows for c in subset)
        assert set(zip(got["_segment"].to_pylist(), got["_seq"].to_pylist())) == \
            {(c.seg, c.seq + i) for c in subset for i in range(c.rows)}


def test_time_bounds_and_cuts_inside_slices_across_files() -> None:
    s = _stream()
    chunks, lo0, hi0 = _chunks(s), s.state.head_tso, s.state.tick
    tsos = np.sort(read_table(s.store, s.schema, chunks, lo0, hi0)["_tso"].to_numpy())
    segs = sorted({c.seg for c in chunks})
    # a cut in the middle of each named segment's records, across files
    starts = {seg: 3 for seg in segs[:3]}
    ends = {seg: 20 for seg in segs[2:5]}
    for lo, hi in ((lo0, hi0), (int(tsos[37]), int(tsos[290])), (int(tsos[100]), int(tsos[101]))):
        want = _reference(s.store, s.schema, chunks, lo, hi, starts, ends)
        got = read_table(s.store, s.schema, chunks, lo, hi, starts, ends)
        assert got.sort_by(ORDER).equals(want), (lo, hi)
        for seg in segs:
            seq = got.filter(pc.equal(got["_segment"], seg))["_seq"].to_numpy()
            assert np.all(seq >= starts.get(seg, 0)) and np.all(seq < ends.get(seg, 1 << 40))


def test_a_task_keeps_each_segments_records_in_commit_order() -> None:
    s = _stream()
    chunks, lo, hi = _chunks(s), s.state.head_tso, s.state.tick
    got = pa.Table.from_batches(list(read_task(s.store, s.schema, ReadTask(tuple(chunks), lo, hi))))
    assert got.num_rows == APPENDS * ROWS
    for seg in {c.seg for c in chunks}:
        seq = got.filter(pc.equal(got["_segment"], seg))["_seq"].to_numpy()
        assert np.array_equal(seq, np.arange(len(seq)))  # every record once, in commit order


def test_each_file_is_decoded_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _stream()
    chunks, lo, hi = _chunks(s), s.state.head_tso, s.state.tick
    calls: list[tuple[int, ...]] = []
    real_groups, real_group = pq.ParquetFile.read_row_groups, pq.ParquetFile.read_row_group

    def groups(self: pq.ParquetFile, row_groups: list[int], columns: list[str] | None = None,
               **kwargs: object) -> pa.Table:
        if columns is None or "v" in columns:  # a decode of the user columns (not the raw timestamps)
            calls.append(tuple(row_groups))
        return real_groups(self, row_groups, columns, **kwargs)

    def group(self: pq.ParquetFile, i: int, *args: object, **kwargs: object) -> pa.Table:
        calls.append((i,))
        return real_group(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", groups)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", group)
    assert read_table(s.store, s.schema, chunks, lo, hi).num_rows == APPENDS * ROWS
    assert calls == [(0,)] * APPENDS  # one call a file, its one row group
    calls.clear()
    assert sum(b.num_rows for b in s.to_reader()) == APPENDS * ROWS
    assert len(calls) == APPENDS


def test_a_task_takes_whole_shared_files() -> None:
    s = _stream()
    chunks, lo, hi = _chunks(s), s.state.head_tso, s.state.tick
    assert sorted(len(u) for u in file_units(chunks)) == sorted(
        sum(c.path == p for c in chunks) for p in {c.path for c in chunks})
    for tasks in (plan_tasks(chunks, lo, hi, min_partitions=len(chunks)),
                  plan_tasks(chunks, lo, hi, min_partitions=3)):
        owner = {}
        for i, t in enumerate(tasks):
            for c in t.chunks:
                assert owner.setdefault(c.path, i) == i  # never one file's slices in two tasks
        assert len(tasks) <= APPENDS
        assert sorted((c.path, c.seg) for t in tasks for c in t.chunks) == sorted((c.path, c.seg) for c in chunks)


def test_a_task_reads_each_file_once() -> None:
    s = _stream()
    chunks, lo, hi = _chunks(s), s.state.head_tso, s.state.tick
    ops: list[tuple[str, str]] = []
    store = Store(s.store.url)
    store.observer = lambda op, rel: ops.append((op, rel))
    for task in plan_tasks(chunks, lo, hi, min_partitions=APPENDS):
        ops.clear()
        rows = sum(b.num_rows for b in read_task(store, s.schema, task))
        assert rows == task.rows
        assert len(ops) == 1  # one store call: the task's files in one batched read


def test_overlapping_views_still_read_one_by_one() -> None:
    # two views of the same rows (never written so, but a plan must not mix their floors)
    s = _stream(1)
    c = next(c for c in _chunks(s) if c.rows > 2)
    other = Chunk(**{**c.__dict__, "seg": c.seg + 1000})
    lo, hi = s.state.head_tso, s.state.tick
    got = read_table(s.store, s.schema, [c, other], lo, hi)
    assert got.num_rows == 2 * c.rows
    assert sorted(set(got["_segment"].to_pylist())) == [c.seg, c.seg + 1000]
