"""Bounded reads: limits that hold on overlapping chunks, marks, the planner's tasks.

Micro-batches are driven through the planner exactly as the streaming source does (a
:class:`~pyspark_tstream.read.window.Window` that lives across batches); no Spark here.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pyarrow as pa
import pytest
from histories import micro_batches, overlapping_chunks
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.conf.options import SourceOptions
from pyspark_tstream.errors import ConfigError, CorruptMetadataError
from pyspark_tstream.journal import seal
from pyspark_tstream.journal.entries import FORMAT_VERSION, Chunk
from pyspark_tstream.read import ends, planner, tasks
from pyspark_tstream.read.reading import chunk_tsos, read_table
from pyspark_tstream.read.window import Window
from pyspark_tstream.store import layout
from pyspark_tstream.timestamps import MarkSampler, mark_step, raw_hybrid, raw_marks
from pyspark_tstream.write.spec import WriteSpec
from pyspark_tstream.write.writing import write_batches


def _url(name: str) -> str:
    return f"memory://{name}-{uuid.uuid4().hex[:8]}/s"


def _overlapping(url: str, n: int = 1000, tasks: int = 3, same_ms: int = 1) -> Stream:
    s = overlapping_chunks(url, n, tasks, same_ms)
    chunks = s.journal.read_entry(s.state.pos).chunks
    assert len(chunks) == tasks and max(c.lo for c in chunks) < min(c.hi for c in chunks)  # overlap
    return s


def _batches(s: Stream, limits: ends.Limits, exact: bool = True) -> list[pa.Table]:
    batches = micro_batches(s, limits, exact)
    for lo, hi, _ in batches:
        assert hi > lo and hi & 0x3FFFF == 0x3FFFF  # progress, ending on a millisecond
    return [t for _, _, t in batches]


@pytest.mark.parametrize("exact", [True, False], ids=["refined", "marks-only"])
def test_record_limit_holds_on_three_overlapping_chunks(exact: bool) -> None:
    s = _overlapping(_url("bounded-records"))
    batches = _batches(s, ends.Limits(max_records=100), exact)
    sizes = [b.num_rows for b in batches]
    assert all(n <= 100 + 1 for n in sizes), sizes  # one millisecond holds one record here
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert sorted(ids) == list(range(1000)) and len(ids) == 1000  # exact: nothing twice or lost
    # the cut lands inside the chunks, not at their ends (by marks alone within a few mark
    # steps of the limit; refined from the _tso column within REFINE_FRACTION of it)
    assert len(sizes) <= 25, sizes
    if exact:
        assert all(n >= 100 * (1 - ends.REFINE_FRACTION) for n in sizes[:-1]), sizes


def test_byte_limit_holds_on_three_overlapping_chunks() -> None:
    s = _overlapping(_url("bounded-bytes"))
    chunks = s.journal.read_entry(s.state.pos).chunks
    per_row = sum(c.bytes for c in chunks) / sum(c.rows for c in chunks)
    limit = int(per_row * 100)
    sizes = [b.num_rows for b in _batches(s, ends.Limits(max_bytes=limit))]
    assert sum(sizes) == 1000
    assert all(n * per_row <= limit + per_row * 1.01 for n in sizes), sizes  # + one millisecond
    assert len(sizes) <= 14, sizes


def test_file_limit_counts_chunks_touched() -> None:
    s = Stream.create(_url("bounded-files"), segments=1)
    for b in range(10):
        t = [1_700_000_000_000 + b * 1000 + i for i in range(100)]
        s.append(pa.table({"id": list(range(b * 100, b * 100 + 100)), "t": t}), timestamp="t")
    state = s.refresh()
    window, lo, sizes, ids = Window(s.journal), state.head_tso, [], []
    while lo < state.tick:
        p = planner.plan(window, state, lo, state.tick, ends.Limits(max_files=3))
        t = read_table(s.store, s.schema, p.chunks, lo, p.hi)
        touched = {c.path for c in p.chunks if read_table(s.store, s.schema, [c], lo, p.hi).num_rows}
        assert len(touched) <= 3
        sizes.append(t.num_rows)
        ids += t.column("id").to_pylist()
        lo = p.hi
    assert sorted(ids) == list(range(1000)) and sizes[0] == 300, sizes


def test_a_millisecond_larger_than_the_limit_is_the_only_overshoot() -> None:
    s = _overlapping(_url("bounded-ms"), n=900, same_ms=300)  # three ms of 300 records
    sizes = [b.num_rows for b in _batches(s, ends.Limits(max_records=100))]
    assert sizes == [300, 300, 300]  # a batch never splits a millisecond


def test_read_with_limit_is_the_prefix_of_the_full_read() -> None:
    s = _overlapping(_url("bounded-read"))
    full = s.read()
    for limit in (1, 10, 333, 999, 1000, 5000):
        got = s.read(limit=limit)
        assert got.column("id").to_pylist() == full.column("id").to_pylist()[:limit]
    start = full.column("_timestamp")[500].as_py()
    assert s.read(start=start, limit=7).column("id").to_pylist() == list(range(500, 507))


def test_marks_sample_final_tso_and_sampler_matches_whole_column() -> None:
    s = _overlapping(_url("bounded-marks"))
    for c in s.journal.read_entry(s.state.pos).chunks:
        tsos = chunk_tsos(s.store, c)
        assert c.marks == tuple(int(x) for x in tsos[:: mark_step(c.rows)])
    rng = np.random.default_rng(7)
    for rows, piece in ((1, 5000), (5, 5000), (32, 5000), (33, 5000), (1000, 5000), (100_003, 5000),
                        (100_003, 70_000), (300_000, 140_000)):  # and pieces of whole row groups
        raw = raw_hybrid(np.sort(rng.integers(0, 10**6, rows)))
        sampler, at = MarkSampler(), 0
        while at < rows:
            k = int(rng.integers(1, piece))
            sampler.add(raw[at: at + k])
            at += k
            assert len(sampler.kept) <= 64  # bounded memory, also within a long piece
        assert sampler.marks() == raw_marks(raw) and len(raw_marks(raw)) <= 32


def test_chunk_format_v1_reads_and_newer_versions_are_refused() -> None:
    v1 = [3, "data/3/a.parquet", 10, 900, 20, 5, 7, 99]
    assert Chunk.from_json(v1) == Chunk(3, "data/3/a.parquet", 10, 900, 20, 5, 7, 99)
    assert Chunk.from_json(v1).to_json() == v1  # defaults are not written
    c = Chunk(3, "m.parquet", 10, 900, 20, 0, 7, 99, offset=4, sorted=False, marks=(7, 50))
    assert Chunk.from_json(json.loads(json.dumps(c.to_json()))) == c
    url = _url("bounded-v")
    s = Stream.create(url, segments=1)
    s.append(pa.table({"x": [1, 2]}))
    entry = seal.unseal(s.store.read(layout.entry(1)))
    assert entry["v"] == FORMAT_VERSION
    entry["v"] = 1  # a v1 stream: entries without the new fields
    for ch in entry["chunks"]:
        del ch[8:]
    s.store.write(layout.entry(1), seal.seal(entry))
    assert Stream.open(url).read().column("x").to_pylist() == [1, 2]
    entry["v"] = FORMAT_VERSION + 1
    s.store.write(layout.entry(1), seal.seal(entry))  # sealed as the newer build would
    with pytest.raises(CorruptMetadataError, match=f"version {FORMAT_VERSION + 1}.*upgrade pyspark-tstream"):
        Stream.open(url).journal.read_entry(1)


def test_partition_count_options_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 1000)  # the driver's cores must not matter
    mb = 1 << 20
    assert tasks.partition_count(10 * mb, 100) == 1  # small: 8 MB per task at least
    assert tasks.partition_count(17 * mb, 100) == 2  # one wave on 2 cores, not two
    assert tasks.partition_count(1000 * mb, 100) == tasks.DEFAULT_PARALLELISM
    assert tasks.partition_count(1000 * mb, 100, parallelism=2) == 8  # one per ~128 MB
    assert tasks.partition_count(1000 * mb, 100, parallelism=64) == 64
    assert tasks.partition_count(1 * mb, 100, min_partitions=5) == 5
    assert tasks.partition_count(1000 * mb, 100, max_partitions=3) == 3
    assert tasks.partition_count(1000 * mb, 2, min_partitions=5) == 2  # never more than chunks
    o = SourceOptions.from_options({"path": "memory://x/s", "minPartitions": "4", "MAXPARTITIONS": "16"})
    assert (o.min_partitions, o.max_partitions) == (4, 16)
    for bad, match in (({"minPartitions": "0"}, "minPartitions='0' must be positive"),
                       ({"maxPartitions": "lots"}, "maxPartitions='lots' is not an integer"),
                       ({"minPartitions": "8", "maxPartitions": "2"}, "maxPartitions=2 is below minPartitions=8")):
        with pytest.raises(ConfigError, match=match):
            SourceOptions.from_options({"path": "memory://x/s", **bad})


def test_substitution_hook_sees_every_planned_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _overlapping(_url("bounded-hook"))
    seen: list[list[Chunk]] = []

    def hook(store: object, state: object, chunks: list[Chunk], **_: object) -> list[Chunk]:
        seen.append(list(chunks))
        return chunks

    monkeypatch.setattr(planner, "substitute", hook)
    assert s.read().num_rows == 1000
    assert len(seen) == 1 and len(seen[0]) == 3


def test_lazy_plan_finds_older_records_committed_later() -> None:
    """Lanes: a later journal position may hold records older than an earlier one's (here the
    tick is held low by a live writer, so a second segment's older client times stand). A
    limited plan stops only once the tick it has read passes its cut, so nothing is skipped."""
    from pyspark_tstream.timestamps import pack

    url = _url("bounded-lanes")
    s = Stream.create(url, segments=2)
    holder = Stream.open(url).writer("holder")
    holder.heartbeat(pack(10))  # the tick stays low while the commits below land
    for k, (seg, t0) in enumerate(zip(s.state.segments, (2_000_000, 1_000_000))):
        table = pa.table({"id": [k * 1000 + i for i in range(200)], "t": [t0 + i for i in range(200)]})
        spec = s.write_spec(table.schema, timestamp="t")
        one = WriteSpec(**{**spec.__dict__, "segment_ids": (seg.id,), "bounds": (seg.lo,)})
        for _ in range(40):  # many positions, so the older records sit nodes later
            s.commit(write_batches(one, [table.slice(0, 5)]), schema=table.schema)
            table = table.slice(5)
    holder.close()
    batches = _batches(s, ends.Limits(max_records=50))
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert sorted(ids) == sorted(list(range(200)) + list(range(1000, 1200)))
    assert batches[0].column("id").to_pylist() == list(range(1000, 1050))  # the oldest, committed last
    assert all(b.num_rows <= 51 for b in batches)
    assert s.read(limit=7).column("id").to_pylist() == list(range(1000, 1007))
