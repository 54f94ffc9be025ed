"""A compaction manifest (``_tstream/compact/<id>.json``): what one macro-chunk replaced.

Written next to its macro-chunk before the compaction commits; vacuum deletes what it lists
once the compaction is older than the grace period, so a manifest that does not decode, names
another macro-chunk or lists anything but data files reads as none (the files it would name
are then worked out from the journal): a damaged one must never make vacuum delete metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..journal import seal
from ..store import layout


@dataclass(frozen=True)
class Manifest:
    """Macro-chunk ``macro`` holds ``_seq`` ``[first, end)`` of segment ``seg``; the files
    ``replaced`` go once its compaction is older than the grace period. ``shared``: the shared
    files (wide writes) of slices it merged, each with the journal position that committed it;
    vacuum deletes one once no live slice names it (:mod:`.shared_gc`)."""

    seg: int
    macro: str
    first: int
    end: int
    replaced: tuple[str, ...]
    shared: Mapping[str, int] = field(default_factory=dict)

    def encode(self, sealed: bool = False) -> bytes:
        """The stored bytes (``shared`` sorted by path, left out when empty; ``sealed``: the
        stream declares checksums)."""
        doc: dict[str, Any] = {"seg": self.seg, "macro": self.macro, "from": self.first, "to": self.end,
                               "replaced": list(self.replaced)}
        if self.shared:
            doc["shared"] = [[path, pos] for path, pos in sorted(self.shared.items())]
        return seal.encode(doc, sealed)

    @classmethod
    def decode(cls, raw: bytes) -> Manifest:
        """The manifest in ``raw``; ``ValueError``/``TypeError`` if it is not one, or if it lists
        a file that is not a data file. A ``shared`` list that does not decode reads as empty
        (it only names candidates, each checked again before it goes)."""
        doc = seal.unseal(raw)
        if not isinstance(doc, dict):
            raise TypeError("a manifest is a JSON object")
        replaced = doc.get("replaced")
        if not isinstance(replaced, list) or not all(isinstance(r, str) and layout.is_data_file(r) for r in replaced):
            raise TypeError("a manifest's replaced files must be data files")
        seg, first, end, macro = doc.get("seg"), doc.get("from"), doc.get("to"), doc.get("macro")
        if not (isinstance(macro, str) and type(seg) is int and type(first) is int and type(end) is int):
            raise TypeError("a manifest names its segment, macro-chunk and _seq range")
        try:
            shared = {path: int(pos) for path, pos in doc.get("shared", []) if layout.is_data_file(path)}
        except (ValueError, TypeError, AttributeError):
            shared = {}
        return cls(seg=seg, macro=macro, first=first, end=end, replaced=tuple(replaced), shared=shared)

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
