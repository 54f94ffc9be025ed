"""The Python API: ``Stream.create/open``, ``append``, ``read``, ``info`` and producer sessions.

Spark-free. The Spark sink and source are thin adapters over the same calls: ``write_spec`` +
:mod:`~pyspark_tstream.writing` on the tasks, ``commit`` on the driver, ``plan`` +
:mod:`~pyspark_tstream.reading` for sources.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .commit import Ack, CommitRequest, check_schema_for_write
from .config import StreamConfig
from .errors import CommitConflictError, ConfigError, SegmentSealedError, StreamNotFoundError, TimestampError
from .journal import COL_MAX_TSO, COL_WALL, Entry, Journal
from .retention import (RetentionPolicy, TruncateRequest, collect_garbage, first_seq_after, gc_target,
                        orphan_files, retention_bound)
from .reroute import reroute
from .scaling import ScaleRequest, ScalingPolicy, fraction_ranges, read_epoch, split_ranges, write_epoch_record
from .sealed import SealedMap
from .reading import plan_chunks, read_table
from .routing import KEY_SPACE, fraction
from .schema import RAW_TSO, check_names, decode_schema, encode_schema, normalize, user_schema
from .state import Segment, StreamState, segment_id
from .storage import Store
from .timestamps import apply_floor, iso, now_ms, pack, physical, to_ms, tso_id
from .writing import ChunkInfo, WriteSpec, write_batches

TimeLike = int | str | datetime | None
#: Retention is evaluated on every this-many-th journal position (amortized O(1) per commit).
RETENTION_EVERY = 16
#: Chunks of a truncation stay this long for readers that planned before it.
GC_GRACE_MS = 10 * 60_000
#: Unreferenced data files younger than this may belong to a commit still in flight.
ORPHAN_GRACE_MS = 6 * 3_600_000


def _to_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, (list, tuple)):
        return pa.Table.from_pylist(list(data))
    if hasattr(data, "to_arrow") and not hasattr(data, "iloc"):
        return data.to_arrow()
    if hasattr(data, "iloc"):  # pandas
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TypeError(f"append takes a pyarrow Table/RecordBatch, a list of dicts or a pandas DataFrame, "
                    f"not {type(data).__name__}")


def initial_segments(n: int, epoch: int = 0, first_number: int = 0) -> list[Segment]:
    """``n`` segments splitting the key space evenly."""
    bounds = [i * KEY_SPACE // n for i in range(n)] + [KEY_SPACE]
    return [Segment(id=segment_id(epoch, first_number + i), lo=bounds[i], hi=bounds[i + 1]) for i in range(n)]


class Stream:
    """A stream at a URL. Use :meth:`create` or :meth:`open`; both are cheap (2 store calls)."""

    def __init__(self, store: Store, entry: Entry) -> None:
        self.store = store
        self.journal = Journal(store)
        self.sealed_map = SealedMap(store)
        self.journal.flushers += [self.sealed_map.flush, lambda st: write_epoch_record(store, st)]
        self._entry = entry

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    def create(cls, url: str, *, schema: pa.Schema | None = None, segments: int = 4,
               timestamping: str = "client-prefer", storage_options: Mapping[str, Any] | None = None,
               **config: Any) -> Stream:
        """Create a stream; fails with StreamExistsError if one exists at ``url``.

        ``config`` takes the other :class:`~pyspark_tstream.config.StreamConfig` fields
        (``timestamping_uncapped``, ``writers``, ``writer_lease_ms``, ``retention``, ``scaling``,
        ``compression``). ``schema`` may be omitted: the first write then fixes it.
        """
        cfg = StreamConfig.from_kwargs({"segments": segments, "timestamping": timestamping, **config})
        store = Store(url, storage_options)
        return cls._create(store, cfg, schema)

    @classmethod
    def _create(cls, store: Store, cfg: StreamConfig, schema: pa.Schema | None) -> Stream:
        if schema is not None:
            schema = normalize(user_schema(schema))
            check_names(schema)
        now = now_ms()
        state = StreamState(
            pos=0, epoch=0, tick=0, max_tso=0, wall=now, created=now,
            schema=encode_schema(schema) if schema is not None else "", config=cfg.to_dict(),
            segments=initial_segments(cfg.segments), writers={}, index=[], next_number=cfg.segments)
        entry = Journal(store).create(Entry(pos=0, op="create", wall=now, state=state))
        return cls(store, entry)

    @classmethod
    def open(cls, url: str, storage_options: Mapping[str, Any] | None = None) -> Stream:
        """Open an existing stream; StreamNotFoundError if there is none."""
        store = Store(url, storage_options)
        return cls(store, Journal(store).head())

    @classmethod
    def open_or_create(cls, url: str, *, storage_options: Mapping[str, Any] | None = None,
                       config: Mapping[str, Any] | None = None, schema: pa.Schema | None = None) -> Stream:
        """Open, or create with ``config`` if missing; explicit ``config`` must agree if it exists."""
        store = Store(url, storage_options)
        given = dict(config or {})
        try:
            stream = cls(store, Journal(store).head())
        except StreamNotFoundError:
            cfg = StreamConfig.from_kwargs(given)
            try:
                return cls._create(store, cfg, schema)
            except FileExistsError:  # lost a creation race: fine, use the winner's stream
                stream = cls(store, Journal(store).head())
        stream.config.check_agrees(given, list(given))
        return stream

    # -- state --------------------------------------------------------------------------------
    @property
    def state(self) -> StreamState:
        """The newest state this handle has seen (call :meth:`refresh` to look again)."""
        return self._entry.state

    def refresh(self) -> StreamState:
        """Catch up with the journal: 1 store call if nothing changed."""
        nxt = self.journal.try_entry(self._entry.pos + 1)
        if nxt is not None:
            newest = self.journal.head(known=nxt)
            if newest.pos > self._entry.pos:  # another thread on this handle may be ahead
                self._entry = newest
        return self._entry.state

    @property
    def url(self) -> str:
        return self.store.display_url

    @property
    def config(self) -> StreamConfig:
        return StreamConfig.from_dict(self.state.config)

    @property
    def schema(self) -> pa.Schema | None:
        """User columns (without system columns), or None before the first write."""
        return decode_schema(self.state.schema) if self.state.schema else None

    # -- writing ------------------------------------------------------------------------------
    def write_spec(self, schema: pa.Schema, *, key: str | None = None, timestamp: str | None = None,
                   merge_schema: bool = False, writer_tag: str = "w") -> WriteSpec:
        """What writer tasks need to write chunks of data with ``schema`` (validated here)."""
        incoming = normalize(user_schema(schema))
        check_names(incoming)
        target = check_schema_for_write(self.state, incoming, merge_schema)
        cfg = self.config
        segs = self.state.segments
        spec = WriteSpec(store=self.store, schema=target, segment_ids=tuple(s.id for s in segs),
                         bounds=tuple(s.lo for s in segs), key=key, timestamp=timestamp,
                         timestamping=cfg.timestamping, uncapped=cfg.timestamping_uncapped,
                         compression=cfg.compression, writer_tag=writer_tag)
        spec.check_input(schema)
        return spec

    def commit(self, chunks: Sequence[ChunkInfo], *, writer_id: str | None = None, batch_id: Any = None,
               session: bool = False, schema: pa.Schema | None = None, merge_schema: bool = False,
               op: str = "append", heartbeat: int | None = None, close: bool = False) -> Ack:
        """Make ``chunks`` visible in one journal commit; a repeated (writer, batch) is a no-op."""
        req = CommitRequest(chunks=list(chunks), writer_id=writer_id, batch_id=batch_id, session=session,
                            op=op, heartbeat=heartbeat, close=close,
                            schema=normalize(user_schema(schema)) if schema is not None else None,
                            merge_schema=merge_schema, now=now_ms(), count_raised=self._count_raised)
        for _ in range(100):
            try:
                entry, _ = self.journal.commit(req, self.state)
                break
            except SegmentSealedError:
                # a scale committed since these chunks were routed: give them to its successors
                state = self.refresh()
                active = {g.id for g in state.segments}
                req.chunks = [r for c in req.chunks
                              for r in ([c] if c.seg in active else reroute(self.store, c, state.segments))]
        else:
            raise CommitConflictError("segments kept changing under this commit; retry it",
                                      expected=self.state.pos + 1)
        if entry is None:
            return self._duplicate_ack(req)
        self._entry = entry
        if entry.chunks:
            self._after_data_commit(entry)
        return Ack.from_entry(entry)

    def _after_data_commit(self, entry: Entry) -> None:
        """Policies evaluated at commit: auto-scaling, and retention every few commits."""
        cfg = entry.state.config
        if cfg.get("scaling"):
            policy = ScalingPolicy.parse(cfg["scaling"])
            if policy is not None and policy.decide(entry.state, now_ms()) is not None:
                self._commit_op(lambda st, pos: (lambda r: r(st, pos) if r is not None else None)(
                    policy.decide(st, now_ms())))
        if cfg.get("retention") and entry.pos % RETENTION_EVERY == 0:
            self.trim()

    def _commit_op(self, build: Any) -> Entry | None:
        entry, state = self.journal.commit(build, self.state)
        if entry is not None:
            self._entry = entry
        else:
            self.refresh()
        return entry

    def _duplicate_ack(self, req: CommitRequest) -> Ack:
        pos = req.duplicate_pos
        self.refresh()
        if pos is not None and pos >= 0:
            original = self.journal.try_entry(pos)
            if original is not None:
                return Ack.from_entry(original, duplicate=True)
        return Ack(pos=-1 if pos is None else pos, rows=0, tick=self.state.tick, duplicate=True,
                   writer_id=req.writer_id, batch_id=req.batch_id)

    def _count_raised(self, info: ChunkInfo, floor: int) -> int:
        raw = pq.read_table(io.BytesIO(self.store.read(info.path)), columns=[RAW_TSO]).column(0).to_numpy()
        return int(np.count_nonzero(apply_floor(raw, floor) != raw))

    def append(self, data: Any, key: str | None = None, timestamp: str | None = None,
               writer_id: str | None = None, batch_id: Any = None, *, merge_schema: bool = False,
               session: bool = False) -> Ack:
        """Append records in one atomic commit and return the S2-style :class:`Ack`.

        ``data``: a pyarrow Table/RecordBatch, a list of dicts or a pandas DataFrame. ``key``
        names the routing-key column, ``timestamp`` the client timestamp column (TIMESTAMP or
        epoch-ms integers). The same (``writer_id``, ``batch_id``) twice commits once.
        """
        table = _to_table(data)
        state = self.refresh()
        if writer_id is not None and batch_id is not None:
            w = state.writers.get(writer_id)
            if w is not None and w.find(batch_id) is not None:
                req = CommitRequest(writer_id=writer_id, batch_id=batch_id)
                req.duplicate_pos = w.find(batch_id)
                return self._duplicate_ack(req)
        spec = self.write_spec(table.schema, key=key, timestamp=timestamp, merge_schema=merge_schema)
        chunks = write_batches(spec, [table]) if table.num_rows else []
        if not chunks and writer_id is None:
            return Ack(pos=state.pos, rows=0, tick=state.tick)
        return self.commit(chunks, writer_id=writer_id, batch_id=batch_id, session=session,
                           schema=table.schema, merge_schema=merge_schema)

    def heartbeat(self, writer_id: str, tso: int | None = None) -> Ack:
        """A data-less tick record: ``writer_id`` is live and will not commit below ``tso``."""
        return self.commit([], writer_id=writer_id, session=True, op="tick",
                           heartbeat=pack(now_ms()) if tso is None else tso)

    def tick(self) -> StreamState:
        """A data-less commit that lets the journal drop writers whose lease expired."""
        self.commit([], op="tick")
        return self.state

    def writer(self, writer_id: str) -> Producer:
        """A producer session: holds the tick (until closed or its lease expires)."""
        return Producer(self, writer_id)

    # -- reading ------------------------------------------------------------------------------
    def _range(self, start: TimeLike, end: TimeLike) -> tuple[int, int]:
        state = self.state
        lo = state.head_tso
        if start is not None:
            lo = max(lo, pack(to_ms(start, option="start")) - 1)
        hi = state.tick
        if end is not None:
            hi = min(hi, pack(to_ms(end, option="end")) - 1)
        return lo, hi

    def read(self, start: TimeLike = None, end: TimeLike = None, limit: int | None = None,
             columns: Sequence[str] | None = None) -> pa.Table:
        """Records with ``start <= _timestamp < end``, ordered by ``_tso``, with system columns.

        ``start``/``end``: epoch ms, datetime, ISO-8601 text or an ago duration like ``"-15m"``.
        ``end`` defaults to the current tick (only complete time is returned). ``limit`` keeps
        the first records by ``_tso``.
        """
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise TimestampError(f"limit={limit!r} must be a non-negative integer")
        state = self.refresh()
        schema = self.schema
        lo, hi = self._range(start, end)
        if schema is None or hi <= lo or limit == 0:
            from .schema import full_schema

            return full_schema(schema or pa.schema([])).empty_table()
        chunks = plan_chunks(self.journal, state, lo, hi)
        if limit is not None:
            chunks = _enough_for(chunks, limit)
        table = read_table(self.store, schema, chunks, lo, hi)
        if columns is not None:
            table = table.select(list(columns))
        return table.slice(0, limit) if limit is not None else table

    def plan(self, lo: int, hi: int, *, first_pos: int | None = None, last_pos: int | None = None) -> list:
        """Chunks that may hold records with ``lo < _tso <= hi`` (see :mod:`reading`)."""
        return plan_chunks(self.journal, self.state, lo, hi, first_pos, last_pos)

    def seek(self, when: TimeLike) -> int:
        """The position (exclusive ``_tso`` bound) before the first record at or after ``when``."""
        return max(self.state.head_tso, pack(to_ms(when, option="timestamp")) - 1)

    def seek_tail(self, n: int) -> int:
        """Exclusive ``_tso`` bound such that the last ``n`` records at or below the tick follow it."""
        state = self.refresh()
        if n <= 0:
            return state.tick
        want = n
        while True:
            first = self.journal.search(state, 4, max(state.rows - want - 1, -1))
            chunks = [c for d in self.journal.deltas(state, max(first - 1, 0), state.pos) for c in d.chunks
                      if c.lo <= state.tick]
            tsos = _chunk_tsos(self.store, chunks, state.tick)
            if len(tsos) >= n or first <= state.head_pos:
                if len(tsos) < n:
                    return state.head_tso
                bound = int(np.partition(tsos, len(tsos) - n)[len(tsos) - n]) - 1
                earliest = self.journal.search(state, COL_MAX_TSO, bound)
                if earliest >= max(first - 1, 0):
                    return bound
            want *= 2

    # -- epochs and scaling ------------------------------------------------------------------
    def scale(self, *, split: int | None = None, parts: int = 2, merge: Sequence[int] | None = None,
              seal: Sequence[int] | None = None, ranges: Sequence[tuple[float, float]] | None = None) -> dict:
        """Split a segment into ``parts``, merge adjacent segments, or seal/create explicitly.

        One journal commit: the sealed segments stop taking records; their successors own the
        same key range in a new epoch. Returns ``{"epoch", "sealed", "created"}``.
        """
        state = self.refresh()
        if split is not None:
            seg = state.segment(split)
            if seg is None:
                raise ConfigError(f"cannot split segment {split}: not active (active: "
                                  f"{[g.id for g in state.segments]})", option="split", value=split)
            req = ScaleRequest([split], split_ranges(seg, parts), now_ms())
        elif merge is not None:
            segs = sorted((g for g in state.segments if g.id in set(merge)), key=lambda g: g.lo)
            if len(segs) != len(set(merge)) or len(segs) < 2:
                raise ConfigError(f"cannot merge {list(merge)}: give 2 or more active, adjacent segments",
                                  option="merge", value=list(merge))
            req = ScaleRequest(list(merge), [(segs[0].lo, segs[-1].hi)], now_ms())
        elif seal is not None and ranges is not None:
            req = ScaleRequest(list(seal), fraction_ranges(ranges), now_ms())
        else:
            raise ConfigError("scale needs split=<segment>, merge=[segments] or seal=[...] with ranges=[...]",
                              option="scale")
        entry = self._commit_op(req)
        assert entry is not None
        return {"epoch": entry.state.epoch, "sealed": entry.info["sealed"], "created": entry.info["created"]}

    def successors(self, segment: int) -> list[int]:
        """Segments that took over ``segment``'s key range when it was sealed ([] if active)."""
        rec = self.sealed_map.get(self.state, segment)
        return list(rec["successors"]) if rec else []

    def predecessors(self, segment: int) -> list[int]:
        """Segments ``segment`` replaced (from its creation epoch's record)."""
        epoch = segment >> 32
        if epoch == 0:
            return []
        return list(read_epoch(self.store, self.state, epoch)["predecessors"].get(str(segment), []))

    def sealed_info(self, segment: int) -> dict | None:
        """Final size, rows, last ``_seq``/``_tso`` and sealing epoch of a sealed segment."""
        return self.sealed_map.get(self.state, segment)

    def epoch_at(self, when: TimeLike) -> int:
        """The epoch in force at ``when`` (a time like :meth:`read` takes)."""
        state = self.refresh()
        pos = self.journal.search(state, COL_WALL, to_ms(when, option="when"))
        return self._epoch_before(state, pos)

    def _epoch_before(self, state: StreamState, pos: int) -> int:
        """The epoch after journal position ``pos - 1`` (one entry read)."""
        if pos > state.pos:
            return state.epoch
        prev = self.journal.try_entry(pos - 1) if pos > state.head_pos else None
        return prev.state.epoch if prev is not None else (self.journal.try_entry(pos) or self._entry).state.epoch

    def segments_at(self, when: TimeLike) -> list[dict[str, Any]]:
        """Active segments (id and key range) at ``when``."""
        state = self.refresh()
        epoch = self.epoch_at(when)
        if epoch == state.epoch:
            return [{"id": g.id, "key_range": [fraction(g.lo), fraction(g.hi)]} for g in state.segments]
        rec = read_epoch(self.store, state, epoch)
        if rec.get("segments") is None:
            return [{"id": g.id, "key_range": [fraction(g.lo), fraction(g.hi)]}
                    for g in initial_segments(int(state.config["segments"]))]
        return [{"id": i, "key_range": [fraction(lo), fraction(hi)]} for i, lo, hi in rec["segments"]]

    # -- cuts, truncation, retention ---------------------------------------------------------
    def cut_at(self, when: TimeLike) -> dict[int, int]:
        """Stream cut at ``when``: per active segment, the first ``_seq`` at or after that time."""
        state = self.refresh()
        bound = min(pack(to_ms(when, option="when")) - 1, state.tick)
        return first_seq_after(self.store, self.journal, state, bound)

    def truncate(self, before: TimeLike | dict[int, int], *, reason: str = "manual") -> StreamState:
        """Drop records before ``before`` (a time, or a stream cut {segment: seq}).

        Records become unreadable at once; their files go at the next :meth:`vacuum` (or the
        retention check) after a grace period. The head never moves past the tick.
        """
        state = self.refresh()
        if isinstance(before, dict):
            bound = self._cut_bound(state, {int(k): int(v) for k, v in before.items()})
        else:
            bound = pack(to_ms(before, option="before")) - 1
        return self._truncate_to(bound, reason)

    def _truncate_to(self, bound: int, reason: str) -> StreamState:
        """Move the head to the ``_tso`` bound (clamped to the tick); O(segments) store calls."""
        state = self.refresh()
        bound = min(bound, state.tick)
        if bound <= state.head_tso:
            return state
        cut = first_seq_after(self.store, self.journal, state, bound)
        head_pos = self.journal.search(state, COL_MAX_TSO, bound)
        self._commit_op(TruncateRequest(bound, cut, head_pos, now_ms(), reason))
        return self.state

    def _cut_bound(self, state: StreamState, cut: dict[int, int]) -> int:
        """The largest ``_tso`` bound that removes nothing at or after ``cut`` in any segment."""
        bound = state.tick
        for c in self.plan(state.head_tso, state.tick):
            if c.seg in cut and c.seq <= cut[c.seg] < c.seq + c.rows:
                raw = pq.read_table(io.BytesIO(self.store.read(c.path)), columns=[RAW_TSO]).column(0).to_numpy()
                bound = min(bound, int(apply_floor(raw, c.floor)[cut[c.seg] - c.seq]) - 1)
        return bound

    def trim(self, *, maxlen: int | None = None, max_age: str | None = None, max_bytes: int | None = None,
             gc_grace_ms: int = GC_GRACE_MS) -> StreamState:
        """Apply the stream's ``retention`` policy (or the limits given), then collect garbage.

        ``maxlen`` keeps the newest N records (Redis ``XTRIM MAXLEN``), ``max_age`` a duration,
        ``max_bytes`` a size. Consumer groups hold the head back when the policy says
        ``groups=true``.
        """
        state = self.refresh()
        policy = RetentionPolicy.parse(state.config.get("retention")) or RetentionPolicy()
        if maxlen is not None or max_age is not None or max_bytes is not None:
            policy = RetentionPolicy(
                age_ms=to_ms("-" + max_age, option="max_age", now=0) * -1 if max_age else policy.age_ms,
                size=max_bytes if max_bytes is not None else policy.size,
                count=maxlen if maxlen is not None else policy.count, groups=policy.groups)
        tail = self.seek_tail(policy.count) if policy.count is not None else None
        floor = self._group_floor() if policy.groups else None
        bound = retention_bound(self.journal, state, policy, now_ms(), floor, tail)
        if bound > state.head_tso:
            self._truncate_to(bound, "retention")
        self.vacuum(grace_ms=gc_grace_ms)
        return self.state

    def _group_floor(self) -> int | None:
        from .groups import Group

        positions = Group.positions(self)
        return min(positions.values()) if positions else None

    def vacuum(self, grace_ms: int = GC_GRACE_MS, *, orphans: bool = False,
               orphan_grace_ms: int = ORPHAN_GRACE_MS) -> dict[str, int]:
        """Delete files and metadata of records truncated at least ``grace_ms`` ago.

        With ``orphans``, also delete data files no commit names (failed or duplicate task
        attempts) older than ``orphan_grace_ms``; that part lists the data folders.
        """
        state = self.refresh()
        upto = gc_target(state, now_ms(), grace_ms)
        counts = collect_garbage(self.store, self.journal, state, upto)
        if orphans:
            found = orphan_files(self.store, self.journal, self.refresh(), now_ms(), orphan_grace_ms)
            self.store.delete(found)
            counts = {**counts, "orphans": len(found)}
        if upto > state.gc_pos:
            def mark(st: StreamState, pos: int) -> Entry | None:
                if st.gc_pos >= upto:
                    return None
                st.gc_pos = upto
                return Entry(pos=pos, op="gc", wall=now_ms(), state=st, info=counts)
            self._commit_op(mark)
        return counts

    def info(self) -> dict[str, Any]:
        """Tick, epochs, segments, writers, first/last ids, size: a snapshot for humans and tools."""
        s = self.refresh()
        schema = self.schema
        return {
            "url": self.url, "position": s.pos, "epoch": s.epoch,
            "tick": s.tick, "tick_id": tso_id(s.tick), "tick_time": iso(physical(s.tick)) if s.tick else None,
            "first_id": tso_id(s.first_tso) if s.first_tso else None,
            "last_id": tso_id(s.max_tso) if s.max_tso else None,
            "first_time": iso(physical(s.first_tso)) if s.first_tso else None,
            "last_time": iso(physical(s.max_tso)) if s.max_tso else None,
            "rows": s.rows, "bytes": s.bytes, "chunks": s.chunks,
            "segments": [
                {"id": g.id, "epoch": g.epoch, "number": g.number, "key_range": [fraction(g.lo), fraction(g.hi)],
                 "rows": g.rows, "bytes": g.bytes, "chunks": g.chunks, "first_seq": g.first_seq,
                 "next_seq": g.next_seq, "last_id": tso_id(g.last_tso) if g.last_tso else None}
                for g in s.segments],
            "writers": {
                wid: {"live": w.live, "last_id": tso_id(w.tso) if w.tso else None,
                      "last_commit": iso(w.wall) if w.wall else None, "commits": w.commits, "rows": w.rows}
                for wid, w in s.writers.items()},
            "sealed_segments": s.sealed,
            "schema": [f"{f.name} {f.type}" for f in schema] if schema is not None else None,
            "config": dict(s.config),
            "created": iso(s.created),
        }


def _enough_for(chunks: list, limit: int) -> list:
    """The chunks that can hold the first ``limit`` records by ``_tso``.

    Sorted by first ``_tso``: once ``limit`` rows are covered by chunks whose last ``_tso`` is
    below the next chunk's first, later chunks cannot contribute.
    """
    ordered = sorted(chunks, key=lambda c: c.lo)
    out, rows, bound = [], 0, None
    for c in ordered:
        if bound is not None and rows >= limit and c.lo > bound:
            break
        out.append(c)
        rows += c.rows
        bound = c.hi if bound is None else max(bound, c.hi)
    return out


def _chunk_tsos(store: Store, chunks: Sequence, tick: int) -> np.ndarray:
    """Final ``_tso`` values (at or below ``tick``) of ``chunks``, reading only the raw column."""
    if not chunks:
        return np.zeros(0, dtype=np.int64)
    parts = []
    for c, data in zip(chunks, store.read_many([c.path for c in chunks])):
        raw = pq.read_table(io.BytesIO(data), columns=[RAW_TSO]).column(0).to_numpy()
        tso = apply_floor(raw, c.floor)
        parts.append(tso[tso <= tick])
    return np.concatenate(parts)


class Producer:
    """A writer session (Milvus proxy / S2 producer): while live, the tick waits for it.

    Use as a context manager; ``close`` ends the session so the tick stops waiting at once
    (otherwise it waits until ``writerLeaseMs`` passes without a commit or heartbeat).
    """

    def __init__(self, stream: Stream, writer_id: str) -> None:
        self.stream = stream
        self.writer_id = writer_id

    def append(self, data: Any, key: str | None = None, timestamp: str | None = None,
               batch_id: Any = None, *, merge_schema: bool = False) -> Ack:
        return self.stream.append(data, key=key, timestamp=timestamp, writer_id=self.writer_id,
                                  batch_id=batch_id, merge_schema=merge_schema, session=True)

    def heartbeat(self, tso: int | None = None) -> Ack:
        return self.stream.heartbeat(self.writer_id, tso)

    def close(self) -> None:
        self.stream.commit([], writer_id=self.writer_id, op="tick", close=True)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
