"""What compaction reached, as the state records it: ``state.compaction["segs"]``, typed.

Invariant: the per-segment summary is stored as a positional JSON list (format v2, §6.12 of
docs/design.md) and read only through :class:`SegmentSummary`, whose :data:`SegmentSummary.FIELDS`
names each position once. Decoding keeps how many fields a stored summary had, so encoding it
again gives the same list: summaries of the first form (5 fields, no ``macro_end``; older ones
had 3, no map version) are read, kept and written back as they were.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from .state import StreamState


@dataclass(frozen=True)
class SegmentSummary:
    """One segment's summary: compaction's progress there, and where plans look its records up.

    Parameters
    ----------
    settled_to : int
        Every ``_seq`` below it is merged into a macro-chunk, adopted, or listed as it is.
    last_pos : int
        The last journal position whose chunks are settled (-1: none).
    chunks : int
        The segment's chunk count up to it: what
        :func:`~pyspark_tstream.compaction.policy.due` subtracts from the segment's chunks.
    bucket, version : int or None
        The macro-map bucket the last compaction of the segment wrote, and its version (plans
        read that version directly); None in the 3-field form.
    macro_end : int or None
        End ``_seq`` of the last macro-chunk in the map: no chunk above it is in one. None in
        the 5-field form, whose map need not list every compacted ``_seq``.
    """

    settled_to: int
    last_pos: int = -1
    chunks: int = 0
    bucket: int | None = None
    version: int | None = None
    macro_end: int | None = None

    #: The stored list's positions, in order (the trailing ones may be absent in older forms).
    FIELDS: ClassVar[tuple[str, ...]] = ("settled_to", "last_pos", "chunks", "bucket", "version", "macro_end")

    @classmethod
    def decode(cls, v: list[Any]) -> SegmentSummary:
        """The summary stored as ``v`` (3, 5 or 6 integers, in :data:`FIELDS` order)."""
        return cls(**{name: int(x) for name, x in zip(cls.FIELDS, v)})

    def encode(self) -> list[int]:
        """The stored list: every field up to the last one present (the form it was read in)."""
        values = [getattr(self, f.name) for f in fields(self)]
        while values and values[-1] is None:
            values.pop()
        return values

    @property
    def map_version(self) -> tuple[int, int] | None:
        """``(bucket, version)`` of the map version the state names, when it names one."""
        if self.bucket is None or self.version is None or self.version < 0:
            return None
        return self.bucket, self.version

    @property
    def lookup_end(self) -> int:
        """Chunks of the segment below this ``_seq`` may be in a macro-chunk (look them up)."""
        return self.settled_to if self.macro_end is None else self.macro_end

    @property
    def map_lists_all(self) -> bool:
        """Whether the map lists every compacted ``_seq`` (6-field form: chunks a compaction
        passed over are listed as they are), so a plan may read it instead of the journal."""
        return self.macro_end is not None

    def merged(self, new: SegmentSummary) -> SegmentSummary:
        """This summary advanced by ``new`` (another compactor's may have landed first): each
        field the larger, the map version the newer; always the 6-field form."""
        known = (self.bucket, self.version) if self.bucket is not None and self.version is not None else (-1, -1)
        bucket, version = max(known, (new.bucket if new.bucket is not None else -1,
                                      new.version if new.version is not None else -1))
        return SegmentSummary(max(new.settled_to, self.settled_to), max(new.last_pos, self.last_pos),
                              max(new.chunks, self.chunks), bucket, version, max(new.lookup_end, self.lookup_end))


def segment_summaries(state: StreamState) -> dict[int, SegmentSummary]:
    """Per segment id, what compaction reached there (empty until the first compaction)."""
    segs = state.compaction.get("segs", {}) if state.compaction else {}
    return {int(k): SegmentSummary.decode(v) for k, v in segs.items()}


def compacted_upto(state: StreamState, seg: int) -> int:
    """The ``_seq`` below which the segment's chunks have been compacted (or left as they are)."""
    segs = state.compaction.get("segs", {}) if state.compaction else {}
    e = segs.get(str(seg))
    return SegmentSummary.decode(e).settled_to if e else 0


def compaction_pos(state: StreamState) -> int:
    """The compaction's scan position: every chunk committed below it is in the macro map
    version the state names for its segment."""
    return int((state.compaction or {}).get("pos", 0))
