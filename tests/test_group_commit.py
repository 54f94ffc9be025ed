"""Group commit: a commit's critical path, folding published requests exactly once."""

from __future__ import annotations

import json
import threading

import pytest
from conftest import CallLog
from group_requests import counts as _counts
from group_requests import exists as _exists
from group_requests import in_threads as _in_threads
from group_requests import publish as _publish
from group_requests import rows as _rows
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import UnsupportedFormatError
from pyspark_tstream.journal import entries, seal
from pyspark_tstream.journal.entries import Entry
from pyspark_tstream.journal.state import FOLD_WINDOW
from pyspark_tstream.store import layout
from pyspark_tstream.timestamps import now_ms
from pyspark_tstream.write import group as group_mod
from pyspark_tstream.write.commit import CommitIntent, CommitRequest
from pyspark_tstream.write.group import CONTENDED_COMMITS, CROWD, PATIENCE, GroupCommit, Part, Published, new_id
from pyspark_tstream.write.writing import write_batches


def test_a_single_writers_commit_is_its_data_put_and_one_conditional_create(url: str) -> None:
    """On an object store the head hint, the listing of others' requests and the check that no
    entry lies past the commit's slot (journal/holes.py) leave the critical path: the committing
    thread makes only the data write(s) and one conditional create."""
    s = Stream.create(url, segments=2)
    s.append(_rows("w", 0), writer_id="w", batch_id=0)
    s.context.journal.hints.background = True  # the product default off memory:// (conftest asks for in line)
    s.appending.group.background = True
    caller = threading.get_ident()
    mine: list[tuple[str, str]] = []
    others: list[tuple[str, str]] = []
    s.store.observer = lambda op, rel: (mine if threading.get_ident() == caller else others).append((op, rel))
    for b in range(1, 5):  # away from the index flush every 32 positions
        mine.clear()
        others.clear()
        ack = s.append(_rows("w", b), writer_id="w", batch_id=b)
        assert ack.rows == 10 and not ack.duplicate
        ops = [op for op, _ in mine]
        assert ops[-1] == "put_if_absent" and set(ops[:-1]) <= {"open_output", "write"}, mine
        assert len(ops) == 2, mine  # one data file (all segments' slices) + the create: 2 round trips
        assert ("read_many", f"{layout.entry(ack.pos - 1)} (+3)") in others, others  # beside the data write
    s.context.journal.hints.settle()
    assert Stream.open(url).state.pos == s.state.pos


def test_compaction_due_after_an_append_runs_off_its_critical_path(url: str) -> None:
    """On an object store, an append at which compaction is due still makes only its data write
    and one conditional create on the caller's thread (in line, compaction cost a lone writer's
    commit p99 ~1 s at 30 ms a request); the compaction lands in the background, and the
    caller's next appends commit on top of it."""
    s = Stream.create(url, segments=1, compaction="min=4")
    s.context.journal.hints.background = True  # the product default off memory:// (conftest asks for in line)
    s.appending.group.background = True
    s.upkeep.inline = False  # the product's default (conftest asks for in line)
    caller = threading.get_ident()
    mine: list[tuple[str, str]] = []
    s.store.observer = lambda op, rel: mine.append((op, rel)) if threading.get_ident() == caller else None
    sent = 0
    while s.state.pos + 1 < 3 * 16:  # up to a compaction check (every 16) away from an index flush (32)
        s.append(_rows("w", sent), writer_id="w", batch_id=sent)
        sent += 1
        s.upkeep.settle(60)  # (the checks at 16 and 32 run in the background too: let them land)
    ran = threading.Event()
    release = threading.Event()
    import pyspark_tstream.api.upkeep as upkeep_mod

    real = upkeep_mod.compact

    def held(*a: object, **kw: object) -> object:
        ran.set()
        assert release.wait(30), "the test never released the compaction"
        return real(*a, **kw)

    upkeep_mod.compact = held
    try:
        mine.clear()
        ack = s.append(_rows("w", 999), writer_id="w", batch_id=999)  # at position 48: compaction due
        assert ack.pos % 16 == 0
        assert [op for op, _ in mine][-1] == "put_if_absent" and len(mine) == 2, mine
        assert ran.wait(30), "the due compaction never started"
        assert not release.is_set()  # the append returned while the compaction was held
        s.append(_rows("w", 1000), writer_id="w", batch_id=1000)  # the caller goes on meanwhile
        release.set()
        s.upkeep.settle(60)
    finally:
        upkeep_mod.compact = real
        release.set()
    s.context.journal.hints.settle()
    after = Stream.open(url)
    assert any(e.op == "compact" for e in (after.journal.read_entry(p) for p in range(ack.pos, after.state.pos + 1)))
    assert sum(_counts(after).values()) == 10 * (sent + 2)  # every append once
    s.append(_rows("w", 1001), writer_id="w", batch_id=1001)  # on top of the background's commit
    assert Stream.open(url).state.pos == s.state.pos


def test_a_lone_writers_index_flush_reads_no_entry_back(url: str) -> None:
    """The level-1 index node written every 32 positions holds the deltas of its 32 entries; a
    writer that committed them (or read them) keeps their stored bytes, so the flush reads
    nothing back (it was a batched GET of 32 entries on the commit's critical path), and the
    node is the one fsck rebuilds from the journal."""
    Stream.create(url, segments=2, compaction="off")
    s = Stream.open(url)  # a producer's handle: it read the create's entry (the head hint)
    batch = 0
    while s.state.pos + 1 < 32:
        s.append(_rows("w", batch), writer_id="w", batch_id=batch)
        batch += 1
    calls: list[tuple[str, str]] = []
    s.store.observer = lambda op, rel: calls.append((op, rel))
    ack = s.append(_rows("w", batch), writer_id="w", batch_id=batch)
    assert ack.pos == 32
    # no entry read back: the one batched read is of what lies around the commit's slot (the
    # slot, the entries before and after it, the head hint: journal/holes.py), not the node's
    assert [c for c in calls if c[0].startswith("read")] == [("read_many", f"{layout.entry(31)} (+3)")], calls
    assert [rel for op, rel in calls if op == "write" and rel.startswith("_tstream/index/")], calls
    assert Stream.open(url).verify().ok


def test_a_writer_far_behind_publishes_its_request_near_the_head(url: str) -> None:
    """A writer learns one entry per lost race; one far behind must not publish its request
    with its stale position as base, or writers at the head (more than FOLD_WINDOW ahead) can
    never fold it and it waits out the window, race after race (at 4 writers one made 9
    commits in 15 s). At its first loss it reads the head: the base is the head's position."""
    s = Stream.create(url, segments=2)
    behind = Stream.open(url)  # a handle that saw position 0 only
    for b in range(FOLD_WINDOW + 4):
        s.append(_rows("ahead", b), writer_id="ahead", batch_id=b)
    head = s.state.pos
    published: list[int] = []

    def watch(op: str, rel: str) -> None:
        parsed = layout.request_name(rel.rsplit("/", 1)[-1]) if rel.startswith(layout.REQUESTS) else None
        if op == "write" and parsed is not None:
            published.append(parsed[0])

    behind.store.observer = watch
    ack = behind.append(_rows("behind", 0), writer_id="behind", batch_id=0)
    assert published and published[0] >= head, (published, head)
    assert ack.pos == head + 1 and not ack.duplicate
    assert _counts(Stream.open(url))[("behind", 0)] == 10


def test_a_published_request_is_folded_by_the_next_winner_and_acknowledged(url: str) -> None:
    s = Stream.create(url, segments=2)
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    b = Stream.open(url)
    item = _publish(b, "b", 0)
    s.appending.group.contended = 1  # a writer that lost lately lists before its attempt
    s.append(_rows("a", 1), writer_id="a", batch_id=1)
    entry = s.journal.read_entry(s.state.pos)
    assert [(f.rid, f.writer, f.batch) for f in entry.folds] == [(entry.folds[0].rid, "a", 1), (item.rid, "b", 0)]
    assert entry.state.was_folded(item.rid) == entry.pos
    # b's writer (its process went on) is acknowledged by that entry, not by a commit of its own
    own = Part(item.rid, item.request(None), item.base)
    done = b.appending.group.commit(own.req, b.state, own=own)
    part, created = done.entry, done.created
    assert not created and part is not None and part.pos == entry.pos and part.writer == "b"
    assert sum(c.rows for c in part.chunks) == 10
    assert _counts(s) == {("a", 0): 10, ("a", 1): 10, ("b", 0): 10}


def test_a_writer_that_gave_up_after_publishing_is_committed_once(url: str) -> None:
    """Its request is folded later; its retry with the same (writer, batch) is then a no-op."""
    s = Stream.create(url, segments=2)
    _publish(Stream.open(url), "quitter", 7)
    s.appending.group.contended = 1
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    retry = Stream.open(url).append(_rows("quitter", 7), writer_id="quitter", batch_id=7)
    assert retry.duplicate
    assert _counts(s) == {("a", 0): 10, ("quitter", 7): 10}


def test_a_request_is_never_folded_twice(url: str) -> None:
    """Two combiners that both listed a request: the second finds it in the state's window."""
    s = Stream.create(url)
    item = _publish(Stream.open(url), "b", 0)
    for w in ("a", "c"):
        h = Stream.open(url)
        h.appending.group.contended = 1
        h.append(_rows(w, 0), writer_id=w, batch_id=0)
    assert _counts(s) == {("a", 0): 10, ("b", 0): 10, ("c", 0): 10}
    folds = [f.rid for e in s.journal.log.read_entries(range(1, s.refresh().pos + 1)) for f in e.folds]
    assert folds.count(item.rid) == 1


def test_an_anonymous_request_is_folded_once_by_its_id_alone(url: str) -> None:
    s = Stream.create(url)
    table = _rows("anon", 0)
    chunks = write_batches(s.appending.write_spec(table.schema), [table], ordered=True)
    req = CommitRequest(chunks=chunks, intent=CommitIntent(schema=table.schema), now=now_ms())
    item = Published.of(new_id(), s.state.pos, req)
    s.store.write(item.path, item.encode())
    for w in ("a", "c"):
        h = Stream.open(url)
        h.appending.group.contended = 1
        h.append(_rows(w, 0), writer_id=w, batch_id=0)
    own = Part(item.rid, item.request(None), item.base)
    done = Stream.open(url).appending.group.commit(own.req, s.refresh(), own=own)
    part, created = done.entry, done.created
    assert not created and part is not None
    assert _counts(s) == {("a", 0): 10, ("anon", 0): 10, ("c", 0): 10}


def test_a_request_past_its_window_is_not_folded_and_its_writer_commits_it(url: str) -> None:
    s = Stream.create(url)
    item = _publish(Stream.open(url), "late", 0)
    for i in range(FOLD_WINDOW + 1):
        s.append(_rows("a", i), writer_id="a", batch_id=i)  # never lists: nobody folds "late"
    h = Stream.open(url)
    h.appending.group.contended = 1
    h.append(_rows("c", 0), writer_id="c", batch_id=0)  # lists it, but too late to fold it
    assert ("late", 0) not in _counts(s)
    own = Part(item.rid, item.request(None), item.base)
    done = Stream.open(url).appending.group.commit(own.req, s.refresh(), own=own)
    part, created = done.entry, done.created
    assert created and part is not None and part.writer == "late"
    assert _counts(s)[("late", 0)] == 10


def test_concurrent_writers_fold_and_lose_nothing(url: str) -> None:
    s0 = Stream.create(url, segments=3)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            s = Stream.open(url)
            for b in range(8):
                s.append(_rows(f"w{t}", b), writer_id=f"w{t}", batch_id=b)
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    _in_threads(work, 12)
    assert not errors, errors
    assert _counts(s0) == {(f"w{t}", b): 10 for t in range(12) for b in range(8)}


def test_crash_at_every_store_call_of_a_folding_commit(url: str) -> None:
    """A crash at each store call of a commit that folds another writer's request; then both
    writers retry: every batch exactly once."""
    probe = Stream.create(url + "-probe")
    _publish(Stream.open(url + "-probe"), "b", 0)
    log = CallLog()
    probe.appending.group.contended = 1
    probe.store.observer = log
    probe.append(_rows("a", 0), writer_id="a", batch_id=0)
    total = log.count()
    assert total >= 4  # the listing, the request read, the data, the create
    for k in range(1, total + 1):
        u = f"{url}-{k}"
        s = Stream.create(u)
        _publish(Stream.open(u), "b", 0)
        s.appending.group.contended = 1
        crash = CallLog()
        crash.fail_at = k
        s.store.observer = crash
        try:
            s.append(_rows("a", 0), writer_id="a", batch_id=0)
            op, rel = crash.calls[k - 1]  # the commit stood: only best-effort work failed
            assert rel == layout.HEAD or (op == "delete" and rel.startswith(layout.REQUESTS)), crash.calls[k - 1]
        except RuntimeError as e:
            assert "injected crash" in str(e)
        s.store.observer = None
        for w in ("a", "b"):
            Stream.open(u).append(_rows(w, 0), writer_id=w, batch_id=0)
        assert _counts(Stream.open(u)) == {("a", 0): 10, ("b", 0): 10}, f"crash at call {k}"


def test_a_folding_entry_round_trips_and_version_2_entries_still_read(url: str) -> None:
    s = Stream.create(url)
    _publish(Stream.open(url), "b", 0)
    s.appending.group.contended = 1
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    entry = s.journal.read_entry(s.state.pos)
    base = s.journal.read_entry(s.state.pos - 1).state
    assert entry.folds and Entry.decode(entry.encode(), path="x", base=base).folds == entry.folds
    # an entry as format 2 wrote it (no folds, no state.folded) reads and appends unchanged
    u2 = url + "-v2"
    s2 = Stream.create(u2)
    s2.append(_rows("a", 0), writer_id="a", batch_id=0)
    whole = s2.journal.read_entry(1)
    whole.change = None  # stored with its whole state, as format 2 stored every entry
    raw = seal.unseal(whole.encode())
    raw["v"] = 2
    raw["state"].pop("checkpoint")
    raw["state"].pop("features")  # format 2 had no declared features (nor checksums)
    s2.store.write(layout.entry(1), json.dumps(raw).encode())
    s2.store.write(layout.HEAD, json.dumps(raw).encode())
    again = Stream.open(u2)
    again.append(_rows("a", 1), writer_id="a", batch_id=1)
    assert _counts(again) == {("a", 0): 10, ("a", 1): 10}


def test_a_newer_format_is_refused(url: str) -> None:
    s = Stream.create(url)
    s.append(_rows("a", 0))
    raw = seal.unseal(s.store.read(layout.entry(1)))
    raw["v"] = entries.FORMAT_VERSION + 1
    with pytest.raises(UnsupportedFormatError):
        Entry.decode(seal.seal(raw), path="x")  # sealed as the newer build would


def test_a_damaged_request_is_skipped_never_folded(url: str) -> None:
    s = Stream.create(url)
    s.store.write(layout.commit_request(0, "deadbeef00000000"), b"{not json")
    s.appending.group.contended = 1
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    assert _counts(s) == {("a", 0): 10}
    assert GroupCommit(s.journal)._discover(None, s.state) == []


class _SlowDownProxy:
    """S3's behaviour on one key: above ``limit`` conditional writes a second, 503 SlowDown."""

    def __init__(self, upstream: str, limit: int) -> None:
        import time

        from s3servers import FaultProxy

        outer = self

        class Proxy(FaultProxy):
            def _next(self, method: str, path: str) -> str:
                if method == "PUT" and "/_tstream/journal/" in path:
                    with self._lock:
                        second = int(time.monotonic())
                        n = outer.seen.get((path, second), 0) + 1
                        outer.seen[(path, second)] = n
                        if n > limit:
                            outer.refused += 1
                            return "503"
                return super()._next(method, path)

        self.seen: dict[tuple[str, int], int] = {}
        self.refused = 0
        self.proxy = Proxy(upstream).start()


@pytest.mark.s3
def test_slowdown_on_the_contended_slot_fails_no_writer(moto_server: str) -> None:
    """Writers racing for one journal key past S3's per-key rate get 503 SlowDown; the store
    retries them, group commit folds the losers, and every batch lands exactly once."""
    import uuid

    from pyspark_tstream.store.failures import RetryPolicy
    from s3servers import BUCKET, s3_storage_options

    slow = _SlowDownProxy(moto_server, limit=2)
    try:
        url = f"s3://{BUCKET}/slowdown-{uuid.uuid4().hex[:8]}/stream"
        opts = s3_storage_options(slow.proxy.endpoint)
        Stream.create(url, storage_options=opts)
        errors: list[BaseException] = []

        def work(t: int) -> None:
            try:
                s = Stream.open(url, opts, retry=RetryPolicy(attempts=8))
                for b in range(4):
                    s.append(_rows(f"w{t}", b), writer_id=f"w{t}", batch_id=b)
                s.context.journal.hints.settle()
            except BaseException as e:  # noqa: BLE001 - surfaced below
                errors.append(e)

        _in_threads(work, 6)
        assert not errors, errors
        assert slow.refused > 0  # the limit was reached: writers met SlowDown and did not fail
        assert _counts(Stream.open(url, opts)) == {(f"w{t}", b): 10 for t in range(6) for b in range(4)}
    finally:
        slow.proxy.stop()


# -- vacuum: request objects left behind, and the chunks a pending request names ----------------
def test_vacuum_never_deletes_the_chunks_of_a_request_still_pending(url: str) -> None:
    """Orphan cleanup with no grace between a request's publication and its fold: its chunks
    are named by no entry yet, but by the request, so they stay and the fold reads them."""
    s = Stream.create(url, segments=2)
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    item = _publish(Stream.open(url), "b", 0)
    counts = Stream.open(url).vacuum(grace_ms=0, orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    assert counts.orphans == 0 and counts.requests == 0
    assert all(_exists(s, c.path) for c in item.chunks) and _exists(s, item.path)
    s.appending.group.contended = 1
    s.append(_rows("a", 1), writer_id="a", batch_id=1)
    assert s.journal.read_entry(s.state.pos).state.was_folded(item.rid) == s.state.pos
    assert _counts(s) == {("a", 0): 10, ("a", 1): 10, ("b", 0): 10}


def test_vacuum_between_a_combiners_listing_and_its_fold_breaks_nothing(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The combiner has read the request and is about to fold it when a vacuum runs. The
    request is past the orphan grace (its writer published it long ago), the combiner's own
    chunk is not (an uncommitted chunk inside the grace is any writer's, not group commit's)."""
    s = Stream.create(url)
    item = _publish(Stream.open(url), "b", 0)
    seen: list[dict[str, int]] = []
    discover = GroupCommit._discover
    vac = Stream.open(url)
    modified = vac.store.modified_ms
    old = {c.path for c in item.chunks} | {item.path}
    monkeypatch.setattr(vac.store, "modified_ms", lambda rel: 0 if rel in old else modified(rel))

    def discover_then_vacuum(self: GroupCommit, own: Part | None, state: object) -> list[Published]:
        found = discover(self, own, state)  # type: ignore[arg-type]
        if found and not seen:
            seen.append(vac.vacuum(grace_ms=0, orphans=True, orphan_grace_ms=60_000, unsafe_orphan_grace=True))
        return found

    monkeypatch.setattr(GroupCommit, "_discover", discover_then_vacuum)
    s.appending.group.contended = 1
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    assert seen and seen[0].orphans == 0 and seen[0].requests == 0
    assert s.journal.read_entry(s.state.pos).state.was_folded(item.rid) == s.state.pos
    assert _counts(Stream.open(url)) == {("a", 0): 10, ("b", 0): 10}


def test_vacuum_collects_crashed_writers_requests_after_their_window_and_grace(url: str) -> None:
    """A request whose writer vanished stays until no slot can fold it and the grace passed,
    folded or not; an unfolded one's chunks are then ordinary orphans."""
    s = Stream.create(url, segments=2)
    folded = _publish(Stream.open(url), "folded", 0)
    s.appending.group.contended = 1
    s.append(_rows("a", 0), writer_id="a", batch_id=0)  # folds it, and deletes its object
    assert s.state.was_folded(folded.rid) == s.state.pos and not _exists(s, folded.path)
    s.store.write(folded.path, folded.encode())  # as if the folder had died before that delete
    s.appending.group.contended = 0  # a folder lists for a while: this one no more
    lost = _publish(Stream.open(url), "lost", 0)  # nobody lists again: never folded
    for i in range(1, FOLD_WINDOW):
        s.append(_rows("a", i), writer_id="a", batch_id=i)
    # folded's window (base 0) has closed; lost (base 1) may still be folded at the next slot
    assert s.state.pos == folded.base + FOLD_WINDOW == lost.base + FOLD_WINDOW - 1
    assert Stream.open(url).vacuum(grace_ms=3_600_000).requests == 0  # within the grace
    assert _exists(s, folded.path)
    counts = Stream.open(url).vacuum(grace_ms=0, orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    assert counts.requests == 1 and counts.orphans == 0
    assert not _exists(s, folded.path) and _exists(s, lost.path)
    assert all(_exists(s, c.path) for c in lost.chunks)
    s.append(_rows("a", FOLD_WINDOW), writer_id="a", batch_id=FOLD_WINDOW)  # lost's window closes
    counts = Stream.open(url).vacuum(grace_ms=0, orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    lost_files = {c.path for c in lost.chunks}
    assert counts.requests == 1 and counts.orphans == len(lost_files)
    assert not _exists(s, lost.path) and not any(_exists(s, p) for p in lost_files)
    assert not s.store.list(layout.REQUESTS)
    assert _counts(Stream.open(url)) == {**{("a", i): 10 for i in range(FOLD_WINDOW + 1)}, ("folded", 0): 10}


def test_a_folding_entry_s_delta_is_its_stored_form(url: str) -> None:
    """An entry's delta (what index nodes keep and fsck compares with them) holds its folds as
    the stored lists, not as the ``Fold`` records a decoded entry reads by name: a node written
    with a folding entry must equal the one fsck rebuilds from the journal."""
    from pyspark_tstream.journal.entries import Entry, Fold

    s = Stream.create(url, segments=1)
    s.append([{"v": 1}])
    entry = s.journal.read_entry(1)
    folded = Entry(pos=entry.pos, op=entry.op, wall=entry.wall, state=entry.state, chunks=entry.chunks,
                   folds=[Fold("r1", "a", 1, len(entry.chunks), {})])
    stored = json.loads(json.dumps(folded.delta_json()))
    assert folded.delta_json() == stored
    back = Entry.decode(folded.encode(), path="x")
    assert back.folds == [Fold("r1", "a", 1, len(entry.chunks), {})] and back.folds[0].writer == "a"
    assert back.delta_json() == stored


def _crowded(url: str) -> tuple[Stream, list[tuple[str, str]]]:
    """A handle whose writer met a crowd lately (it publishes first), and its store calls."""
    b = Stream.open(url)
    b.appending.group.contended, b.appending.group.crowd = CONTENDED_COMMITS, CROWD
    calls: list[tuple[str, str]] = []
    b.store.observer = lambda op, rel: calls.append((op, rel))
    return b, calls


def test_a_crowded_writer_publishes_first_and_the_leader_s_fold_acknowledges_it(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer with a crowd pending publishes its request before any create; an older request
    is pending, so it waits, polling the next entry, and the leader's entry (which folds both)
    acknowledges it: it made no conditional create, and the leader deleted its request."""
    monkeypatch.setattr(group_mod, "POLL_MIN_S", 0.5)  # patience of seconds: the leader runs in this thread
    s = Stream.create(url, segments=2)
    old = _publish(Stream.open(url), "old", 0)  # base 0: older than anything published after the next commit
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    b, calls = _crowded(url)
    acks = {}
    waiter = threading.Thread(target=lambda: acks.update(b=b.append(_rows("b", 0), writer_id="b", batch_id=0)))
    waiter.start()
    for _ in range(500):
        if len(s.store.list(layout.REQUESTS)) == 2:
            break
        threading.Event().wait(0.01)
    s.appending.group.contended = CONTENDED_COMMITS  # the leader lists and folds both
    s.append(_rows("a", 1), writer_id="a", batch_id=1)
    waiter.join(30)
    assert acks["b"].pos == s.state.pos and not acks["b"].duplicate
    assert not [rel for op, rel in calls if op == "put_if_absent"], calls
    assert s.state.was_folded(old.rid) == s.state.pos
    assert not s.store.list(layout.REQUESTS)  # both deleted by the writer whose entry folded them
    assert _counts(Stream.open(url)) == {("old", 0): 10, ("a", 0): 10, ("a", 1): 10, ("b", 0): 10}


def test_a_waiter_whose_leader_died_races_once_out_of_patience(url: str) -> None:
    """The oldest request's writer died: a crowded writer polls the next entry PATIENCE times,
    then races with the requests it has read (none: reading every other's request at each
    waiter's race was what collapsed 64 writers), so the dead one's request is left to vacuum."""
    s = Stream.create(url, segments=2)
    old = _publish(Stream.open(url), "old", 0)
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    b, calls = _crowded(url)
    ack = b.append(_rows("b", 0), writer_id="b", batch_id=0)
    assert ack.pos == 2 and not ack.duplicate
    polls = [rel for op, rel in calls if op == "read" and rel == layout.entry(2)]
    assert len(polls) == PATIENCE
    # no request read at all, batched or not (a batched call is labelled by its first object only)
    assert not [(op, rel) for op, rel in calls if op.startswith("read") and rel.startswith(layout.REQUESTS)], calls
    assert Stream.open(url).state.was_folded(old.rid) is None
    assert _counts(Stream.open(url)) == {("a", 0): 10, ("b", 0): 10}
