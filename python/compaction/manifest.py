"""A compaction manifest (``_tstream/compact/<id>.json``): what one macro-chunk replaced.

Written next to its macro-chunk before the compaction commits; vacuum deletes what it lists
once the compaction is older than the grace period, so a manifest that does not decode, names
another macro-chunk or lists anything but data files reads as none (the files it would name
are then worked out from the journal): a damaged one must never make vacuum delete metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..codec import EMPTY, INT, STR, DictRecord, custom, record, stored
from ..journal import seal
from ..store import layout


def _data_files(v: Any) -> bool:
    return type(v) is list and all(type(r) is str and layout.is_data_file(r) for r in v)


def _shared(stored: Any) -> dict[str, int]:
    """A stored ``shared`` list's data files (empty when it does not decode: it only names
    candidates, each checked again before it goes)."""
    try:
        return {path: int(pos) for path, pos in stored if layout.is_data_file(path)}
    except (ValueError, TypeError, AttributeError):
        return {}


#: ``replaced``: a list of data files (anything else makes the manifest unreadable).
_REPLACED = custom(list, tuple, _data_files)
#: ``shared``: ``[[path, pos], ...]`` sorted by path.
_SHARED = custom(lambda m: [[path, pos] for path, pos in sorted(m.items())], _shared)


@record
@dataclass(frozen=True)
class Manifest(DictRecord):
    """Macro-chunk ``macro`` holds ``_seq`` ``[first, end)`` of segment ``seg``; the files
    ``replaced`` go once its compaction is older than the grace period. ``shared``: the shared
    files (wide writes) of slices it merged, each with the journal position that committed it;
    vacuum deletes one once no live slice names it (:mod:`.shared_gc`)."""

    seg: int = stored(INT)
    macro: str = stored(STR)
    first: int = stored(INT, key="from")
    end: int = stored(INT, key="to")
    replaced: tuple[str, ...] = stored(_REPLACED)
    shared: Mapping[str, int] = stored(_SHARED, factory=dict, omit=EMPTY)

    def encode(self, sealed: bool = False) -> bytes:
        """The stored bytes (``shared`` sorted by path, left out when empty; ``sealed``: the
        stream declares checksums)."""
        return seal.encode(self.to_json(), sealed)

    @classmethod
    def decode(cls, raw: bytes) -> Manifest:
        """The manifest in ``raw``; ``ValueError``/``TypeError`` if it is not one, or if it lists
        a file that is not a data file. A ``shared`` list that does not decode reads as empty."""
        return cls.checked(seal.unseal(raw), "a manifest")

    @classmethod
    def read(cls, raw: bytes | None, macro: str) -> Manifest | None:
        """The manifest of macro-chunk ``macro`` in ``raw``, or None when it is missing, does
        not decode or names another macro-chunk."""
        if raw is None:
            return None
        try:
            found = cls.decode(raw)
        except (ValueError, TypeError):
            return None
        return found if found.macro == macro else None
