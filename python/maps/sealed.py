"""The sealed-segment map, sharded by segment number (Pravega PDP-32).

Shard ``k`` holds the final facts of sealed segments numbered ``[k*W, (k+1)*W)``: key range,
rows, bytes, first/last ``_seq``, last ``_tso``, sealing epoch and successors. A shard is a
chain of immutable versions ``_tstream/sealed/<k>/<v>.json`` taken with create-if-absent plus an
overwritable head hint, so concurrent or stale writers can never lose an update (each version is
built from its predecessor), and finding the newest costs 2 reads.

Sealing is committed in the journal first (the records wait in ``state.pending_sealed``); they
reach their shard right after, written by the scaler or by whichever commit comes next, and
leave the state only once a commit has seen them in the shard. A lookup checks the state first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..errors import CorruptMetadataError, corrupt
from ..journal.scale_records import SealedRecord
from ..journal.state import StreamState, segment_number
from ..store import layout
from ..store.races import LOST, Lost, until_won
from ..store.storage import Store
from ..store.versions import newest_version

SHARD_WIDTH = 256
_RECORD_INTS = tuple(k for k in SealedRecord.FIELDS if k != "successors")


def shard_of(segment_id: int) -> int:
    """The shard that holds a sealed segment's record."""
    return segment_number(segment_id) // SHARD_WIDTH


def decode_shard(data: bytes, path: str) -> dict[str, Any]:
    """A shard version (or its head copy); CorruptMetadataError with the remedy if it is not."""
    try:
        d = json.loads(data)
        if not (isinstance(d, dict) and isinstance(d.get("v"), int) and isinstance(d.get("segments"), dict)
                and all(isinstance(r, dict) and all(isinstance(r.get(k), int) for k in _RECORD_INTS)
                        and isinstance(r.get("successors"), list) for r in d["segments"].values())):
            raise TypeError("not a sealed-segment shard")
        return d
    except (ValueError, TypeError) as e:
        raise corrupt("sealed-segment shard", path, e, layout.stream_url(path)) from e


class SealedMap:
    """Reads and merges sealed-segment shards of one stream."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _decode(self, data: bytes, rel: str) -> dict[str, Any]:
        return decode_shard(data, self.store.uri(rel))

    def latest(self, shard: int) -> dict[str, Any]:
        """Newest version of a shard (``{"v": -1, "segments": {}}`` if it has none)."""
        try:
            cur = self._decode(self.store.read(layout.sealed_head(shard)), layout.sealed_head(shard))
        except (FileNotFoundError, CorruptMetadataError):  # a hint: probe the versions instead
            cur = {"shard": shard, "v": -1, "segments": {}}

        def read(v: int) -> dict[str, Any]:
            return self._decode(self.store.read(layout.sealed_version(shard, v)), layout.sealed_version(shard, v))

        return newest_version(read, lambda v: self.store.exists(layout.sealed_version(shard, v)), cur["v"], cur)

    def get(self, state: StreamState, segment_id: int) -> SealedRecord | None:
        """The sealed record of a segment, or None if it is not sealed (O(1) store calls)."""
        for rec in state.pending_sealed:
            if rec.id == segment_id:
                return rec
        stored = self.latest(shard_of(segment_id))["segments"].get(str(segment_number(segment_id)))
        return SealedRecord.from_json(stored) if stored is not None else None

    def merge(self, records: Iterable[SealedRecord]) -> None:
        """Make sure every record is in its shard (a no-op for records already there)."""
        by_shard: dict[int, list[SealedRecord]] = {}
        for rec in records:
            by_shard.setdefault(shard_of(rec.id), []).append(rec)
        for shard, recs in sorted(by_shard.items()):
            self._merge_shard(shard, recs)

    def _merge_shard(self, shard: int, recs: list[SealedRecord]) -> None:
        tried = [-1]

        def attempt() -> None | Lost:
            cur = self.latest(shard)
            missing = [r for r in recs if str(segment_number(r.id)) not in cur["segments"]]
            if not missing:
                return None
            nxt = {"shard": shard, "v": cur["v"] + 1,
                   "segments": {**cur["segments"], **{str(segment_number(r.id)): r.to_json() for r in missing}}}
            tried[0] = nxt["v"]
            data = json.dumps(nxt, separators=(",", ":")).encode()
            if not self.store.put_if_absent(layout.sealed_version(shard, nxt["v"]), data):
                return LOST
            try:  # a hint only: a stale head costs one more probe
                self.store.write(layout.sealed_head(shard), data)
            except OSError:
                pass
            return None

        until_won(attempt, what=f"sealed-segment shard {self.store.uri(layout.sealed_head(shard))}",
                  expected=lambda: tried[0])

    def flush(self, state: StreamState) -> None:
        """Journal flusher: move pending records into shards, then out of the state."""
        if state.pending_sealed:
            self.merge(state.pending_sealed)
            state.pending_sealed = []
