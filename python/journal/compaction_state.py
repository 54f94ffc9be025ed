"""What compaction recorded in the journal, typed: ``state.compaction`` and the parts of a
``compact`` entry.

Invariant: each stored form is read and written only through its record here, which names each
stored key or position once: :class:`CompactionProgress` (``state.compaction``, a JSON object),
:class:`SegmentSummary` (one segment's summary in it, a positional list, format v2, §12 of
docs/protocol.md) and :class:`CompactPart` (one part of a ``compact`` entry's ``info``). Decoding
keeps what the stored form held (how many fields a summary had, which keys ``state.compaction``
has and in what order), so encoding it again gives the same bytes: summaries of the first form
(5 fields, no ``macro_end``; older ones had 3, no map version) are read, kept and written back
as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..codec import BOOL, DEFAULT, INT, NONE, STR, DictRecord, ListRecord, opt, rec, record, stored, tuple_of

if TYPE_CHECKING:  # the state holds these records: it imports this module
    from .state import StreamState


@record
@dataclass(frozen=True)
class SegmentSummary(ListRecord):
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

    settled_to: int = stored(INT)
    last_pos: int = stored(INT, default=-1, required=True)
    chunks: int = stored(INT, default=0, required=True)
    bucket: int | None = stored(opt(INT), default=None, omit=NONE)
    version: int | None = stored(opt(INT), default=None, omit=NONE)
    macro_end: int | None = stored(opt(INT), default=None, omit=NONE)

    @classmethod
    def decode(cls, v: Any) -> SegmentSummary:
        """The summary stored as ``v`` (3, 5 or 6 integers, in field order); TypeError if it is not one."""
        return cls.checked(v, "a segment's compaction summary")

    def encode(self) -> list[int]:
        """The stored list: every field up to the last one present (the form it was read in)."""
        return self.to_json()

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


@dataclass(frozen=True)
class CompactionProgress:
    """``state.compaction``: how far compaction and the deletion of what it replaced went.

    Each field is None while its key is absent: the whole object is left out of the state until
    the first compaction or the first collection of replaced files, whichever comes first.

    Parameters
    ----------
    segs : dict of int to SegmentSummary, optional
        Per segment id, what compaction reached there (stored under the id as text).
    pos : int, optional
        The scan position: every chunk committed below it is in the macro map version the
        state names for its segment.
    gc : int, optional
        Files replaced by compactions below this position are deleted.
    key_order : tuple of str
        The stored keys in the order they were written (a vacuum before the first compaction
        writes ``gc`` first); keys added later follow in :data:`KEYS` order, as they always were.
    """

    segs: dict[int, SegmentSummary] | None = None
    pos: int | None = None
    gc: int | None = None
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    #: The stored keys, in the order a first compaction writes them (``gc`` comes with a vacuum).
    KEYS: ClassVar[tuple[str, ...]] = ("segs", "pos", "gc")

    @classmethod
    def decode(cls, d: dict[str, Any]) -> CompactionProgress:
        """The progress stored as ``d`` (any subset of :data:`KEYS`, in any order)."""
        segs = d.get("segs")
        return cls(segs=None if segs is None else {int(k): SegmentSummary.decode(v) for k, v in segs.items()},
                   pos=None if d.get("pos") is None else int(d["pos"]),
                   gc=None if d.get("gc") is None else int(d["gc"]),
                   key_order=tuple(k for k in d if k in cls.KEYS))

    def encode(self) -> dict[str, Any]:
        """The stored object: the keys present, in :attr:`key_order` (empty: left out of the state)."""
        stored = {"segs": None if self.segs is None else {str(k): e.encode() for k, e in self.segs.items()},
                  "pos": self.pos, "gc": self.gc}
        order = self.key_order + tuple(k for k in self.KEYS if k not in self.key_order)
        return {k: stored[k] for k in order if stored[k] is not None}

    @property
    def summaries(self) -> dict[int, SegmentSummary]:
        """Per segment id, what compaction reached there (empty until the first compaction)."""
        return self.segs or {}

    @property
    def scan_pos(self) -> int:
        """The scan position (0 until the first compaction)."""
        return self.pos or 0

    @property
    def replaced_gc(self) -> int:
        """Files replaced by compactions below this position are deleted (0: none yet)."""
        return self.gc or 0

    def advanced(self, segs: dict[int, SegmentSummary], pos: int) -> CompactionProgress:
        """This progress with a compaction's summaries and scan position."""
        return self._with(segs=segs, pos=pos)

    def collected(self, gc: int) -> CompactionProgress:
        """This progress with replaced files deleted below ``gc``."""
        return self._with(gc=gc)

    def _with(self, **values: Any) -> CompactionProgress:
        new = replace(self, **values)
        added = tuple(k for k in self.KEYS if k not in self.key_order and getattr(new, k) is not None)
        return replace(new, key_order=self.key_order + added)


@record
@dataclass(frozen=True)
class CompactPart(DictRecord):
    """One macro-chunk a ``compact`` entry commits: an item of its ``info["parts"]``.

    A part is either merged by that compaction (``replaced``: how many files it replaces) or
    adopted from the map (``adopted``: published by a compaction that never reached the
    journal); the stored object has exactly one of the two keys.
    """

    seg: int = stored(INT)
    first: int = stored(INT, key="from")  # the macro-chunk holds _seq [first, end) of segment seg
    end: int = stored(INT, key="to")
    macro: str = stored(STR)  # the macro-chunk's file
    manifest: str = stored(STR)  # the manifest naming the files it replaces
    rows: int = stored(INT)
    bytes: int = stored(INT)
    replaced: int | None = stored(opt(INT), default=None, omit=NONE)
    adopted: bool = stored(BOOL, default=False, omit=DEFAULT)


@record
@dataclass(frozen=True)
class CompactInfo(DictRecord):
    """A ``compact`` entry's info: the macro-chunks it commits (``rows`` is 0: it adds no records)."""

    rows: int = stored(INT, default=0)
    _: KW_ONLY
    parts: tuple[CompactPart, ...] = stored(tuple_of(rec(CompactPart)), default=())

    def encode(self) -> dict[str, Any]:
        """The stored ``info``."""
        return self.to_json()

    @classmethod
    def decode(cls, info: Mapping[str, Any]) -> CompactInfo:
        """The info of a ``compact`` entry (or the empty one of another op's ``info``)."""
        return cls.from_json(dict(info))


def compact_parts(info: Mapping[str, Any]) -> list[CompactPart]:
    """The parts a journal entry's ``info`` commits (none unless its op is ``compact``)."""
    return list(CompactInfo.decode(info).parts)


def segment_summaries(state: StreamState) -> dict[int, SegmentSummary]:
    """Per segment id, what compaction reached there (empty until the first compaction)."""
    return state.compaction.summaries


def compacted_upto(state: StreamState, seg: int) -> int:
    """The ``_seq`` below which the segment's chunks have been compacted (or left as they are)."""
    e = state.compaction.summaries.get(seg)
    return e.settled_to if e else 0


def compaction_pos(state: StreamState) -> int:
    """The compaction's scan position: every chunk committed below it is in the macro map
    version the state names for its segment."""
    return state.compaction.scan_pos


def replaced_gc_start(state: StreamState) -> int:
    """The first journal position whose compactions' replaced files may not be deleted yet:
    where vacuum's collection of replaced files resumes, and from where their manifests are needed."""
    return max(state.compaction.replaced_gc, state.gc_pos)
