"""Stream state: the stream after a journal entry.

The state (active segments, writers and their dedupe windows, the tick, the open parts of the
time index) is what a commit, a poll, a seek or a report needs. Since format 6 an entry holds
only its change to the state (:mod:`~pyspark_tstream.journal.delta`); the whole state is in
entry 0 and in a checkpoint every so often (:mod:`~pyspark_tstream.journal.checkpoint`), and
the state after an entry is the checkpoint it names plus the changes after it. Entries of
format 5 and older hold the whole state each. Its size is O(active segments + writers + index
fan-out · depth), never O(history): sealed segments move to the sharded sealed map, journal
deltas to compacted index nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..codec import (
    BOOL,
    EMPTY,
    INT,
    INT_TYPES,
    LIST,
    NONE,
    STR,
    TRANSIENT,
    DictRecord,
    ListRecord,
    custom,
    dict_of,
    list_of,
    opt,
    rec,
    record,
    stored,
    tuple_of,
)
from .checkpoint_mark import CheckpointMark
from .compaction_state import CompactionProgress
from .config import ConfigRecord
from .features import FEATURES, READER, WRITER, declared
from .scale_records import EpochRecord, SealedRecord
from .summary import FIRST_SUMMARY_COLUMNS, Summary

if TYPE_CHECKING:
    from .expiry import Quiet

#: How many recent batch ids each writer remembers exactly (Redis IDMP keeps 100).
DEDUPE_WINDOW = 64
#: Group commit: a published request with base ``b`` may be folded only at positions
#: ``(b, b + FOLD_WINDOW]``, and the state remembers the ids folded in its last this-many
#: positions, so no request is folded twice (docs/design.md §7.27).
FOLD_WINDOW = 16


@record
@dataclass
class Segment(ListRecord):
    """An active segment: owns key range ``[lo, hi)`` of ``[0, 2**64)``; stored as the list of
    its fields in this order (the first three always, the others 0 when absent)."""

    id: int = stored(INT)
    lo: int = stored(INT)
    hi: int = stored(INT)
    next_seq: int = stored(INT, default=0)
    last_tso: int = stored(INT, default=0)
    rows: int = stored(INT, default=0)
    bytes: int = stored(INT, default=0)
    chunks: int = stored(INT, default=0)
    first_seq: int = stored(INT, default=0)  # head after truncation
    win_rows: int = stored(INT, default=0)  # rows at the start of the auto-scaling rate window
    win_bytes: int = stored(INT, default=0)
    win_wall: int = stored(INT, default=0)  # wall ms the window started (0: not started)

    @property
    def epoch(self) -> int:
        return segment_epoch(self.id)

    @property
    def number(self) -> int:
        return segment_number(self.id)


#: Low bits of a segment id that hold its number; the creation epoch sits above them.
SEGMENT_NUMBER_BITS = 32
_NUMBER_MASK = (1 << SEGMENT_NUMBER_BITS) - 1


def segment_id(epoch: int, number: int) -> int:
    """Pravega-style id: creation epoch in the high 32 bits, segment number in the low 32."""
    return (epoch << SEGMENT_NUMBER_BITS) | number


def segment_epoch(seg_id: int) -> int:
    """The epoch that created segment ``seg_id``."""
    return seg_id >> SEGMENT_NUMBER_BITS


def segment_number(seg_id: int) -> int:
    """The stream-wide unique number of segment ``seg_id`` (its data folder and sealed-map slot)."""
    return seg_id & _NUMBER_MASK


@record
@dataclass
class Writer(DictRecord):
    """A producer's committed progress, its liveness for the tick, and its dedupe window.

    ``lanes`` maps an active segment id to the largest ``_tso`` this writer committed there: the
    writer lane. A later record of this writer in that segment is raised above it (S2's running
    max, per producer as in Milvus); other writers' records never are. Stored as an object of
    its fields in this order (``seen`` absent: an older build's writer, seen).
    """

    tso: int = stored(INT, default=0, required=True)
    wall: int = stored(INT, default=0, required=True)
    live: bool = stored(BOOL, default=False, required=True)
    seen: bool = stored(BOOL, default=False, missing=True)
    #: [[batch_id, pos], ...] oldest first; a pair is never changed in place (:meth:`remember`
    #: appends and evicts whole pairs), so decoding copies the list, not each pair
    batches: list[list[Any]] = stored(list_of(LIST), factory=list)
    commits: int = stored(INT, default=0)
    rows: int = stored(INT, default=0)
    floor: int | None = stored(opt(INT), default=None, omit=NONE)  # largest integer batch id evicted from the window
    lanes: dict[int, int] = stored(dict_of(INT, int_keys=True), factory=dict, omit=EMPTY)

    def find(self, batch: Any) -> int | None:
        """Journal position of ``batch`` if already committed; -1 if older than the window."""
        for b, pos in self.batches:
            if b == batch:
                return int(pos)
        if self.floor is not None and isinstance(batch, int) and batch <= self.floor:
            return -1
        return None

    def last_batch(self) -> int | None:
        """The largest integer batch id this writer ever committed (None: none yet).

        Exact although the window is bounded: an evicted integer id raised :attr:`floor`, and
        every later one is still in the window. What an increasing-batch writer (``df.write``'s
        ``batchId``, Delta's ``txnVersion``) compares a new batch id with.
        """
        ints = [b for b, _ in self.batches if isinstance(b, int) and not isinstance(b, bool)]
        if self.floor is not None:
            ints.append(self.floor)
        return max(ints, default=None)

    def copy(self) -> Writer:
        """A copy a commit may change without changing this one (lists and lanes copied)."""
        return Writer(tso=self.tso, wall=self.wall, live=self.live, seen=self.seen,
                      batches=[list(b) for b in self.batches], commits=self.commits, rows=self.rows,
                      floor=self.floor, lanes=dict(self.lanes))

    def remember(self, batch: Any, pos: int) -> None:
        self.batches.append([batch, pos])
        while len(self.batches) > DEDUPE_WINDOW:
            old, _ = self.batches.pop(0)
            if isinstance(old, int) and not isinstance(old, bool):
                self.floor = old if self.floor is None else max(self.floor, old)


@record
@dataclass(frozen=True)
class Truncation(ListRecord):
    """A truncation that moved the head, stored ``[wall ms, head_pos]``: garbage collection of
    what it cut waits the grace period after ``wall``."""

    wall: int = stored(INT)
    head_pos: int = stored(INT)


@record
@dataclass(frozen=True)
class SchemaChange(ListRecord):
    """One additive schema change, stored ``[pos, wall, tick, [columns]]``: the commit at ``pos``
    (wall ``wall`` ms) added ``columns``; ``tick`` is the tick published before it."""

    pos: int = stored(INT)
    wall: int = stored(INT)
    tick: int = stored(INT)
    columns: tuple[str, ...] = stored(tuple_of(STR))


@record
@dataclass(frozen=True)
class FoldedAt(ListRecord):
    """The published group-commit requests one journal position folded, stored ``[pos, [ids]]``."""

    pos: int = stored(INT)
    ids: tuple[str, ...] = stored(tuple_of(STR))


def _summary_ok(v: Any) -> bool:
    return type(v) is list and len(v) >= FIRST_SUMMARY_COLUMNS and INT_TYPES.issuperset(map(type, v))


def _features(v: Any) -> dict[str, dict[str, str]]:
    return {p: f for p in (READER, WRITER) if (f := declared({FEATURES: v}, p))}


_CONFIG = custom(ConfigRecord.to_json, ConfigRecord.from_json, lambda v: type(v) is dict)
_SUMMARY = custom(Summary.encode, Summary.decode, _summary_ok)
_COMPACTION = custom(CompactionProgress.encode, CompactionProgress.decode, lambda v: type(v) is dict)
_FEATURES = custom(lambda f: {k: dict(v) for k, v in f.items()}, _features)


@record
@dataclass
class StreamState(DictRecord):
    """The stream after journal entry ``pos``; stored as an object of its fields in this order
    (a field with a default is absent in an older stream's state and reads as the default; the
    last five are left out while empty)."""

    pos: int = stored(INT)
    epoch: int = stored(INT)
    tick: int = stored(INT)
    max_tso: int = stored(INT)
    wall: int = stored(INT)
    created: int = stored(INT)
    schema: str = stored(STR)  # base64 Arrow IPC of the user schema
    config: ConfigRecord = stored(_CONFIG)
    segments: list[Segment] = stored(list_of(rec(Segment)))
    writers: dict[str, Writer] = stored(dict_of(rec(Writer)))
    #: open (unflushed) summaries per level, oldest first
    index: list[list[Summary]] = stored(list_of(list_of(_SUMMARY)))
    rows: int = stored(INT, default=0)
    bytes: int = stored(INT, default=0)
    chunks: int = stored(INT, default=0)
    next_number: int = stored(INT, default=0)  # next segment number
    head_pos: int = stored(INT, default=0)  # first journal position still readable (truncation moves it)
    head_tso: int = stored(INT, default=0)  # records with _tso <= head_tso are gone
    sealed: int = stored(INT, default=0)  # segments sealed so far
    first_tso: int = stored(INT, default=0)  # _tso of the oldest readable record (0: none yet)
    gc_pos: int = stored(INT, default=0)  # chunks of journal positions below this were deleted
    #: journal entries and nodes below this were deleted (lags gc_pos by a run)
    meta_gc_pos: int = stored(INT, default=0)
    pending_sealed: list[SealedRecord] = stored(list_of(rec(SealedRecord)), factory=list)  # not yet in the shards
    pending_epoch: EpochRecord | None = stored(opt(rec(EpochRecord)), default=None)  # epoch record not yet written
    truncations: list[Truncation] = stored(list_of(rec(Truncation)), factory=list)  # recent ones, oldest first
    #: compaction progress (python/compaction/compact.py): scan position, per-segment summaries,
    #: and how far replaced files were deleted; empty until the first compaction
    compaction: CompactionProgress = stored(_COMPACTION, factory=CompactionProgress, omit=EMPTY)
    #: additive schema changes (mergeSchema), oldest first; at most one per stream column, so
    #: bounded by the schema it describes. Live queries stop their batches before a change
    #: (read/schema_guard.py)
    schema_changes: list[SchemaChange] = stored(list_of(rec(SchemaChange)), factory=list, omit=EMPTY)
    #: group commit: the positions of the last ``FOLD_WINDOW`` that folded published requests,
    #: oldest first (write/group.py)
    folded: list[FoldedAt] = stored(list_of(rec(FoldedAt)), factory=list, omit=EMPTY)
    #: format v6: the newest checkpoint of the whole state at or before this position (None: a
    #: stream written by format 5 or older, whose entries each hold the whole state)
    checkpoint: CheckpointMark | None = stored(opt(rec(CheckpointMark)), default=None, omit=EMPTY)
    #: the features this stream uses beyond its format version's, declared by a stream that
    #: needs a new one: ``{"reader": {name: release}, "writer": {...}}``; empty for every stream
    #: so far, and then not stored (:mod:`~pyspark_tstream.journal.features`)
    features: dict[str, dict[str, str]] = stored(_FEATURES, key=FEATURES, factory=dict, omit=EMPTY)
    #: Copy-on-write bookkeeping, never stored: the writers a commit's private copy
    #: (:func:`~pyspark_tstream.journal.delta.state_copy`) changed or removed, in the order it
    #: first did. Its other writers are shared with the state it copied, so they are changed only
    #: through :meth:`writer_to_change` and :meth:`drop_writer`; the change is then built from
    #: these alone (:func:`~pyspark_tstream.journal.delta.change`). None: not such a copy (every
    #: writer is compared).
    edited: dict[str, None] | None = field(default=None, compare=False, repr=False, metadata=TRANSIENT)
    #: Never stored: until when no writer's lease ends or retention passes
    #: (:mod:`~pyspark_tstream.journal.expiry`), so a commit scans no writer before then. None: unknown.
    quiet: Quiet | None = field(default=None, compare=False, repr=False, metadata=TRANSIENT)

    def writer_to_change(self, wid: str) -> Writer:
        """Writer ``wid`` (created if absent), this state's own to change: copied on its first
        change when this state is a commit's private copy, whose writers are shared with the
        committed state it copied."""
        w = self.writers.get(wid)
        if self.edited is not None and wid not in self.edited:
            self.edited[wid] = None
            if w is not None:
                w = self.writers[wid] = w.copy()
        if w is None:
            w = self.writers[wid] = Writer()
        return w

    def drop_writer(self, wid: str) -> None:
        """Remove writer ``wid`` (its state expired)."""
        del self.writers[wid]
        if self.edited is not None:
            self.edited[wid] = None

    def was_folded(self, rid: str) -> int | None:
        """The position that folded published request ``rid``, if within the remembered window."""
        for f in self.folded:
            if rid in f.ids:
                return f.pos
        return None

    def segment(self, seg_id: int) -> Segment | None:
        for s in self.segments:
            if s.id == seg_id:
                return s
        return None
