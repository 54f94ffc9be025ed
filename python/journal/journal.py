"""The journal: a totally ordered sequence of commits, one immutable object per position.

One job: the commit protocol. :class:`Journal` holds an
:class:`~pyspark_tstream.journal.entries.EntryLog` (entry I/O) and a
:class:`~pyspark_tstream.journal.timeindex.TimeIndex`, and forwards the few of their methods its
callers use; its own code takes positions. Invariants:

* Position ``n`` is taken by exactly one commit, through an atomic create-if-absent of
  ``_tstream/journal/…/<n>.json``; data files become visible only when an entry names them.
* Every entry (format v6) carries what its commit changed in the
  :class:`~pyspark_tstream.journal.state.StreamState` (:mod:`~pyspark_tstream.journal.delta`;
  entry 0 the whole state), and a checkpoint of the whole state is written every so often
  (:mod:`~pyspark_tstream.journal.checkpoint`) before a conditional create, of the committed state
  it builds on; the ``head`` object copies the newest entry. The head is a hint: a stale head only
  costs a failed conditional create (a committer then reads the entry that beat it, and applies
  its change) or a probe (a reader).
* A commit never creates into the slot of a lost entry, nor past a lost newest entry: before
  its create it reads the slots around its own and the head hint
  (:mod:`~pyspark_tstream.journal.holes`), and refuses naming the lost entry.
* A commit drops the writers silent longer than the writer retention
  (:mod:`~pyspark_tstream.journal.expiry`), as part of its change.
* A commit writes only committed facts besides its own entry: full index nodes and pending
  sealed/epoch records of earlier commits (deterministic bytes, so a lost race rewrites the
  same content), and its own pending records only after it won its slot.

Costs (store calls): commit 1 batched read of what lies around its slot (entries ``n - 1`` and
``n + 1`` and the head hint, :mod:`~pyspark_tstream.journal.holes`: no create into a lost
entry's slot; beside the caller's data upload on object stores, after :meth:`Journal.expect`)
and 1 conditional create on its critical path (+ 1 node write and 1 batched read every
``FANOUT`` commits; a lost race 1 read, and no create when that read showed the slot taken),
then 1 head write in the background on object stores (:mod:`~pyspark_tstream.journal.hints`);
reads and searches as in
:mod:`~pyspark_tstream.journal.entries`
and :mod:`~pyspark_tstream.journal.timeindex`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from ..errors import CorruptMetadataError, StorageError, error
from ..store import layout
from ..store.races import LOST, Lost, until_won
from ..store.storage import Store
from . import checkpoint
from .ahead import Ahead, Also, unsound_newest
from .checkpoint_mark import CheckpointMark
from .delta import change, state_copy
from .entries import FORMAT_VERSION, Entry, EntryLog
from .expiry import expire
from .features import check_writer
from .hints import HeadHints
from .holes import PastCheck, hole
from .outcome import Attempt, Committed, Taken
from .state import StreamState
from .timeindex import Delta, TimeIndex, summary

#: Extra conditional creates that settle an ambiguous journal create (after the store's retries).
RESOLVE_ATTEMPTS = 3

logger = logging.getLogger(__name__)

NodeReader = Callable[[int, int], dict[str, Any]]


class Journal:
    """Reads, searches and appends the journal entries of one stream."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: Entry I/O: reads entries and the head and anchor hints.
        self.log = EntryLog(store)
        #: The time index over the entries ``log`` reads.
        self.index = TimeIndex(self.log)
        #: Called with the work state before each conditional create: lazy writes of committed
        #: facts (sealed-segment shards, epoch records) that then leave the state.
        self.flushers: list[Callable[[StreamState], None]] = []
        #: The head hint (written in the background on object stores) and other deferred chores.
        self.hints = HeadHints(store)
        #: Whether an entry lies past the slot a commit takes (:mod:`~pyspark_tstream.journal.holes`).
        self.past = PastCheck(store)

    # -- entry I/O (see entries.EntryLog) ------------------------------------------------------
    def read_entry(self, pos: int) -> Entry:
        """The entry at ``pos`` (FileNotFoundError if it is absent)."""
        return self.log.read_entry(pos)

    def try_entry(self, pos: int, ahead: Sequence[int] = (), also: Also | None = None) -> Entry | None:
        """The entry at ``pos`` or None: one store call, the whole of a poll with nothing new
        (``ahead``, ``also``: :meth:`EntryLog.try_entry <pyspark_tstream.journal.entries.EntryLog.try_entry>`)."""
        return self.log.try_entry(pos, ahead, also)

    def head(self, known: Entry | None = None) -> Entry:
        """The newest entry: the head hint, then probes past it (``known``: an entry the caller has)."""
        return self.log.head(known)

    def lowest_listed(self) -> int | None:
        """The lowest entry position above 0 that a listing shows (repair's anchor of last resort)."""
        return self.log.lowest_listed()

    # -- the time index (see timeindex.TimeIndex) ---------------------------------------------
    def search(self, state: StreamState, col: int, value: int, read_node: NodeReader | None = None) -> int:
        """First journal position whose summary ``col`` exceeds ``value`` (``state.pos + 1`` if none)."""
        return self.index.search(state, col, value, read_node)

    def search_any(self, state: StreamState, value: int) -> int:
        """Like :meth:`search` on max ``_tso``, also below the head (0 if those nodes were collected)."""
        return self.index.search_any(state, value)

    def read_node(self, level: int, node: int, ahead: Ahead | None = None) -> dict[str, Any]:
        """Index node ``node`` of ``level`` (CorruptMetadataError if it is missing or unreadable;
        ``ahead``: where it may have been read ahead)."""
        return self.index.read_node(level, node, ahead)

    def deltas(self, state: StreamState, first: int, last: int, *, truncated: bool = False) -> list[Delta]:
        """Deltas of positions ``first..last`` (inclusive), from compacted nodes where flushed."""
        return self.index.deltas(state, first, last, truncated=truncated)

    def node_deltas(self, state: StreamState, node: int, known: Collection[int] = (),
                    read_node: NodeReader | None = None) -> list[tuple[Delta, int]]:
        """``(delta, tick after it)`` of the positions of level-1 node ``node``."""
        return self.index.node_deltas(state, node, known, read_node)

    # -- the commit protocol ------------------------------------------------------------------
    def create(self, entry: Entry) -> Entry:
        """Write entry 0; StreamExistsError if the stream exists."""
        entry.state.index = [[summary(entry)]]
        # entry 0 holds the whole state: it is the first checkpoint (written as one too, below)
        entry.state.checkpoint = CheckpointMark(pos=0, bytes=len(checkpoint.encode(entry.state)))
        data = entry.encode()
        if not self._create_slot(0, data):
            existing = self.try_entry(0)
            if existing is None or existing.nonce != entry.nonce:
                raise error("TSTREAM_STREAM_EXISTS", url=self.store.display_url)
        self.log.remember(0, data)
        self.log.keep(entry.state)
        try:  # a hint of entry 0 (which holds the same state): readers fall back to the entry
            checkpoint.write(self.store, entry.state)
        except Exception as e:  # noqa: BLE001 - the stream exists; entry 0 serves as its checkpoint
            logger.info("checkpoint %s not written (%s); entry 0 holds the same state",
                        self.store.uri(layout.checkpoint(0)), e)
        self._write_head(data)
        return entry

    def commit(self, build: Callable[[StreamState, int], Entry | None],
               state: StreamState | None = None) -> tuple[Entry | None, StreamState]:
        """Append the entry ``build(state, pos)`` makes, retrying on lost races.

        ``build`` gets a private copy of the newest known state and the position to take, and
        returns the entry (its ``state`` already advanced) or None when nothing must be written
        (e.g. the batch is a duplicate). A conditional create that reports "exists" may hide our
        own earlier attempt (an ambiguous outcome on an object store), so the winner's nonce is
        compared before treating it as a conflict.
        """
        newest = state if state is not None else self.head().state
        lost = 0

        def attempt() -> tuple[Entry | None, StreamState] | Lost:
            nonlocal newest, lost
            out = self.attempt(build, newest)
            if isinstance(out, Taken):  # another commit took the slot: rebuild on its state
                newest = out.winner.state
                lost += 1
                if lost >= 2:
                    # lost twice in a row: we may be far behind (a long vacuum or compaction
                    # under many commits a second). Walking one slot per lost race would cost a
                    # rebuild and a create per commit we missed, and fall further behind while
                    # others commit; the head (a read, and a probe past it) is the newest
                    newest = max(newest, self.head().state, key=lambda st: st.pos)
                return LOST
            return out.entry, out.state

        return until_won(attempt, what=f"a journal slot of {self.store.display_url}",
                         expected=lambda: newest.pos + 1)

    def attempt(self, build: Callable[[StreamState, int], Entry | None],
                state: StreamState) -> Attempt:
        """One try at position ``state.pos + 1``: :class:`~.outcome.Committed`, or
        :class:`~.outcome.Taken` with the winner's entry (a group committer looks in it for the
        requests it folded)."""
        pos = state.pos + 1
        if state.features:  # a stream needing a feature this build does not know is not written
            check_writer(state.features, FORMAT_VERSION, self.store.display_url)
        # never commit past a newest entry known only through the head hint's
        # copy without seeing it is there (one read, once per handle): refuses, naming repair
        self.log.confirm(state.pos)
        self.log.keep(state)  # the winner of a lost race is decoded on it (one change applied)
        work = state_copy(state)
        entry = build(work, pos)
        if entry is None:
            return Committed(None, state)
        entry.pos = pos
        entry.state.pos = pos
        # Only committed facts are flushed: what ``build`` just added stays pending in this
        # entry's state until a later commit, so an attempt that loses the race for ``pos``
        # has written nothing of its own (a rival scale's records would otherwise lose to
        # the loser's sealed-map and epoch records).
        fresh_sealed = entry.state.pending_sealed[len(state.pending_sealed):]
        fresh_epoch = entry.state.pending_epoch if entry.state.pending_epoch != state.pending_epoch else None
        entry.state.pending_sealed = entry.state.pending_sealed[:len(state.pending_sealed)]
        entry.state.pending_epoch = state.pending_epoch
        for flush in self.flushers:
            try:
                flush(entry.state)
            except Exception as e:  # noqa: BLE001 - the facts stay pending in the state: retried
                logger.warning("tstream: %s: writing committed sealed/epoch records failed (%s); they "
                               "stay pending and the next commit writes them", self.store.display_url, e)
        entry.state.pending_sealed = entry.state.pending_sealed + fresh_sealed
        if fresh_epoch is not None:
            unwritten = entry.state.pending_epoch
            if unwritten is not None:
                # the state holds one pending epoch record: committing this scale would replace
                # the record its flush just failed to write, and that epoch would never have one
                rel = self.store.uri(layout.epoch_record(unwritten.epoch))
                raise StorageError(
                    f"the record of epoch {unwritten.epoch} ({rel}) is not written yet: its write failed "
                    f"and a scale to epoch {fresh_epoch.epoch} would drop it; nothing was committed. Retry "
                    "the scale once the store answers", path=rel, retriable=True)
            entry.state.pending_epoch = fresh_epoch
        try:
            self.index.flush(entry.state, state.meta_gc_pos)
        except FileNotFoundError:
            # the entries this slot's index node copies were collected, and collection keeps
            # those of the newest open node: another commit filled this node, so the slot is
            # taken (a writer this far behind loses its race without a create)
            taken = self.try_entry(pos)
            if taken is not None:
                return Taken(taken)
            newest = self.head()
            if newest.pos >= pos:  # collected too: the newest entry is the state to go on from
                return Taken(newest)
            raise  # the slot is free: an entry is missing that nothing collected (fsck)
        if not entry.state.index:
            entry.state.index = [[]]
        entry.state.index[0].append(summary(entry))
        expire(entry.state, entry.wall)
        data = self._encode(entry, state)
        # what lies around this slot (asked beside the caller's last round trip where it could
        # be: journal/holes.py): a committed entry at or past it means the slot was taken
        # meanwhile or its entry was lost, where a create would fork the journal; the newest
        # entry missing means a create would leave a hole below it. Nothing is created then
        around = self.past.around(pos)
        if around.taken is not None:  # a race lost: the winner came in the batch
            return Taken(self.log.known(pos, around.taken))
        if around.passed or not around.before:
            found = self.try_entry(pos)
            if found is not None:
                return Taken(found)
            if not around.passed:
                raise unsound_newest(self.store, self.store.uri(layout.entry(pos - 1)), "is missing")
            if self.log.collected(pos):  # a writer so far behind that its slot was collected
                return Taken(self.head())
            raise hole(self.store, pos, around)
        if not self._create_slot(pos, data):
            winner = self.try_entry(pos)
            if winner is None:
                raise CorruptMetadataError(
                    f"journal slot {self.store.uri(layout.entry(pos))} reported as taken but is "
                    "missing; check the store's consistency", path=self.store.uri(layout.entry(pos)))
            if winner.nonce != entry.nonce:
                return Taken(winner)
            # our own earlier attempt created it (its answer was lost): the commit is ours
        self.log.remember(pos, data)
        self.log.keep(entry.state)
        self.hints.offer(pos, data)
        self._publish(entry.state, bool(fresh_sealed) or fresh_epoch is not None)
        return Committed(entry, entry.state)

    def expect(self, pos: int) -> None:
        """The next commit will try position ``pos``: on an object store, start reading now
        what lies around that slot (:mod:`~pyspark_tstream.journal.holes`), so the answer rides
        beside the caller's round trip (its data upload) instead of adding one before the
        create. Elsewhere the commit reads it in line (local reads)."""
        if self.hints.background:
            self.past.expect(pos)

    def forget(self) -> None:
        """Drop what :meth:`expect` asked if no commit used it: the answer predates the next
        call, and a loss before a call is always seen by that call's commit."""
        self.past.forget()

    def _encode(self, entry: Entry, before: StreamState) -> bytes:
        """The stored bytes of ``entry``: its change on committed state ``before`` (format v6),
        after writing the checkpoint of ``before`` when one is due (a committed fact: racing
        committers write the same bytes, and a lost race has written nothing of its own)."""
        mark = before.checkpoint
        if mark is None or checkpoint.due(before):
            mark = checkpoint.write(self.store, before)
        entry.state.checkpoint = mark
        entry.change = change(before, entry.state)
        entry.change["checkpoint"] = mark.to_json()  # always there: a reader starts from it
        delta = entry.delta_json()
        mark = checkpoint.advanced(mark, len(entry.encode(delta)))
        entry.state.checkpoint = mark
        entry.change["checkpoint"] = mark.to_json()
        return entry.encode(delta)

    def _publish(self, state: StreamState, fresh: bool) -> None:
        """Write the facts this commit made pending (sealed records, an epoch record) now that
        it won its slot, so every handle finds them at once. Best-effort: they stay pending in
        the state, and the next commit writes them again (the same bytes) and lets them go."""
        if not fresh:
            return
        copy = StreamState.from_json(json.loads(json.dumps(state.to_json())))
        try:
            for flush in self.flushers:
                flush(copy)
        except Exception as e:  # noqa: BLE001 - the commit landed; the next one retries this
            logger.warning("tstream: %s: writing sealed/epoch records after commit %d failed (%s); the "
                        "next commit writes them", self.store.display_url, state.pos, e)

    def _create_slot(self, pos: int, data: bytes) -> bool:
        """The conditional create of entry ``pos``; True if it created it, False if it exists.

        A transient store failure that outlives the store's retries leaves the outcome unknown (the
        PUT may have been applied; a refusal such as 403 is not ambiguous and is raised as is).
        Repeating the same conditional create settles it: it either creates
        the entry now or reports "exists", and the caller then compares nonces. If the store
        keeps failing, the error says the outcome is unknown: the caller must keep the batch's
        files (the sink's abort proves from the journal whether it may delete them).
        """
        rel = layout.entry(pos)
        try:
            return self.store.put_if_absent(rel, data)
        except StorageError as first:
            if not first.retriable:
                raise  # refused (e.g. 403): the store did not apply it, nothing is ambiguous
            failure = first
        for attempt in range(RESOLVE_ATTEMPTS):
            time.sleep(self.store.retry.delay(attempt))
            try:
                return self.store.put_if_absent(rel, data)
            except StorageError as e:
                failure = e
        raise StorageError(
            f"commit to journal slot {self.store.uri(rel)} has an unknown outcome: the store kept "
            f"failing ({failure}); nothing was deleted. Retry the write with the same writer id and "
            "batch id (a committed batch is a no-op) and check the stream with `tstream fsck`",
            path=self.store.uri(rel), retriable=True) from failure

    def _write_head(self, data: bytes) -> None:
        # The head is a hint; the entry already committed. A failed hint write only makes the
        # next reader probe one more position, so it must not turn a commit into an error
        # (whatever the failure: the commit is durable and must be reported as such).
        try:
            self.store.write(layout.HEAD, data)
        except Exception as e:  # noqa: BLE001 - see above
            logger.info("head hint %s not written (%s); readers probe past it",
                        self.store.uri(layout.HEAD), e)
