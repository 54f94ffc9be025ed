"""Group commit: concurrent writers share journal slots (flat combining over an object store).

One job: commit a data request so that acknowledged commits per second grow with writers while
conditional creates stay at about one per round trip (docs/design.md §7.27). Every journal slot
is a conditional create on one key; with N writers racing for it one wins, and without
folding N − 1 would re-read and race again, one slot at a time. Here a writer's request goes straight for the next
slot (its critical path: the data PUTs, then one create). Only a writer that lost publishes its
request as an immutable object (:func:`~pyspark_tstream.store.layout.commit_request`: chunk
list, writer, batch, base position); whoever wins a slot folds in every published request it
has listed, as if each had committed in turn (:func:`fold`). After publishing, the writer of
the oldest request it lists leads: it lists again, reads the requests and races for the next
slot; the others wait, reading the next entry once a round trip, and are acknowledged by the
entry that folds them (a waiter out of :data:`PATIENCE` races with the requests it has read:
its leader died or lags). A writer contended lately, with :data:`CROWD` others' requests
pending at its last listing, publishes first instead of racing first: in a crowd racing first
loses most times, and every loser pays a create, a read of the winner, a listing and a read of
each request it had not seen. :meth:`GroupCommit.commit` is a small state machine
(:class:`Phase`, :data:`TRANSITIONS`); its tuned constants are one table below, whose figures
are in docs/performance.md.

Invariants kept:

* a request is folded at most once, whatever its writer does (crashes, retries, gives up): a
  published request with base ``b`` may be folded only at positions ``(b, b + FOLD_WINDOW]``,
  and every state remembers the ids folded in its last ``FOLD_WINDOW`` positions
  (``StreamState.folded``), which covers all of ``(b, p − 1]`` for any slot ``p`` it may take;
  a (writer, batch) is also deduplicated as for any commit (``CommitRequest.settled``), so a
  retry with the same ids after a fold is a no-op;
* a request is published only after its chunks are durable (the writer wrote them before
  committing), so a combiner never names a missing file;
* folding is the composition of sequential commits (``CommitRequest.__call__`` applied in
  order on one state): lanes, the tick, dense ``_seq`` and dedupe hold exactly as if each had
  its own entry;
* a request that cannot be applied on the state (its segment was sealed by a scale, its schema
  does not fit) is left out by a combiner, never failed: its own writer meets the error;
* request objects are deleted by the writer whose entry folded them, in one call (in the
  background) and, when that writer died first, by ``vacuum`` from their names alone once
  their window has passed
  (:mod:`~pyspark_tstream.write.requests`, which also keeps their chunks from orphan cleanup).

Costs (store calls): an uncontended commit 1 conditional create; a lost race 1 read of the
winner, 1 request PUT (once) beside 1 listing; then a leader 1 listing, 1 batched read of the
requests not yet seen and 1 create per attempt, a waiter 1 read per poll and 1 listing per
entry that did not fold it. Each attempt also reads what lies around its slot
(:mod:`~pyspark_tstream.journal.holes`), beside the data upload, the publish and listing or the
waiter's listing where the slot is known before them, else just before the create.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

from ..errors import CommitConflictError, corrupt
from ..journal import outcome
from ..journal.entries import Entry
from ..journal.features import checksummed
from ..journal.journal import Journal
from ..journal.state import FOLD_WINDOW, StreamState
from ..store import layout
from ..store.races import MAX_ATTEMPTS
from .commit import CommitRequest, CountRaised
from .fold import FOLD_MAX, Part, Published, fold, new_id, publishable

__all__ = ["FOLD_MAX", "Committed", "GroupCommit", "Part", "Phase", "Published", "fold", "new_id", "part_of",
           "publishable"]

# -- tuning: one table. docs/performance.md ("Group commit tuning") gives the benchmark and the
# figure that set each value; the simulation checks that none changes what is committed.
#: Lost races in one commit after which the head hint is read again (Journal.commit reads it
#: after 2): reading it at every loss makes the head the most rewritten object under many writers.
HEAD_AFTER_LOSSES = 8
#: After a lost race (or a fold by another writer), a writer lists published requests before
#: each of its next this-many commits, so it folds them instead of losing to writers ahead.
CONTENDED_COMMITS = 16
#: Others' pending requests in a contended writer's last listing from which its commits publish
#: first and wait to be folded instead of racing first (in a crowd most racers lose, and each
#: loss costs a create, a read of the winner, a listing and reads of others' requests).
CROWD = 3
#: Polls for the next entry a published request's writer makes while another leads, before it
#: races for the slot itself (the leader may have died or be slow).
PATIENCE = 8
#: A waiter's pause between polls: a share of its last attempt's duration, or its publishing
#: round trip (seconds, bounded).
POLL_SHARE, POLL_MIN_S, POLL_MAX_S = 0.5, 0.001, 2.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Committed:
    """What :meth:`GroupCommit.commit` did with a request."""

    #: The view of the journal entry that holds the request (:func:`part_of`); None when it
    #: needed no commit (:meth:`CommitRequest.settled`).
    entry: Entry | None
    #: Whether this call created the entry (else another writer's fold committed the request).
    created: bool
    #: Chunk files the caller must not delete though ``entry`` is None: the request had been
    #: published and another commit of its (writer, batch) settled it, so it stays foldable until
    #: its window passes; only the dedupe keeps it out of folds and writer expiry drops that, so
    #: a fold after the expiry would name deleted files (orphan cleanup takes them later).
    keep: frozenset[str] = frozenset()


class Phase(Enum):
    """Where :meth:`GroupCommit.commit` is with one request."""

    #: choose: publish first (a crowd) or race first
    OPEN = "open"
    #: folded already? else race, wait or gather
    CHECK = "check"
    #: another writer leads: poll the next entry
    WAIT = "wait"
    #: this writer leads (or ran out of patience): read the requests listed
    GATHER = "gather"
    #: one attempt at the next slot
    RACE = "race"
    #: the attempt lost: publish and list
    LOST = "lost"
    #: the commit is settled (``_Run.result``)
    DONE = "done"


#: Every move :meth:`GroupCommit.commit` may make, in one place.
TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.OPEN: frozenset({Phase.CHECK}),
    Phase.CHECK: frozenset({Phase.DONE, Phase.RACE, Phase.WAIT, Phase.GATHER}),
    Phase.WAIT: frozenset({Phase.CHECK, Phase.DONE}),
    Phase.GATHER: frozenset({Phase.RACE}),
    Phase.RACE: frozenset({Phase.DONE, Phase.LOST}),
    Phase.LOST: frozenset({Phase.CHECK, Phase.DONE}),
    Phase.DONE: frozenset(),
}


@dataclass
class _Run:
    """One :meth:`GroupCommit.commit` call's working state, passed between its phases."""

    #: our request (``own.base``/``own.rid`` change as it is published or renewed)
    own: Part
    #: the newest committed state known
    newest: StreamState
    #: after a publish or a poll: the ``(base, rid)`` the last listing named (None: race next)
    names: list[tuple[int, str]] | None = None
    #: others' requests the next attempt folds
    pending: list[Published] = field(default_factory=list)
    #: a waiter's pause between polls (seconds)
    pause: float = POLL_MIN_S
    #: lost races so far, and polls since the last new entry or lost race
    lost: int = 0
    polls: int = 0
    #: the clock at the last attempt's start
    started: float = 0.0
    #: the outcome, once settled
    result: Committed | None = None


def part_of(entry: Entry, rid: str) -> Entry | None:
    """The view of ``entry`` as the commit of request ``rid`` alone (None if it holds no such part)."""
    at = 0
    for f in entry.folds:
        if f.rid == rid:
            return Entry(pos=entry.pos, op=entry.op, wall=entry.wall, state=entry.state, nonce=entry.nonce,
                         writer=f.writer, batch=f.batch, chunks=entry.chunks[at: at + f.chunks], info=f.info)
        at += f.chunks
    return None


class GroupCommit:
    """Commits data requests through one journal, folding and being folded (module docstring)."""

    #: How a waiter pauses and reads the time (the simulation runs them on its clock).
    pause = staticmethod(time.sleep)
    clock = staticmethod(time.monotonic)

    def __init__(self, journal: Journal, count_raised: CountRaised | None = None) -> None:
        self.journal = journal
        self.store = journal.store
        self.count_raised = count_raised
        #: Published requests read so far, by id (immutable; dropped once out of their window).
        self.seen: dict[str, Published] = {}
        self._pool: ThreadPoolExecutor | None = None
        #: Listing runs beside the data writes on object stores (in line elsewhere, when contended).
        self.background = journal.hints.background
        #: Commits left during which this writer lists before its first attempt (after a lost race).
        self.contended = 0
        #: Others' requests the last listing found: a crowd publishes first (:data:`CROWD`).
        self.crowd = 0
        #: What the last finished listing found (others' requests a commit may fold).
        self._last_listed: list[Published] = []

    def prefetch(self, state: StreamState) -> Future[list[Published]]:
        """Start listing the published requests now (while the caller writes its data), so the
        first attempt folds them without a round trip of its own. Every writer lists, contended
        lately or not: a writer that skipped it while uncontended folded nothing, and others'
        published requests then waited for their window to pass. A writer contended lately, in
        a crowd, lists nothing here: its commit publishes its
        request first and reads others' only if it leads (:meth:`commit`)."""
        if self.contended and self.crowd >= CROWD:
            nothing: Future[list[Published]] = Future()
            nothing.set_result([])
            return nothing
        return self._executor().submit(self._discover, None, state)

    def commit(self, req: CommitRequest, state: StreamState,
               listed: Future[list[Published]] | None = None, own: Part | None = None) -> Committed:
        """Commit ``req`` on ``state`` (the newest known), folding others' published requests
        and being folded by others (:class:`Committed` says which happened). ``listed``: a
        :meth:`prefetch` of the pending requests; ``own``: ``req`` as already published (a
        writer resuming after a crash).

        A small state machine (:class:`Phase`): :meth:`_open` chooses to publish first or to
        race first, then each phase's method does its store calls and names the next phase
        (:data:`TRANSITIONS` lists the moves allowed) until one settles the commit."""
        run = _Run(own if own is not None else Part(new_id(), req), state, pause=POLL_MIN_S)
        steps = {Phase.OPEN: lambda: self._open(run, listed), Phase.CHECK: lambda: self._check(run),
                 Phase.WAIT: lambda: self._wait(run), Phase.GATHER: lambda: self._gather(run),
                 Phase.RACE: lambda: self._race(run), Phase.LOST: lambda: self._lost(run)}
        phase = Phase.OPEN
        while run.result is None:
            nxt = steps[phase]()
            assert nxt in TRANSITIONS[phase], f"group commit: no move from {phase} to {nxt}"
            phase = nxt
        return run.result

    def _open(self, run: _Run, listed: Future[list[Published]] | None) -> Phase:
        """Before the first attempt: a writer contended lately, among a crowd, publishes first
        and lists (then leads the next fold or waits to be folded: racing first lost most
        times, and each loser then paid a create, a read of the winner, a listing and reads of
        others' requests); any other races first with the requests a listing found."""
        own = run.own
        if self.contended and self.crowd >= CROWD and not own.published and publishable(own.req):
            started = self.clock()
            run.names = self._contend(own, run.newest)
            run.pause = min(POLL_MAX_S, max(POLL_MIN_S, self.clock() - started))  # a round trip
        elif listed is not None:
            # uncontended, a listing still in flight must not hold the create back (a LIST is
            # slower than the data PUT beside it). The last listing that finished (the previous
            # commit's) is folded instead: a request published before it is folded a commit
            # late, not never (a writer that lost once and waited for nothing else would keep
            # losing to writers a state ahead)
            run.pending = listed.result() if self.contended or listed.done() else list(self._last_listed)
        else:
            run.pending = self._discover(None, run.newest) if self.contended else []
        self.contended = max(0, self.contended - 1)
        return Phase.CHECK

    def _check(self, run: _Run) -> Phase:
        """Before each step: done if another writer's entry folded our published request;
        otherwise race (nothing listed since the last attempt), wait (an older published
        request's writer leads), or gather (this writer leads, or ran out of patience)."""
        if run.lost >= MAX_ATTEMPTS:
            raise CommitConflictError(f"gave up after {MAX_ATTEMPTS} lost races on a journal slot of "
                                      f"{self.store.display_url}", expected=run.newest.pos + 1)
        own = run.own
        if own.published:
            done = self._folded_before(own, run.newest)
            if done is not None:
                run.result = Committed(done, False)
                return Phase.DONE
        if run.names is None:
            return Phase.RACE
        if own.published and run.polls < PATIENCE and not self._leads(own, run.names, run.newest):
            return Phase.WAIT
        return Phase.GATHER

    def _wait(self, run: _Run) -> Phase:
        """An older published request's writer leads the next fold, which takes ours too if it
        listed it: poll the next entry (a read a poll; racing instead cost each loser a create,
        a read of the winner, a listing and a read of every request it had not seen)."""
        run.polls += 1
        nxt = self._poll(run.newest)
        if nxt is None:
            self.pause(run.pause)
            return Phase.CHECK
        run.newest, run.polls = nxt.state, 0
        mine = part_of(nxt, run.own.rid) if nxt.folds else None
        if mine is not None:
            self._folded(run.own)
            run.result = Committed(mine, False)
            return Phase.DONE
        self.journal.expect(run.newest.pos + 1)  # beside the listing (journal/holes.py)
        run.names = self._list(run.own, run.newest)
        return Phase.CHECK

    def _gather(self, run: _Run) -> Phase:
        """Read the requests listed, to fold them in the next attempt. A leader lists again
        first, so the fold takes the requests others published while it listed; a writer out
        of patience (its leader is slow or died) races with the requests it has read alone,
        since each such writer reading every other's request made a round O(writers²)."""
        if run.own.published:
            run.names = self._list(run.own, run.newest)
        run.pending, run.names = self._read(run.names or [], run.newest, fetch=run.polls < PATIENCE), None
        return Phase.RACE

    def _race(self, run: _Run) -> Phase:
        """One attempt at the next slot with our request and the pending ones: done if it
        committed (or another writer's winning entry folded ours), else lost."""
        own = run.own
        parts = [own, *(Part(p.rid, p.request(self.count_raised), p.base) for p in run.pending)]
        run.started = self.clock()
        out = self.journal.attempt(lambda st, pos: fold(parts, st, pos), run.newest)
        if isinstance(out, outcome.Committed):
            entry = out.entry
            run.newest = out.state
            if entry is None:
                run.result = Committed(None, False, self._settled(own))
                return Phase.DONE
            # the entry folds the requests it took even when ours was not among them (settled
            # by another commit of its batch, or folded by another writer meanwhile)
            self._created(own, parts, entry)
            mine = part_of(entry, own.rid) if entry.folds else entry
            run.result = (self._created_without_own(own, entry) if mine is None and own.published
                          else Committed(mine, True))
            return Phase.DONE
        winner = out.winner
        if own.published and winner.folds:
            mine = part_of(winner, own.rid)
            if mine is not None:
                self._folded(own)
                run.result = Committed(mine, False)
                return Phase.DONE
        run.newest = winner.state
        run.lost += 1
        run.polls = 0
        run.pause = min(POLL_MAX_S, max(POLL_MIN_S, POLL_SHARE * (self.clock() - run.started)))
        return Phase.LOST

    def _lost(self, run: _Run) -> Phase:
        """After a lost race: publish our request and list others' (one round trip), so the
        next fold can take it; done if the race was lost to our own (writer, batch)."""
        own = run.own
        self.contended = CONTENDED_COMMITS
        if run.lost == 1 or run.lost % HEAD_AFTER_LOSSES == 0:
            # far behind, maybe: the head is the newest. At the first loss too, before the
            # request is published: its base must be near the head, or writers ahead fold it
            # only within FOLD_WINDOW of a stale base and its writer starves. Otherwise rarely:
            # under many writers the head is the object most rewritten and slowest to read
            run.newest = max(run.newest, self.journal.head().state, key=lambda st: st.pos)
        if not own.published and own.req.settled(run.newest):
            # the race was lost to (writer, batch) itself: nothing to commit, and a request
            # published now would stay foldable with its files (Committed.keep)
            run.result = Committed(None, False)
            return Phase.DONE
        self.journal.expect(run.newest.pos + 1)  # beside the publish and listing (journal/holes.py)
        run.names = self._contend(own, run.newest)
        return Phase.CHECK

    def _created_without_own(self, own: Part, entry: Entry) -> Committed:
        """This writer created ``entry`` of others' requests without its published ``own``:
        another writer folded ``own`` meanwhile (that entry is the answer), or another commit of
        its (writer, batch) settled it, and its files stay (:attr:`Committed.keep`)."""
        done = self._folded_before(own, entry.state)
        return Committed(done, True, self._settled(own) if done is None else frozenset())

    @staticmethod
    def _settled(own: Part) -> frozenset[str]:
        """The files of ``own`` that stay once another commit of its (writer, batch) settled it:
        all of them if it was published (:attr:`Committed.keep`), none otherwise."""
        return frozenset(c.path for c in own.req.chunks) if own.published else frozenset()

    @staticmethod
    def _leads(own: Part, names: Sequence[tuple[int, str]], state: StreamState) -> bool:
        """Whether ``own`` is the oldest request still foldable after ``state`` among ``names``
        (its writer then builds the next fold; the writer of the oldest always sees itself so)."""
        mine = (own.base, own.rid)
        return all(mine <= (base, rid) for base, rid in names
                   if base + FOLD_WINDOW > state.pos and state.was_folded(rid) is None)

    def _poll(self, state: StreamState) -> Entry | None:
        """The entry after ``state`` if it is there (one read)."""
        self.journal.log.keep(state)  # decoded on it: its change applied, no checkpoint read
        return self.journal.try_entry(state.pos + 1)

    # -- after a lost race -------------------------------------------------------------------
    def _contend(self, own: Part, state: StreamState) -> list[tuple[int, str]]:
        """Publish ``own`` (once, if it may be folded) and list the requests others published,
        both at once: one round trip. Only the names: a writer reads requests when it leads."""
        if own.published or not publishable(own.req):
            return self._list(own, state)
        own.base = state.pos
        item = Published.of(own.rid, own.base, own.req)
        put = self._executor().submit(self.store.write, item.path, item.encode(checksummed(state.features)))
        try:
            return self._list(own, state)
        finally:
            put.result()  # published before our next attempt: a fold of it names durable chunks

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tstream-group")
        return self._pool

    def _discover(self, own: Part | None, state: StreamState) -> list[Published]:
        """The published requests that may still be folded after ``state``, oldest first."""
        return self._read(self._list(own, state), state)

    def _list(self, own: Part | None, state: StreamState) -> list[tuple[int, str]]:
        """``(base, rid)`` of the published requests but ``own`` that may still be folded after
        ``state`` (one listing)."""
        nxt = state.pos + 1
        wanted: list[tuple[int, str]] = []
        for name in self.store.list(layout.REQUESTS):
            parsed = layout.request_name(name)
            if parsed is None:
                continue
            base, rid = parsed
            if (own is None or rid != own.rid) and base + FOLD_WINDOW >= nxt and state.was_folded(rid) is None:
                wanted.append((base, rid))
        self.crowd = len(wanted)
        return wanted

    def _read(self, wanted: Sequence[tuple[int, str]], state: StreamState, fetch: bool = True) -> list[Published]:
        """The requests ``wanted`` names that may still be folded after ``state``, oldest first
        (one batched read of those not read before; none without ``fetch``)."""
        nxt = state.pos + 1
        wanted = [(b, r) for b, r in wanted if b + FOLD_WINDOW >= nxt and state.was_folded(r) is None]
        for rid in [r for r, p in self.seen.items() if p.base + FOLD_WINDOW < nxt]:
            del self.seen[rid]
        unread = [layout.commit_request(b, r) for b, r in wanted if r not in self.seen] if fetch else []
        for rel, data in zip(unread, self.store.read_present(unread)):
            if data is None:
                continue
            try:
                item = Published.decode(data, self.store.uri(rel))
            except Exception as e:  # noqa: BLE001 - a damaged request is skipped, never folded
                logger.warning("tstream: %s", e)
                continue
            self.seen[item.rid] = item
        out = sorted((self.seen[r] for _, r in wanted if r in self.seen), key=lambda p: (p.base, p.rid))
        self._last_listed = out
        return out

    # -- a request another writer may have folded --------------------------------------------
    def _folded_before(self, own: Part, state: StreamState) -> Entry | None:
        """The part of the entry that folded ``own`` if ``state`` shows it did; if its window
        passed unfolded, ``own`` becomes a fresh, unpublished request (returns None)."""
        pos = state.was_folded(own.rid)
        if pos is None and state.pos >= own.base + FOLD_WINDOW:
            if state.pos - FOLD_WINDOW >= own.base + 1:  # the window's positions left this state's memory
                pos = self.journal.read_entry(own.base + FOLD_WINDOW).state.was_folded(own.rid)
            if pos is None:  # nobody can fold it any more: commit it afresh
                rel = layout.commit_request(own.base, own.rid)  # fixed now: own.rid changes below
                self.journal.hints.later(lambda: self.store.delete([rel]))
                own.rid, own.base = new_id(), -1
                return None
        if pos is None:
            return None
        mine = part_of(self.journal.read_entry(pos), own.rid)
        if mine is None:
            raise corrupt("journal entry", self.store.uri(layout.entry(pos)),
                          ValueError(f"the state says it folded request {own.rid}, the entry does not"),
                          self.store.display_url)
        self._folded(own)
        return mine

    def _folded(self, own: Part) -> None:
        """Another writer's entry folded ``own`` (that writer deletes its object): others commit
        beside this writer, so it publishes first for a while."""
        self.contended = CONTENDED_COMMITS

    def _created(self, own: Part, parts: Sequence[Part], entry: Entry) -> None:
        """This writer's ``entry`` committed ``own`` and folded some of ``parts``: delete the
        published objects of those it folded, in one call off the critical path (a writer
        folded by another deletes nothing: one call a fold, not one a request)."""
        ids = {f.rid for f in entry.folds}
        doomed = [layout.commit_request(p.base, p.rid) for p in parts if p.published and p.rid in ids]
        if len(ids) > 1:
            self.contended = CONTENDED_COMMITS
        if doomed:
            self.journal.hints.later(lambda: self.store.delete(doomed))
