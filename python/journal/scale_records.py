"""What a scale records, typed: :class:`SealedRecord` per segment it seals, one :class:`EpochRecord`.

Invariant: each record is one JSON object with the same keys in the same order wherever it is
stored (``state.pending_sealed`` / ``state.pending_epoch`` while it waits, then its sealed-map
shard / its epoch record and history chunk), and it is read and written only through its class
here, which names each key once. Every record ever written has all its keys (the stand-in
record of epoch 0, :meth:`EpochRecord.initial`, has its own fixed subset), so encoding a
decoded record gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # the state holds these records: it imports this module
    from .state import Segment, StreamState


@dataclass(frozen=True)
class SealedRecord:
    """The final facts of a sealed segment (docs/protocol.md §7).

    Parameters
    ----------
    id, lo, hi : int
        The segment and its key range ``[lo, hi)``.
    rows, bytes, chunks : int
        Its totals when it was sealed.
    first_seq, next_seq : int
        Its first readable ``_seq`` (head after truncation) and one past its last.
    last_tso : int
        Its largest committed ``_tso``.
    sealed_epoch, sealed_pos : int
        The epoch the scale that sealed it began, and that scale's journal position.
    successors : tuple of int
        The segments created by that scale whose key ranges overlap it.
    """

    id: int
    lo: int
    hi: int
    rows: int
    bytes: int
    chunks: int
    first_seq: int
    next_seq: int
    last_tso: int
    sealed_epoch: int
    sealed_pos: int
    successors: tuple[int, ...]

    #: The stored keys, in stored order (the field names).
    FIELDS: ClassVar[tuple[str, ...]] = ("id", "lo", "hi", "rows", "bytes", "chunks", "first_seq", "next_seq",
                                         "last_tso", "sealed_epoch", "sealed_pos", "successors")

    @classmethod
    def of(cls, s: Segment, epoch: int, pos: int, created: Sequence[Segment]) -> SealedRecord:
        """The record of segment ``s`` (as it was before), sealed by the scale at ``pos`` into
        ``epoch`` that created ``created``."""
        return cls(s.id, s.lo, s.hi, s.rows, s.bytes, s.chunks, s.first_seq, s.next_seq, s.last_tso, epoch, pos,
                   tuple(c.id for c in created if c.lo < s.hi and s.lo < c.hi))

    def to_json(self) -> dict[str, Any]:
        """The stored object."""
        return {name: list(self.successors) if name == "successors" else getattr(self, name) for name in self.FIELDS}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the stored object's)."""
        return self.to_json()

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SealedRecord:
        stored: dict[str, Any] = {name: d[name] for name in cls.FIELDS}
        return cls(**{**stored, "successors": tuple(stored["successors"])})


@dataclass(frozen=True)
class EpochRecord:
    """What the scale that began ``epoch`` did (docs/protocol.md §8).

    Parameters
    ----------
    epoch, pos : int
        The epoch and the journal position of the scale that began it.
    sealed, created : tuple of int
        The segments it sealed and created.
    segments : tuple of (id, lo, hi), optional
        The active segments after it; None only in the record of epoch 0 of a stream never
        scaled (its segments are the initial split of ``config.segments``).
    wall, tick : int, optional
        The state's wall ms and tick after the scale; None only in that epoch-0 record.
    predecessors : dict of int to tuple of int, optional
        Per created segment, the sealed segments it replaced; None only in that epoch-0 record.
    """

    epoch: int
    pos: int
    sealed: tuple[int, ...]
    created: tuple[int, ...]
    segments: tuple[tuple[int, int, int], ...] | None
    wall: int | None = None
    tick: int | None = None
    predecessors: dict[int, tuple[int, ...]] | None = None

    #: The stored keys, in stored order.
    KEYS: ClassVar[tuple[str, ...]] = ("epoch", "pos", "wall", "tick", "sealed", "created", "predecessors",
                                       "segments")
    #: The keys left out when None (``segments`` is stored as null instead).
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"wall", "tick", "predecessors"})

    @classmethod
    def initial(cls) -> EpochRecord:
        """The stand-in record of epoch 0 of a stream never scaled (no object on the store)."""
        return cls(0, 0, (), (), None)

    @classmethod
    def of(cls, after: StreamState, pos: int, sealed: Sequence[Segment], created: Sequence[Segment]) -> EpochRecord:
        """The record of the scale at ``pos`` (``after``: the state it committed)."""
        return cls(after.epoch, pos, tuple(s.id for s in sealed), tuple(c.id for c in created),
                   tuple((s.id, s.lo, s.hi) for s in after.segments), after.wall, after.tick,
                   {c.id: tuple(s.id for s in sealed if s.lo < c.hi and c.lo < s.hi) for c in created})

    def to_json(self) -> dict[str, Any]:
        """The stored object."""
        stored: dict[str, Any] = {
            "epoch": self.epoch, "pos": self.pos, "wall": self.wall, "tick": self.tick,
            "sealed": list(self.sealed), "created": list(self.created),
            "predecessors": None if self.predecessors is None else {
                str(k): list(v) for k, v in self.predecessors.items()},
            "segments": None if self.segments is None else [list(g) for g in self.segments]}
        return {k: stored[k] for k in self.KEYS if not (k in self.OMITTED_WHEN_NONE and stored[k] is None)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> EpochRecord:
        preds, segs = d.get("predecessors"), d.get("segments")
        return cls(epoch=d["epoch"], pos=d["pos"], sealed=tuple(d["sealed"]), created=tuple(d["created"]),
                   segments=None if segs is None else tuple((int(i), int(lo), int(hi)) for i, lo, hi in segs),
                   wall=d.get("wall"), tick=d.get("tick"),
                   predecessors=None if preds is None else {int(k): tuple(v) for k, v in preds.items()})
