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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import CorruptMetadataError, corrupt
from ..journal import seal
from ..journal.features import checksummed
from ..journal.scale_records import SealedRecord
from ..journal.state import StreamState, segment_number
from ..store import layout
from ..store.races import LOST, Lost, until_won
from ..store.storage import Store
from ..store.versions import newest_version

SHARD_WIDTH = 256
_RECORD_INTS = tuple(k for k in SealedRecord.STORED if k != "successors")


def shard_of(segment_id: int) -> int:
    """The shard that holds a sealed segment's record."""
    return segment_number(segment_id) // SHARD_WIDTH


@dataclass(frozen=True)
class ShardVersion:
    """One version of a shard, stored ``{"shard": k, "v": v, "segments": {"<number>": record}}``:
    the sealed records it holds by segment number (stored as text), in stored order."""

    shard: int
    v: int  # -1: a shard with no version yet
    segments: Mapping[str, SealedRecord] = field(default_factory=dict)

    def holds(self, segment_id: int) -> bool:
        """Whether the record of sealed segment ``segment_id`` is in this version."""
        return str(segment_number(segment_id)) in self.segments

    def get(self, segment_id: int) -> SealedRecord | None:
        return self.segments.get(str(segment_number(segment_id)))

    def next(self, records: Iterable[SealedRecord]) -> ShardVersion:
        """The next version: this one's records, then ``records`` added in order."""
        return ShardVersion(self.shard, self.v + 1,
                            {**self.segments, **{str(segment_number(r.id)): r for r in records}})

    def encode(self, sealed: bool = False) -> bytes:
        """The stored bytes of the version (and of the shard's head hint when it is the newest;
        ``sealed``: its stream declares checksums)."""
        doc = {"shard": self.shard, "v": self.v, "segments": {k: r.to_json() for k, r in self.segments.items()}}
        return seal.encode(doc, sealed)

    @classmethod
    def decode(cls, data: bytes, path: str) -> ShardVersion:
        """A shard version (or its head copy); CorruptMetadataError with the remedy if it is not."""
        try:
            d = seal.unseal(data)
            if not (isinstance(d, dict) and isinstance(d.get("shard"), int) and isinstance(d.get("v"), int)
                    and isinstance(d.get("segments"), dict)
                    and all(isinstance(r, dict) and all(isinstance(r.get(k), int) for k in _RECORD_INTS)
                            and isinstance(r.get("successors"), list) for r in d["segments"].values())):
                raise TypeError("not a sealed-segment shard")
            return cls(d["shard"], d["v"], {k: SealedRecord.from_json(r) for k, r in d["segments"].items()})
        except (ValueError, TypeError, KeyError) as e:
            raise corrupt("sealed-segment shard", path, e, layout.stream_url(path)) from e


class SealedMap:
    """Reads and merges sealed-segment shards of one stream."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _decode(self, data: bytes, rel: str) -> ShardVersion:
        return ShardVersion.decode(data, self.store.uri(rel))

    def latest(self, shard: int) -> ShardVersion:
        """Newest version of a shard (version -1, holding nothing, if it has none)."""
        try:
            cur = self._decode(self.store.read(layout.sealed_head(shard)), layout.sealed_head(shard))
        except (FileNotFoundError, CorruptMetadataError):  # a hint: probe the versions instead
            cur = ShardVersion(shard, -1)

        def read(v: int) -> ShardVersion:
            return self._decode(self.store.read(layout.sealed_version(shard, v)), layout.sealed_version(shard, v))

        return newest_version(read, lambda v: self.store.exists(layout.sealed_version(shard, v)), cur.v, cur)

    def get(self, state: StreamState, segment_id: int) -> SealedRecord | None:
        """The sealed record of a segment, or None if it is not sealed (O(1) store calls)."""
        for rec in state.pending_sealed:
            if rec.id == segment_id:
                return rec
        return self.latest(shard_of(segment_id)).get(segment_id)

    def merge(self, records: Iterable[SealedRecord], *, sealed: bool = False) -> None:
        """Make sure every record is in its shard (a no-op for records already there);
        ``sealed``: the stream declares checksums (:mod:`~pyspark_tstream.journal.seal`)."""
        by_shard: dict[int, list[SealedRecord]] = {}
        for rec in records:
            by_shard.setdefault(shard_of(rec.id), []).append(rec)
        for shard, recs in sorted(by_shard.items()):
            self._merge_shard(shard, recs, sealed)

    def _merge_shard(self, shard: int, recs: list[SealedRecord], sealed: bool) -> None:
        tried = [-1]

        def attempt() -> None | Lost:
            cur = self.latest(shard)
            missing = [r for r in recs if not cur.holds(r.id)]
            if not missing:
                return None
            nxt = cur.next(missing)
            tried[0] = nxt.v
            data = nxt.encode(sealed)
            if not self.store.put_if_absent(layout.sealed_version(shard, nxt.v), data):
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
            self.merge(state.pending_sealed, sealed=checksummed(state.features))
            state.pending_sealed = []
