"""What a journal entry that commits no data stores in its ``info``: one typed record per op.

``scale`` (:class:`ScaleInfo`), ``truncate`` (:class:`TruncateInfo`) and ``gc``
(:class:`GcInfo`); a ``compact`` entry's is :class:`~.compaction_state.CompactInfo`, a data
commit's ``write/commit.CommitInfo``. Each record is built where its op commits and read
wherever the entry is, through one encode/decode pair naming its stored keys once; the stored
objects keep every form ever written (a ``gc`` entry of the first release has no ``replaced``),
since entry bytes are part of the format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..codec import INT, NONE, STR, DictRecord, dict_of, opt, record, stored, tuple_of


@record
@dataclass(frozen=True)
class ScaleInfo(DictRecord):
    """A ``scale`` entry's info: the segments it sealed and created (ids, in key order) and why
    (``manual``, or ``auto`` from the scaling policy)."""

    sealed: tuple[int, ...] = stored(tuple_of(INT), default=())
    created: tuple[int, ...] = stored(tuple_of(INT), default=())
    reason: str = stored(STR, default="manual")

    def encode(self) -> dict[str, Any]:
        """The stored ``info``."""
        return self.to_json()

    @classmethod
    def decode(cls, info: Mapping[str, Any]) -> ScaleInfo:
        return cls.from_json(dict(info))


@record
@dataclass(frozen=True)
class TruncateInfo(DictRecord):
    """A ``truncate`` entry's info: the new head (records with ``_tso <= head_tso`` are gone),
    each segment's first ``_seq`` kept (``cut``, stored keyed by the segment id as text) and why
    (``manual`` or ``retention``)."""

    head_tso: int = stored(INT)
    cut: Mapping[int, int] = stored(dict_of(INT, int_keys=True), factory=dict)
    reason: str = stored(STR, default="manual")

    def encode(self) -> dict[str, Any]:
        """The stored ``info``."""
        return self.to_json()

    @classmethod
    def decode(cls, info: Mapping[str, Any]) -> TruncateInfo:
        return cls.from_json(dict(info))


@record
@dataclass(frozen=True)
class GcInfo(DictRecord):
    """A ``gc`` entry's info, and what ``vacuum`` returns: how many objects it deleted of each kind.

    ``chunks`` (data files of truncated positions), ``entries`` and ``nodes`` (journal entries and
    index nodes); then, each None where the version that wrote the entry did not count it:
    ``replaced`` (files compaction replaced), ``requests`` (group-commit requests no slot can fold
    any more) and ``orphans`` (unreferenced data files, when asked for).
    """

    chunks: int = stored(INT, default=0)
    entries: int = stored(INT, default=0)
    nodes: int = stored(INT, default=0)
    replaced: int | None = stored(opt(INT), default=None, omit=NONE)
    requests: int | None = stored(opt(INT), default=None, omit=NONE)
    orphans: int | None = stored(opt(INT), default=None, omit=NONE)

    def encode(self) -> dict[str, int]:
        """The stored ``info`` (and ``vacuum``'s result): a None count is not stored."""
        return self.to_json()

    def to_dict(self) -> dict[str, int]:
        """The JSON form ``tstream vacuum`` prints (the stored ``info``: a None count is left out)."""
        return self.encode()

    @classmethod
    def decode(cls, info: Mapping[str, Any]) -> GcInfo:
        return cls.from_json(dict(info))


@record
@dataclass(frozen=True)
class RepairInfo(DictRecord):
    """A ``repair`` entry's info (no records): the (segment number, bucket) macro-map buckets the
    repair was about to mark partial, the reason it committed an entry at this format."""

    partial: tuple[tuple[int, int], ...] = stored(tuple_of(tuple_of(INT)))

    def encode(self) -> dict[str, list[list[int]]]:
        """The stored ``info``."""
        return self.to_json()
