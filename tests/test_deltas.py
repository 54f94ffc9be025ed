"""Format v6: entries carry their change, checkpoints hold the whole state, writer state expires.

What a commit writes follows what it changed, not how many writers the stream has known; a
reader or a committer that lost a race applies one change; a state rebuilt from a checkpoint and
the entries after it is the committer's own, field for field; a lost or damaged checkpoint is
named by fsck, read around, and rebuilt by repair; a crash at any store call of a checkpointing
commit loses nothing; a writer silent past ``writer_retention_ms`` leaves the state (and a replay
of its batch appends again), unless its session's lease still holds or it is declared.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest
from conftest import CallLog, crash_at
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import CorruptMetadataError
from pyspark_tstream.journal import checkpoint, packing
from pyspark_tstream.journal.entries import Entry
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.journal.outcome import Taken
from pyspark_tstream.journal.timeindex import FANOUT
from pyspark_tstream.store import layout

T0 = 1_700_000_000_000


def _rows(b: int, n: int = 4) -> pa.Table:
    return pa.table({"key": [f"k{i}" for i in range(n)], "t": [T0 + b * 10 + i for i in range(n)],
                     "batch": [b] * n})


def _append(s: Stream, writer: str, b: int) -> None:
    s.append(_rows(b), key="key", timestamp="t", writer_id=writer, batch_id=b)


def _entry_bytes(s: Stream) -> int:
    return len(s.store.read(layout.entry(s.refresh().pos)))


def test_a_commit_writes_what_it_changed_not_every_writer_known(url: str) -> None:
    """The entry a producer's commit writes is as large with 200 producers known as with 5
    (format 5 wrote every writer's window and lanes in every entry: 40 times larger here)."""
    sizes = {}
    for known in (5, 200):
        s = Stream.create(f"{url}-{known}", segments=4, compaction="off")
        for w in range(known):
            _append(s, f"producer-{w}", w)
        _append(s, "producer-1", 10_000)  # a known producer's next batch
        sizes[known] = _entry_bytes(s)
        assert len(s.state.writers) == known
    # the whole state (what format 5 wrote in every entry) is many times the entry
    assert len(checkpoint.encode(s.state)) > 20 * sizes[200]
    assert sizes[200] <= sizes[5] * 1.1 + 64, sizes


def test_checkpoints_are_amortized_and_a_rebuild_reads_few_objects(url: str) -> None:
    """Over many commits the checkpoints add at most about half the entries' own bytes; a fresh
    handle finds the newest state in 4 store calls (head hint, checkpoint, one batched read of
    the entries after it, the probe past the head)."""
    s = Stream.create(url, segments=4, compaction="off")
    for w in range(300):
        _append(s, f"producer-{w % 60}", w)
    entries = sum(len(s.store.read(layout.entry(p))) for p in range(1, s.state.pos + 1))
    marks = [s.state.checkpoint]
    assert marks[0] is not None and marks[0].pos > 0
    stored = [p for p in range(s.state.pos + 1) if s.store.exists(layout.checkpoint(p))]
    written = sum(len(s.store.read(layout.checkpoint(p))) for p in stored if p > 0)
    assert 0 < written <= entries * 0.75, (written, entries)
    log = CallLog()
    fresh = Stream.open(url)  # (the open itself is not counted: it also reads the config)
    fresh.store.observer = log
    st = fresh.journal.head().state
    assert st.to_json() == s.state.to_json()
    assert log.count() <= 4, log.calls


def test_a_poll_and_a_lost_race_apply_one_change(url: str) -> None:
    """A reader with nothing new makes one call; with one new commit, three (the entry, the head
    hint, the probe past it) and no checkpoint read. A committer that lost a race reads the winner's entry and
    applies its change: no checkpoint, no head read."""
    s = Stream.create(url, segments=4, compaction="off")
    for b in range(5):
        _append(s, "a", b)
    reader = Stream.open(url)
    other = Stream.open(url)
    log = CallLog()
    reader.store.observer = log
    reader.refresh()
    assert log.count() == 1
    _append(s, "a", 5)
    log.reset()
    assert reader.refresh().pos == s.state.pos
    assert log.count() == 3 and not any("checkpoints" in rel for _, rel in log.calls), log.calls
    assert reader.state.to_json() == s.state.to_json()
    log = CallLog()
    other.store.observer = log
    stale = other.state  # position 5: entry 6 is taken
    lost = other.journal.attempt(lambda st, pos: Entry(pos=pos, op="tick", wall=st.wall, state=st), stale)
    assert isinstance(lost, Taken) and lost.winner.pos == 6 and lost.winner.state.to_json() == s.state.to_json()
    # the handle knew entry 5 through the head hint, and its open read entry 5's own slot in the
    # same batch as the probe past it (a commit past a missing or torn newest entry would leave a
    # hole): the commit is one batched read of what lies around its slot (entries 5, 6 and 7 and
    # the head hint: a create into a lost entry's slot would fork the journal, journal/holes.py;
    # in line here, beside the data upload on an object store), which holds the winner: no
    # create, no read of its own
    assert log.calls == [("read_many", f"{layout.entry(5)} (+3)")], log.calls


def test_the_state_rebuilt_from_checkpoints_is_the_committers(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scales, schema changes, truncation, vacuum and compaction: every state a reader rebuilds
    (from checkpoints written every 3 entries) is the committer's own, field for field. More
    entries than an index node holds: the entries of the open node stay (the commit that fills it
    copies them), so collection needs a node written first."""
    monkeypatch.setattr(checkpoint, "MAX_ENTRIES", 3)
    s = Stream.create(url, segments=2)
    for b in range(24 + FANOUT):
        _append(s, f"w{b % 3}", b)
        if b == 6:
            s.scale(split=s.state.segments[0].id, parts=2)
        if b == 9:
            s.append(_rows(b).append_column("x", pa.array([1] * 4)), key="key", timestamp="t", merge_schema=True)
        if b == 15:
            s.truncate(T0 + 100)
            s.vacuum(grace_ms=0)
        if b == 18:
            s.compact(full=True)
        assert Stream.open(url).state.to_json() == s.refresh().to_json(), b
    assert s.state.checkpoint is not None and s.state.checkpoint.pos > s.state.pos - 4
    s.vacuum(grace_ms=0)
    st = s.refresh()
    assert st.meta_gc_pos > 1  # entries were collected, up to a checkpoint below gc_pos
    for p in range(st.meta_gc_pos, st.pos + 1):  # every entry left rebuilds, by a fresh handle
        assert Journal(s.store).read_entry(p).state.pos == p
    assert s.verify().ok
    assert sorted(Stream.open(url).read()["batch"].to_pylist()) == sorted(s.read()["batch"].to_pylist())


@pytest.mark.parametrize("damage", ["missing", "garbage", "different"])
def test_a_lost_or_damaged_checkpoint_is_named_read_around_and_rebuilt(url: str, damage: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "MAX_ENTRIES", 4)
    s = Stream.create(url, segments=2, compaction="off")
    for b in range(10):
        _append(s, "w", b)
    mark = s.refresh().checkpoint
    assert mark is not None and 0 < mark.prev < mark.pos
    rel = layout.checkpoint(mark.pos)
    good = s.store.read(rel)
    if damage == "missing":
        s.store.delete([rel])
    elif damage == "garbage":
        s.store.write(rel, good[:50])
    else:
        s.store.write(rel, good.replace(b'"rows":', b'"rows":1', 1))
    if damage != "different":  # readers rebuild the state from the checkpoint before it
        assert Stream.open(url).state.to_json() == s.state.to_json()
    report = s.verify()
    assert [(p.kind, p.path, p.repairable) for p in report.problems] == [("checkpoint", s.store.uri(rel), True)]
    repaired = s.repair()
    assert repaired.ok and any("checkpoint" in r for r in repaired.repaired)
    assert s.store.read(rel) == good
    _append(Stream.open(url), "w", 10)
    assert sorted(Stream.open(url).read()["batch"].to_pylist()) == sorted([b for b in range(11) for _ in range(4)])


def test_a_crash_at_any_call_of_a_checkpointing_commit_loses_nothing(url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "MAX_ENTRIES", 3)

    def build(name: str) -> Stream:
        s = Stream.create(name, segments=2, compaction="off")
        for b in range(3):
            _append(s, "w", b)
        assert checkpoint.due(s.refresh())
        return s

    probe = build(url + "-probe")
    log = CallLog()
    probe.store.observer = log
    _append(probe, "w", 3)
    assert any(rel.startswith(checkpoint.layout.CHECKPOINTS) for _, rel in log.calls)
    want = sorted(b for b in range(4) for _ in range(4))
    for k in range(1, log.count() + 1):
        name = f"{url}-{k}"
        s = build(name)
        crash = crash_at(s, k, lambda st: _append(st, "w", 3))
        fresh = Stream.open(name)
        seen = sorted(fresh.read()["batch"].to_pylist())
        assert seen in (want[:-4], want), f"crash at call {k} ({crash.calls[-1]}) left {seen}"
        _append(fresh, "w", 3)  # the retry: appended once
        again = Stream.open(name)
        assert sorted(again.read()["batch"].to_pylist()) == want
        assert again.verify().ok, (k, again.verify().summary())


def test_a_silent_writer_expires_and_a_replay_of_its_batch_appends_again(url: str) -> None:
    """Documented consequence of writer retention (as Kafka's producer-id expiry): inside the
    retention a replay is a no-op; after it, the writer's window is gone and the replay appends."""
    s = Stream.create(url, segments=2, writer_retention_ms=50)
    _append(s, "old", 0)
    assert s.append(_rows(0), key="key", timestamp="t", writer_id="old", batch_id=0).duplicate
    time.sleep(0.1)
    _append(s, "new", 1)  # this commit's wall is past old's retention: it drops "old"
    assert "old" not in s.refresh().writers and "new" in s.state.writers
    assert "old" not in Stream.open(url).state.writers  # every replica agrees
    ack = s.append(_rows(0), key="key", timestamp="t", writer_id="old", batch_id=0)
    assert not ack.duplicate and ack.rows == 4
    assert sorted(s.read()["batch"].to_pylist()) == [0] * 8 + [1] * 4


def test_a_session_outlives_the_retention_while_its_lease_holds(url: str) -> None:
    """A live session silent past the retention keeps its window while its lease holds (it holds
    the tick too); a declared writer is kept (the tick waits for it); once the session closes,
    it expires like any writer."""
    s = Stream.create(url, segments=2, writer_retention_ms=50, writer_lease_ms=60_000, writers=["declared"])
    session = s.appending.writer("session")
    session.append(_rows(0), key="key", timestamp="t", batch_id=0)
    _append(s, "declared", 1)
    _append(s, "plain", 2)
    time.sleep(0.1)
    _append(s, "later", 3)
    st = s.refresh()
    assert "plain" not in st.writers  # silent past the retention, no session
    assert "session" in st.writers and st.writers["session"].live  # its lease (60 s) still holds
    assert "declared" in st.writers
    assert session.append(_rows(0), key="key", timestamp="t", batch_id=0).duplicate
    session.close()
    time.sleep(0.1)
    _append(s, "last", 4)
    assert "session" not in s.refresh().writers  # closed: no lease holds it any more


def test_writer_retention_is_validated() -> None:
    with pytest.raises(ValueError, match="writerRetentionMs=0 must be a positive integer"):
        Stream.create("memory://bad-retention/s", writer_retention_ms=0)


def test_a_cold_read_of_the_newest_commits_unpacks_each_entry_once(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh handle's open cross-checks the checkpoint against the entries after it, which
    unpacks their packed chunk lists; a read of the newest commits then plans from those same
    deltas (it decoded each entry a second time before), and reads the records a handle that
    decodes everything from the stored bytes reads. A damaged packed list in one of those
    entries is still named by the open."""
    monkeypatch.setattr(checkpoint, "MAX_ENTRIES", 6)
    s = Stream.create(url, segments=16, compaction="off")
    n = 64
    for b in range(11):  # 64 keys: a slice in (almost) every segment, packed (>= PACK_MIN chunks)
        s.append(pa.table({"key": [f"k{i}" for i in range(n)], "t": [T0 + b * n + i for i in range(n)],
                           "batch": [b] * n}), key="key", timestamp="t")
    st = s.refresh()
    assert st.checkpoint is not None and st.pos - st.checkpoint.pos >= 3
    start = T0 + (st.pos - st.checkpoint.pos - 1) * n  # the commits after the checkpoint
    want = s.read(start=start)
    unpacked: list[str] = []
    real = packing.unpack
    monkeypatch.setattr(packing, "unpack", lambda text: unpacked.append(text) or real(text))
    got = Stream.open(url).read(start=start)
    assert got.num_rows == want.num_rows > 0 and got.equals(want)
    assert len(unpacked) == len(set(unpacked)) >= st.pos - st.checkpoint.pos, "an entry was unpacked twice"
    # the kept deltas are those the stored bytes decode to
    cold = Stream.open(url).journal.log
    for p in range(st.checkpoint.pos + 1, st.pos):
        assert cold.read_deltas([p], expanded=True)[0] == Entry.decode_delta(
            s.store.read(layout.entry(p)), path="x", expanded=True)
    # an entry whose packed chunks are damaged is named by the open, as before
    rel = layout.entry(st.pos - 1)
    stored = json.loads(s.store.read(rel))
    stored["packed"] = stored["packed"][:-8]
    s.store.write(rel, json.dumps(stored).encode())
    with pytest.raises(CorruptMetadataError) as e:
        Stream.open(url).read(start=start)
    assert e.value.path == s.store.uri(rel)
