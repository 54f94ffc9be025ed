"""Epochs and scaling: seal segments and create successors in one journal commit.

Invariants:

* a scale replaces a set of active segments whose key ranges are contiguous by new segments
  covering exactly the same range; the epoch grows by one and new ids carry it (Pravega);
* each writer's lane continues in a successor from the max of that writer's lanes in the
  predecessors it replaces, so one writer's records of one key stay in ``_tso`` order across
  scales (other writers' times are not inherited: a scale never moves a record by another
  writer's clock);
* the scale costs O(segments sealed + created): one journal entry, one epoch record and one
  shard version per shard touched;
* epoch records are also grouped in fixed-size history chunks (PDP-32): every
  ``EPOCH_CHUNK``-th record's writer also writes the chunk of the ``EPOCH_CHUNK`` records
  ending with it (one batched read of the others, amortized O(1) per scale), so reading E
  consecutive epochs costs ⌈E / EPOCH_CHUNK⌉ + 1 reads. Streams written before chunks existed
  have none: their records are read one by one (batched).

The auto-scaling policy (stream config ``scaling``) is evaluated after data commits from each
segment's rate over a window of at least ``window`` seconds: a segment above
``records``/``bytes`` per second splits in ``factor``; two adjacent segments both under a
quarter of the target merge, never below ``min`` segments or above ``max``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, corrupt
from ..journal import seal
from ..journal.entries import FORMAT_VERSION, Entry
from ..journal.features import check_object, checksummed
from ..journal.op_info import ScaleInfo
from ..journal.operations import Operation
from ..journal.scale_records import EpochRecord, SealedRecord
from ..journal.state import Segment, StreamState, segment_id
from ..keys import SEGMENTS_MAX
from ..policytext import policy_parts
from ..store import layout
from ..store.storage import Store
from .routing import KEY_SPACE

#: Epoch records per history chunk.
EPOCH_CHUNK = 32


def epoch_record_bytes(rec: EpochRecord, sealed: bool = False) -> bytes:
    """An epoch record's object (``_tstream/epochs/..``; ``sealed``: its stream declares checksums)."""
    return seal.encode(rec.to_json(), sealed)


def epoch_chunk_bytes(k: int, records: Sequence[EpochRecord], sealed: bool = False) -> bytes:
    """History chunk ``k``: the ``EPOCH_CHUNK`` records of epochs ``k*EPOCH_CHUNK ..``."""
    return seal.encode({"v": FORMAT_VERSION, "chunk": k, "records": [r.to_json() for r in records]}, sealed)


def write_epoch_record(store: Store, state: StreamState) -> None:
    """Journal flusher: write the pending epoch record, and the history chunk it completes
    (deterministic, so rewrites are harmless)."""
    rec = state.pending_epoch
    if rec is not None:
        sealed = checksummed(state.features)
        store.write(layout.epoch_record(rec.epoch), epoch_record_bytes(rec, sealed))
        if rec.epoch % EPOCH_CHUNK == EPOCH_CHUNK - 1:
            k = rec.epoch // EPOCH_CHUNK
            records = _read_singles(store, range(k * EPOCH_CHUNK, rec.epoch)) + [rec]
            store.write(layout.epoch_chunk(k), epoch_chunk_bytes(k, records, sealed))
        state.pending_epoch = None


def _read_singles(store: Store, epochs: Sequence[int]) -> list[EpochRecord]:
    """Epoch records one object each (one batched read); epoch 0 has none if never scaled."""
    out = []
    if len(epochs) and epochs[0] == 0:
        zero = layout.epoch_record(0)
        out.append(EpochRecord.from_json(seal.unseal(store.read(zero))) if store.exists(zero)
                   else EpochRecord.initial())
        epochs = epochs[1:]
    rels = [layout.epoch_record(e) for e in epochs]
    return out + [decode_epoch(d, store.uri(r), e) for r, d, e in zip(rels, store.read_many(rels), epochs)] \
        if rels else out


def read_epochs(store: Store, state: StreamState, first: int, last: int) -> list[EpochRecord]:
    """Records of epochs ``first..last`` in order: one read per full history chunk, one batched
    read for the rest."""
    out: list[EpochRecord] = []
    e = first
    while e <= last:
        k, end = e // EPOCH_CHUNK, min(last, (e // EPOCH_CHUNK + 1) * EPOCH_CHUNK - 1)
        pending = state.pending_epoch.epoch if state.pending_epoch is not None else None
        if (k + 1) * EPOCH_CHUNK - 1 <= state.epoch and pending != (k + 1) * EPOCH_CHUNK - 1:
            rel = layout.epoch_chunk(k)
            try:
                chunk = seal.unseal(store.read(rel), required=checksummed(state.features))
                if not (isinstance(chunk, dict) and isinstance(chunk.get("records"), list)):
                    raise TypeError("not an epoch history chunk")
            except FileNotFoundError:
                chunk = None  # a stream from before history chunks: read the records themselves
            except (ValueError, TypeError) as err:
                raise corrupt("epoch history chunk", store.uri(rel), err, store.display_url) from err
            if chunk is not None:
                check_object("epoch history chunk", chunk.get("v"), store.uri(rel))
                try:
                    out.extend(EpochRecord.from_json(r) for r in chunk["records"][e - k * EPOCH_CHUNK:
                                                                                  end - k * EPOCH_CHUNK + 1])
                except (ValueError, TypeError, KeyError, AttributeError) as err:
                    raise corrupt("epoch history chunk", store.uri(rel), err, store.display_url) from err
                e = end + 1
                continue
        # the rest: singles up to ``last`` in one batched read (the newest may still be pending)
        todo = [x for x in range(e, last + 1) if x != pending]
        got = {r.epoch: r for r in _read_singles(store, todo)}
        if state.pending_epoch is not None and e <= state.pending_epoch.epoch <= last:
            got[state.pending_epoch.epoch] = state.pending_epoch
        out.extend(got[x] for x in range(e, last + 1))
        break
    return out


def read_epoch(store: Store, state: StreamState, epoch: int) -> EpochRecord:
    """The record of ``epoch``: its segments, what it sealed and created, where it began."""
    if state.pending_epoch is not None and state.pending_epoch.epoch == epoch:
        return state.pending_epoch
    if epoch == 0 and not store.exists(layout.epoch_record(0)):
        return EpochRecord.initial()
    try:
        return decode_epoch(store.read(layout.epoch_record(epoch)), store.uri(layout.epoch_record(epoch)), epoch)
    except FileNotFoundError as e:
        raise corrupt("epoch record", store.uri(layout.epoch_record(epoch)), e, store.display_url) from e


def decode_epoch(data: bytes, path: str, epoch: int) -> EpochRecord:
    """An epoch record; CorruptMetadataError naming ``path`` and the remedy if it is not one."""
    def ints(v: Any) -> bool:
        return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)

    try:
        rec = seal.unseal(data)
        ok = (isinstance(rec, dict) and rec.get("epoch") == epoch and isinstance(rec.get("pos"), int)
              and ints(rec.get("sealed")) and ints(rec.get("created"))
              and isinstance(rec.get("predecessors", {}), dict)
              and all(ints(v) for v in rec.get("predecessors", {}).values())
              and (rec.get("segments") is None or (isinstance(rec["segments"], list) and all(
                  ints(g) and len(g) == 3 for g in rec["segments"]))))
        if not ok:
            raise TypeError("not an epoch record")
        return EpochRecord.from_json(rec)
    except (ValueError, TypeError) as e:
        raise corrupt("epoch record", path, e, layout.stream_url(path)) from e


@dataclass
class ScaleRequest:
    """Seal ``seal`` (segment ids) and create segments over ``ranges`` (key-space ints)."""

    seal: Sequence[int]
    ranges: Sequence[tuple[int, int]]
    now: int = 0
    reason: str = "manual"

    def __call__(self, state: StreamState, pos: int) -> Entry | None:
        active = {s.id: s for s in state.segments}
        unknown = [s for s in self.seal if s not in active]
        if unknown:
            raise ConfigError(
                f"cannot scale: segment(s) {unknown} are not active (active: {sorted(active)}); "
                "refresh and pick active segments", option="segments", value=unknown)
        sealed = sorted((active[s] for s in self.seal), key=lambda s: s.lo)
        for a, b in zip(sealed, sealed[1:]):
            if a.hi != b.lo:
                raise ConfigError(f"cannot scale: segments {a.id} and {b.id} are not adjacent key ranges",
                                  option="segments", value=[a.id, b.id])
        lo, hi = sealed[0].lo, sealed[-1].hi
        ranges = sorted(self.ranges)
        if not ranges or ranges[0][0] != lo or ranges[-1][1] != hi or any(
                r[0] >= r[1] for r in ranges) or any(a[1] != b[0] for a, b in zip(ranges, ranges[1:])):
            raise ConfigError("cannot scale: new key ranges must exactly cover the sealed segments' "
                              "range without gaps or overlaps", option="ranges", value=self.ranges)
        total = len(active) - len(sealed) + len(ranges)
        if total > SEGMENTS_MAX:
            raise ConfigError(
                f"cannot scale: {len(sealed)} segment(s) into {len(ranges)} would leave {total} active segments, "
                f"over the limit of {SEGMENTS_MAX}; split into fewer parts or merge segments first "
                f"({len(active)} are active)", option="parts", value=len(ranges))
        epoch = state.epoch + 1
        floor = max(s.last_tso for s in sealed)
        created = []
        for r in ranges:
            created.append(Segment(id=segment_id(epoch, state.next_number), lo=r[0], hi=r[1], last_tso=floor,
                                   win_wall=self.now))
            state.next_number += 1
        created_ids = [c.id for c in created]
        state.pending_sealed.extend(SealedRecord.of(s, epoch, pos, created) for s in sealed)
        sealed_ids = {s.id for s in sealed}
        for wid, shared in list(state.writers.items()):
            if not sealed_ids.intersection(shared.lanes):
                continue  # no lane in a sealed segment: nothing to carry over
            w = state.writer_to_change(wid)
            # a writer's lane continues in each successor: its later records of a key stay after
            # its earlier ones, and no other writer's times are inherited
            for c in created:
                inherited = max((w.lanes.get(s.id, 0) for s in sealed if s.lo < c.hi and c.lo < s.hi), default=0)
                if inherited:
                    w.lanes[c.id] = max(w.lanes.get(c.id, 0), inherited)
            for s in sealed:
                w.lanes.pop(s.id, None)
        keep = [s for s in state.segments if s.id not in self.seal]
        state.segments = sorted(keep + created, key=lambda s: s.lo)
        state.epoch = epoch
        state.sealed += len(sealed)
        state.wall = max(state.wall, self.now)
        state.pending_epoch = EpochRecord.of(state, pos, sealed, created)
        return Entry(pos=pos, op=Operation.SCALE, wall=self.now, state=state,
                     info=ScaleInfo(tuple(s.id for s in sealed), tuple(created_ids), self.reason).encode())


def split_ranges(seg: Segment, parts: int) -> list[tuple[int, int]]:
    """``parts`` equal key ranges covering ``seg``."""
    if parts < 2 or parts > SEGMENTS_MAX:
        raise ConfigError(f"split into {parts} parts: give 2 to {SEGMENTS_MAX}", option="parts", value=parts)
    width = seg.hi - seg.lo
    if width < parts:
        raise ConfigError(f"segment {seg.id} is too narrow to split into {parts}", option="parts", value=parts)
    bounds = [seg.lo + width * i // parts for i in range(parts)] + [seg.hi]
    return [(bounds[i], bounds[i + 1]) for i in range(parts)]


def fraction_ranges(ranges: Sequence[tuple[float, float]]) -> list[tuple[int, int]]:
    """Key ranges given as fractions of [0, 1) → key-space integers."""
    out = []
    for lo, hi in ranges:
        if not 0 <= lo < hi <= 1:
            raise ConfigError(f"key range ({lo}, {hi}) must satisfy 0 <= lo < hi <= 1", option="ranges",
                              value=(lo, hi))
        out.append((int(lo * KEY_SPACE) if lo < 1 else KEY_SPACE, KEY_SPACE if hi >= 1 else int(hi * KEY_SPACE)))
    return out


# -- auto-scaling -----------------------------------------------------------------------------
_RATE = re.compile(r"^\s*([0-9.]+)\s*(?:/s)?\s*$")


@dataclass(frozen=True)
class ScalingPolicy:
    """Parsed ``scaling`` config: ``records=5000/s,factor=2,min=1,max=64,window=10``."""

    records: float | None = None
    bytes: float | None = None
    factor: int = 2
    min: int = 1
    max: int = 1024
    window: float = 10.0

    @classmethod
    @functools.lru_cache(maxsize=64)  # parsed on every data commit; the text rarely changes
    def parse(cls, text: str | None) -> ScalingPolicy | None:
        """The policy of a ``scaling`` config text; None when there is none."""
        if not text:
            return None
        values: dict[str, float] = {}
        for part in policy_parts(text, seps="=:"):
            m = _RATE.match(part.value.lower())
            if not (part.sep and m) or part.key not in ("records", "bytes", "factor", "min", "max", "window"):
                raise ConfigError(
                    f"scaling={text!r}: cannot read {part.text!r}; use e.g. records=5000/s,factor=2,min=1,max=64,"
                    "window=10 (keys: records, bytes, factor, min, max, window)", option="scaling", value=text)
            values[part.key] = float(m.group(1))
        if "records" not in values and "bytes" not in values:
            raise ConfigError(f"scaling={text!r} needs a target: records=<n>/s or bytes=<n>/s",
                              option="scaling", value=text)
        policy = cls(records=values.get("records"), bytes=values.get("bytes"), factor=int(values.get("factor", 2)),
                     min=int(values.get("min", 1)), max=int(values.get("max", 1024)),
                     window=values.get("window", 10.0))
        if policy.factor < 2 or policy.min < 1 or policy.max < policy.min:
            raise ConfigError(f"scaling={text!r}: need factor >= 2 and 1 <= min <= max", option="scaling",
                              value=text)
        return policy

    def _over(self, rows: float, size: float, scale: float) -> bool:
        return ((self.records is not None and rows > self.records * scale)
                or (self.bytes is not None and size > self.bytes * scale))

    def _under(self, rows: float, size: float, scale: float) -> bool:
        return ((self.records is None or rows < self.records * scale)
                and (self.bytes is None or size < self.bytes * scale))

    def decide(self, state: StreamState, now: int) -> ScaleRequest | None:
        """One scale the rates call for (hottest split first), or None."""
        rates = {}
        for s in state.segments:
            span = (now - s.win_wall) / 1000 if s.win_wall else 0
            if span >= self.window:
                rates[s.id] = ((s.rows - s.win_rows) / span, (s.bytes - s.win_bytes) / span)
        n = len(state.segments)
        hot = [s for s in state.segments if s.id in rates and self._over(*rates[s.id], 1.0)]
        if hot and n - 1 + self.factor <= min(self.max, SEGMENTS_MAX):
            seg = max(hot, key=lambda s: rates[s.id][0])
            return ScaleRequest([seg.id], split_ranges(seg, self.factor), now, "auto: split hot segment")
        if n > self.min:
            for a, b in zip(state.segments, state.segments[1:]):
                if a.id in rates and b.id in rates and self._under(*rates[a.id], 0.25) and \
                        self._under(*rates[b.id], 0.25):
                    return ScaleRequest([a.id, b.id], [(a.lo, b.hi)], now, "auto: merge cold segments")
        return None


def restart_windows(state: StreamState, now: int, window: float) -> None:
    """Start a new rate window for segments whose window is stale (called on data commits).

    A window is judged once it spans ``window`` seconds and restarted after four: long enough
    that a burst still counts, short enough that old traffic stops counting.
    """
    for s in state.segments:
        if not s.win_wall or (now - s.win_wall) / 1000 >= 4 * window:
            s.win_rows, s.win_bytes, s.win_wall = s.rows, s.bytes, now
