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
pending at its last listing, publishes first instead of racing first: at 16 writers racing
first lost most times, and every loser paid a create, a read of the winner, a listing and a
read of each request it had not seen (24 store requests a commit; 12 now).

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
entry that did not fold it.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import CommitConflictError, corrupt
from ..journal import outcome
from ..journal.entries import Entry, Fold
from ..journal.journal import Journal
from ..journal.operations import Operation
from ..journal.shapes import is_int, need
from ..journal.state import FOLD_WINDOW, FoldedAt, StreamState
from ..schema import decode_schema, encode_schema, reconcile
from ..store import layout
from ..store.races import MAX_ATTEMPTS
from .commit import CommitInfo, CommitIntent, CommitRequest, CountRaised
from .spec import ChunkInfo, fits

#: Format of a published request object.
REQUEST_VERSION = 1
#: At most this many requests go into one entry (bounds an entry's size).
FOLD_MAX = 256
#: Lost races in one commit after which the head hint is read (Journal.commit reads it after 2).
HEAD_AFTER_LOSSES = 8
#: After a lost race, a writer lists published requests before each of its next this-many commits.
CONTENDED_COMMITS = 16
#: Others' pending requests in a contended writer's last listing from which its commits publish
#: first and wait to be folded (fewer race: at 4 writers racing first was faster, at 16 slower).
CROWD = 3
#: Polls for the next entry a published request's writer makes while another leads, before it
#: races for the slot itself (the leader may have died or be slow).
PATIENCE = 8
#: A waiter's pause between polls: a share of its last attempt's duration, or its publishing
#: round trip (seconds, bounded).
POLL_SHARE, POLL_MIN_S, POLL_MAX_S = 0.5, 0.001, 2.0

logger = logging.getLogger(__name__)


def new_id() -> str:
    """A request id: 64 random bits, hex (unique within any fold window)."""
    return uuid.uuid4().hex[:16]


def publishable(req: CommitRequest) -> bool:
    """Whether ``req`` may be folded by another writer: a plain data append (ticks, session
    closes and schema merges commit on their own)."""
    want = req.intent
    return (want.op == "append" and bool(req.chunks) and want.heartbeat is None and not want.close
            and not want.merge_schema)


@dataclass(frozen=True)
class Published:
    """A commit request as another writer reads it: what ``CommitRequest`` needs, and its slot window."""

    rid: str
    base: int
    now: int
    chunks: tuple[ChunkInfo, ...]
    writer: str | None = None
    batch: Any = None
    session: bool = False
    monotonic: bool = False
    schema: str = ""  # the data's user schema, encoded ("" none)

    @property
    def path(self) -> str:
        return layout.commit_request(self.base, self.rid)

    @classmethod
    def of(cls, rid: str, base: int, req: CommitRequest) -> Published:
        want = req.intent
        return cls(rid=rid, base=base, now=req.now, chunks=tuple(req.chunks), writer=want.writer_id,
                   batch=want.batch_id, session=want.session, monotonic=want.monotonic,
                   schema=encode_schema(want.schema) if want.schema is not None else "")

    def request(self, count_raised: CountRaised | None) -> CommitRequest:
        intent = CommitIntent(writer_id=self.writer, batch_id=self.batch, session=self.session,
                              monotonic=self.monotonic, schema=_schema(self.schema))
        return CommitRequest(chunks=list(self.chunks), intent=intent, now=self.now, count_raised=count_raised)

    def encode(self) -> bytes:
        return json.dumps({"v": REQUEST_VERSION, "rid": self.rid, "base": self.base, "now": self.now,
                           "writer": self.writer, "batch": self.batch, "session": self.session,
                           "monotonic": self.monotonic, "schema": self.schema,
                           "chunks": [c.to_json() for c in self.chunks]}, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes, path: str) -> Published:
        """The request in ``data``; CorruptMetadataError naming ``path`` if it is not one."""
        try:
            d = json.loads(data)
            need(isinstance(d, dict) and d.get("v") == REQUEST_VERSION, "the request's version")
            need(isinstance(d.get("rid"), str) and is_int(d.get("base")) and is_int(d.get("now")), "rid/base/now")
            need(d.get("writer") is None or isinstance(d["writer"], str), "writer")
            need(isinstance(d.get("chunks"), list) and all(isinstance(c, dict) for c in d["chunks"]), "chunks")
            return cls(rid=d["rid"], base=d["base"], now=d["now"], writer=d.get("writer"), batch=d.get("batch"),
                       session=bool(d.get("session")), monotonic=bool(d.get("monotonic")),
                       schema=str(d.get("schema") or ""),
                       chunks=tuple(ChunkInfo.from_json(c) for c in d["chunks"]))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise corrupt("commit request", path, e, layout.stream_url(path)) from e


@dataclass
class Part:
    """One request in a fold: the builder's own (first) or a published one."""

    rid: str
    req: CommitRequest
    base: int = -1  # the base it was published with; -1 while unpublished
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def published(self) -> bool:
        return self.base >= 0

    def window_has(self, pos: int) -> bool:
        """Whether this request may be folded at ``pos`` (always, while unpublished)."""
        return not self.published or self.base < pos <= self.base + FOLD_WINDOW


def _schema(encoded: str) -> pa.Schema | None:
    """A published request's schema ("" none; :func:`decode_schema` caches by text: a
    contended writer rebuilds every pending request at each attempt)."""
    return decode_schema(encoded) if encoded else None


def applicable(req: CommitRequest, state: StreamState) -> bool:
    """Whether ``req`` applies on ``state`` without error: its segments are active and its schema fits."""
    if not all(fits(c, state.segment(c.seg)) for c in req.chunks):
        return False
    if req.intent.schema is not None and state.schema:
        try:
            reconcile(_schema(state.schema), req.intent.schema, merge=False)
        except Exception:  # noqa: BLE001 - a mismatch of any kind: its own writer reports it
            return False
    return True


def fold(parts: Sequence[Part], state: StreamState, pos: int) -> Entry | None:
    """The entry at ``pos`` that commits ``parts`` in order on ``state`` (a private copy), as
    that many sequential commits would; None if none needs committing.

    ``parts[0]`` is the builder's own request: its errors (a sealed segment, a schema that does
    not fit) propagate. Others that cannot apply, are out of their window or were folded
    already are left out. An entry of the builder's own unpublished request alone is an
    ordinary entry; any other records its parts in ``folds`` and the published ids in
    ``state.folded``.
    """
    built: list[tuple[Part, Entry]] = []
    for i, part in enumerate(parts[:FOLD_MAX]):
        if not part.window_has(pos) or state.was_folded(part.rid) is not None:
            continue
        if i > 0 and not applicable(part.req, state):
            continue
        entry = part.req(state, pos)
        if entry is not None:
            built.append((part, entry))
    if not built:
        return None
    if len(built) == 1 and not built[0][0].published and built[0][0] is parts[0]:
        return built[0][1]
    ids = [p.rid for p, _ in built if p.published]
    state.folded = [f for f in state.folded if f.pos > pos - FOLD_WINDOW] + ([FoldedAt(pos, tuple(ids))] if ids else [])
    info = CommitInfo.fold([CommitInfo.decode(e.info) for _, e in built])
    first = built[0][1]
    return Entry(pos=pos, op=Operation.APPEND, wall=max(e.wall for _, e in built), state=state, writer=first.writer,
                 batch=first.batch, chunks=[c for _, e in built for c in e.chunks], info=info.encode(),
                 folds=[Fold(p.rid, e.writer, e.batch, len(e.chunks), e.info) for p, e in built])


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
        lately or not: a writer that skipped it while uncontended folded nothing, and at 4
        writers others' published requests then waited for their window to pass (p99 8 s,
        against 2.4 s). A writer contended lately lists nothing here: its commit publishes its
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
        writer resuming after a crash)."""
        own = own if own is not None else Part(new_id(), req)
        newest = state
        names: list[tuple[int, str]] | None = None  # after a lost race: what the last listing named
        pause = POLL_MIN_S  # a waiter's pause between polls
        if self.contended and self.crowd >= CROWD and not own.published and publishable(req):
            # others committed beside this writer lately: publish first, then lead the next fold
            # or wait to be folded (racing first lost most times, and each loser then paid a
            # create, a read of the winner, a listing and reads of others' requests)
            pending: list[Published] = []
            started = self.clock()
            names = self._contend(own, newest)
            pause = min(POLL_MAX_S, max(POLL_MIN_S, self.clock() - started))  # a round trip
        elif listed is not None:
            # uncontended, a listing still in flight must not hold the create back (a LIST is
            # slower than the data PUT beside it: waiting cost a lone writer 60 ms). The last
            # listing that finished (the previous commit's) is folded instead: a request
            # published before it is folded a commit late, not never (a writer that lost once
            # and waited for nothing else would keep losing to writers a state ahead: at 4
            # writers one made 9 commits in 15 s, 74 lost races)
            pending = listed.result() if self.contended or listed.done() else list(self._last_listed)
        else:
            pending = self._discover(None, state) if self.contended else []
        self.contended = max(0, self.contended - 1)
        lost = polls = 0
        while lost < MAX_ATTEMPTS:
            if own.published:
                done = self._folded_before(own, newest)
                if done is not None:
                    return Committed(done, False)
            if names is not None:
                if own.published and polls < PATIENCE and not self._leads(own, names, newest):
                    # an older published request's writer leads the next fold, which takes ours
                    # too if it listed it. Waiting costs a read per poll; racing cost each loser
                    # a create, a read of the winner, a listing and a read of every request it
                    # had not seen (at 16 writers 24 requests a commit, the machine's limit)
                    polls += 1
                    nxt = self._poll(newest)
                    if nxt is None:
                        self.pause(pause)
                        continue
                    newest, polls = nxt.state, 0
                    mine = part_of(nxt, own.rid) if nxt.folds else None
                    if mine is not None:
                        self._folded(own)
                        return Committed(mine, False)
                    names = self._list(own, newest)
                    continue
                if own.published:
                    # leading: list again, so the fold takes the requests others published
                    # while this one listed (else it folded about 3 a time)
                    names = self._list(own, newest)
                # out of patience (the leader is slow or died), a writer races with the requests
                # it has read alone: each reading every other's request had 64 writers read
                # 4,000 objects a round
                pending, names = self._read(names, newest, fetch=polls < PATIENCE), None
            parts = [own, *(Part(p.rid, p.request(self.count_raised), p.base) for p in pending)]
            started = self.clock()
            out = self.journal.attempt(lambda st, pos: fold(parts, st, pos), newest)  # noqa: B023 - runs in this attempt
            if isinstance(out, outcome.Committed):
                entry, newest = out.entry, out.state
                if entry is None:
                    return Committed(None, False, self._settled(own))
                # the entry folds the requests it took even when ours was not among them (settled
                # by another commit of its batch, or folded by another writer meanwhile)
                self._created(own, parts, entry)
                mine = part_of(entry, own.rid) if entry.folds else entry
                if mine is None and own.published:
                    return self._created_without_own(own, entry)
                return Committed(mine, True)
            winner = out.winner
            if own.published and winner.folds:
                mine = part_of(winner, own.rid)
                if mine is not None:
                    self._folded(own)
                    return Committed(mine, False)
            newest = winner.state
            lost += 1
            polls = 0
            pause = min(POLL_MAX_S, max(POLL_MIN_S, POLL_SHARE * (self.clock() - started)))
            self.contended = CONTENDED_COMMITS
            if lost == 1 or lost % HEAD_AFTER_LOSSES == 0:
                # far behind, maybe: the head is the newest. At the first loss too, before the
                # request is published: its base must be near the head, or writers ahead fold it
                # only within FOLD_WINDOW of a stale base (a writer that lost moved one entry on
                # per lost race while the head moved faster; at 4 writers the writer ahead found
                # 3 in 4 published requests out of its window, and their writers starved: p99
                # 2.5 s). Otherwise rarely: under many writers the head is the object most
                # rewritten and slowest to read
                newest = max(newest, self.journal.head().state, key=lambda st: st.pos)
            if not own.published and own.req.settled(newest):
                # the race was lost to (writer, batch) itself: nothing to commit, and a request
                # published now would stay foldable with its files (Committed.keep)
                return Committed(None, False)
            names = self._contend(own, newest)
        raise CommitConflictError(f"gave up after {MAX_ATTEMPTS} lost races on a journal slot of "
                                  f"{self.store.display_url}", expected=newest.pos + 1)

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
        put = self._executor().submit(self.store.write, item.path, item.encode())
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
