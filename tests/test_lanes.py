"""Writer lanes: a record's time moves only for its own writer's earlier records, the tick or the
arrival cap — never for another writer's clock or for the row order of an unordered batch."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import DAY, T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.epochs.routing import KEY_SPACE, key_hash, route
from pyspark_tstream.errors import UnsupportedFormatError
from pyspark_tstream.journal import seal
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.store import layout
from pyspark_tstream.write import ordering, writing
from pyspark_tstream.write.writing import write_batches


def _moved(t: pa.Table, column: str = "t") -> int:
    """Records whose ``_timestamp`` is not their client time (epoch-ms column ``column``)."""
    ms = pc.cast(t["_timestamp"], pa.int64())
    return int(pc.sum(pc.cast(pc.not_equal(ms, t[column]), pa.int64())).as_py() or 0)


def _unordered_commit(s: Stream, table: pa.Table, *, tasks: int, key: str | None = None,
                      writer_id: str | None = None, batch_id: Any = None, seed: int = 0) -> Any:
    """What the Spark sink does: ``tasks`` tasks each write a shuffled share, one commit."""
    rng = np.random.default_rng(seed)
    shuffled = table.take(pa.array(rng.permutation(table.num_rows)))
    spec = s.write_spec(table.schema, key=key, timestamp="t")
    share = -(-table.num_rows // tasks)
    chunks = [c for i in range(tasks)
              for c in write_batches(spec, [shuffled.slice(i * share, share)], task=f"p{i}")]
    return s.commit(chunks, writer_id=writer_id, batch_id=batch_id, schema=table.schema)


def _keys_sharing_a_segment(segments: int, n: int) -> list[str]:
    keys = [f"k{i}" for i in range(200)]
    bounds = [i * KEY_SPACE // segments for i in range(segments)]
    segs = route(key_hash(pa.array(keys), name="k"), bounds).tolist()
    first = segs[0]
    return [k for k, sg in zip(keys, segs) if sg == first][:n]


def test_shuffled_batch_keeps_every_event_time(url: str) -> None:
    """The issue's repartition(4) case through the sink's code path: 0 moved records."""
    s = Stream.create(url, segments=4)
    n = 20_000
    table = pa.table({"id": np.arange(n), "t": T0 + np.arange(n)})
    ack = _unordered_commit(s, table, tasks=4)
    got = s.read()
    assert got.num_rows == n
    assert _moved(got) == 0
    assert ack.raised == 0 and ack.moved == {"lane": 0, "tick": 0, "cap": 0}
    # each chunk is time-sorted; chunks of one segment overlap in time and _seq stays dense
    for seg in pc.unique(got["_segment"]).to_pylist():
        part = got.filter(pc.equal(got["_segment"], seg))
        assert sorted(part["_seq"].to_pylist()) == list(range(part.num_rows))


def test_large_unordered_task_writes_bounded_sorted_runs(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task larger than a run writes several time-sorted chunks instead of holding it all."""
    monkeypatch.setattr(writing, "RUN_ROWS", 1_000)
    monkeypatch.setattr(writing, "GATHER_ROWS", 1)  # each batch on its own (a run overshoots by one)
    s = Stream.create(url, segments=1)
    n, step = 5_000, 700
    t = T0 + np.random.default_rng(1).permutation(n)
    table = pa.table({"t": t})
    spec = s.write_spec(table.schema, timestamp="t")
    chunks = write_batches(spec, [table.slice(i, step) for i in range(0, n, step)])
    assert len(chunks) == 4 and sum(c.rows for c in chunks) == n
    assert all(c.rows < 1_000 + step for c in chunks)  # a run never holds much more than RUN_ROWS
    s.commit(chunks, schema=table.schema)
    got = s.read()
    assert got.num_rows == n and _moved(got) == 0
    assert got["t"].to_pylist() == sorted(t.tolist())


def test_a_task_gathers_small_batches_before_routing_them(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark hands a task 10k-row batches: the writer routes them in groups of GATHER_ROWS rows
    (or GATHER_BYTES, for wide rows), zero-copy, and writes exactly what it wrote batch by batch."""
    seen: list[int] = []
    gather = writing.GATHER_ROWS
    assert gather == 1 << 16
    add = writing.ChunkWriter.add
    monkeypatch.setattr(writing.ChunkWriter, "add", lambda self, data: (seen.append(data.num_rows), add(self, data)))
    n = 100_000
    rng = np.random.default_rng(5)
    table = pa.table({"k": [f"k{i % 11}" for i in range(n)], "t": T0 + np.sort(rng.integers(0, 50_000, n)),
                      "v": rng.integers(0, 1 << 40, n)})
    batches = table.to_batches(max_chunksize=10_000)

    def written(gather_rows: int) -> list[tuple[int, list[int], list[int]]]:
        monkeypatch.setattr(writing, "GATHER_ROWS", gather_rows)
        s = Stream.open(url)
        chunks = write_batches(s.write_spec(table.schema, key="k", timestamp="t"), iter(batches))
        files = [_chunk_file(s, c).read() for c in chunks]
        return sorted((c.seg, f["v"].to_pylist(), f[writing.RAW_TSO].to_pylist()) for c, f in zip(chunks, files))

    Stream.create(url, segments=3)
    one_by_one = written(1)
    assert seen == [10_000] * 10
    seen.clear()
    assert written(gather) == one_by_one  # same chunks, rows and stamps
    assert seen == [70_000, 30_000]  # 7 batches reach 64k rows; the rest at the end
    seen.clear()
    monkeypatch.setattr(writing, "GATHER_BYTES", 2 * batches[0].nbytes)
    assert written(gather) == one_by_one
    assert seen == [20_000] * 5  # wide rows: at most GATHER_BYTES gathered


def _chunk_file(s: Stream, chunk: Any) -> pq.ParquetFile:
    return pq.ParquetFile(pa.BufferReader(s.store.read(chunk.path)))


def test_time_ordered_task_input_streams_into_one_chunk(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows that arrive in client-time order (a scan of time-ordered data) are already sorted:
    each segment's rows stream into one chunk a row group at a time, not into RUN_ROWS runs,
    and are stamped exactly as the sort of the whole would stamp them."""
    monkeypatch.setattr(writing, "RUN_ROWS", 1_000)
    monkeypatch.setattr(writing, "ROW_GROUP_ROWS", 512)
    s = Stream.create(url, segments=2)
    n, step = 5_000, 700
    t = T0 + np.arange(n) // 3  # each millisecond three times, ties across batch boundaries
    table = pa.table({"k": [f"k{i % 7}" for i in range(n)], "t": t})
    spec = s.write_spec(table.schema, key="k", timestamp="t")
    chunks = write_batches(spec, [table.slice(i, step) for i in range(0, n, step)])
    assert len(chunks) == 2 and sum(c.rows for c in chunks) == n  # one per segment, not 5+ runs
    for c in chunks:
        f = _chunk_file(s, c)
        assert f.num_row_groups == -(-c.rows // 512)  # streamed in whole row groups
        raw = f.read([writing.RAW_TSO])[writing.RAW_TSO].to_numpy()
        ms = f.read(["t"])["t"].to_numpy()
        assert raw.tolist() == writing.raw_hybrid(ms).tolist()  # the whole's stamps
        assert (c.raw_lo, c.raw_hi) == (int(raw[0]), int(raw[-1]))
    s.commit(chunks, schema=table.schema)
    got = s.read()
    assert got.num_rows == n and _moved(got) == 0


def test_a_segment_out_of_order_keeps_its_streamed_prefix_and_sorts_the_rest(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a segment's rows arrive out of order, its written prefix is closed as one chunk and
    the rest is sorted in runs: every chunk time-sorted, no record moved, none lost."""
    monkeypatch.setattr(writing, "ROW_GROUP_ROWS", 1_000)
    monkeypatch.setattr(writing, "GATHER_ROWS", 1)  # the prefix ends at a batch boundary
    s = Stream.create(url, segments=1)
    first = T0 + np.arange(3_000)
    rest = T0 + np.random.default_rng(3).permutation(3_000)  # earlier than the prefix's end
    table = pa.table({"t": np.concatenate([first, rest])})
    spec = s.write_spec(table.schema, timestamp="t")
    chunks = write_batches(spec, [table.slice(i, 1_000) for i in range(0, 6_000, 1_000)])
    assert [c.rows for c in chunks] == [3_000, 3_000]
    for c in chunks:
        raw = _chunk_file(s, c).read([writing.RAW_TSO])[writing.RAW_TSO].to_numpy()
        assert np.all(np.diff(raw) > 0)
    s.commit(chunks, schema=table.schema)
    got = s.read()
    assert got.num_rows == 6_000 and _moved(got) == 0
    assert sorted(got["t"].to_pylist()) == sorted(table["t"].to_pylist())


def test_an_unwritten_prefix_joins_the_run(url: str) -> None:
    """Shuffled input breaks order at its second batch: the few rows streamed before that are
    not yet in a file, so they join the run instead of making a small chunk of their own."""
    s = Stream.create(url, segments=1)
    t = T0 + np.random.default_rng(5).permutation(4_000)
    table = pa.table({"t": t})
    spec = s.write_spec(table.schema, timestamp="t")
    chunks = write_batches(spec, [table.slice(0, 1), table.slice(1, 999)] +
                           [table.slice(i, 1_000) for i in range(1_000, 4_000, 1_000)])
    assert [c.rows for c in chunks] == [4_000]
    s.commit(chunks, schema=table.schema)
    got = s.read()
    assert got["t"].to_pylist() == sorted(t.tolist()) and _moved(got) == 0


def test_a_run_of_sorted_stretches_is_reordered_without_copying() -> None:
    """Stretches of rows, each in order (files read out of time order), are put in order by
    zero-copy slices; anything else by a take of one row group at a time. Both give ``take``'s
    rows."""
    body = pa.table({"v": np.arange(9_000, dtype=np.int64)})
    order = np.concatenate([np.arange(6_000, 9_000), np.arange(0, 3_000), np.arange(3_000, 6_000)])
    parts = list(ordering.in_order(body, order, 2_000))
    assert [p.num_rows for p in parts] == [2_000] * 4 + [1_000]  # written a row group at a time
    assert pa.concat_tables(parts).equals(body.take(pa.array(order)))
    base = body.column("v").chunk(0).buffers()[1].address
    assert {c.buffers()[1].address for p in parts for c in p.column("v").chunks} == {base}  # no copy
    shuffled = np.random.default_rng(2).permutation(9_000)
    parts = list(ordering.in_order(body, shuffled, 2_000))
    assert [p.num_rows for p in parts] == [2_000] * 4 + [1_000]
    assert pa.concat_tables(parts).equals(body.take(pa.array(shuffled)))
    assert pa.concat_tables(ordering.in_order(body, None, 4_000)).equals(body)


def test_a_shuffled_task_holds_at_most_its_run_buffer(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a task holds between batches (Arrow's own count) stays within RUN_BUFFER_BYTES:
    writing a segment's run frees its rows even while other segments' rows of the same input
    batches are still buffered."""
    monkeypatch.setattr(writing, "RUN_BUFFER_BYTES", 4 << 20)
    s = Stream.create(url, segments=4)
    rng = np.random.default_rng(0)
    n = 10_000
    payload = pa.array([b"x" * 100] * n, pa.binary())

    def batch() -> pa.Table:
        return pa.table({"k": rng.integers(0, 1000, n), "b": payload,
                         "t": T0 + rng.integers(0, 3_600_000, n)})

    spec = s.write_spec(batch().schema, key="k", timestamp="t")
    writer = writing.ChunkWriter(spec)
    base, peak = pa.total_allocated_bytes(), 0
    for _ in range(60):  # 60 MB of input through a 4 MB buffer
        writer.add(batch())
        peak = max(peak, pa.total_allocated_bytes() - base)
    chunks = writer.finish()
    assert sum(c.rows for c in chunks) == 60 * n
    # Arrow pads each buffer, and rows taken before the first run count twice: a quarter more
    # at most (slices of one take per batch held twice the buffer: 8.0 MB here)
    assert peak <= 1.25 * (4 << 20), f"held {peak / 2**20:.1f} MB"


def test_streamed_rows_count_against_the_task_memory_bound(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pending rows of streamed chunks are written out early when the task holds too much."""
    monkeypatch.setattr(writing, "RUN_BUFFER_BYTES", 20_000)  # about 1,200 rows of this table
    s = Stream.create(url, segments=1)
    n = 10_000
    table = pa.table({"t": T0 + np.arange(n), "v": np.arange(n, dtype=np.float64)})
    spec = s.write_spec(table.schema, timestamp="t")
    writer = writing.ChunkWriter(spec)
    for i in range(0, n, 500):
        writer.add(table.slice(i, 500))
        assert writer._run_bytes <= 20_000
    chunks = writer.finish()
    assert len(chunks) == 1 and chunks[0].rows == n
    assert _chunk_file(s, chunks[0]).num_row_groups > 1  # drained early, in small row groups
    s.commit(chunks, schema=table.schema)
    assert s.read()["t"].to_pylist() == table["t"].to_pylist()


def test_three_writers_one_a_month_ahead_share_a_segment(url: str) -> None:
    """Declared writers, two keys in one segment, one loader a month ahead: nobody is moved."""
    keys = _keys_sharing_a_segment(8, 2)
    other = next(k for k in (f"x{i}" for i in range(100)) if k not in keys)
    airports = {"AAA": keys[0], "BBB": keys[1], "CCC": other}
    s = Stream.create(url, segments=8, timestamping_uncapped=True, writers=list(airports))
    ahead = {"AAA": 30 * DAY, "BBB": 0, "CCC": 0}
    rng = np.random.default_rng(7)
    expected = 0
    for day in range(40):
        for name, key in airports.items():
            times = np.sort(T0 + ahead[name] + day * DAY + rng.integers(0, DAY, 50))
            batch = pa.table({"airport": [name] * 50, "k": [key] * 50, "t": times})
            ack = _unordered_commit(s, batch, tasks=2, key="k", writer_id=name, batch_id=day, seed=day)
            assert ack.moved == {"lane": 0, "tick": 0, "cap": 0}, (name, day, ack.moved)
            expected += 50
    # the tick is the slowest writer's: the fast one's month is not complete yet
    assert s.refresh().tick >> 18 < T0 + 40 * DAY
    for name in airports:  # the loaders finish: their sessions end
        s.commit([], writer_id=name, op="tick", close=True)
    got = s.read()
    assert got.num_rows == expected
    assert _moved(got) == 0
    # two airports really did share a segment
    segs = {a: set(got.filter(pc.equal(got["airport"], a))["_segment"].to_pylist()) for a in airports}
    assert segs["AAA"] == segs["BBB"] and len(segs["AAA"]) == 1


def test_lane_still_orders_one_writers_commits(url: str) -> None:
    """A writer's later commit with earlier times is raised above its own lane, not others'."""
    keys = _keys_sharing_a_segment(2, 2)
    s = Stream.create(url, segments=2, timestamping_uncapped=True, writers=["a", "b"])
    s.heartbeat("b", tso=1 << 18)  # b is live and holds the tick low
    s.append([{"k": keys[0], "t": T0 + 5_000}], key="k", timestamp="t", writer_id="a", batch_id=0)
    back = s.append([{"k": keys[0], "t": T0 + 1_000}], key="k", timestamp="t", writer_id="a", batch_id=1)
    assert back.moved["lane"] == 1 and back.first_tso >> 18 == T0 + 5_000
    mine = s.append([{"k": keys[1], "t": T0 + 2_000}], key="k", timestamp="t", writer_id="b", batch_id=0)
    assert mine.moved == {"lane": 0, "tick": 0, "cap": 0} and mine.first_tso >> 18 == T0 + 2_000
    entry = Journal(s.store).read_entry(back.pos)
    assert entry.info["moved"] == {"lane": 1} and entry.info["raised"] == 1


def test_tick_and_cap_moves_are_counted(url: str) -> None:
    s = Stream.create(url, segments=1)
    s.append([{"t": T0 + 10_000}], timestamp="t")  # one-shot: the tick becomes its time
    late = s.append([{"t": T0}, {"t": T0 + 1}], timestamp="t")
    assert late.moved["tick"] == 2 and late.raised == 2
    future = s.append([{"t": 4_000_000_000_000}], timestamp="t")
    assert future.moved["cap"] == 1


def test_declared_backfill_keeps_last_week_while_tick_waits(url: str) -> None:
    now = T0 + 365 * DAY
    s = Stream.create(url, segments=2, timestamping_uncapped=True, writers=["live", "backfill"])
    live = Stream.open(url).writer("live")
    for i in range(5):
        live.append(pa.table({"src": ["live"] * 10, "t": now + i * 1000 + np.arange(10)}), timestamp="t",
                    batch_id=i)
    assert s.refresh().tick == 0  # the declared backfill has not committed yet: the tick waits
    week = now - 7 * DAY + np.arange(0, 7 * DAY, DAY // 4)
    ack = s.append(pa.table({"src": ["backfill"] * len(week), "t": week}), timestamp="t",
                   writer_id="backfill", batch_id=0)
    assert ack.moved == {"lane": 0, "tick": 0, "cap": 0}
    assert s.refresh().tick >> 18 == int(week.max())
    live.close()
    s.commit([], writer_id="backfill", op="tick", close=True)
    got = s.read()
    assert got.num_rows == 50 + len(week) and _moved(got) == 0


def test_scale_continues_a_writers_lane_only(url: str) -> None:
    """After a split, a writer's records of a key stay after its own earlier ones."""
    s = Stream.create(url, segments=1, timestamping_uncapped=True, writers=["a", "b"])
    s.heartbeat("b", tso=1 << 18)
    s.append([{"k": "x", "t": T0 + 9_000}], key="k", timestamp="t", writer_id="a", batch_id=0)
    seg = s.refresh().segments[0].id
    s.scale(split=seg)
    again = s.append([{"k": "x", "t": T0 + 1_000}], key="k", timestamp="t", writer_id="a", batch_id=1)
    assert again.first_tso >> 18 == T0 + 9_000 and again.moved["lane"] == 1
    other = s.append([{"k": "x", "t": T0 + 1_000}], key="k", timestamp="t", writer_id="b", batch_id=0)
    assert other.first_tso >> 18 == T0 + 1_000 and other.moved["lane"] == 0
    assert all(seg not in w.lanes for w in s.refresh().writers.values())


def test_truncate_and_cut_under_interleaved_lanes(url: str) -> None:
    """Two lanes interleaved in one segment: truncation by time removes exactly the old records,
    a cut at a time starts after them, and records read in (_tso, _segment, _seq) order."""
    s = Stream.create(url, segments=1, timestamping_uncapped=True, writers=["a", "b"])
    for i in range(6):
        s.append([{"w": "a", "t": T0 + 10_000 + i * 10}], timestamp="t", writer_id="a", batch_id=i)
        s.append([{"w": "b", "t": T0 + i * 10}], timestamp="t", writer_id="b", batch_id=i)
    for w in ("a", "b"):
        s.commit([], writer_id=w, op="tick", close=True)
    everything = s.read()
    assert _moved(everything) == 0
    assert everything["t"].to_pylist() == sorted(everything["t"].to_pylist())
    cut = s.cut_at(T0 + 10_000)
    from_cut = s.read(start=T0 + 10_000)
    assert from_cut["w"].to_pylist() == ["a"] * 6
    # the cut is a prefix of the segment whose records are all before the time
    seg = everything["_segment"][0].as_py()
    before = everything.filter(pc.less(everything["_seq"], cut[seg]))
    assert all(t < T0 + 10_000 for t in before["t"].to_pylist())
    s.truncate(T0 + 10_000)
    assert s.read()["w"].to_pylist() == ["a"] * 6


def test_ids_are_unique_when_lanes_share_a_time(url: str) -> None:
    from pyspark_tstream.api.groups import Group, record_ids

    s = Stream.create(url, segments=1, timestamping_uncapped=True, writers=["a", "b"])
    s.append([{"w": "a", "t": T0}], timestamp="t", writer_id="a", batch_id=0)
    s.append([{"w": "b", "t": T0}], timestamp="t", writer_id="b", batch_id=0)
    for w in ("a", "b"):
        s.commit([], writer_id=w, op="tick", close=True)
    got = s.read()
    assert got["_tso"][0] == got["_tso"][1]
    ids = record_ids(got)
    assert len(set(ids)) == 2
    g = Group.create(s, "g", start="0")
    assert g.read("c", count=1)["w"].to_pylist() == ["a"]
    assert g.read("c", count=1)["w"].to_pylist() == ["b"]  # the shared time skipped nothing
    assert g.ack(ids) == 2


def test_format_v1_stream_reads_and_appends(url: str) -> None:
    """A stream written before lanes (journal format 1) keeps working."""
    s = Stream.create(url, segments=1)
    s.append([{"t": T0}], timestamp="t", writer_id="w", batch_id=0)
    store = s.store
    for e in [s.journal.read_entry(pos) for pos in range(s.refresh().pos + 1)]:
        e.change = None  # format 1 stored the whole state in every entry
        d = seal.unseal(e.encode())
        d["v"] = 1
        d["state"].pop("checkpoint")
        d["state"].pop("features")  # nor declared features (nor checksums)
        for w in d["state"]["writers"].values():
            w.pop("lanes", None)
        store.write(layout.entry(e.pos), json.dumps(d).encode())
    store.delete(["_tstream/head.json", layout.checkpoint(0)])
    old = Stream.open(url)
    assert old.read()["t"].to_pylist() == [T0]
    old.append([{"t": T0 + 1}], timestamp="t", writer_id="w", batch_id=1)
    assert Stream.open(url).read()["t"].to_pylist() == [T0, T0 + 1]


def test_newer_format_fails_clearly(url: str) -> None:
    s = Stream.create(url, segments=1)
    d = seal.unseal(s.store.read(layout.entry(0)))
    d["v"] = 99
    s.store.write(layout.entry(0), seal.seal(d))  # sealed as the newer build would
    s.store.write("_tstream/head.json", seal.seal(d))
    with pytest.raises(UnsupportedFormatError, match="format version 99.*upgrade pyspark-tstream"):
        Stream.open(url)


def test_chunk_with_bad_trailing_fields_fails_clearly(url: str) -> None:
    """Format-v2 trailing fields (offset, sorted, marks) are checked like the rest of a chunk."""
    from pyspark_tstream.errors import CorruptMetadataError

    s = Stream.create(url, segments=1)
    ack = s.append([{"t": T0}], timestamp="t")
    d = json.loads(s.store.read(layout.entry(ack.pos)))
    d["chunks"][0] = d["chunks"][0][:8] + [0.5, "yes"]
    s.store.write(layout.entry(ack.pos), json.dumps(d).encode())
    with pytest.raises(CorruptMetadataError, match="tstream repair"):
        Stream.open(url).journal.read_entry(ack.pos)


def test_remembered_keys_route_like_the_hash(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task remembers the segments of the string keys it has routed; every record still lands
    where the routing hash puts it: repeated keys, new keys, nulls, and past the memory's cap."""
    monkeypatch.setattr(writing, "KNOWN_KEYS_MAX", 40)
    s = Stream.create(url, segments=4)
    bounds = s.write_spec(pa.schema([("k", pa.string()), ("t", pa.int64())]), key="k", timestamp="t").bounds
    rng = np.random.default_rng(3)
    batches = []
    for b, universe in enumerate([10, 10, 30, 60, 60]):  # new keys arrive; then more than the cap
        keys = [None if rng.random() < 0.05 else f"key-{rng.integers(0, universe)}" for _ in range(200)]
        batches.append(pa.table({"k": pa.array(keys, pa.string()), "t": T0 + b * 1000 + np.arange(200)}))
    spec = s.write_spec(batches[0].schema, key="k", timestamp="t")
    writer = writing.ChunkWriter(spec, "p0")
    for table in batches:
        want = route(key_hash(table["k"], name="k"), bounds)
        assert writer._route(table).tolist() == want.tolist()
    assert writer._known is None  # past the cap: every value is hashed
    chunks = write_batches(spec, batches, task="p1")
    s.commit(chunks, schema=batches[0].schema)
    got = s.read()
    assert got.num_rows == 1000
    want = dict(zip(got["k"].to_pylist(), route(key_hash(got["k"], name="k"), bounds).tolist()))
    segs = {seg.id: i for i, seg in enumerate(s.state.segments)}
    assert all(want[k] == segs[g] for k, g in zip(got["k"].to_pylist(), got["_segment"].to_pylist()))
