"""The Python API: ``Stream.create/open``, ``append``, ``read``, ``info`` and producer sessions.

Spark-free. The Spark sink and source are thin adapters over the same calls: ``write_spec`` +
:mod:`~pyspark_tstream.writing` on the tasks, ``commit`` on the driver, ``plan`` +
:mod:`~pyspark_tstream.reading` for sources.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .commit import Ack, CommitRequest, check_schema_for_write
from .compacted import compacted_upto, substitute
from .compaction import COMPACT_EVERY, CompactionPolicy, compact, due
from .config import StreamConfig
from .errors import CommitConflictError, SegmentSealedError, StreamNotFoundError, TimestampError
from .journal import Entry, Journal
from .reroute import reroute
from .planner import Plan, Window, plan, plan_chunks, tail_bound
from .reading import read_table, read_tsos
from .routing import fraction
from .scaling import ScalingPolicy, write_epoch_record
from .schema import (
    RAW_TSO,
    check_names,
    decode_schema,
    encode_schema,
    normalize,
    user_schema,
)
from .sealed import SealedMap
from .state import StreamState
from .storage import Store
from .stream_admin import StreamAdmin, TimeLike, initial_segments
from .timestamps import apply_floor, iso, now_ms, pack, physical, to_ms, tso_id
from .writing import ChunkInfo, WriteSpec, write_batches

if TYPE_CHECKING:
    from .fsck import Report

logger = logging.getLogger(__name__)

#: Retention is evaluated on every this-many-th journal position (amortized O(1) per commit).
RETENTION_EVERY = 16


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


class Stream(StreamAdmin):
    """A stream at a URL. Use :meth:`create` or :meth:`open`; both are cheap (2 store calls)."""

    def __init__(self, store: Store, entry: Entry) -> None:
        self._compact_retry_pos = 0  # automatic compaction backs off after a failure
        self._compact_backoff = COMPACT_EVERY
        self.store = store
        self.journal = Journal(store)
        self.sealed_map = SealedMap(store)
        self.journal.flushers += [self.sealed_map.flush, lambda st: write_epoch_record(store, st)]
        self._entry = entry
        self._retention_due = False  # a failed retention pass: retry at the next data commit

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
        """Policies evaluated at commit: auto-scaling, and retention every few commits.

        Best-effort: the data commit is durable before this runs, so a failure here must not
        turn it into an error (Spark would call the sink's ``abort`` on a committed batch). A
        failure is logged and the policy is simply evaluated again: scaling at every data commit,
        retention at the next one through this handle (or the next multiple of
        ``RETENTION_EVERY``).
        """
        cfg = entry.state.config
        if cfg.get("scaling"):
            self._best_effort("auto-scaling", entry, lambda: self._auto_scale(cfg["scaling"], entry))
        if cfg.get("retention") and (entry.pos % RETENTION_EVERY == 0 or self._retention_due):
            self._retention_due = not self._best_effort("retention", entry, self.trim)
        if entry.pos % COMPACT_EVERY == 0:
            self._auto_compact(entry)

    def _auto_scale(self, text: str, entry: Entry) -> None:
        policy = ScalingPolicy.parse(text)
        if policy is not None and policy.decide(entry.state, now_ms()) is not None:
            def scale(st: StreamState, pos: int) -> Entry | None:
                # decided again on the newest state: another committer may have scaled already
                request = policy.decide(st, now_ms())
                return request(st, pos) if request is not None else None
            self._commit_op(scale)

    def _best_effort(self, what: str, entry: Entry, work: Callable[[], Any]) -> bool:
        """Run post-commit ``work``; log (never raise) a failure. True if it completed."""
        try:
            work()
            return True
        except Exception as e:
            logger.warning("stream %s: %s after the commit at journal position %d failed (%s: %s); "
                           "the commit stands and %s runs again at a later commit",
                           self.url, what, entry.pos, type(e).__name__, e, what, exc_info=True)
            return False

    def _auto_compact(self, entry: Entry) -> None:
        """Best-effort compaction after a data commit: decided from the state (zero reads);
        a failure is logged and retried after a back-off, never raised into the commit."""
        policy = CompactionPolicy.parse(entry.state.config.get("compaction"))
        if policy is None or entry.pos < self._compact_retry_pos or not due(entry.state, policy):
            return
        try:
            compact(self, policy=policy)
            self._compact_backoff = COMPACT_EVERY
        except Exception as e:  # noqa: BLE001 - the data commit landed; compaction retries later
            self._compact_retry_pos = entry.pos + self._compact_backoff
            self._compact_backoff = min(self._compact_backoff * 2, 64 * COMPACT_EVERY)
            logger.warning("tstream: automatic compaction of %s failed (%s: %s); it runs again after "
                           "position %d", self.url, type(e).__name__, e, self._compact_retry_pos)

    def compact(self, *, full: bool = True, target: int | str | None = None, min_pieces: int | None = None,
                progress: Any = None, total: Any = None) -> dict[str, int]:
        """Merge small chunks of each segment into macro-chunks (one journal commit).

        ``full`` (default) packs every run of small pieces into macro-chunks of at most
        ``target`` bytes (the stream's ``compaction`` config, else 128MB); ``full=False`` does
        what automatic compaction does (size-tiered merges of ``min`` pieces). Records never
        change; replaced files go at a later :meth:`vacuum` after its grace period. Returns
        counts: macros written, chunks and rows merged, bytes written, macros adopted/lost.
        See :mod:`~pyspark_tstream.compaction`.
        """
        base = CompactionPolicy.parse(self.refresh().config.get("compaction")) or CompactionPolicy()
        if target is not None or min_pieces is not None:
            spec = f"target={target or base.target},min={min_pieces or base.min}"
            base = CompactionPolicy.parse(spec)
        return compact(self, full=full, policy=base, progress=progress, total=total)

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
        chunks = write_batches(spec, [table], ordered=True) if table.num_rows else []
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
        # lazily: with a limit, the walk stops once the chunks surely hold ``limit`` records
        p = plan(Window(self.journal), state, lo, hi, at_least=limit)
        table = read_table(self.store, schema, p.chunks, lo, p.hi)
        if columns is not None:
            table = table.select(list(columns))
        return table.slice(0, limit) if limit is not None else table

    def plan(self, lo: int, hi: int, *, first_pos: int | None = None, last_pos: int | None = None) -> list:
        """Chunks that may hold records with ``lo < _tso <= hi`` (see :mod:`planner`)."""
        return plan_chunks(self.journal, self.state, lo, hi, first_pos, last_pos)

    def plan_read(self, lo: int, hi: int, **kw: Any) -> Plan:
        """The lazy :func:`~pyspark_tstream.planner.plan` of ``(lo, hi]`` on the newest state."""
        return plan(Window(self.journal), self.state, lo, hi, **kw)

    def seek(self, when: TimeLike) -> int:
        """The position (exclusive ``_tso`` bound) before the first record at or after ``when``."""
        return max(self.state.head_tso, pack(to_ms(when, option="timestamp")) - 1)

    def seek_tail(self, n: int) -> int:
        """Exclusive ``_tso`` bound such that the last ``n`` records at or below the tick follow it."""
        state = self.refresh()
        # the span's chunks may have been compacted (and their files collected): read views
        return tail_bound(self.journal, state, n,
                          lambda chunks, tick: _chunk_tsos(self.store, substitute(self.store, state, list(chunks)), tick))

    def verify(self, progress: Callable[[int, int], None] | None = None) -> Report:
        """Check the stream (``tstream fsck``): journal entries, hints, index nodes, sealed shards,
        epoch records, and every live chunk's size and rows. Returns a
        :class:`~pyspark_tstream.fsck.Report` (``ok``, ``problems``, ``summary()``)."""
        from .fsck import verify

        return verify(self.store, progress)[0]

    def repair(self, progress: Callable[[int, int], None] | None = None) -> Report:
        """Rebuild what the journal can (``tstream repair``); the report lists what remains."""
        from .repair import repair

        report = repair(self.store, progress)
        self.refresh()
        return report

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
                 "next_seq": g.next_seq, "last_id": tso_id(g.last_tso) if g.last_tso else None,
                 "compacted_seq": compacted_upto(s, g.id)}
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


def _chunk_tsos(store: Store, chunks: Sequence, tick: int) -> np.ndarray:
    """Final ``_tso`` values (at or below ``tick``) of ``chunks``, reading only the raw column."""
    parts = [tso[tso <= tick] for _, tso in read_tsos(store, chunks)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


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

    def __exit__(self, *exc: object) -> None:
        self.close()
