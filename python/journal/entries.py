"""Journal entries on the store: reading them back (their format: :mod:`.entry`).

One job: entry I/O. An entry is one immutable JSON object per journal position
(:func:`~pyspark_tstream.store.layout.entry`) holding what its commit did (a
:class:`Chunk` list and info) and, since format 6, its change to the
:class:`~pyspark_tstream.journal.state.StreamState` (entry 0 and entries of format 5 and older
hold the whole state; :mod:`~pyspark_tstream.journal.checkpoint` holds it every so often); the
head hint copies the newest one. Readers treat the head (and the ``anchor`` that names
the oldest entry garbage collection kept) as hints: a stale or lost hint costs probes or an
O(log n) search, never a wrong answer. Entries carry a format version, checked with every
other object's by :func:`~pyspark_tstream.journal.features.check_object` (a newer one is
refused); a state declaring a reader feature this build does not know is refused where it is
built (:func:`~pyspark_tstream.journal.features.check_reader`). An entry of a stream declaring
checksums is sealed (:mod:`.seal`): verified before it is parsed, and refused without its
seal. Committing entries is
:mod:`~pyspark_tstream.journal.journal`'s job.

Costs (store calls): the newest entry 2 round trips (the head, then one batch:
:func:`~pyspark_tstream.journal.ahead.open_batch`), a poll with nothing new 1.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..errors import CorruptMetadataError, corrupt, error
from ..store import layout
from ..store.storage import Store
from ..store.versions import newest_present, probe_past
from . import checkpoint
from .ahead import Ahead, Also, open_batch, unsound_newest
from .checkpoint_mark import CheckpointMark
from .chunk import Chunk as Chunk
from .chunk import Fold as Fold
from .chunk import check_folds as check_folds
from .crosscheck import Replayed, checkpoint_problem, culprit, next_seqs, step_problem
from .delta import apply_all
from .entry import CHANGE as CHANGE
from .entry import ENTRY as ENTRY
from .entry import FORMAT_VERSION as FORMAT_VERSION
from .entry import PACK_MIN as PACK_MIN
from .entry import Entry as Entry
from .entry import at_position, change_of, check_sealed, stored_pos
from .entry import decode_anchor as decode_anchor
from .entry import encode_anchor as encode_anchor
from .state import StreamState

logger = logging.getLogger(__name__)

#: Stored bytes of this many entries are kept after this handle read or committed them: a
#: time-index flush needs the deltas of the last FANOUT positions, which a lone writer committed
#: itself (reading them back was a batched GET every 32 commits on its critical path).
RECENT_ENTRIES = 64
#: States (format v6) an :class:`EntryLog` keeps to decode the next entries on.
KEPT_STATES = 4
#: Chunks of the decoded deltas an :class:`EntryLog` keeps from a cold open's cross-check and
#: the entries it decodes (:meth:`EntryLog.read_deltas` takes them instead of decoding the same
#: entries again): the entries after a checkpoint at many segments, not a wide commit's
#: thousands of slices, which a long-lived handle (a streaming source) would otherwise hold.
KEPT_DELTA_CHUNKS = 16_384


class EntryLog:
    """Reads the journal entries of one stream (never writes them)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._recent: dict[int, bytes] = {}  # position -> stored bytes, oldest first
        #: states this handle built or was given, by position (format v6: a change entry is
        #: decoded on the state before it, so a poll applies one change, not a rebuild)
        self._states: dict[int, StreamState] = {}
        #: the newest position this handle knows only through the head hint (:meth:`confirm`)
        self._unconfirmed: int | None = None
        self._hint_only: set[int] = set()  # positions whose remembered bytes are the hint's copy
        self._ahead = Ahead(store)  # what :meth:`head` read in its one batch (dropped as it returns)
        #: expanded deltas (:meth:`Entry.delta_of`) the open's cross-check decoded, by position:
        #: a read of the newest commits plans from those very entries
        self._deltas: dict[int, dict[str, Any]] = {}

    def remember(self, pos: int, data: bytes, *, hint: bool = False) -> None:
        """Keep the stored bytes of committed entry ``pos`` (entries are immutable) for
        :meth:`read_deltas`; the oldest beyond :data:`RECENT_ENTRIES` are dropped. ``hint``:
        they are the head hint's copy, not read from the entry's own slot (:meth:`confirm`)."""
        recent = self._recent
        if not hint:
            self._hint_only.discard(pos)
        elif pos not in recent or pos in self._hint_only:
            self._hint_only.add(pos)
        recent[pos] = data
        while len(recent) > RECENT_ENTRIES:
            self._hint_only.discard(next(iter(recent)))
            recent.pop(next(iter(recent)), None)

    def kept(self, pos: int) -> bool:
        """Whether this handle holds the stored bytes of entry ``pos`` (:meth:`remember`)."""
        return pos in self._recent

    def keep(self, state: StreamState) -> None:
        """Keep committed ``state`` to decode the entry after it on (the newest few are kept).
        A kept state must not be changed in place (a commit works on a copy)."""
        states = self._states
        states.pop(state.pos, None)
        states[state.pos] = state
        while len(states) > KEPT_STATES:
            states.pop(min(states), None)

    def decode(self, data: bytes, rel: str, built: dict[int, StreamState] | None = None,
               parsed: dict[str, Any] | None = None) -> Entry:
        """The entry whose stored bytes are ``data`` (read from ``rel``; ``parsed``: their
        :meth:`Entry.parse`, when the caller has it), a change (format v6) applied on the state
        before it: from ``built`` (position -> state), else kept or rebuilt (:meth:`state_at`)."""
        path = self.store.uri(rel)
        d = Entry.parse(data, path=path) if parsed is None else parsed
        named = layout.numbered_name(rel.rsplit("/", 1)[-1]) if rel.startswith(layout.JOURNAL + "/") else None
        if named is not None:  # read by position (the head hint names its own)
            at_position(d, named, path)
        base = None
        if CHANGE in d:
            pos = d["pos"]
            base = (built or {}).get(pos - 1) or self.state_at(pos - 1, Entry.checkpoint_of(d))
        entry = Entry.build(d, path=path, base=base)
        check_sealed(data, entry.state, path)
        if base is not None:  # its change against its own chunks (no store call)
            found = step_problem(next_seqs(base), next_seqs(entry.state),
                                 ((c.seg, c.seq, c.rows) for c in entry.chunks))
            if found is not None and found[0] == "entry":
                raise corrupt("journal entry", path, ValueError(found[1]), layout.stream_url(path))
        self.keep(entry.state)
        delta = Entry.packed_delta(d)
        if delta is not None:  # a read of the newest commits plans from it
            self._keep_delta(entry.pos, delta)
        return entry

    def state_at(self, pos: int, start: int) -> StreamState:
        """The state after entry ``pos``, rebuilt from checkpoint ``start`` (or a newer state
        this handle kept) and the entries after it: one read of the checkpoint, one batched
        read of the entries (none of what this handle kept). A lost or damaged checkpoint is
        rebuilt the same way from the one its entry names before it (logged: ``tstream repair``
        rewrites it)."""
        kept = self._states.get(pos)
        if kept is not None:
            return kept
        base = max((p for p in self._states if start <= p < pos), default=None)
        older = max((p for p in self._states if p < start), default=None)
        if base is None and older is not None and checkpoint.entries_cheaper(self._states[older], start):
            # a state this handle kept from before the checkpoint, when the entries from it to
            # the checkpoint hold fewer bytes than the checkpoint (which holds every writer): a
            # committer a few commits behind meets a checkpoint written meanwhile on many catch-ups
            try:
                return self._rebuild(pos, self._states[older], older)
            except (FileNotFoundError, CorruptMetadataError):
                pass  # entries before the checkpoint were collected (or damaged): rebuild from it
        if base is not None:
            return self._rebuild(pos, self._states[base], base)
        return self._from_checkpoint(pos, start)

    def _from_checkpoint(self, pos: int, start: int) -> StreamState:
        """The state after entry ``pos`` rebuilt from checkpoint ``start``, which is first
        cross-checked against the entries replayed after it (:mod:`.crosscheck`: no store call):
        one that contradicts them is not used, and the state is rebuilt from the checkpoint
        before it, as for a lost one."""
        state, size = self._checkpoint(start)
        if size is None:  # not read from a checkpoint object: nothing to cross-check
            return self._rebuild(pos, state, start)
        seen = Replayed()
        after = self._rebuild(pos, state, start, seen)
        found = checkpoint_problem(state, size, after, seen)
        if found is None:
            return after
        for p in [p for p in self._states if p >= start]:  # built on damaged metadata
            self._states.pop(p, None)
        culprit, problem = found
        if culprit != start:  # an entry contradicts its own chunks: nothing else holds its change
            where = self.store.uri(layout.entry(culprit))
            raise corrupt("journal entry", where, ValueError(problem), layout.stream_url(where))
        return self._rebuild(pos, self._older(start, CorruptMetadataError(
            f"it contradicts the journal entries after it: {problem}",
            path=self.store.uri(layout.checkpoint(start)))), start)

    def _rebuild(self, pos: int, state: StreamState, base: int, seen: Replayed | None = None) -> StreamState:
        """The state after entry ``pos`` from ``state``, the state after entry ``base``: one
        batched read of the entries between that this handle has not kept. ``seen`` collects
        the chunks the entries commit (a checkpoint's cross-check, :mod:`.crosscheck`)."""
        todo = list(range(base + 1, pos + 1))
        raws = dict((p, self._recent[p]) for p in todo if p in self._recent)
        missing = [p for p in todo if p not in raws]
        if missing:
            for p, raw in zip(missing, self._ahead.take_present([layout.entry(p) for p in missing])):
                if raw is None:  # nothing else holds its change: no state after it can be built
                    gone = self.store.uri(layout.entry(p))
                    raise corrupt("journal entry", gone, FileNotFoundError(gone), layout.stream_url(gone))
                raws[p] = raw
            for p in missing[-RECENT_ENTRIES:]:
                self.remember(p, raws[p])  # a cold read's window needs the newest entries' chunks
        changes: list[dict[str, Any]] = []
        for p in todo:  # changes are applied together; an entry holding the whole state restarts
            path = self.store.uri(layout.entry(p))
            d = change_of(raws[p], p, path)  # its chunks are not needed (nor unpacked) here
            if CHANGE in d:
                changes.append(d[CHANGE])
                if seen is not None:
                    self._cross_checked(seen, p, d, path)
            else:
                state, changes = Entry.build(Entry.parse(raws[p], path=path), path=path).state, []
                if seen is not None:
                    seen.restarted = True
        if changes:
            try:
                state = apply_all(state, changes)
            except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
                where = self.store.uri(layout.entry(culprit(state, changes, pos)))
                raise corrupt("journal entry", where, e, layout.stream_url(where)) from e
            if state.pos != pos:
                where = self.store.uri(layout.entry(pos))
                raise corrupt("journal entry", where, ValueError(f"the changes end at {state.pos}"),
                              layout.stream_url(where))
        for p in todo:
            check_sealed(raws[p], state, self.store.uri(layout.entry(p)))
        self.keep(state)
        return state

    def _cross_checked(self, seen: Replayed, pos: int, d: dict[str, Any], path: str) -> None:
        """Note stored change entry ``d`` (position ``pos``) in ``seen``; its packed chunks
        unpack once, for the cross-check and for the reads planned next (kept as its delta)."""
        if "packed" in d:
            try:
                delta = Entry.delta_of(d, path=path, expanded=True)
            except CorruptMetadataError:
                pass  # as one that does not unpack: the cross-check names the entry
            else:
                seen.add(pos, d[CHANGE], delta["chunks"], checked=True)
                self._keep_delta(pos, delta)
                return
        seen.add_entry(pos, d[CHANGE], d)

    def _keep_delta(self, pos: int, delta: dict[str, Any]) -> None:
        kept = self._deltas
        kept[pos] = delta
        while len(kept) > RECENT_ENTRIES or sum(len(k["chunks"]) for k in kept.values()) > KEPT_DELTA_CHUNKS:
            kept.pop(min(kept))

    def mark_of(self, pos: int) -> CheckpointMark | None:
        """The checkpoint mark entry ``pos`` holds (format v6), None if it holds none or is
        missing: one read, the entry's chunks not decoded."""
        rel = layout.entry(pos)
        try:
            d = change_of(self._recent.get(pos) or self.store.read(rel), pos, self.store.uri(rel))
        except FileNotFoundError:
            return None
        ch = d.get(CHANGE)
        try:
            return None if ch is None else CheckpointMark.checked(ch.get("checkpoint"), "state.checkpoint")
        except (TypeError, ValueError) as e:
            raise corrupt("journal entry", self.store.uri(rel), e, self.store.display_url) from e

    def _checkpoint(self, pos: int) -> tuple[StreamState, int | None]:
        """The state after entry ``pos`` and its checkpoint's stored size: from its checkpoint,
        or (size None) from the entry itself when it holds the whole state, or rebuilt from the
        checkpoint before it."""
        rel = layout.checkpoint(pos)
        try:
            data = self._ahead.take(rel)
            return checkpoint.decode(data, pos, self.store.uri(rel)), len(data)
        except (FileNotFoundError, CorruptMetadataError) as e:
            return self._older(pos, e), None

    def _older(self, pos: int, problem: BaseException) -> StreamState:
        """The state after entry ``pos`` without its checkpoint (lost, unreadable or
        contradicting the journal: ``problem``): from the entry itself when it holds the whole
        state, else rebuilt from the checkpoint that entry names."""
        rel = layout.entry(pos)
        where = self.store.uri(layout.checkpoint(pos))
        try:
            d = Entry.parse(self.store.read(rel), path=self.store.uri(rel))
        except FileNotFoundError:
            d = {CHANGE: {"checkpoint": [pos]}}  # collected: no older checkpoint is named
        if CHANGE not in d:
            return Entry.build(d, path=self.store.uri(rel)).state
        older = Entry.checkpoint_of(d)
        if older >= pos:
            raise CorruptMetadataError(
                f"checkpoint {where} cannot be used ({problem}) and no older checkpoint can rebuild it (the "
                f"entries from one were collected); run `tstream fsck {self.store.display_url}` and `tstream "
                f"repair {self.store.display_url}`, which rewrites it when the journal holds its state",
                path=where)
        logger.warning("checkpoint %s cannot be used (%s); rebuilding the state from checkpoint %d "
                       "(`tstream repair` rewrites it)", where, problem, older)
        return self.state_at(pos, older)

    def read_entries(self, positions: Sequence[int]) -> list[Entry]:
        """The entries at ``positions``, in that order: one batched read."""
        rels = [layout.entry(p) for p in positions]
        if not rels:
            return []
        raws = dict(zip(positions, self.store.read_many(rels)))
        built: dict[int, StreamState] = {}
        out: dict[int, Entry] = {}
        for p in sorted(set(positions)):  # a change entry decodes on the one before it
            out[p] = self.decode(raws[p], layout.entry(p), built)
            built[p] = out[p].state
        return [out[p] for p in positions]

    def read_deltas(self, positions: Sequence[int], *, expanded: bool = False) -> list[dict[str, Any]]:
        """:meth:`Entry.delta_json` of the entries at ``positions`` (``expanded``: see :meth:`Entry.decode_delta`),
        in that order: one batched read of those this handle has not kept (:meth:`remember`; none:
        no read), states not decoded. A kept entry decodes from the very bytes the store holds;
        an expanded delta the open's cross-check decoded is not decoded again (the deltas
        returned are shared: not to be changed)."""
        decoded = self._deltas if expanded else {}
        kept = dict(self._recent)
        missing = [p for p in positions if p not in kept and p not in decoded]
        if missing:
            read = self.store.read_many([layout.entry(p) for p in missing])
            kept.update(zip(missing, read))
            for p, data in sorted(zip(missing, read))[-RECENT_ENTRIES:]:
                self.remember(p, data)  # a read plans twice (its bound, then its chunks)
        return [decoded.get(p) or at_position(Entry.decode_delta(kept[p], path=self.store.uri(layout.entry(p)),
                                                                 expanded=expanded), p, self.store.uri(layout.entry(p)))
                for p in positions]

    def read_entry(self, pos: int) -> Entry:
        """The entry at ``pos`` (FileNotFoundError if it is absent)."""
        rel = layout.entry(pos)
        return self.decode(self.store.read(rel), rel)

    def known(self, pos: int, data: bytes) -> Entry:
        """The entry at ``pos`` from its stored bytes ``data``, read from its slot (kept)."""
        rel = layout.entry(pos)
        entry = self.decode(data, rel)
        self.remember(pos, data)
        return entry

    def try_entry(self, pos: int, ahead: Sequence[int] = (), also: Also | None = None) -> Entry | None:
        """The entry at ``pos`` or None: one store call, the whole of a poll with nothing new;
        ``ahead``: entries read next (a read's open index node), fetched in it unless kept;
        ``also``: other objects read next (a seek's index node), fetched in it too."""
        rel = layout.entry(pos)
        unkept = [p for p in ahead if p != pos and p not in self._recent]
        if (unkept or (also and also[1])) and rel not in self._ahead:  # the probe last of the entries
            for p, raw in zip(unkept, self._ahead.fetch([*(layout.entry(p) for p in unkept), rel], also)):
                got = self._ahead.pop(layout.entry(p))  # absent ones too: a later read must look again
                if raw is not None:
                    self.remember(p, got or raw)
        try:
            data = self._ahead.take(rel)
        except FileNotFoundError:
            return None
        entry = self.decode(data, rel)
        self.remember(pos, data)
        return entry

    def head(self, known: Entry | None = None) -> Entry:
        """The newest entry: read the head hint, then probe past it (a stale hint is fine).

        ``known`` is an entry the caller already has; probing starts from the newer of the two.
        Hints are hints: a missing or unreadable head (or anchor) costs a search over journal
        positions, O(log n) reads (see :meth:`_search_newest`), and the next commit rewrites it.
        """
        try:
            return self._head(known)
        finally:
            self._ahead.clear()  # read for this call: an absent slot may be filled by now

    def _head(self, known: Entry | None) -> Entry:
        entry: Entry | None = None
        hint: Entry | None = None
        try:
            data = self.store.read(layout.HEAD)
            if known is None or stored_pos(data) > known.pos:  # else the hint is no news
                d = Entry.parse(data, path=self.store.uri(layout.HEAD))
                self._ahead.fetch(open_batch(d["pos"], Entry.checkpoint_of(d) if CHANGE in d else None,
                                             self._states, self._recent))
                entry = hint = self.decode(data, layout.HEAD, parsed=d)
                self.remember(entry.pos, data, hint=True)  # a copy of that entry's stored bytes
                own = self._ahead.pop(layout.entry(entry.pos))
                if own == data:  # its own slot holds the very bytes: sound, no check at commit
                    self.remember(entry.pos, own)
        except FileNotFoundError:
            pass
        except CorruptMetadataError as e:
            if e.path != self.store.uri(layout.HEAD):
                raise  # the hint is sound: an entry its state is rebuilt from is not (named)
            logger.warning("head hint %s is unreadable (%s); finding the newest journal entry by "
                           "search instead (the next commit rewrites the head)",
                           self.store.uri(layout.HEAD), e.__cause__)
        if known is not None and (entry is None or known.pos > entry.pos):
            entry = known
            self._ahead.clear()
        if entry is None:
            entry = self._search_newest()
        newest = probe_past(entry, lambda e: self.try_entry(e.pos + 1))
        if newest is hint and newest.pos in self._hint_only:  # known through the hint alone: a
            self._unconfirmed = newest.pos  # commit confirms its slot first
        return newest

    def confirm(self, pos: int) -> None:
        """Before a commit at ``pos + 1``: when this handle knows entry ``pos`` only through the
        head hint's copy (one read, once), check that the entry itself is there and sound.
        Committing past a missing or torn newest entry would leave a hole in the journal, and
        the commit's head write would overwrite the only copy that restores it; so this refuses
        (CorruptMetadataError naming the entry and ``tstream repair``, which restores it from
        the hint)."""
        if self._unconfirmed != pos:
            return
        rel = layout.entry(pos)
        path = self.store.uri(rel)
        try:
            data = self.store.read(rel)
            copy = self._recent.get(pos)
            # other bytes are sound only where repair wrote the hint holding the whole state
            # (from a format-5 entry) and the entry parses as the same commit
            if data != copy and (copy is None or CHANGE in Entry.parse(copy, path=path) or
                                 Entry.parse(data, path=path).get("nonce") != Entry.parse(copy, path=path)["nonce"]):
                raise unsound_newest(self.store, path, None)
        except FileNotFoundError as e:
            raise unsound_newest(self.store, path, "is missing") from e
        except CorruptMetadataError as e:
            if e.path == path and "differs from the head hint" in str(e):
                raise
            raise unsound_newest(self.store, path, f"is torn or edited ({e.__cause__ or e})") from e
        self._unconfirmed = None

    def _present(self, pos: int) -> bool:
        try:
            self.store.read(layout.entry(pos))
            return True
        except FileNotFoundError:
            return False

    def _search_newest(self) -> Entry:
        """The newest entry without the head hint: exponential then binary search over positions.

        Live entries are contiguous from the lowest one garbage collection kept to the newest,
        so ``present(p)`` is monotone above the lowest live position: O(log n) reads.
        """
        lo = self._lowest_live()
        if lo is None:
            raise error("TSTREAM_STREAM_NOT_FOUND", url=self.store.display_url)
        return self.read_entry(self._no_hole_past(newest_present(self._present, lo)))

    def newest_stored(self) -> int | None:
        """The newest position whose entry object exists, readable or not (None: no journal).
        O(log n) existence reads, no decoding: what ``repair`` needs when the newest entry is
        torn and no hint holds a copy of it."""
        lo = self._lowest_live()
        return None if lo is None else self._no_hole_past(newest_present(self._present, lo))

    def _no_hole_past(self, found: int) -> int:
        """``found``, the newest entry a search over positions found, once a listing shows no
        entry past the next one (2 list calls, only where the head hint is lost or unreadable).
        The search takes the journal as contiguous: a lost entry below entries that exist would
        pass for its end, and the next commit would take its position, hiding every commit
        after it. An entry past ``found + 1`` while ``found + 1`` is absent is such a loss
        (commits are created in order, and collection never deletes at the newest end); one
        at ``found + 1`` is a commit that landed meanwhile (the caller probes past it)."""
        folders = sorted((f for f in self.store.list(layout.JOURNAL) if f.isdigit()), key=int)
        if not folders:
            return found
        listed = (layout.numbered_name(n) for n in self.store.list(layout.journal_folder(folders[-1])))
        newest = max((p for p in listed if p is not None), default=found)
        if newest > found + 1 and not self._present(found + 1):
            gone = self.store.uri(layout.entry(found + 1))
            raise corrupt("journal entry", gone,
                          FileNotFoundError(f"it is missing while entries up to {newest} exist"),
                          layout.stream_url(gone))
        return found

    def _lowest_live(self) -> int | None:
        """Where the live journal starts: the anchor, else entry 0 (never collected) when entry
        1 exists, else the lowest listed entry (only when GC ran and the anchor is lost)."""
        anchor = self._anchor_pos()
        if anchor is not None and self._present(anchor):
            return anchor
        has_zero = self._present(0)
        if has_zero and self._present(1):
            return 0
        listed = self.lowest_listed()  # GC deleted [1, x) or nothing but entry 0 exists
        return listed if listed is not None else (0 if has_zero else None)

    def collected(self, pos: int) -> bool:
        """Whether garbage collection deleted entry ``pos`` (it lies below the anchor; one read)."""
        anchor = self._anchor_pos()
        return anchor is not None and pos < anchor

    def _anchor_pos(self) -> int | None:
        try:
            return decode_anchor(self.store.read(layout.ANCHOR))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as e:
            logger.warning("anchor %s is unreadable (%s: %s); searching the journal instead "
                           "(`tstream repair` rewrites it)", self.store.uri(layout.ANCHOR), type(e).__name__, e)
            return None

    def lowest_listed(self) -> int | None:
        """The lowest entry position above 0 that a listing shows (2 list calls)."""
        for folder in self.store.list(layout.JOURNAL):
            listed = (layout.numbered_name(n) for n in self.store.list(layout.journal_folder(folder)))
            above = sorted(p for p in listed if p is not None and p > 0)
            if above:
                return above[0]
        return None
