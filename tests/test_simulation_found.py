"""Bugs the simulation (``tests/test_simulation.py``) found, each pinned without it."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal.outcome import Committed
from pyspark_tstream.maps.macromap import MacroMap
from pyspark_tstream.timestamps import now_ms
from pyspark_tstream.write.writing import write_batches

SCHEMA = pa.schema([("id", pa.int64()), ("key", pa.string())])


def _url() -> str:
    return f"memory://sim-found-{uuid.uuid4().hex}/stream"


def test_to_reader_of_a_handle_opened_before_the_first_write_returns_the_columns() -> None:
    """``to_reader`` took its columns from the handle's state before refreshing it: a handle
    opened before the first write read the new records with no user columns."""
    url = _url()
    Stream.create(url, segments=2)
    early = Stream.open(url)  # no schema yet
    Stream.open(url).append(pa.table({"id": [1, 2], "key": ["a", "b"]}, schema=SCHEMA), key="key")
    table = early.to_reader(system_columns=True).read_all()
    assert table.num_rows == 2
    assert sorted(table.column("id").to_pylist()) == [1, 2]


def test_verify_finds_the_macro_chunks_of_a_merged_segment_whose_chunks_sit_in_sealed_folders() -> None:
    """Chunks written for two segments that a merge sealed before their commit are re-routed
    whole to the merged segment and stay in the sealed segments' folders; compaction writes the
    merged segment's macro-chunk into its own folder. ``verify`` listed only the folders raw
    chunks sit in, so it reported the macro-chunk gone (and ``repair`` would act on it)."""
    url = _url()
    s = Stream.create(url, segments=2)
    t = pa.table({"id": list(range(40)), "key": [f"k{i}" for i in range(40)]}, schema=SCHEMA)
    spec = s.write_spec(SCHEMA, key="key")
    chunks = write_batches(spec, [t], ordered=True)
    Stream.open(url).scale(merge=[0, 1])
    s.commit(chunks, schema=SCHEMA)  # re-routed whole: same files, the merged segment
    other = Stream.open(url)
    assert other.compact(full=True).macros == 1
    report = other.verify()
    assert report.ok, report.summary()
    assert sorted(other.read()["id"].to_pylist()) == list(range(40))


def crash(op: str, rel: str) -> None:
    """A store observer: the compacting process dies at its journal commit."""
    if op == "put_if_absent" and rel.startswith("_tstream/journal/"):
        raise RuntimeError("the compacting process died before its journal commit")


def append_batch(s: Stream, b: int) -> None:
    """Batch ``b``: ids ``b*10 .. b*10+2`` under one key."""
    s.append(pa.table({"id": [b * 10 + i for i in range(3)], "key": ["a"] * 3}, schema=SCHEMA), key="key")


def maps_aged(s: Stream) -> Stream:
    """``s`` with every file but the macro-map versions seen as long past any grace."""
    published = s.store.modified_ms
    s.store.modified_ms = lambda rel: published(rel) if "/macros/" in rel else 0  # type: ignore[method-assign]
    return s


def test_orphan_cleanup_keeps_the_macro_chunks_of_the_committed_map_version() -> None:
    """A compaction that re-merged a committed macro-chunk published the map's next version and
    died before its journal commit. Orphan cleanup took the macro-chunks live from the newest
    map versions only, so it deleted the committed one, which the state's map version (what
    plans read) still names: once its replaced files were collected, its records were lost."""
    url = _url()
    s = Stream.create(url, segments=1)
    for b in range(6):
        append_batch(s, b)
        if b == 2:
            assert Stream.open(url).compact(full=True, target="64KB").macros == 1

    dying = Stream.open(url)
    dying.store.observer = crash
    with pytest.raises(RuntimeError):
        dying.compact(full=True, target="64KB")
    Stream.open(url).vacuum(grace_ms=0, orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    after = Stream.open(url)
    assert sorted(after.read()["id"].to_pylist()) == [b * 10 + i for b in range(6) for i in range(3)]
    report = after.verify()
    assert report.ok, report.summary()


def test_orphan_cleanup_keeps_the_macro_chunks_of_a_map_version_whose_commit_is_to_come() -> None:
    """A compaction publishes the map's next version and is slow to commit it; a rival merges
    its macro-chunk with newer chunks, publishes the version after and dies before its journal
    commit. Orphan cleanup took the macro-chunks live from the newest version and the versions
    the state names only, so it deleted the first one's macro-chunk (older than the orphan
    grace; its map version is not), which that compaction's commit then named: its records were
    lost (the map version the state names lists a missing file)."""
    url = _url()
    s = Stream.create(url, segments=1)

    fired: list[str] = []

    def meanwhile(op: str, rel: str) -> None:  # the slow compaction's map version is published
        if op == "put_if_absent" and rel.startswith("_tstream/journal/") and not fired:
            fired.append(rel)
            for b in range(3, 6):
                append_batch(s, b)
            rival = Stream.open(url)
            rival.store.observer = crash
            with pytest.raises(RuntimeError):
                rival.compact(full=True, target="64KB")
            maps_aged(Stream.open(url)).vacuum(grace_ms=0, orphans=True, orphan_grace_ms=3_600_000)

    for b in range(3):
        append_batch(s, b)
    slow = Stream.open(url)
    slow.store.observer = meanwhile
    assert slow.compact(full=True, target="64KB").macros == 1
    slow.store.observer = None
    assert fired
    after = Stream.open(url)
    assert sorted(after.read()["id"].to_pylist()) == [b * 10 + i for b in range(6) for i in range(3)]
    report = after.verify()
    assert report.ok, report.summary()
    after.vacuum(grace_ms=0, orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    assert sorted(Stream.open(url).read()["id"].to_pylist()) == [b * 10 + i for b in range(6) for i in range(3)]


def test_orphan_cleanup_keeps_uncommitted_map_versions_for_the_orphan_grace_only() -> None:
    """Versions newer than the one the state names are kept for the orphan grace, like any file
    of a commit that may be in flight; past it, the macro-chunks that only such versions list
    are orphans (the newest version, which the next compaction adopts, holds their records)."""
    url = _url()
    s = Stream.create(url, segments=1)

    made: list[set[str]] = []
    for run in range(3):  # each run merges the last one's macro-chunk with newer chunks, then dies
        for b in range(run * 3, run * 3 + 3):
            append_batch(s, b)
        dying = Stream.open(url)
        dying.store.observer = crash
        with pytest.raises(RuntimeError):
            dying.compact(full=True, target="64KB")
        made.append({m.path for m in MacroMap(s.store).latest(0, 0).macros})
    older = made[0] | made[1]
    assert len(made[2]) == 1 and not made[2] & older

    def vacuum(grace_ms: int) -> int:
        done = maps_aged(Stream.open(url)).vacuum(grace_ms=0, orphans=True, orphan_grace_ms=grace_ms,
                                                  unsafe_orphan_grace=True)
        return done.orphans

    vacuum(3_600_000)
    assert all(s.store.exists(p) for p in older | made[2])
    vacuum(0)
    assert not any(s.store.exists(p) for p in older) and all(s.store.exists(p) for p in made[2])
    Stream.open(url).compact(full=True, target="64KB")  # adopts the newest version's macro-chunk
    Stream.open(url).vacuum(grace_ms=0, orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    after = Stream.open(url)
    assert sorted(after.read()["id"].to_pylist()) == [b * 10 + i for b in range(9) for i in range(3)]
    report = after.verify()
    assert report.ok, report.summary()


def test_a_settled_request_keeps_its_files_while_a_fold_after_writer_expiry_may_name_them() -> None:
    """A writer lost its journal race, published its request, lost again to another commit of
    its own (writer, batch), then found the batch committed and deleted that attempt's files.
    The request stayed foldable for ``FOLD_WINDOW`` positions, kept out of folds only by the
    writer's dedupe window; once the writer expired, another writer's next commit folded it and
    the journal named the deleted files. Now the files stay: the fold appends the batch again,
    the documented consequence of a replay after expiry, and nothing is lost."""
    import time

    from pyspark_tstream.write.group import CONTENDED_COMMITS

    url = _url()
    Stream.create(url, segments=1, writer_retention_ms=50)
    a = Stream.open(url)
    batch = pa.table({"id": [1, 2], "key": ["a", "b"]}, schema=SCHEMA)
    raced = []

    def race(op: str, rel: str) -> None:
        if op != "put_if_absent" or not rel.startswith("_tstream/journal/") or len(raced) == 2:
            return
        raced.append(rel)
        if len(raced) == 1:  # another writer lands first: the request is published
            Stream.open(url).append(pa.table({"id": [0], "key": ["z"]}, schema=SCHEMA), key="key", writer_id="y")
        else:  # a twin of the writer (a zombie task, a restarted driver) lands the batch
            Stream.open(url).append(batch, key="key", writer_id="w", batch_id=1)

    a.store.observer = race
    assert a.append(batch, key="key", writer_id="w", batch_id=1).duplicate
    assert len(raced) == 2 and a.store.list("_tstream/requests")
    time.sleep(0.1)  # the writer falls silent past its retention
    x = Stream.open(url)
    x.append(pa.table({"id": [3], "key": ["c"]}, schema=SCHEMA), key="key", writer_id="x", batch_id=0)
    assert "w" not in x.state.writers
    x.appending.group.contended = CONTENDED_COMMITS  # it lists the published requests, and folds them
    x.append(pa.table({"id": [4], "key": ["d"]}, schema=SCHEMA), key="key", writer_id="x", batch_id=1)
    after = Stream.open(url)
    assert sorted(after.read()["id"].to_pylist()) == [0, 1, 1, 2, 2, 3, 4]
    report = after.verify()
    assert report.ok, report.summary()


def test_a_folded_request_older_than_its_writers_last_commit_moves_its_wall_never_back() -> None:
    """A commit that folded its writer's own new batch and a stale published request of the same
    writer set the writer's wall to the request's time, before its commits since: with a short
    ``writerRetentionMs`` the writer was dropped in the entry that had just committed its batch
    (its dedupe window with it), and a lease could end early the same way."""
    from pyspark_tstream.write.commit import CommitIntent, CommitRequest

    url = _url()
    s = Stream.create(url, segments=1, writer_retention_ms=1_000)
    s.append(pa.table({"id": [1], "key": ["a"]}, schema=SCHEMA), key="key", writer_id="w", batch_id=1)
    last = s.state.writers["w"].wall
    stale = CommitRequest(intent=CommitIntent(writer_id="w", batch_id=0), now=last - 5_000)
    out = s.journal.attempt(stale, s.state)
    assert isinstance(out, Committed)
    entry, after = out.entry, out.state
    assert entry is not None
    assert "w" in after.writers, "the writer that committed at its wall was dropped as expired"
    assert after.writers["w"].wall == last
    assert after.writers["w"].find(1) is not None


def test_collecting_entries_keeps_those_the_open_index_node_still_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """``checkpoints`` seed 205,476: a truncation up to the newest entries, then vacuums, collected
    entries of the open level-0 index node; the commit that filled the node copies their deltas
    into it, so it and every later commit failed (no such object). Entries the open node needs stay."""
    import pyspark_tstream.journal.checkpoint as checkpoint
    from pyspark_tstream.journal.timeindex import FANOUT
    from pyspark_tstream.store import layout

    # checkpoints every few entries, as large entries (many writers or segments changed) make
    # them by the size rule: the checkpoint GC may collect up to is then near the newest entry
    monkeypatch.setattr(checkpoint, "MAX_ENTRIES", 4)
    monkeypatch.setattr(checkpoint, "MIN_BYTES", 1024)
    s = Stream.create(_url(), segments=1)

    def append(n: int) -> None:
        for _ in range(n):
            s.append(pa.table({"k": ["a"], "t": [now_ms()]}), key="k", timestamp="t")

    append(FANOUT + 5)  # one node written, the next one open
    open_first = s.refresh().index[0][0].id
    s.truncate(before=now_ms() + 60_000)  # every record: the head moves past the newest entry
    for _ in range(3):
        s.vacuum(grace_ms=0)
    state = s.refresh()
    assert all(s.store.exists(layout.entry(p)) for p in range(open_first, state.pos + 1))
    append(FANOUT)  # fills the open node: its entries are read
    assert s.refresh().pos >= state.pos + FANOUT  # (and automatic compaction commits)
    s.truncate(before=now_ms() + 120_000)
    for _ in range(3):
        s.vacuum(grace_ms=0)
    assert s.refresh().meta_gc_pos > open_first  # once the node is written, its entries go
    append(3)
    assert s.verify().ok


def test_a_writer_behind_the_node_it_would_fill_loses_its_race_though_the_node_s_entries_are_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``checkpoints`` seed 903,683: a writer's state was one entry short of filling a level-0
    index node; meanwhile another commit filled it and vacuum collected the node's entries. The
    writer's attempt at the taken slot copied their deltas into the node first and failed with
    no such object, so its append failed. An attempt at a slot whose node's entries are gone
    is an attempt at a taken slot: it loses the race to the entry there and commits after it."""
    import time

    import pyspark_tstream.journal.checkpoint as checkpoint
    from pyspark_tstream.journal.timeindex import FANOUT
    from pyspark_tstream.store import layout

    monkeypatch.setattr(checkpoint, "MAX_ENTRIES", 4)
    monkeypatch.setattr(checkpoint, "MIN_BYTES", 1024)
    url = _url()
    s = Stream.create(url, segments=1, compaction="off")  # only these appends commit

    def append(on: Stream, n: int) -> None:
        for _ in range(n):
            on.append(pa.table({"k": ["a"], "t": [now_ms()]}), key="k", timestamp="t")

    append(s, 8)
    s.truncate(before=now_ms() + 1)  # early in the first node: what GC may collect lies there
    time.sleep(0.01)
    append(s, FANOUT - 1 - s.refresh().pos)
    behind = Stream.open(url)  # its next attempt would fill the first node
    assert behind.state.pos == FANOUT - 1 and len(behind.state.index[0]) == FANOUT
    append(s, 6)  # the node is written, and checkpoints past it
    for _ in range(3):
        s.vacuum(grace_ms=0)
    assert not s.store.exists(layout.entry(1))  # the first node's entries are collected
    ack = behind.append(pa.table({"k": ["b"], "t": [now_ms()]}), key="k", timestamp="t")
    assert ack.pos == s.refresh().pos and not ack.duplicate
    after = Stream.open(url)
    kept = sum(e.op == "append" for e in after.journal.log.read_entries(range(10, after.state.pos)))
    assert after.read()["k"].to_pylist() == ["a"] * kept + ["b"]  # the truncation took the first 8
    report = after.verify()
    assert report.ok, report.summary()
