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

from .checkpoint_mark import CheckpointMark
from .compaction_state import CompactionProgress
from .config import ConfigRecord
from .features import FEATURES, READER, WRITER, declared
from .scale_records import EpochRecord, SealedRecord
from .summary import Summary

if TYPE_CHECKING:
    from .expiry import Quiet

#: How many recent batch ids each writer remembers exactly (Redis IDMP keeps 100).
DEDUPE_WINDOW = 64
#: Group commit: a published request with base ``b`` may be folded only at positions
#: ``(b, b + FOLD_WINDOW]``, and the state remembers the ids folded in its last this-many
#: positions, so no request is folded twice (docs/design.md §7.27).
FOLD_WINDOW = 16


@dataclass
class Segment:
    """An active segment: owns key range ``[lo, hi)`` of ``[0, 2**64)``."""

    id: int
    lo: int
    hi: int
    next_seq: int = 0
    last_tso: int = 0
    rows: int = 0
    bytes: int = 0
    chunks: int = 0
    first_seq: int = 0  # head after truncation
    win_rows: int = 0  # rows at the start of the auto-scaling rate window
    win_bytes: int = 0
    win_wall: int = 0  # wall ms the window started (0: not started)

    @property
    def epoch(self) -> int:
        return segment_epoch(self.id)

    @property
    def number(self) -> int:
        return segment_number(self.id)

    def to_json(self) -> list[Any]:
        return [self.id, self.lo, self.hi, self.next_seq, self.last_tso, self.rows, self.bytes,
                self.chunks, self.first_seq, self.win_rows, self.win_bytes, self.win_wall]

    @classmethod
    def from_json(cls, v: list[Any]) -> Segment:
        return cls(*v)


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


@dataclass
class Writer:
    """A producer's committed progress, its liveness for the tick, and its dedupe window.

    ``lanes`` maps an active segment id to the largest ``_tso`` this writer committed there: the
    writer lane. A later record of this writer in that segment is raised above it (S2's running
    max, per producer as in Milvus); other writers' records never are.
    """

    tso: int = 0
    wall: int = 0
    live: bool = False
    seen: bool = False
    batches: list[list[Any]] = field(default_factory=list)  # [[batch_id, pos], ...] oldest first
    floor: int | None = None  # largest integer batch id evicted from the window
    commits: int = 0
    rows: int = 0
    lanes: dict[int, int] = field(default_factory=dict)

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
        return Writer(self.tso, self.wall, self.live, self.seen, [list(b) for b in self.batches], self.floor,
                      self.commits, self.rows, dict(self.lanes))

    def remember(self, batch: Any, pos: int) -> None:
        self.batches.append([batch, pos])
        while len(self.batches) > DEDUPE_WINDOW:
            old, _ = self.batches.pop(0)
            if isinstance(old, int) and not isinstance(old, bool):
                self.floor = old if self.floor is None else max(self.floor, old)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"tso": self.tso, "wall": self.wall, "live": self.live, "seen": self.seen,
                             "batches": self.batches, "commits": self.commits, "rows": self.rows}
        if self.floor is not None:
            d["floor"] = self.floor
        if self.lanes:
            d["lanes"] = {str(k): v for k, v in self.lanes.items()}
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Writer:
        return cls(tso=d["tso"], wall=d["wall"], live=d["live"], seen=d.get("seen", True),
                   batches=[list(x) for x in d.get("batches", [])], floor=d.get("floor"),
                   commits=d.get("commits", 0), rows=d.get("rows", 0),
                   lanes={int(k): int(v) for k, v in d.get("lanes", {}).items()})


@dataclass(frozen=True)
class Truncation:
    """A truncation that moved the head, stored ``[wall ms, head_pos]``: garbage collection of
    what it cut waits the grace period after ``wall``."""

    wall: int
    head_pos: int

    def to_json(self) -> list[int]:
        return [self.wall, self.head_pos]

    @classmethod
    def from_json(cls, v: list[Any]) -> Truncation:
        wall, head_pos = v
        return cls(int(wall), int(head_pos))


@dataclass(frozen=True)
class SchemaChange:
    """One additive schema change, stored ``[pos, wall, tick, [columns]]``: the commit at ``pos``
    (wall ``wall`` ms) added ``columns``; ``tick`` is the tick published before it."""

    pos: int
    wall: int
    tick: int
    columns: tuple[str, ...]

    def to_json(self) -> list[Any]:
        return [self.pos, self.wall, self.tick, list(self.columns)]

    @classmethod
    def from_json(cls, v: list[Any]) -> SchemaChange:
        pos, wall, tick, columns = v
        return cls(int(pos), int(wall), int(tick), tuple(columns))


@dataclass(frozen=True)
class FoldedAt:
    """The published group-commit requests one journal position folded, stored ``[pos, [ids]]``."""

    pos: int
    ids: tuple[str, ...]

    def to_json(self) -> list[Any]:
        return [self.pos, list(self.ids)]

    @classmethod
    def from_json(cls, v: list[Any]) -> FoldedAt:
        pos, ids = v
        return cls(int(pos), tuple(ids))


@dataclass
class StreamState:
    """The stream after journal entry ``pos``."""

    pos: int
    epoch: int
    tick: int
    max_tso: int
    wall: int
    created: int
    schema: str  # base64 Arrow IPC of the user schema
    config: ConfigRecord
    segments: list[Segment]
    writers: dict[str, Writer]
    index: list[list[Summary]]  # open (unflushed) summaries per level, oldest first
    rows: int = 0
    bytes: int = 0
    chunks: int = 0
    next_number: int = 0  # next segment number
    head_pos: int = 0  # first journal position still readable (truncation moves it)
    head_tso: int = 0  # records with _tso <= head_tso are gone
    sealed: int = 0  # segments sealed so far
    first_tso: int = 0  # _tso of the oldest readable record (0: none yet)
    gc_pos: int = 0  # chunks of journal positions below this were deleted
    meta_gc_pos: int = 0  # journal entries and nodes below this were deleted (lags gc_pos by a run)
    pending_sealed: list[SealedRecord] = field(default_factory=list)  # not yet in the shards
    pending_epoch: EpochRecord | None = None  # epoch record not yet written
    truncations: list[Truncation] = field(default_factory=list)  # recent ones, oldest first
    #: compaction progress (python/compaction/compact.py): scan position, per-segment summaries,
    #: and how far replaced files were deleted; empty until the first compaction
    compaction: CompactionProgress = field(default_factory=CompactionProgress)
    #: additive schema changes (mergeSchema), oldest first; at most one per stream column, so
    #: bounded by the schema it describes. Live queries stop their batches before a change
    #: (read/schema_guard.py)
    schema_changes: list[SchemaChange] = field(default_factory=list)
    #: group commit: the positions of the last ``FOLD_WINDOW`` that folded published requests,
    #: oldest first (write/group.py)
    folded: list[FoldedAt] = field(default_factory=list)
    #: format v6: the newest checkpoint of the whole state at or before this position (None: a
    #: stream written by format 5 or older, whose entries each hold the whole state)
    checkpoint: CheckpointMark | None = None
    #: the features this stream uses beyond its format version's, declared by a stream that
    #: needs a new one: ``{"reader": {name: release}, "writer": {...}}``; empty for every stream
    #: so far, and then not stored (:mod:`~pyspark_tstream.journal.features`)
    features: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Copy-on-write bookkeeping, never stored: the writers a commit's private copy
    #: (:func:`~pyspark_tstream.journal.delta.state_copy`) changed or removed, in the order it
    #: first did. Its other writers are shared with the state it copied, so they are changed only
    #: through :meth:`writer_to_change` and :meth:`drop_writer`; the change is then built from
    #: these alone (:func:`~pyspark_tstream.journal.delta.change`). None: not such a copy (every
    #: writer is compared).
    edited: dict[str, None] | None = field(default=None, compare=False, repr=False)
    #: Never stored: until when no writer's lease ends or retention passes
    #: (:mod:`~pyspark_tstream.journal.expiry`), so a commit scans no writer before then. None: unknown.
    quiet: Quiet | None = field(default=None, compare=False, repr=False)

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

    def to_json(self) -> dict[str, Any]:
        compaction = self.compaction.encode()
        return {
            "pos": self.pos, "epoch": self.epoch, "tick": self.tick, "max_tso": self.max_tso,
            "wall": self.wall, "created": self.created, "schema": self.schema, "config": self.config.to_json(),
            "segments": [s.to_json() for s in self.segments],
            "writers": {k: w.to_json() for k, w in self.writers.items()},
            "index": [[i.encode() for i in level] for level in self.index],
            "rows": self.rows, "bytes": self.bytes, "chunks": self.chunks,
            "next_number": self.next_number, "head_pos": self.head_pos, "head_tso": self.head_tso,
            "sealed": self.sealed, "first_tso": self.first_tso, "gc_pos": self.gc_pos, "meta_gc_pos": self.meta_gc_pos,
            "pending_sealed": [r.to_json() for r in self.pending_sealed],
            "pending_epoch": None if self.pending_epoch is None else self.pending_epoch.to_json(),
            "truncations": [t.to_json() for t in self.truncations],
            **({"compaction": compaction} if compaction else {}),
            **({"schema_changes": [c.to_json() for c in self.schema_changes]} if self.schema_changes else {}),
            **({"folded": [f.to_json() for f in self.folded]} if self.folded else {}),
            **({"checkpoint": self.checkpoint.to_json()} if self.checkpoint is not None else {}),
            **({FEATURES: {k: dict(v) for k, v in self.features.items()}} if self.features else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StreamState:
        return cls(
            pos=d["pos"], epoch=d["epoch"], tick=d["tick"], max_tso=d["max_tso"], wall=d["wall"],
            created=d["created"], schema=d["schema"], config=ConfigRecord.from_json(d["config"]),
            segments=[Segment.from_json(s) for s in d["segments"]],
            writers={k: Writer.from_json(w) for k, w in d["writers"].items()},
            index=[[Summary.decode(i) for i in level] for level in d["index"]],
            rows=d.get("rows", 0), bytes=d.get("bytes", 0),
            chunks=d.get("chunks", 0), next_number=d.get("next_number", 0),
            head_pos=d.get("head_pos", 0), head_tso=d.get("head_tso", 0), sealed=d.get("sealed", 0),
            first_tso=d.get("first_tso", 0), gc_pos=d.get("gc_pos", 0), meta_gc_pos=d.get("meta_gc_pos", 0),
            pending_sealed=[SealedRecord.from_json(r) for r in d.get("pending_sealed", [])],
            pending_epoch=None if d.get("pending_epoch") is None else EpochRecord.from_json(d["pending_epoch"]),
            truncations=[Truncation.from_json(t) for t in d.get("truncations", [])],
            compaction=CompactionProgress.decode(d.get("compaction", {})),
            schema_changes=[SchemaChange.from_json(c) for c in d.get("schema_changes", [])],
            folded=[FoldedAt.from_json(f) for f in d.get("folded", [])],
            checkpoint=None if d.get("checkpoint") is None else CheckpointMark.from_json(d["checkpoint"]),
            features={p: f for p in (READER, WRITER) if (f := declared(d, p))},
        )
