"""What a commit does to the stream state: floors, sequence numbers, dedupe, writers, the tick.

Pure functions of (state, request) so that a retry after a lost race recomputes everything from
the winner's state (two reads aside: ``count_raised`` for the ack, and the orphan fence's check
that a writer stalled past its margin still has its files, :mod:`~pyspark_tstream.store.fence`,
no store call otherwise). Invariants kept:

* writer lanes: every chunk a writer commits to a segment gets
  ``floor = max(lane, tick) + 1``, where ``lane`` is the largest ``_tso`` that writer committed
  to that segment before this commit (0 for a one-shot writer). All chunks of one commit are
  floored against the lane's previous commit, never against each other: a micro-batch is an
  unordered set, and another writer's clock never moves a record. ``_seq`` stays dense per
  segment in commit order (chunk ``k`` gets ``seq = segment.next_seq``), so ``_tso`` increases
  within a chunk and within a lane, not along a segment;
* nothing committed after tick ``G`` is published has ``_tso <= G`` (floors exceed the tick);
  ticks end on a millisecond, so later records are in a later millisecond too;
* ``G`` never decreases; it is the min over live writers of their latest committed ``_tso`` (the
  max committed ``_tso`` when none is live); a live writer silent for ``writerLeaseMs`` is
  dropped only by this function, i.e. through a journal record;
* the same (writer, batch) commits at most once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import pyarrow as pa

from ..codec import DEFAULT, INT, DictRecord, record, stored
from ..errors import SegmentSealedError
from ..journal.entries import Chunk, Entry
from ..journal.expiry import end_leases, quiet
from ..journal.state import DEDUPE_WINDOW, SchemaChange, StreamState
from ..schema import decode_schema, encode_schema, reconcile
from ..store.fence import Fence
from ..timestamps import LOGICAL_MASK, final_bounds, final_marks, tso_id
from .spec import ChunkInfo, fits


def floor_after(lane: int, tick: int) -> int:
    """The least ``_tso`` a commit may give a record of a segment: above the writer's lane there
    (its order) and above the tick (nothing at or below a published tick ever appears)."""
    return max(lane, tick) + 1


#: Reads a chunk's raw timestamps to count exactly how many records its floor raised.
CountRaised = Callable[[ChunkInfo, int], int]


@record
@dataclass(frozen=True)
class Moved(DictRecord):
    """How many records each rule that may move a record's time moved (docs/design.md §3.2):
    ``lane`` (raised above the same writer's earlier records in its segment), ``tick`` (raised
    above the published tick) and ``cap`` (client time lowered to arrival time)."""

    lane: int = stored(INT, default=0, omit=DEFAULT)
    tick: int = stored(INT, default=0, omit=DEFAULT)
    cap: int = stored(INT, default=0, omit=DEFAULT)

    @property
    def raised(self) -> int:
        """Records moved up (``lane + tick``)."""
        return self.lane + self.tick

    def __add__(self, other: Moved) -> Moved:
        return Moved(*(getattr(self, rule) + getattr(other, rule) for rule in MOVE_RULES))

    def counts(self) -> dict[str, int]:
        """Every rule's count, zeros too (an :class:`Ack`'s ``moved``)."""
        return {rule: getattr(self, rule) for rule in MOVE_RULES}

    def encode(self) -> dict[str, int]:
        """The stored form: the rules that moved something, in :data:`MOVE_RULES` order."""
        return self.to_json()

    @classmethod
    def decode(cls, stored: Mapping[str, Any]) -> Moved:
        return cls.from_json(dict(stored))


#: The rules that may move a record's time, as counted in acks and journal entries.
MOVE_RULES: tuple[str, ...] = tuple(f.name for f in fields(Moved))


@dataclass(frozen=True)
class CommitInfo:
    """What a data commit did, as its journal entry's ``info`` stores it (and a group-commit
    entry's :class:`~pyspark_tstream.journal.entries.Fold` stores each folded request's).

    ``rows`` committed; ``moved`` per rule and ``raised`` (``moved.raised`` for the entries
    written now; read on its own, as stored); ``expired``: the writers whose lease this commit
    ended; ``folded``: how many requests a group-commit entry folded (0: the entry of one
    commit). A field at zero or empty is left out of the stored form, except ``rows``.
    """

    rows: int
    moved: Moved = field(default_factory=Moved)
    raised: int = 0
    expired: tuple[str, ...] = ()
    folded: int = 0

    #: The stored keys in stored order: a fold's order is not a single commit's, and the entry
    #: bytes are part of the format.
    ORDER: ClassVar[tuple[str, ...]] = ("rows", "raised", "moved", "expired")
    FOLD_ORDER: ClassVar[tuple[str, ...]] = ("rows", "folded", "moved", "raised", "expired")

    @classmethod
    def of(cls, rows: int, moved: Moved, expired: Sequence[str]) -> CommitInfo:
        """The info of one commit."""
        return cls(rows=rows, moved=moved, raised=moved.raised, expired=tuple(expired))

    @classmethod
    def fold(cls, parts: Sequence[CommitInfo]) -> CommitInfo:
        """The info of an entry that folds ``parts`` (their sums; expired writers sorted)."""
        return cls(rows=sum(p.rows for p in parts), moved=sum((p.moved for p in parts), Moved()),
                   raised=sum(p.raised for p in parts), expired=tuple(sorted({w for p in parts for w in p.expired})),
                   folded=len(parts))

    def encode(self) -> dict[str, Any]:
        """The stored ``info``."""
        stored = {"rows": self.rows, "folded": self.folded, "raised": self.raised, "moved": self.moved.encode(),
                  "expired": list(self.expired)}
        return {k: stored[k] for k in (self.FOLD_ORDER if self.folded else self.ORDER) if k == "rows" or stored[k]}

    @classmethod
    def decode(cls, info: Mapping[str, Any]) -> CommitInfo:
        """The info of a data commit's entry (or a folded request) as stored."""
        return cls(rows=int(info.get("rows", 0)), moved=Moved.decode(info.get("moved", {})),
                   raised=int(info.get("raised", 0)), expired=tuple(info.get("expired", ())),
                   folded=int(info.get("folded", 0)))


@dataclass(frozen=True)
class SegmentAck:
    """What a commit wrote to one segment: its ``_seq`` range ``[first_seq, last_seq]``, the
    smallest and largest ``_tso`` and the record count.

    Also read by key (``ack.segments[seg]["rows"]``), as the mapping it replaced was.
    """

    first_seq: int
    last_seq: int
    first_tso: int
    last_tso: int
    rows: int

    #: The keys ``seg_ack[key]`` accepts (the field names).
    KEYS: ClassVar[tuple[str, ...]] = ("first_seq", "last_seq", "first_tso", "last_tso", "rows")

    @property
    def first_id(self) -> str:
        """``first_tso`` as a ``<ms>-<logical>`` id."""
        return tso_id(self.first_tso)

    @property
    def last_id(self) -> str:
        """``last_tso`` as a ``<ms>-<logical>`` id."""
        return tso_id(self.last_tso)

    def __getitem__(self, key: str) -> int:
        if key not in self.KEYS:
            raise KeyError(f"{key!r}: a segment's ack holds {', '.join(self.KEYS)}")
        value: int = getattr(self, key)
        return value

    def keys(self) -> tuple[str, ...]:
        """The keys, so ``dict(seg_ack)`` gives the plain mapping."""
        return self.KEYS

    def with_chunk(self, c: Chunk) -> SegmentAck:
        """This ack with a later chunk of the same commit added (chunks of one commit may
        overlap in time: sorted runs of an unordered batch)."""
        return SegmentAck(self.first_seq, c.seq + c.rows - 1, min(self.first_tso, c.lo), max(self.last_tso, c.hi),
                          self.rows + c.rows)

    @classmethod
    def of(cls, c: Chunk) -> SegmentAck:
        """The ack of a commit's first chunk in its segment."""
        return cls(c.seq, c.seq + c.rows - 1, c.lo, c.hi, c.rows)


@dataclass
class Ack:
    """What an append did (S2-style): positions and adjusted timestamps per segment.

    ``segments`` maps segment id to a :class:`~pyspark_tstream.write.commit.SegmentAck` (``first_seq``, ``last_seq``,
    ``first_tso``, ``last_tso``, ``rows``; also read by key). ``moved`` counts the records each
    rule moved: ``lane`` (raised above the same writer's earlier records in its segment),
    ``tick`` (raised above the published tick) and ``cap`` (client time lowered to arrival
    time); ``raised`` is ``lane + tick``.
    ``duplicate`` is True when (writer_id, batch_id) had already been committed (or, for a
    writer whose batch ids only increase, a later batch was); the other fields then describe
    that earlier commit when it is still known, and ``note`` says why nothing was appended.
    """

    pos: int
    rows: int
    tick: int
    segments: dict[int, SegmentAck] = field(default_factory=dict)
    raised: int = 0
    duplicate: bool = False
    writer_id: str | None = None
    batch_id: Any = None
    moved: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MOVE_RULES, 0))
    note: str = ""

    @property
    def first_tso(self) -> int | None:
        """Smallest ``_tso`` this commit wrote (None for a data-less commit)."""
        return min((s.first_tso for s in self.segments.values()), default=None)

    @property
    def last_tso(self) -> int | None:
        """Largest ``_tso`` this commit wrote (None for a data-less commit)."""
        return max((s.last_tso for s in self.segments.values()), default=None)

    @property
    def first_id(self) -> str | None:
        """``first_tso`` as a ``<ms>-<logical>`` id."""
        return None if self.first_tso is None else tso_id(self.first_tso)

    @property
    def last_id(self) -> str | None:
        """``last_tso`` as a ``<ms>-<logical>`` id."""
        return None if self.last_tso is None else tso_id(self.last_tso)

    @classmethod
    def from_entry(cls, entry: Entry, *, duplicate: bool = False) -> Ack:
        """The ack of a committed entry (``duplicate``: a replay answered from it)."""
        segs: dict[int, SegmentAck] = {}
        for c in entry.chunks:
            s = segs.get(c.seg)
            segs[c.seg] = SegmentAck.of(c) if s is None else s.with_chunk(c)
        info = CommitInfo.decode(entry.info)
        return cls(pos=entry.pos, rows=sum(c.rows for c in entry.chunks), tick=entry.state.tick,
                   segments=segs, raised=info.raised, duplicate=duplicate,
                   writer_id=entry.writer, batch_id=entry.batch, moved=info.moved.counts())


def _advance_tick(state: StreamState) -> None:
    live = (state.writers.get(wid) for wid in quiet(state).live)  # the live writers alone, not all
    blockers = [w.tso for w in live if w is not None and w.live]
    for declared in state.config.writers:
        w = state.writers.get(declared)
        if w is None or not w.seen:
            blockers.append(0)
    candidate = min(blockers) if blockers else state.max_tso
    # Ticks end on a millisecond (logical part all ones) and floors start the next one, so no
    # record committed later shares a millisecond with anything at or below the tick: Spark's
    # late-row filter (event_time <= watermark) then drops nothing with a zero-delay watermark.
    state.tick = max(state.tick, candidate | LOGICAL_MASK if candidate > 0 else 0)


@dataclass(frozen=True)
class CommitIntent:
    """What a caller asks of one commit beside its chunks: who commits (and how its batches
    are deduplicated), what kind of record it is, and the data's schema."""

    writer_id: str | None = None
    batch_id: Any = None
    session: bool = False  # the writer holds the tick until it closes or its lease expires
    #: batch ids of this writer only increase (Delta's ``txnVersion``): an integer batch id at or
    #: below the writer's last committed one is a no-op even if that exact id never committed
    monotonic: bool = False
    op: str = "append"
    heartbeat: int | None = None  # a tso the writer promises not to go below
    close: bool = False  # the writer session ends: stop holding the tick
    schema: pa.Schema | None = None  # the data's user schema (for a first write or mergeSchema)
    merge_schema: bool = False


@dataclass
class CommitRequest:
    """One commit: chunks (possibly none) and what the caller asked of it."""

    chunks: Sequence[ChunkInfo] = ()
    intent: CommitIntent = field(default_factory=CommitIntent)
    now: int = 0
    count_raised: CountRaised | None = None
    #: since when this writer's chunk files have waited for a commit (None: not its own files,
    #: e.g. a published request another writer folds, which keeps them from orphan cleanup)
    fence: Fence | None = None
    duplicate_pos: int | None = field(default=None, init=False)
    #: (last committed batch id, its journal position or -1) when ``monotonic`` skipped the batch
    superseded_by: tuple[Any, int] | None = field(default=None, init=False)

    def settled(self, state: StreamState) -> bool:
        """True if (writer, batch) needs no commit on ``state``: committed, or superseded.

        Sets :attr:`duplicate_pos` (the earlier commit's position, -1 when it is older than the
        dedupe window) or :attr:`superseded_by`, which :meth:`skip_text` reports.
        """
        self.duplicate_pos = self.superseded_by = None
        want = self.intent
        writer = state.writers.get(want.writer_id) if want.writer_id is not None else None
        if writer is None or want.batch_id is None:
            return False
        found = writer.find(want.batch_id)
        if found is not None:
            self.duplicate_pos = found
            return True
        last = writer.last_batch() if want.monotonic else None
        if last is not None and type(want.batch_id) is int and want.batch_id <= last:
            where = writer.find(last)
            self.superseded_by = (last, -1 if where is None else where)
            return True
        return False

    def check_files(self) -> None:
        """Refuse to name chunk files orphan cleanup may have deleted: no store call unless the
        writer took longer than the fence margin since its first write (:mod:`~pyspark_tstream.store.fence`)."""
        if self.fence is not None:
            self.fence.check(c.path for c in self.chunks)

    def skip_text(self) -> str:
        """Why this request committed nothing, for the log (after :meth:`settled` said so)."""
        head = f"tstream: batch {self.intent.batch_id!r} of writer {self.intent.writer_id!r}"
        if self.superseded_by is not None:
            last, pos = self.superseded_by
            at = f" (journal position {pos})" if pos >= 0 else ""
            return (f"{head} is not above its last committed batch {last!r}{at}: batch ids of an "
                    "idempotent writer only increase; nothing appended")
        if self.duplicate_pos is not None and self.duplicate_pos >= 0:
            return f"{head} was already committed at journal position {self.duplicate_pos}; nothing appended"
        return (f"{head} was already committed (before the writer's last {DEDUPE_WINDOW} batches); "
                "nothing appended")

    def __call__(self, state: StreamState, pos: int) -> Entry | None:
        """Build the entry at ``pos`` on top of ``state`` (a private copy), or None if duplicate.

        Runs right before each conditional create: a writer stalled past the orphan fence
        checks its files are still there first (:meth:`check_files`)."""
        if self.settled(state):
            return None
        self.check_files()
        want = self.intent
        writer = state.writers.get(want.writer_id) if want.writer_id is not None else None
        self._schema(state, pos)
        expired = end_leases(state, self.now, want.writer_id)
        lanes = state.writers[want.writer_id].lanes if writer is not None and want.writer_id is not None else {}
        chunks, moved = self._place(state, lanes)
        rows = sum(c.rows for c in chunks)
        if chunks:
            state.max_tso = max(state.max_tso, max(c.hi for c in chunks))
            if not state.first_tso:
                state.first_tso = min(c.lo for c in chunks)
        state.rows += rows
        state.bytes += sum(c.bytes for c in chunks)
        state.chunks += len(chunks)
        if want.writer_id is not None:
            writer = state.writer_to_change(want.writer_id)
            for c in chunks:
                writer.lanes[c.seg] = max(writer.lanes.get(c.seg, 0), c.hi)
            if want.batch_id is not None:
                writer.remember(want.batch_id, pos)
            mine = max((c.hi for c in chunks), default=0)
            writer.tso = max(writer.tso, mine, want.heartbeat or 0)
            # never back: a folded request's time is when it was published, maybe before this
            # writer's later commits (its wall decides its lease and its expiry)
            writer.wall = max(writer.wall, self.now)
            writer.commits += 1
            writer.rows += rows
            declared = want.writer_id in state.config.writers
            if want.close:
                writer.live = False
                writer.seen = True
            elif want.session or declared:
                writer.live = True
                writer.seen = True
        _advance_tick(state)
        state.wall = max(state.wall, self.now)  # monotone, so the time index can search it
        if chunks and state.config.scaling:
            from ..epochs.scaling import ScalingPolicy, restart_windows

            policy = ScalingPolicy.parse(state.config.scaling)
            if policy is not None:
                restart_windows(state, self.now, policy.window)
        return Entry(pos=pos, op=want.op, wall=self.now, state=state, writer=want.writer_id,
                     batch=want.batch_id, chunks=chunks, info=CommitInfo.of(rows, moved, expired).encode())

    def _schema(self, state: StreamState, pos: int) -> None:
        """Fix or widen the stream schema; a widening is recorded with the tick before it (runs
        before the tick moves), so a live query can end its batches before its records."""
        schema = self.intent.schema
        if schema is None:
            return
        if not state.schema:
            state.schema = encode_schema(schema)
            return
        current = decode_schema(state.schema)
        merged = reconcile(current, schema, merge=self.intent.merge_schema)
        if merged != current:
            state.schema = encode_schema(merged)
            added = merged.names[len(current):]  # reconcile appends new columns, never reorders
            state.schema_changes = [*state.schema_changes, SchemaChange(pos, self.now, state.tick, tuple(added))]

    def _place(self, state: StreamState, lanes: dict[int, int]) -> tuple[list[Chunk], Moved]:
        """Number and floor the chunks; ``lanes`` is the writer's lane state before this commit."""
        out: list[Chunk] = []
        moved = dict.fromkeys(MOVE_RULES, 0)
        for info in self.chunks:
            seg = state.segment(info.seg)
            if seg is None or not fits(info, seg):
                raise SegmentSealedError(
                    f"chunk {info.path} targets segment {info.seg}, which is no longer active (a scale "
                    "sealed it) or no longer owns the chunk's keys; the writer must re-route its records",
                    segment=info.seg)
            lane = lanes.get(seg.id, 0)
            floor = floor_after(lane, state.tick)
            lo, hi = final_bounds(info.raw_lo, info.raw_hi, info.rows, floor)
            out.append(Chunk(seg=seg.id, path=info.path, rows=info.rows, bytes=info.bytes,
                             seq=seg.next_seq, floor=floor, lo=lo, hi=hi,
                             marks=final_marks(info.marks, info.rows, floor), offset=info.offset,
                             file_bytes=info.file_bytes, span_start=info.span_start,
                             span_bytes=info.span_bytes))
            moved["lane"] += info.lane_raised
            moved["cap"] += info.capped
            if info.raw_lo < floor:  # a prefix of the chunk was raised (a_i - i is non-decreasing)
                if info.raw_hi - (info.rows - 1) < floor:
                    n = info.rows
                else:
                    n = self.count_raised(info, floor) if self.count_raised is not None else 0
                moved["tick" if state.tick >= lane else "lane"] += n
            seg.next_seq += info.rows
            seg.last_tso = max(seg.last_tso, hi)
            seg.rows += info.rows
            seg.bytes += info.bytes
            seg.chunks += 1
        return out, Moved(**moved)


def check_schema_for_write(state: StreamState, schema: pa.Schema, merge: bool) -> pa.Schema:
    """The stream schema a write will have (the data's own schema for a first write)."""
    if not state.schema:
        return schema
    return reconcile(decode_schema(state.schema), schema, merge=merge)
