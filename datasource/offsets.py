"""Source offsets: a ``_tso`` bound plus the journal position it was computed at.

A micro-batch ``(start, end]`` is exactly the records with ``start.tso < _tso <= end.tso``.
``end.tso`` never exceeds the tick published at ``end.pos``, so every such record is in an entry
at or before ``end.pos`` (the tick invariant) and the batch is deterministic on replay. ``cut``
carries a ``startingOffsets`` stream cut (segment → first ``_seq``) until every batch has passed
it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..timestamps import iso, physical


@dataclass(frozen=True)
class TStreamOffset:
    """A position in a stream, as Spark checkpoints it (a dict of primitives)."""

    tso: int
    pos: int
    cut: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"tso": self.tso, "pos": self.pos,
                             "time": iso(physical(self.tso)) if self.tso > 0 else None}
        if self.cut:
            d["cut"] = {str(k): v for k, v in sorted(self.cut.items())}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | str) -> TStreamOffset:
        obj: dict[str, Any]
        if isinstance(d, str):
            import json

            obj = json.loads(d)
        else:
            obj = d
        try:
            return cls(tso=int(obj["tso"]), pos=int(obj["pos"]),
                       cut={int(k): int(v) for k, v in (obj.get("cut") or {}).items()})
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(
                f"offset {obj!r} is not a tstream offset (a checkpoint from another source?); "
                "start the query with a new checkpointLocation") from e
