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
from typing import Any, ClassVar


@dataclass(frozen=True)
class ScaleInfo:
    """A ``scale`` entry's info: the segments it sealed and created (ids, in key order) and why
    (``manual``, or ``auto`` from the scaling policy)."""

    sealed: tuple[int, ...]
    created: tuple[int, ...]
    reason: str

    def encode(self) -> dict[str, Any]:
        """The stored ``info``."""
        return {"sealed": list(self.sealed), "created": list(self.created), "reason": self.reason}

    @classmethod
    def decode(cls, info: Mapping[str, Any]) -> ScaleInfo:
        return cls(sealed=tuple(int(s) for s in info.get("sealed", ())),
                   created=tuple(int(c) for c in info.get("created", ())), reason=str(info.get("reason", "manual")))


@dataclass(frozen=True)
class TruncateInfo:
    """A ``truncate`` entry's info: the new head (records with ``_tso <= head_tso`` are gone),
    each segment's first ``_seq`` kept (``cut``, stored keyed by the segment id as text) and why
    (``manual`` or ``retention``)."""

    head_tso: int
    cut: Mapping[int, int]
    reason: str

    def encode(self) -> dict[str, Any]:
        """The stored ``info``."""
        return {"head_tso": self.head_tso, "cut": {str(k): v for k, v in self.cut.items()}, "reason": self.reason}

    @classmethod
    def decode(cls, info: Mapping[str, Any]) -> TruncateInfo:
        return cls(head_tso=int(info["head_tso"]), cut={int(k): int(v) for k, v in info.get("cut", {}).items()},
                   reason=str(info.get("reason", "manual")))


@dataclass(frozen=True)
class GcInfo:
    """A ``gc`` entry's info, and what ``vacuum`` returns: how many objects it deleted of each kind.

    ``chunks`` (data files of truncated positions), ``entries`` and ``nodes`` (journal entries and
    index nodes); then, each None where the version that wrote the entry did not count it:
    ``replaced`` (files compaction replaced), ``requests`` (group-commit requests no slot can fold
    any more) and ``orphans`` (unreferenced data files, when asked for).
    """

    chunks: int = 0
    entries: int = 0
    nodes: int = 0
    replaced: int | None = None
    requests: int | None = None
    orphans: int | None = None

    #: The stored keys, in stored order (the field names); a None count is not stored.
    KEYS: ClassVar[tuple[str, ...]] = ("chunks", "entries", "nodes", "replaced", "requests", "orphans")

    def encode(self) -> dict[str, int]:
        """The stored ``info`` (and ``vacuum``'s result)."""
        return {k: v for k in self.KEYS if (v := getattr(self, k)) is not None}

    def to_dict(self) -> dict[str, int]:
        """The JSON form ``tstream vacuum`` prints (the stored ``info``: a None count is left out)."""
        return self.encode()

    @classmethod
    def decode(cls, info: Mapping[str, Any]) -> GcInfo:
        return cls(**{k: int(info[k]) for k in cls.KEYS if k in info})


@dataclass(frozen=True)
class RepairInfo:
    """A ``repair`` entry's info (no records): the (segment number, bucket) macro-map buckets the
    repair was about to mark partial, the reason it committed an entry at this format."""

    partial: tuple[tuple[int, int], ...]

    def encode(self) -> dict[str, list[list[int]]]:
        """The stored ``info``."""
        return {"partial": [list(k) for k in self.partial]}
