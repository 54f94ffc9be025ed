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
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from ..codec import INT, NONE, DictRecord, dict_of, opt, record, stored, tuple_of

if TYPE_CHECKING:  # the state holds these records: it imports this module
    from .state import Segment, StreamState


@record
@dataclass(frozen=True)
class SealedRecord(DictRecord):
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

    id: int = stored(INT)
    lo: int = stored(INT)
    hi: int = stored(INT)
    rows: int = stored(INT)
    bytes: int = stored(INT)
    chunks: int = stored(INT)
    first_seq: int = stored(INT)
    next_seq: int = stored(INT)
    last_tso: int = stored(INT)
    sealed_epoch: int = stored(INT)
    sealed_pos: int = stored(INT)
    successors: tuple[int, ...] = stored(tuple_of(INT))

    @classmethod
    def of(cls, s: Segment, epoch: int, pos: int, created: Sequence[Segment]) -> SealedRecord:
        """The record of segment ``s`` (as it was before), sealed by the scale at ``pos`` into
        ``epoch`` that created ``created``."""
        return cls(s.id, s.lo, s.hi, s.rows, s.bytes, s.chunks, s.first_seq, s.next_seq, s.last_tso, epoch, pos,
                   tuple(c.id for c in created if c.lo < s.hi and s.lo < c.hi))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the stored object's)."""
        return self.to_json()


@record
@dataclass(frozen=True)
class EpochRecord(DictRecord):
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

    epoch: int = stored(INT)
    pos: int = stored(INT)
    _: KW_ONLY
    wall: int | None = stored(opt(INT), default=None, omit=NONE)
    tick: int | None = stored(opt(INT), default=None, omit=NONE)
    sealed: tuple[int, ...] = stored(tuple_of(INT))
    created: tuple[int, ...] = stored(tuple_of(INT))
    predecessors: dict[int, tuple[int, ...]] | None = stored(opt(dict_of(tuple_of(INT), int_keys=True)), default=None,
                                                             omit=NONE)
    #: (stored as null, not left out, when None)
    segments: tuple[tuple[int, int, int], ...] | None = stored(opt(tuple_of(tuple_of(INT))), missing=None)

    @classmethod
    def initial(cls) -> EpochRecord:
        """The stand-in record of epoch 0 of a stream never scaled (no object on the store)."""
        return cls(0, 0, sealed=(), created=(), segments=None)

    @classmethod
    def of(cls, after: StreamState, pos: int, sealed: Sequence[Segment], created: Sequence[Segment]) -> EpochRecord:
        """The record of the scale at ``pos`` (``after``: the state it committed)."""
        return cls(after.epoch, pos, sealed=tuple(s.id for s in sealed), created=tuple(c.id for c in created),
                   segments=tuple((s.id, s.lo, s.hi) for s in after.segments), wall=after.wall, tick=after.tick,
                   predecessors={c.id: tuple(s.id for s in sealed if s.lo < c.hi and c.lo < s.hi) for c in created})
