"""Exactly-once commits: concurrency, idempotence, crash points, and the timetick rules."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest
from conftest import CallLog, commits_in, crash_at
from helpers import check_segments
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal import seal
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.timestamps import now_ms, physical

#: The logic here sits above the store: its memory:// cases run by default, its file:// cases
#: in the slow set (tests/test_storage.py pins the file store's own primitives by default).
pytestmark = pytest.mark.slow_on_file


def _batch(writer: str, batch: int, rows: int = 20) -> pa.Table:
    return pa.table({"writer": [writer] * rows, "batch": [batch] * rows, "i": list(range(rows)),
                     "key": [f"k{(batch * 7 + i) % 13}" for i in range(rows)]})


def test_concurrent_appends_exactly_once(url: str) -> None:
    """16 threads, each (writer, batch) attempted by two threads at once: all present once."""
    s0 = Stream.create(url, segments=4)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            s = Stream.open(url)
            for b in range(6):
                s.append(_batch(f"w{t % 8}", b), key="key", writer_id=f"w{t % 8}", batch_id=b)
        except BaseException as e:  # noqa: BLE001 - surfaced below: a thread must not hide a failure
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    t = Stream.open(url).read()
    assert t.num_rows == 8 * 6 * 20
    counts = t.group_by(["writer", "batch"]).aggregate([("i", "count")])
    assert counts.num_rows == 48 and set(counts["i_count"].to_pylist()) == {20}
    check_segments(t, lane="writer")
    state = s0.refresh()
    data = [e for e in s0.journal.log.read_entries(range(1, state.pos + 1)) if e.op != "compact"]
    # one commit per (writer, batch), none for the duplicates: an entry of its own or a part
    # of an entry that folded several (group commit)
    parts = [(w, b) for w, b, _, _ in commits_in(data)]
    assert sorted(parts) == sorted((f"w{w}", b) for w in range(8) for b in range(6))


def test_same_writer_batch_twice_is_noop(url: str) -> None:
    s = Stream.create(url, segments=2)
    first = s.append(_batch("w", 1), writer_id="w", batch_id=1)
    again = s.append(_batch("w", 1), writer_id="w", batch_id=1)
    assert not first.duplicate and again.duplicate
    assert again.pos == first.pos and again.segments == first.segments
    assert s.read().num_rows == 20
    other = s.append(_batch("w", 2), writer_id="w", batch_id=2)
    assert not other.duplicate and s.read().num_rows == 40


def test_batches_out_of_order_within_window_are_kept(url: str) -> None:
    s = Stream.create(url, segments=1)
    for b in (5, 3, 4, 3, 5):
        s.append(_batch("w", b, rows=1), writer_id="w", batch_id=b)
    assert sorted(s.read()["batch"].to_pylist()) == [3, 4, 5]


def _crash_points(url: str, calllog: CallLog, error: type[BaseException]) -> int:
    """Inject a failure at every store call of one append; returns how many calls it makes."""
    probe = Stream.create(url + "-probe", segments=2)
    probe.append(_batch("w", 0), key="key", writer_id="w", batch_id=0)
    probe.store.observer = calllog
    probe.append(_batch("w", 1), key="key", writer_id="w", batch_id=1)
    total = calllog.count()
    assert total >= 3  # the data file, the conditional create, the head hint
    for k in range(1, total + 1):
        s = Stream.create(f"{url}-{k}", segments=2)
        s.append(_batch("w", 0), key="key", writer_id="w", batch_id=0)
        before = sorted(s.read()["batch"].to_pylist())
        log = CallLog()
        log.fail_at, log.error = k, error
        s.store.observer = log
        try:
            s.append(_batch("w", 1), key="key", writer_id="w", batch_id=1)
        except error:
            pass
        s.store.observer = None
        fresh = Stream.open(f"{url}-{k}")
        seen = sorted(fresh.read()["batch"].to_pylist())
        assert seen in (before, before + [1] * 20), f"torn state after crash at call {k}: {log.calls}"
        # the retry of the same batch and a new batch both work, and the result is exactly-once
        fresh.append(_batch("w", 1), key="key", writer_id="w", batch_id=1)
        fresh.append(_batch("w", 2), key="key", writer_id="w", batch_id=2)
        final = fresh.read()
        assert sorted(final["batch"].to_pylist()) == [0] * 20 + [1] * 20 + [2] * 20
        check_segments(final, lane="writer")
    return total


def test_crash_between_any_two_store_calls(url: str, calllog: CallLog) -> None:
    _crash_points(url, calllog, RuntimeError)


def test_store_errors_at_any_call_leave_stream_consistent(url: str, calllog: CallLog) -> None:
    _crash_points(url, calllog, OSError)


def _tick_invariant(url: str) -> None:
    """No entry commits a record at or below the tick published before it; G never drops."""
    j = Journal(Stream.open(url).store)
    head = j.head()
    prev_tick = -1
    for pos in range(0, head.pos + 1):
        e = j.read_entry(pos)
        for c in e.chunks:
            assert c.lo > max(prev_tick, 0), f"entry {pos} chunk {c.path} at {c.lo} <= tick {prev_tick}"
        assert e.state.tick >= prev_tick
        prev_tick = e.state.tick


def test_skewed_writers_never_commit_below_tick(url: str) -> None:
    s = Stream.create(url, segments=3, timestamping_uncapped=True)
    rng = np.random.default_rng(3)
    skews = {"slow": -20_000, "ok": 0, "fast": 5_000}
    producers = {w: Stream.open(url).writer(w) for w in skews}
    for b in range(30):
        w = list(skews)[int(rng.integers(0, 3))]
        base = now_ms() + skews[w]
        t = [base + int(x) for x in sorted(rng.integers(-3000, 3000, 10))]
        producers[w].append(pa.table({"w": [w] * 10, "t": t, "k": [f"k{i}" for i in range(10)]}),
                            key="k", timestamp="t", batch_id=b)
        state = s.refresh()
        live = [x.tso for x in state.writers.values() if x.live]
        assert state.tick >= min(live)
    _tick_invariant(url)
    for p in producers.values():  # lanes: records above the tick are not a suffix of a segment
        p.close()
    check_segments(s.read(), lane="w")


def test_tick_is_min_of_live_writers_and_ignores_one_shot(url: str) -> None:
    s = Stream.create(url, segments=1, timestamping_uncapped=True)
    a, b = s.writer("a"), Stream.open(url).writer("b")
    a.append([{"t": 1_000}], timestamp="t")
    b.append([{"t": 5_000}], timestamp="t")
    assert s.refresh().tick >> 18 == 1_000
    a.append([{"t": 7_000}], timestamp="t")
    assert s.refresh().tick >> 18 == 5_000
    s.append([{"t": 9_000}], timestamp="t")  # one-shot: never holds the tick back
    assert s.refresh().tick >> 18 == 5_000
    b.close()
    assert s.refresh().tick >> 18 == 7_000
    a.close()
    assert s.refresh().tick >> 18 == 9_000  # no live writer: the latest committed _tso


class FakeClock:
    """``now_ms`` that moves only when told: lease and idle rules tested without sleeping (a
    loaded machine made "two commits within 100 ms" false at random)."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now


def test_expired_lease_drops_writer_through_journal(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark_tstream.api.append as append_mod

    clock = FakeClock()
    monkeypatch.setattr(append_mod, "now_ms", clock)
    s = Stream.create(url, segments=1, timestamping_uncapped=True, writer_lease_ms=100)
    s.writer("idle").append([{"t": 1_000}], timestamp="t")
    s.writer("busy").append([{"t": 2_000}], timestamp="t")
    assert s.refresh().tick >> 18 == 1_000
    clock.now += 150
    assert s.refresh().tick >> 18 == 1_000  # a reader's clock changes nothing
    ack = s.writer("busy").append([{"t": 3_000}], timestamp="t")
    entry = Journal(s.store).read_entry(ack.pos)
    assert entry.info.get("expired") == ["idle"]
    assert s.refresh().tick >> 18 == 3_000
    # the expired writer comes back: its records land above the tick
    late = s.writer("idle").append([{"t": 1_500}], timestamp="t")
    assert late.raised == 1 and late.first_tso > ack.tick
    _tick_invariant(url)


def _keys_in_distinct_segments(n_segments: int) -> tuple[str, str]:
    import pyarrow as pa
    from pyspark_tstream.epochs.routing import KEY_SPACE, key_hash, route

    keys = [f"k{i}" for i in range(50)]
    bounds = [i * KEY_SPACE // n_segments for i in range(n_segments)]
    segs = route(key_hash(pa.array(keys)), bounds)
    first = keys[0]
    second = next(k for k, sg in zip(keys, segs) if sg != segs[0])
    return first, second


def test_declared_writers_hold_tick_until_first_commit(url: str) -> None:
    s = Stream.create(url, segments=2, timestamping_uncapped=True, writers=["a", "b"])
    ka, kb = _keys_in_distinct_segments(2)
    s.append([{"t": 5_000, "k": ka}], key="k", timestamp="t", writer_id="a", batch_id=0)  # declared
    assert s.refresh().tick == 0
    s.append([{"t": 1_000, "k": ka}], key="k", timestamp="t")
    assert s.refresh().tick == 0
    s.heartbeat("b", tso=3_000 << 18)
    assert s.refresh().tick >> 18 == 3_000
    # b backfills below a's records without being pushed forward by a's earlier commit
    ack = s.append([{"t": 3_500, "k": kb}], key="k", timestamp="t", writer_id="b", batch_id=0)
    assert ack.raised == 0 and ack.first_tso >> 18 == 3_500


def test_heartbeat_is_data_less_tick_record(url: str) -> None:
    s = Stream.create(url, segments=1)
    ack = s.heartbeat("p", tso=123 << 18)
    e = Journal(s.store).read_entry(ack.pos)
    assert e.op == "tick" and e.chunks == [] and e.state.tick >> 18 == 123
    assert e.state.tick & 0x3FFFF == 0x3FFFF  # ticks end on a millisecond


def test_schema_mismatch_names_columns_and_merge(url: str) -> None:
    from pyspark_tstream.errors import SchemaMismatchError

    s = Stream.create(url, segments=1)
    s.append([{"a": 1, "b": "x"}])
    with pytest.raises(SchemaMismatchError, match=r"a \(int64 in the stream, string in the data\)"):
        s.append([{"a": "one", "b": "y"}])
    with pytest.raises(SchemaMismatchError, match=r"columns not in the stream: \['c'\].*mergeSchema"):
        s.append([{"a": 2, "b": "y", "c": 1.5}])
    s.append([{"a": 2, "b": "y", "c": 1.5}], merge_schema=True)
    s.append([{"a": 3}])  # missing columns are nulls
    t = s.read()
    assert t.column_names[:3] == ["a", "b", "c"]
    assert t["c"].to_pylist() == [None, 1.5, None]
    assert s.refresh().pos == 3


@pytest.mark.parametrize("operation", ["scale", "truncate+vacuum"])
def test_crash_points_of_scale_and_truncation(url: str, operation: str) -> None:
    """A failure at any store call of a scale or a truncation leaves the stream readable and
    consistent, and the next operations succeed."""
    def build(name: str) -> Stream:
        s = Stream.create(name, segments=2)
        for b in range(3):
            s.append(_batch("w", b).append_column("t", pa.array([1_000_000 + b * 1000 + i for i in range(20)])),
                     key="key", timestamp="t", writer_id="w", batch_id=b)
        return s

    def act(s: Stream) -> None:
        if operation == "scale":
            s.scale(split=s.refresh().segments[0].id, parts=2)
            s.append(_batch("w", 9), key="key", writer_id="w", batch_id=9)  # files the sealed shard
        else:
            s.truncate(1_001_500)
            s.vacuum(grace_ms=0)

    probe = build(url + "-probe")
    log = CallLog()
    probe.store.observer = log
    act(probe)
    total = log.count()
    expected_after = sorted(Stream.open(url + "-probe").read()["batch"].to_pylist())
    for k in range(1, total + 1):
        name = f"{url}-{operation}-{k}"
        s = build(name)
        before = sorted(s.read()["batch"].to_pylist())
        crash = crash_at(s, k, act)
        fresh = Stream.open(name)
        seen = sorted(fresh.read()["batch"].to_pylist())
        assert seen in (before, expected_after) or (operation == "scale" and seen == before + [9] * 20), \
            f"crash at call {k} ({crash.calls[-1]}) left {len(seen)} records"
        act(fresh)  # the operation (or its retry) completes after the crash
        final = sorted(Stream.open(name).read()["batch"].to_pylist())
        assert final == expected_after or (operation == "scale" and final == expected_after + [9] * 20)
        check_segments(Stream.open(name).read(), from_zero=operation == "scale", lane="writer")


def test_index_node_holds_each_entrys_delta_exactly(url: str) -> None:
    """A level-1 index node copies what its 32 entries did, read without decoding their states:
    chunk lists (marks, keys), writer and batch, info of scale and compaction entries — equal
    to each entry's own ``delta_json``. A damaged delta fails naming the entry; a damaged state
    does not stop the flush (the node needs none of it)."""
    import json

    from pyspark_tstream.errors import CorruptMetadataError, TStreamError
    from pyspark_tstream.journal.entries import FORMAT_VERSION, Entry
    from pyspark_tstream.journal.timeindex import FANOUT
    from pyspark_tstream.store import layout

    s = Stream.create(url, segments=2, compaction="off")
    t0 = 1_700_000_000_000
    for b in range(FANOUT + 2):
        s.append(pa.table({"key": [f"k{b % 5}", f"k{b % 3}"], "t": [t0 + b, t0 + b + 1]}), key="key",
                 timestamp="t", writer_id=f"w{b % 2}", batch_id=b)
        if b == 10:
            s.scale(split=s.state.segments[0].id, parts=2)
        if b == 20:
            s.compact(full=True)
    node = json.loads(s.store.read(layout.index_node(1, 0)))
    assert [d["pos"] for d in node["entries"]] == list(range(FANOUT))
    expected = [Journal(s.store).read_entry(p).delta_json() for p in range(FANOUT)]
    assert json.dumps(node["entries"]) == json.dumps(expected)  # same bytes: fsck rebuilds nodes
    assert any(d.get("info") for d in expected) and any(d.get("writer") for d in expected)
    assert any(len(c) > 10 for d in expected for c in d["chunks"])  # chunks with marks

    head = s.refresh().pos
    bad = seal.unseal(s.store.read(layout.entry(head)))  # edited below: the seal is left out
    with pytest.raises(CorruptMetadataError, match="journal entry.*x"):
        Entry.decode_delta(json.dumps({**bad, "chunks": [["x"]]}).encode(), path="x")
    with pytest.raises(TStreamError, match=f"format {FORMAT_VERSION + 1}|version {FORMAT_VERSION + 1}"):
        Entry.decode_delta(json.dumps({**bad, "v": FORMAT_VERSION + 1}).encode(), path="x")
    # an entry whose change is damaged still gives its delta to the next node
    assert Entry.decode_delta(json.dumps({**bad, "change": {"pos": "?"}}).encode(), path="x") == \
        Journal(s.store).read_entry(head).delta_json()


def test_search_reads_node_summaries_and_reads_check_their_entries(url: str) -> None:
    """A seek uses only a node's summaries, so an entry damaged inside a level-1 node does not
    stop it; every read that needs the node's entries (a read of the range, a micro-batch plan,
    fsck) still refuses the node, naming it and a remedy, and repair rebuilds it."""
    import json

    from pyspark_tstream.errors import CorruptMetadataError
    from pyspark_tstream.journal.timeindex import COL_MAX_TSO, FANOUT
    from pyspark_tstream.store import layout
    from pyspark_tstream.timestamps import pack

    s = Stream.create(url, segments=1, compaction="off")
    t0 = 1_700_000_000_000
    for b in range(2 * FANOUT + 3):
        s.append(pa.table({"key": ["k"], "t": [t0 + 1000 * b]}), key="key", timestamp="t")
    target = pack(t0 + 1000 * 40)
    want = s.journal.search(s.refresh(), COL_MAX_TSO, target)
    assert FANOUT <= want < 2 * FANOUT  # found inside level-1 node 1

    rel = layout.index_node(1, 1)
    node = seal.unseal(s.store.read(rel))
    node["entries"][5]["chunks"] = [["x"]]
    s.store.write(rel, seal.seal(node))  # written so (its checksum matches): the shape checks find it

    fresh = Stream.open(url)
    assert fresh.journal.search(fresh.state, COL_MAX_TSO, target) == want
    uri = fresh.store.uri(rel)
    with pytest.raises(CorruptMetadataError, match=f"{uri}.*tstream (repair|fsck)"):
        fresh.read()
    with pytest.raises(CorruptMetadataError, match=f"{uri}.*tstream (repair|fsck)"):
        list(fresh.journal.node_deltas(fresh.state, 1))
    report = fresh.verify()
    assert any(rel in p for p in map(str, report.problems)), report.problems
    fresh.repair()
    assert len(Stream.open(url).read()) == 2 * FANOUT + 3

    # a node's entries get the journal entry's own delta check (op, nonce, wall, info too)
    for field, value in (("op", 7), ("nonce", None), ("info", [])):
        node = json.loads(s.store.read(rel))
        node["entries"][5][field] = value
        s.store.write(rel, json.dumps(node).encode())
        with pytest.raises(CorruptMetadataError, match=f"{uri}.*tstream (repair|fsck)"):
            Stream.open(url).read()
        Stream.open(url).repair()
    assert len(Stream.open(url).read()) == 2 * FANOUT + 3


@pytest.mark.parametrize("operation", ["vacuum", "compact"])
def test_a_commit_far_behind_catches_up_in_a_few_reads(url: str, operation: str) -> None:
    """A vacuum deleting files for a while under ~25 commits/s can reach its journal commit
    hundreds of positions behind; walking them one lost race at a time (each a rebuild, a
    conditional create and a read) would fall further behind and give up after 1000 "lost
    races". A committer behind by more than the one slot it just lost jumps to the newest entry
    through the head."""
    s = Stream.create(url, segments=1, compaction="target=1MB,min=1000")  # only this test compacts
    for b in range(20):
        s.append([{"k": "x", "b": b}], key="k")
    if operation == "vacuum":
        s.truncate(physical(s.refresh().tick))  # something for it to delete
    other = Stream.open(url)
    behind = 400
    log = CallLog()

    def meanwhile(op: str, rel: str) -> None:
        log(op, rel)
        if op in ("delete", "open_output") and not fired:
            fired.append(True)
            for b in range(behind):  # these land while the operation works
                other.append([{"k": "x", "b": b}], key="k")
            log.reset()

    fired: list[bool] = []
    mine = Stream.open(url)
    mine.refresh()
    mine.store.observer = meanwhile
    if operation == "vacuum":
        assert mine.vacuum(grace_ms=0).chunks >= 19
    else:
        assert mine.compact(full=True).chunks == 20
    mine.store.observer = None
    assert fired
    st = Stream.open(url).refresh()
    assert st.pos >= behind + 21
    ops = [Stream.open(url).journal.read_entry(p).op for p in range(st.pos - 3, st.pos + 1)]
    assert ("gc" if operation == "vacuum" else "compact") in ops
    # a handful of journal calls, not one per position it was behind
    journal = [op for op, rel in log.calls if rel.startswith("_tstream/journal/")]
    assert journal.count("put_if_absent") <= 3 and journal.count("read") <= 8, log.calls


def test_the_journal_composes_entry_io_and_the_index(url: str) -> None:
    """A ``Journal`` holds an entry log and a time index and forwards what callers use: the
    answers are the parts' own, and nothing else of them (private helpers) leaks through."""
    from pyspark_tstream.journal.entries import EntryLog
    from pyspark_tstream.journal.timeindex import COL_MAX_TSO, FANOUT, TimeIndex

    s = Stream.create(url, segments=1)
    for b in range(FANOUT + 3):  # one level-1 node flushed
        s.append(pa.table({"i": [b]}), writer_id="w", batch_id=b)
    j = Journal(Stream.open(url).store)
    assert not isinstance(j, EntryLog) and isinstance(j.log, EntryLog) and isinstance(j.index, TimeIndex)
    assert j.index.log is j.log
    head = j.head()
    assert head == j.log.head() and head.pos >= FANOUT + 3
    assert j.read_entry(2) == j.log.read_entry(2) and j.try_entry(head.pos + 1) is None
    assert j.lowest_listed() == j.log.lowest_listed() == 1
    state = head.state
    mid = j.read_entry(FANOUT // 2).state.max_tso
    first_after = next(p for p in range(head.pos + 1) if j.read_entry(p).state.max_tso > mid)
    assert j.search(state, COL_MAX_TSO, mid) == j.index.search(state, COL_MAX_TSO, mid) == first_after
    assert j.deltas(state, 1, head.pos) == j.index.deltas(state, 1, head.pos)
    assert j.read_node(1, 0) == j.index.read_node(1, 0)
    assert not any(hasattr(j, name) for name in ("_search_newest", "_lowest_live", "_anchor_pos", "read_deltas"))
