"""Wide writes: one data file per writer task, a slice of it per segment.

Spark-free: tasks are ``write_batches`` calls (what a Spark task runs) committed together, as
the sink's driver commits its tasks' chunks.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import CallLog, crash_at
from helpers import T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal import entry as entries_mod
from pyspark_tstream.journal.entries import Chunk, Entry
from pyspark_tstream.read.ranged import footer_guess
from pyspark_tstream.read.reading import read_table
from pyspark_tstream.store import layout
from pyspark_tstream.write import shared
from pyspark_tstream.write.spec import ChunkInfo
from pyspark_tstream.write.writing import write_batches

SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("val", pa.int64())])


def _task(seed: int, rows: int, span_ms: int = 60_000) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"key": [f"k{i}" for i in rng.integers(0, 200, rows)],
                     "ts": T0 + rng.integers(0, span_ms, rows),
                     "val": np.arange(seed * 1_000_000, seed * 1_000_000 + rows)}, schema=SCHEMA)


def _write(s: Stream, tasks: int, rows: int, first_seed: int = 0) -> list[ChunkInfo]:
    spec = s.write_spec(SCHEMA, key="key", timestamp="ts")
    out: list[ChunkInfo] = []
    for t in range(first_seed, first_seed + tasks):
        out += write_batches(spec, [_task(t, rows)], task=f"t{t}")
    return out


def _data_files(s: Stream) -> list[str]:
    out = []
    for folder in s.store.list(layout.DATA):
        out += [layout.data_file(folder, n) for n in s.store.list(layout.data_folder(folder))]
    return out


def _vals(table: pa.Table) -> list[int]:
    return sorted(table.column("val").to_pylist())


def test_a_task_writes_one_file_and_every_segment_reads_back(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=8)
    infos = _write(s, tasks=3, rows=400)
    assert len({c.path for c in infos}) == 3  # one file per task
    assert len(infos) == 24 and all(c.file_bytes > 0 for c in infos)
    for path in {c.path for c in infos}:  # slices contiguous, in row groups of their own
        mine = sorted((c.offset, c.rows) for c in infos if c.path == path)
        assert [o for o, _ in mine] == list(np.cumsum([0] + [r for _, r in mine[:-1]]))
        assert sum(c.bytes for c in infos if c.path == path) < mine[0][1] * 1000
    s.commit(infos)
    got = Stream.open(url).read()
    assert _vals(got) == sorted(v for t in range(3) for v in _task(t, 400).column("val").to_pylist())
    for seg, n in Counter(got.column("_segment").to_pylist()).items():  # dense _seq per segment
        seqs = sorted(got.filter(pa.compute.equal(got.column("_segment"), seg)).column("_seq").to_pylist())
        assert seqs == list(range(n))
    # a task's slice of a segment is in client-time order: its _tso follow ts
    for c in Stream.open(url).plan(0, 1 << 62):
        rows = read_table(s.store, SCHEMA, [c], 0, 1 << 62)
        assert rows.column("_tso").to_pylist() == sorted(rows.column("_tso").to_pylist())
        assert rows.column("ts").to_pylist() == sorted(rows.column("ts").to_pylist())


def test_one_segment_reads_only_its_row_groups(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "ROW_RANGE_ROWS", 0)  # self-contained slices, not one row group
    s = Stream.create(url, schema=SCHEMA, segments=16)
    s.commit(_write(s, tasks=4, rows=4000))
    chunks = Stream.open(url).plan(0, 1 << 62)
    seg = chunks[0].seg
    mine = [c for c in chunks if c.seg == seg]
    read_bytes = Counter()
    store = s.store
    real_range, real_many = store.read_range, store.read_many

    def read_range(rel: str, start: int, end: int) -> bytes:
        data = real_range(rel, start, end)
        if rel.startswith(layout.DATA):
            read_bytes["data"] += len(data)
        return data

    def read_many(rels: Any, **kw: Any) -> list[bytes]:
        out = real_many(rels, **kw)
        read_bytes["data"] += sum(len(d) for r, d in zip(rels, out) if r.startswith(layout.DATA))
        return out

    store.read_range, store.read_many = read_range, read_many  # type: ignore[method-assign]
    got = read_table(store, SCHEMA, mine, 0, 1 << 62)
    assert got.num_rows == sum(c.rows for c in mine) and set(got.column("_segment").to_pylist()) == {seg}
    own = sum(c.bytes for c in mine)
    # format v5: each slice's span, its row groups and its own footer (v4 read the file's footer
    # first: up to footer_guess bytes more a file)
    assert read_bytes["data"] == sum(c.span_bytes for c in mine) <= 1.5 * own, (read_bytes, own)
    assert read_bytes["data"] < own + sum(footer_guess(c.file_bytes) for c in mine) / 4
    assert read_bytes["data"] < sum(c.file_bytes for c in mine) / 3


def test_a_wide_commit_stays_small_and_old_entries_still_read() -> None:
    # format v5 slices: each with its span, its row groups' bytes plus its own footer (~800 bytes)
    chunks = [Chunk(seg=s, path=f"data/0/w-t{t}-{t:032x}.parquet", rows=78, bytes=2400 + s, seq=t * 78,
                    floor=1, lo=T0 << 22 | t * 1000 + s, hi=(T0 << 22) + 4_000_000_000 + s, offset=s * 78,
                    file_bytes=260_000, marks=(), span_start=s * 3200 + s * (s - 1) // 2, span_bytes=3200 + s)
              for t in range(200) for s in range(64)]
    from pyspark_tstream.journal.state import StreamState
    e = Entry(pos=5, op="append", wall=1, state=StreamState.from_json(json.loads(
        json.dumps({"pos": 5, "epoch": 0, "tick": 0, "max_tso": 0, "wall": 0, "created": 0, "schema": "",
                    "config": {}, "segments": [], "writers": {}, "index": []}))), chunks=chunks)
    data = e.encode()
    assert len(data) < 400_000  # 12,800 slices (it was ~370 bytes a slice as lists: 4.7 MB)
    back = Entry.decode(data, path="mem://x")
    assert back.chunks == chunks
    assert json.loads(data)["v"] == entries_mod.FORMAT_VERSION >= 5
    # a v2 entry (lists, no file_bytes) decodes as it did
    old = json.loads(data)
    old.pop("packed")
    old["v"] = 2
    old["chunks"] = [[1, "data/1/w-a-b.parquet", 10, 100, 0, 1, 5, 9],
                     [1, "data/1/m-c.parquet", 4, 50, 10, 0, 9, 12, 6]]
    got = Entry.decode(json.dumps(old).encode(), path="mem://y").chunks
    assert got[0].file_bytes == 0 and not got[0].shared and got[1].offset == 6
    # a few chunks stay plain lists
    few = Entry(pos=6, op="append", wall=1, state=back.state, chunks=chunks[:3])
    assert len(json.loads(few.encode())["chunks"]) == 3


def test_a_version_2_stream_reads_and_appends(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entries_mod, "FORMAT_VERSION", 2)
    monkeypatch.setattr(entries_mod, "PACK_MIN", 1 << 30)
    s = Stream.create(url, schema=SCHEMA, segments=4)
    s.append(_task(0, 300), key="key", timestamp="ts")
    monkeypatch.undo()
    s = Stream.open(url)
    s.commit(_write(s, tasks=2, rows=300, first_seed=1))
    want = sorted(v for t in range(3) for v in _task(t, 300).column("val").to_pylist())
    assert _vals(Stream.open(url).read()) == want


def _compacted_stream(url: str) -> tuple[Stream, list[int], set[str]]:
    s = Stream.create(url, schema=SCHEMA, segments=4)
    s.commit(_write(s, tasks=3, rows=500))
    s.commit(_write(s, tasks=3, rows=500, first_seed=3))
    shared = {c.path for c in Stream.open(url).plan(0, 1 << 62) if c.shared}
    assert len(shared) == 6
    return s, _vals(s.read()), shared


def test_vacuum_deletes_shared_files_once_compaction_replaced_every_slice(url: str) -> None:
    s, want, shared = _compacted_stream(url)
    s.compact(full=True)
    s.vacuum(grace_ms=3_600_000)  # within the grace: readers that planned before keep them
    assert shared <= set(_data_files(s))
    assert _vals(Stream.open(url).read()) == want
    s.vacuum(grace_ms=0)
    assert not shared & set(_data_files(s))  # every slice compacted: the shared files are gone
    assert _vals(Stream.open(url).read()) == want
    assert not Stream.open(url).verify().problems


def test_shared_files_stay_while_a_segment_s_slices_are_not_compacted(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=4)
    s.commit(_write(s, tasks=1, rows=500))
    shared = {c.path for c in Stream.open(url).plan(0, 1 << 62) if c.shared}
    assert len(shared) == 1
    # a plain chunk for one segment only: that segment's slice is merged with it, the other
    # segments' slices (one piece each) are left as they are
    one = pa.table({"key": ["k1"] * 300, "ts": [T0 + i for i in range(300)], "val": list(range(-300, 0))},
                   schema=SCHEMA)
    spec = s.write_spec(SCHEMA, key="key", timestamp="ts")
    s.commit(write_batches(spec, [one], task="solo"))
    want = _vals(s.read())
    s.vacuum(grace_ms=0, orphans=True)  # nothing compacted: nothing goes
    assert shared <= set(_data_files(s))
    live = {c.path for c in s.plan(0, 1 << 62)}
    assert shared <= live
    s.compact(full=True)
    planned = {c.path for c in Stream.open(url).plan(0, 1 << 62)}
    s.vacuum(grace_ms=0, orphans=True)
    s.vacuum(grace_ms=0, orphans=True)
    files = set(_data_files(s))
    assert shared & planned and any("/m-" in p for p in planned)  # one slice merged, others left
    assert (shared & planned) <= files  # a file a plan still names stays
    assert _vals(Stream.open(url).read()) == want
    assert not Stream.open(url).verify().problems


def test_crash_at_every_store_call_of_the_vacuum_of_shared_files(url: str) -> None:
    probe, want, shared = _compacted_stream(url + "-probe")
    probe.compact(full=True)
    log = CallLog()
    probe.store.observer = log
    probe.vacuum(grace_ms=0)
    probe.store.observer = None
    total = log.count()
    assert not shared & set(_data_files(probe))
    for k in range(1, total + 1):
        s, want, shared = _compacted_stream(f"{url}-{k}")
        s.compact(full=True)
        crash_at(s, k, lambda s: s.vacuum(grace_ms=0))
        assert _vals(Stream.open(f"{url}-{k}").read()) == want, f"crash at call {k}"
        Stream.open(f"{url}-{k}").vacuum(grace_ms=0)
        assert not shared & set(_data_files(s)), f"crash at call {k}"
        assert _vals(Stream.open(f"{url}-{k}").read()) == want, f"crash at call {k}"
        assert not Stream.open(f"{url}-{k}").verify().problems, f"crash at call {k}"


def test_retention_removes_a_slice_but_not_its_file(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=4)
    spec = s.write_spec(SCHEMA, key="key", timestamp="ts")
    # one task: early rows in every segment but late rows only in some, so a truncation between
    # them removes whole slices of the file and keeps others
    early = _task(0, 400, span_ms=1000)
    late = pa.table({"key": ["k1"] * 50, "ts": [T0 + 3_600_000 + i for i in range(50)], "val": list(range(-50, 0))},
                    schema=SCHEMA)
    infos = write_batches(spec, [pa.concat_tables([early, late])], task="t0")
    assert len({c.path for c in infos}) == 1
    s.commit(infos)
    s.commit(_write(s, tasks=1, rows=10, first_seed=9))  # a later entry, so the first can go below the head
    path = infos[0].path
    s.truncate(T0 + 2_000_000)
    s.vacuum(grace_ms=0)
    s.vacuum(grace_ms=0)
    fresh = Stream.open(url)
    assert path in _data_files(fresh)
    got = _vals(fresh.read())
    assert set(range(-50, 0)) <= set(got) and not set(early.column("val").to_pylist()) & set(got)
    assert not fresh.verify().problems


def test_fsck_names_every_segment_a_missing_shared_file_held(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=8)
    infos = _write(s, tasks=2, rows=500)
    s.commit(infos)
    lost = infos[0].path
    held = sorted((c.seg, c.seq, c.seq + c.rows - 1) for c in Stream.open(url).plan(0, 1 << 62) if c.path == lost)
    assert len(held) == 8
    s.store.delete([lost])
    report = Stream.open(url).verify()
    named = sorted((p.details["segment"], p.details["first_seq"], p.details["last_seq"])
                   for p in report.problems if p.kind == "chunk")
    assert named == held


def test_crash_at_every_store_call_of_a_wide_commit(url: str) -> None:
    """Writing and committing 2 tasks x 4 segments, crashed at each store call in turn: the
    stream holds all of it or none of it, and a retry of the same (writer, batch) lands once."""
    probe = Stream.create(url + "-probe", schema=SCHEMA, segments=4)
    log = CallLog()
    probe.store.observer = log
    probe.commit(_write(probe, 2, 200), writer_id="w", batch_id=1, schema=SCHEMA)
    total = log.count()
    want = sorted(v for t in range(2) for v in _task(t, 200).column("val").to_pylist())
    landed = 0
    for k in range(1, total + 1):
        s = Stream.create(f"{url}-{k}", schema=SCHEMA, segments=4)
        crash_at(s, k, lambda s: s.commit(_write(s, 2, 200), writer_id="w", batch_id=1, schema=SCHEMA))
        fresh = Stream.open(f"{url}-{k}")
        got = _vals(fresh.read())
        assert got in ([], want), f"crash at call {k}"
        landed += got == want
        fresh.commit(_write(fresh, 2, 200), writer_id="w", batch_id=1, schema=SCHEMA)
        assert _vals(Stream.open(f"{url}-{k}").read()) == want, f"crash at call {k}"
        assert not fresh.verify().problems, f"crash at call {k}"
    assert 0 < landed < total


def test_an_abort_after_a_landed_commit_deletes_nothing_the_journal_names(tmp_path: Any) -> None:
    """Spark calls abort when commit raised, also with its entry durable: the shared files of
    that batch (every task's one file, holding slices of every segment) must all stay."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType
    from pyspark_tstream.datasource.source import TStreamDataSource

    url = f"file://{tmp_path}/s"
    spark_schema = StructType([StructField("id", LongType()), StructField("key", StringType())])
    Stream.create(url, segments=8)
    source = TStreamDataSource({"path": url, "keyColumn": "key", "checkpointLocation": str(tmp_path / "c")})
    writer = source.streamWriter(spark_schema, False)
    batches = [pa.record_batch({"id": pa.array(range(t * 100, t * 100 + 100), pa.int64()),
                                "key": [f"k{i}" for i in range(100)]}) for t in range(3)]
    messages = [writer.write(iter([b])) for b in batches]
    writer.commit(messages, 0)
    named = {c.path for c in Stream.open(url).plan(0, 1 << 62)}
    assert any(c.shared for c in Stream.open(url).plan(0, 1 << 62))
    writer.abort(messages, 0)  # the commit landed: nothing it names may go
    assert named <= set(_data_files(Stream.open(url)))
    assert sorted(Stream.open(url).read()["id"].to_pylist()) == list(range(300))
    assert not Stream.open(url).verify().problems
    lost = source.streamWriter(spark_schema, False)
    gone = [lost.write(iter([batches[0]]))]
    lost.abort(gone, 1)  # never committed: its files go, the landed batch's stay
    assert not {c.path for m in gone for c in m.chunks} & set(_data_files(Stream.open(url)))
    assert named <= set(_data_files(Stream.open(url)))


def test_slices_written_before_a_split_are_rerouted_with_only_their_own_rows(url: str) -> None:
    """A scale that splits segments between the tasks' writes and their commit re-routes each
    slice of a shared file by key: only the slice's own rows move (splitting the whole shared file
    would bring other segments' rows back twice and leave the parts with the slice's offset
    into a file that no longer holds them, losing the slice's rows)."""
    s = Stream.create(url, schema=SCHEMA, segments=4)
    infos = _write(s, tasks=2, rows=600)
    assert len({c.path for c in infos}) == 2 and all(c.file_bytes > 0 for c in infos)
    for seg in list(s.refresh().segments):  # every segment split after the tasks routed
        s.scale(split=seg.id, parts=2)
    s.commit(infos)
    got = Stream.open(url).read()
    assert _vals(got) == sorted(v for t in range(2) for v in _task(t, 600).column("val").to_pylist())
    active = {seg.id for seg in Stream.open(url).state.segments}
    assert set(got.column("_segment").to_pylist()) <= active
