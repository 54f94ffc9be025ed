"""Writer tasks: route records to segments, stamp raw hybrid timestamps, write Parquet chunks.

Runs wherever the data is (a Spark task or the Python API caller). Nothing here is visible to
readers: a chunk only counts once a journal entry names it, so a failed or duplicate task attempt
leaves at most an orphan file. All per-record work is vectorized (numpy / Arrow compute).

Every chunk is time-sorted: its raw hybrid timestamps strictly increase along its rows, so a
reader slices a time range by binary search. Two input kinds get two rules (docs/design.md
§3.2 and §7.13):

* **unordered** input (a Spark task: a shuffle, a join or a file scan decided its row order) is
  a set. Each segment's rows are ordered by client time (stable) before stamping, so no record
  moves because of where it happened to sit in the task. While a segment's rows arrive in
  client-time order (a scan of time-ordered files or topics) they are already sorted: they are
  streamed into one chunk a row group at a time. From its first row out of order on, a segment
  buffers a bounded run of rows and writes each run as its own chunk (memory stays bounded;
  chunks of one commit may overlap in time, which readers and the committer allow);
* **ordered** input (``Stream.append``, the CLI) is a sequence: input order is stream order and
  S2's running-max rule applies in that order (42, 44, 42, 50 → 42, 44, 44, 50).

Both inputs end alike (:meth:`ChunkWriter.finish`): what several segments still buffer goes into
one shared file (:mod:`.shared`), a slice per segment, so a commit writes one data file however
many segments it reaches; only a segment whose rows fill a row group streams into a file of its
own, and a shared file is split at its size limit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..arrow_arrays import int64s, is_text, numbers
from ..chunkfile.checksums import WRITE_CHECKSUMS
from ..chunkfile.encoding import DICTIONARY_SAMPLE_ROWS, chunk_encodings
from ..epochs.routing import KEY_SPACE, key_hash, route
from ..errors import TimestampError
from ..journal.state import segment_number
from ..schema import RAW_TSO, conform
from ..store import layout
from ..timestamps import LOGICAL_BITS, MAX_MS, MS_RANGE, MarkSampler, now_ms, raw_hybrid, raw_marks
from .ordering import ascending, in_order, time_order
from .shared import SharedFiles
from .spec import ChunkInfo, WriteSpec

__all__ = ["ChunkWriter", "client_ms", "write_batches"]

ROW_GROUP_ROWS = 131_072
#: Without a key column, batches smaller than this go to one segment (fewer, larger files).
SPREAD_MIN_ROWS = 65_536
#: A writer remembers the segments of at most this many distinct string keys (then hashes each row).
KNOWN_KEYS_MAX = 1 << 16
#: Unordered input: a segment's buffered rows are sorted and written as one chunk at this many.
RUN_ROWS = 1 << 20
#: Unordered input: when a task's buffered rows take more memory than this, its largest
#: segment buffer is written out (bounds a task's memory whatever its input size).
RUN_BUFFER_BYTES = 128 << 20
#: Rows a writer gathers (zero-copy) before it routes, splits and stamps them: Spark hands a task
#: 10k-row batches, and each costs the same Python and Arrow calls per segment whatever its size
#: (docs/performance.md, "Figures behind code choices"). Wide rows gather fewer: at most GATHER_BYTES,
#: which keeps a task's memory within RUN_BUFFER_BYTES plus one gathered group.
GATHER_ROWS = 1 << 16
GATHER_BYTES = 8 << 20


def client_ms(spec: WriteSpec, table: pa.Table, arrival: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Millisecond time of each record under the stream's timestamping mode.

    Also returns which records the arrival cap lowered (None when it lowered none).
    """
    n = table.num_rows
    if spec.timestamping == "arrival" or spec.timestamp is None:
        return np.full(n, arrival, dtype=np.int64), None
    col = table.column(spec.timestamp)
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms", tz=col.type.tz)).cast(pa.int64())
    elif pa.types.is_date(col.type):
        col = col.cast(pa.date64()).cast(pa.int64())
    else:
        col = col.cast(pa.int64())
    nulls = col.null_count
    if nulls and spec.timestamping == "client-require":
        raise TimestampError(
            f"timestampColumn {spec.timestamp!r} has {nulls} null value(s) and the stream uses "
            "timestamping=client-require; fill them or use client-prefer (nothing was written)")
    if nulls:
        col = pc.fill_null(col, arrival)
    ms = numbers(col, np.int64)
    if n:
        lo, hi = int(ms.min()), int(ms.max())
        if lo < 0 or hi > MAX_MS:
            bad = lo if lo < 0 else hi
            raise TimestampError(
                f"timestampColumn {spec.timestamp!r} holds {bad}, outside {MS_RANGE}; "
                "fix or drop such records (nothing was written)")
    capped = None
    if not spec.uncapped and n and int(ms.max()) > arrival:
        capped = ms > arrival
        ms = np.minimum(ms, arrival)
    return ms, capped


class _Run:
    """One segment's rows waiting to be stamped and written (unordered input)."""

    __slots__ = ("bodies", "ms", "capped", "rows", "nbytes")

    def __init__(self) -> None:
        self.bodies: list[pa.Table] = []
        self.ms: list[np.ndarray] = []
        self.capped = 0
        self.rows = 0
        self.nbytes = 0


class _Streamed:
    """One segment's chunk written as its rows arrive (ordered input; unordered segments still
    in client-time order): the file, once a row group is ready, the stamped rows waiting for
    it, and what the chunk's description needs."""

    __slots__ = ("file", "writer", "rel", "rows", "first", "prev", "lane_raised", "capped", "marks",
                 "pending", "pending_rows", "pending_bytes", "last_ms", "prefix_ms")

    def __init__(self) -> None:
        self.file: Any = None  # the open output and its ParquetWriter (None: no row group yet)
        self.writer: Any = None
        self.rel = ""
        self.rows = 0  # stamped so far (written or pending)
        self.first = 0  # first raw timestamp
        self.prev: int | None = None  # last raw timestamp: the running max continues from it
        self.lane_raised = 0
        self.capped = 0
        self.marks = MarkSampler()
        self.pending: list[pa.Table] = []  # stamped rows not yet written (under a row group)
        self.pending_rows = 0
        self.pending_bytes = 0  # counted in the task's buffered bytes (unordered input's bound)
        self.last_ms = 0  # unordered input: the last client time streamed
        self.prefix_ms: list[np.ndarray] = []  # unordered input: client times while no file holds a row


class ChunkWriter:
    """Routes record batches of one task to segments and writes time-sorted Parquet chunks.

    ``ordered=False`` (a Spark task): a segment's rows are streamed into one chunk while they
    arrive in client-time order; after that they are buffered in bounded runs, each run ordered
    by client time and written as one chunk. ``ordered=True`` (``Stream.append``): one
    chunk per segment, stamped with the running max in input order; a segment whose rows fill
    a row group streams into a file of its own, the others become slices of one shared file.
    ``finish`` closes everything and returns the chunks' :class:`ChunkInfo`.
    """

    def __init__(self, spec: WriteSpec, task: str = "", *, ordered: bool = False) -> None:
        self.spec = spec
        self.task = task or uuid.uuid4().hex[:8]
        self.ordered = ordered
        self.arrival = now_ms()
        self._done: list[ChunkInfo] = []
        self._runs: dict[int, _Run] = {}
        self._run_bytes = 0  # bytes buffered by runs and by streamed chunks' pending rows
        self._streamed: dict[int, _Streamed] = {}
        self._unsorted: set[int] = set()  # unordered input: segments seen out of client-time order
        self._rotate = 0
        self._checked = False
        self._hash_distinct = True  # until a batch shows mostly distinct keys
        self._known: pa.Array | None = None  # distinct string keys routed so far, and their segments
        self._known_segs = np.zeros(0, dtype=np.int64)
        self._known_lookup: pc.SetLookupOptions | None = None
        self._shared: SharedFiles | None = None  # while finish writes several segments' rest

    def add(self, data: pa.RecordBatch | pa.Table) -> None:
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if table.num_rows == 0:
            return
        if not self._checked:
            self.spec.check_input(table.schema)
            self._checked = True
        ms, capped = client_ms(self.spec, table, self.arrival)
        body = conform(table.select([c for c in table.column_names if c in self.spec.schema.names]),
                       self.spec.schema)
        segs = self._route(table)
        for idx, part, rows in self._split(body, segs):
            if rows is None:
                self._take(idx, part, ms, capped)
            else:
                self._take(idx, part, ms[rows], capped[rows] if capped is not None else None)

    def _split(self, body: pa.Table, segs: np.ndarray) -> Iterator[tuple[int, pa.Table, np.ndarray | None]]:
        """Each segment's rows of ``body`` (in input order): (segment index, rows, their row
        numbers in ``body``, None when they are all of it)."""
        if len(self.spec.segment_ids) == 1 or (segs == segs[0]).all():
            yield int(segs[0]), body, None
            return
        # segment indices are small: a stable sort of int16 is a radix sort (~8x an int64 sort)
        order = np.argsort(segs.astype(np.int16) if len(self.spec.segment_ids) < 1 << 15 else segs,
                           kind="stable")
        sorted_segs = segs[order]
        cuts = np.flatnonzero(np.diff(sorted_segs)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(order)]))
        # While every segment streams (leaving memory within a row group), one take sliced by
        # segment is cheapest. With runs, each segment's rows are taken on their own, so they own
        # their buffers and writing a run frees them (slices of one take kept all segments' rows
        # of a batch alive until the last of them was written: up to twice RUN_BUFFER_BYTES).
        taken = body.take(int64s(order)) if self.ordered or not self._unsorted else None
        if taken is None and body.column(0).num_chunks > 1:
            # a take from a column of several chunks first concatenates them: once per group
            # here, not once per segment
            body = body.combine_chunks()
        for s, e in zip(starts, ends):
            rows = order[s:e]
            yield int(sorted_segs[s]), (taken.slice(s, e - s) if taken is not None
                                        else body.take(int64s(rows))), rows

    def _take(self, idx: int, body: pa.Table, ms: np.ndarray, capped: np.ndarray | None) -> None:
        n_capped = int(np.count_nonzero(capped)) if capped is not None else 0
        if self.ordered:
            self._append(idx, body, ms, n_capped)
            return
        if idx not in self._unsorted:
            s = self._streamed.get(idx)
            if ascending(ms) and (s is None or ms[0] >= s.last_ms):
                # still in client-time order: stamping it now is stamping the sorted whole, and it
                # leaves memory a row group at a time instead of a run at a time
                s = s or self._streamed.setdefault(idx, _Streamed())
                s.last_ms = int(ms[-1])
                if s.file is None:  # kept until the prefix is written (see below)
                    s.prefix_ms.append(ms)
                self._append(idx, body, ms, n_capped)
                self._bound_memory()
                return
            self._unsorted.add(idx)
            if s is not None and s.file is not None:
                self._close_streamed(idx)  # a written sorted prefix stays one chunk
        run = self._runs.get(idx)
        if run is None:
            # a prefix not yet written (under a row group) joins the run rather than make a
            # small chunk of its own: shuffled input writes no more chunks than it did unstreamed
            run = self._runs[idx] = self._unstream(idx)
        run.bodies.append(body)
        run.ms.append(ms)
        run.capped += n_capped
        run.rows += body.num_rows
        run.nbytes += body.nbytes + ms.nbytes
        self._run_bytes += body.nbytes + ms.nbytes
        if run.rows >= RUN_ROWS:
            self._write_run(idx)
        self._bound_memory()

    def _unstream(self, idx: int) -> _Run:
        """A run holding segment ``idx``'s streamed rows that no file holds yet (unstamped again)."""
        run = _Run()
        s = self._streamed.pop(idx, None)
        if s is None:
            return run
        self._run_bytes -= s.pending_bytes
        run.capped = s.capped
        run.bodies = [p.drop_columns([RAW_TSO]) for p in s.pending]
        run.ms = s.prefix_ms
        run.rows = s.pending_rows
        run.nbytes = sum(b.nbytes for b in run.bodies) + sum(m.nbytes for m in run.ms)
        self._run_bytes += run.nbytes
        return run

    def _bound_memory(self) -> None:
        """Write out the largest buffer (a run, or a streamed chunk's pending rows) while the
        task holds more than :data:`RUN_BUFFER_BYTES`."""
        while self._run_bytes > RUN_BUFFER_BYTES:
            run = max(self._runs, key=lambda i: self._runs[i].nbytes, default=None)
            streamed = max((i for i, s in self._streamed.items() if s.pending),
                           key=lambda i: self._streamed[i].pending_bytes, default=None)
            if run is None and streamed is None:
                return
            if streamed is not None and (run is None or
                                         self._runs[run].nbytes < self._streamed[streamed].pending_bytes):
                self._drain(streamed, final=True)
            elif run is not None:
                self._write_run(run)

    def _route(self, table: pa.Table) -> np.ndarray:
        n = table.num_rows
        nseg = len(self.spec.segment_ids)
        if nseg == 1:
            return np.zeros(n, dtype=np.int64)
        if self.spec.key is not None:
            return self._key_segments(table.column(self.spec.key))
        if n < SPREAD_MIN_ROWS:
            # one segment per small batch, rotating from a random start: even spread, few files
            if self._rotate == 0:
                self._rotate = int.from_bytes(uuid.uuid4().bytes[:4], "big")
            self._rotate += 1
            return np.full(n, self._rotate % nseg, dtype=np.int64)
        spread: np.ndarray = (np.arange(n, dtype=np.int64) * nseg) // n
        return spread

    def _key_segments(self, column: pa.ChunkedArray) -> np.ndarray:
        """Segment index of each record, by the routing hash of its key.

        String and binary keys usually repeat (devices, users, tenants), so each distinct value
        is hashed and routed once per task and remembered: a batch only looks its keys up in the
        ones seen before (one hash-table probe a row) and routes the new ones — the same hash, for
        much less work when keys repeat. After a batch whose keys are mostly
        distinct, or once the task has seen :data:`KNOWN_KEYS_MAX` keys, it hashes every value.
        """
        key, bounds, t = self.spec.key or "", self.spec.bounds, column.type
        if self._hash_distinct and is_text(t):
            arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
            if self._known is not None:
                idx = pc.index_in(arr, options=self._known_lookup)
                if idx.null_count == 0:
                    hit: np.ndarray = self._known_segs[numbers(idx, np.int32)]
                    return hit
                fresh = pc.unique(arr.filter(pc.is_null(idx)))
            else:
                fresh = pc.unique(arr)
            if len(fresh) * 2 > len(arr) or (self._known is not None and
                                              len(self._known) + len(fresh) > KNOWN_KEYS_MAX):
                self._hash_distinct = False
                self._known = None
                return route(key_hash(column, name=key), bounds)
            segs = route(key_hash(fresh, name=key), bounds)  # a null key hashes like ""
            if self._known is None:
                self._known, self._known_segs = fresh, segs
            else:
                self._known = pa.concat_arrays([self._known, fresh])
                self._known_segs = np.concatenate([self._known_segs, segs])
            self._known_lookup = pc.SetLookupOptions(value_set=self._known, skip_nulls=False)
            known: np.ndarray = self._known_segs[numbers(pc.index_in(arr, options=self._known_lookup), np.int32)]
            return known
        return route(key_hash(column, name=key), bounds)

    # -- unordered input: sorted runs -----------------------------------------------------------
    def _write_run(self, idx: int) -> None:
        """Order a segment's buffered rows by client time (stable) and write them as one chunk."""
        run = self._runs.pop(idx)
        self._run_bytes -= run.nbytes
        ms = np.concatenate(run.ms) if len(run.ms) > 1 else run.ms[0]
        body = pa.concat_tables(run.bodies) if len(run.bodies) > 1 else run.bodies[0]
        run.bodies.clear()
        order, ms = time_order(ms)
        raw = raw_hybrid(ms)
        f = w = None
        at = 0
        try:
            for part in in_order(body, order, ROW_GROUP_ROWS):
                table = _with_raw(part, raw[at: at + part.num_rows])
                at += part.num_rows
                if w is None:
                    f, w, rel = self._open_chunk(idx, table)
                w.write_table(table, row_group_size=ROW_GROUP_ROWS)
        finally:
            if w is not None:
                w.close()
        assert f is not None  # the run has rows: the loop opened its chunk
        size = f.tell()
        f.close()
        self._done.append(self._info(idx, rel, len(raw), size, int(raw[0]), int(raw[-1]),
                                     _moved(raw, ms), run.capped, raw_marks(raw)))

    # -- streamed chunks (ordered input, time-ordered segments): one per segment -----------------
    def _append(self, idx: int, body: pa.Table, ms: np.ndarray, capped: int) -> None:
        s = self._streamed.get(idx) or self._streamed.setdefault(idx, _Streamed())
        raw = raw_hybrid(ms)
        if s.prev is not None:
            # keep the running max across batches: a_i >= prev + 1 + i
            raw = np.maximum(raw, s.prev + 1 + np.arange(len(raw), dtype=np.int64))
        else:
            s.first = int(raw[0])
        s.prev = int(raw[-1])
        s.lane_raised += _moved(raw, ms)
        s.capped += capped
        s.marks.add(raw)
        part = _with_raw(body, raw)
        s.pending.append(part)
        s.pending_rows += part.num_rows
        s.pending_bytes += part.nbytes
        self._run_bytes += part.nbytes
        s.rows += part.num_rows
        if s.pending_rows >= ROW_GROUP_ROWS:
            self._drain(idx)

    def _drain(self, idx: int, final: bool = False) -> None:
        """Write segment ``idx``'s pending rows to its chunk: whole row groups, or all if ``final``."""
        s = self._streamed[idx]
        parts, s.pending, s.pending_rows = s.pending, [], 0
        self._run_bytes -= s.pending_bytes
        s.pending_bytes = 0
        if not parts:
            return
        table = pa.concat_tables(parts)
        if not final:
            # only whole row groups: writing the overshoot of each drain made a tiny row group
            # (a few hundred rows, each with its own pages and dictionary) after every full one
            whole = table.num_rows - table.num_rows % ROW_GROUP_ROWS
            if whole < table.num_rows:
                rest = table.slice(whole)
                s.pending, s.pending_rows, s.pending_bytes = [rest], rest.num_rows, rest.nbytes
                self._run_bytes += rest.nbytes
                table = table.slice(0, whole)
        if s.file is None:
            s.file, s.writer, s.rel = self._open_chunk(idx, table)
            s.prefix_ms = []
        s.writer.write_table(table, row_group_size=ROW_GROUP_ROWS)

    # -- shared -----------------------------------------------------------------------------------
    def _open_chunk(self, idx: int, table: pa.Table) -> tuple[Any, Any, str]:
        if self._shared is not None:
            return self._shared.open(idx, table)
        return self._new_file(idx, table)

    def _new_file(self, idx: int, table: pa.Table) -> tuple[Any, Any, str]:
        f, rel = self._new_output(idx)
        return f, self._new_writer(table)(f), rel

    def _new_output(self, idx: int) -> tuple[Any, str]:
        seg = self.spec.segment_ids[idx]
        rel = layout.data_chunk(segment_number(seg), self.spec.writer_tag, self.task, uuid.uuid4().hex)
        return self.spec.store.open_output(rel), rel

    def _new_writer(self, table: pa.Table) -> Callable[[Any], Any]:
        """What opens a ParquetWriter for rows like ``table`` on an output (encodings chosen on
        ``table``, once: a shared file's slices all use its first rows' choice)."""
        schema, encodings = table.schema, chunk_encodings(table, self.spec.compression)
        return lambda f: pq.ParquetWriter(f, schema, write_statistics=[RAW_TSO], **encodings, **WRITE_CHECKSUMS)

    def _info(self, idx: int, rel: str, rows: int, size: int, raw_lo: int, raw_hi: int,
              lane_raised: int, capped: int, marks: tuple[int, ...]) -> ChunkInfo:
        bounds = self.spec.bounds
        return ChunkInfo(seg=self.spec.segment_ids[idx], path=rel, rows=rows, bytes=size, raw_lo=raw_lo,
                         raw_hi=raw_hi, task=self.task, key=self.spec.key, key_lo=bounds[idx],
                         key_hi=bounds[idx + 1] if idx + 1 < len(bounds) else KEY_SPACE,
                         lane_raised=lane_raised, capped=capped, marks=marks)

    def finish(self) -> list[ChunkInfo]:
        """Write what is buffered and close every chunk; returns them in segment order. What
        several segments still buffer goes into one shared file (write/shared.py)."""
        # the same rule for both inputs: a Spark task's small runs and a Stream.append's segments
        # that never filled a row group are slices of one file, so an append writes one file
        # per commit however many segments its records reach
        if len(self._runs) + sum(s.file is None for s in self._streamed.values()) > 1:
            # an append's slices are a few rows each: its file's encodings are chosen on rows of
            # all its segments, as each segment's own file chose on its rows
            sample = (_sample([p for i in sorted(self._streamed) for p in self._streamed[i].pending])
                      if self.ordered else None)

            def open_writer(first: pa.Table) -> Callable[[Any], Any]:
                return self._new_writer(first if sample is None else sample)

            self._shared = SharedFiles(self._new_output, open_writer)
        try:
            for idx in sorted(self._runs):
                self._write_run(idx)
            for idx in sorted(self._streamed):
                self._close_streamed(idx)
        except BaseException:
            if self._shared is not None:
                self._shared.abort()  # closed; what it wrote is an orphan until cleaned, as any
            raise
        if self._shared is not None:
            shared, self._shared = self._shared, None
            shared.close()
            self._done = shared.slices(self._done)
        order = {s: i for i, s in enumerate(self.spec.segment_ids)}
        done, self._done = sorted(self._done, key=lambda c: order[c.seg]), []
        return done

    def _close_streamed(self, idx: int) -> None:
        """Write a streamed chunk's pending rows and close it (no-op if ``idx`` has none)."""
        if idx not in self._streamed:
            return
        self._drain(idx, final=True)
        s = self._streamed.pop(idx)
        assert s.prev is not None  # set by the _append that made it
        s.writer.close()
        size = s.file.tell()
        s.file.close()
        self._done.append(self._info(idx, s.rel, s.rows, size, s.first, s.prev, s.lane_raised, s.capped,
                                     s.marks.marks()))

    def abort(self) -> list[str]:
        """Close and forget open files; returns the paths written so far (orphans until cleaned)."""
        paths = [c.path for c in self._done]
        for s in self._streamed.values():
            if s.file is None:
                continue
            try:
                s.writer.close()
            finally:
                s.file.close()
            paths.append(s.rel)
        self._streamed.clear()
        self._runs.clear()
        self._done.clear()
        return paths


def _with_raw(body: pa.Table, raw: np.ndarray) -> pa.Table:
    return body.append_column(pa.field(RAW_TSO, pa.int64(), nullable=False), int64s(raw))


def _sample(tables: list[pa.Table]) -> pa.Table:
    """The first ``DICTIONARY_SAMPLE_ROWS`` rows of ``tables`` (what chooses a file's encodings)."""
    out, n = [], 0
    for t in tables:
        out.append(t)
        n += t.num_rows
        if n >= DICTIONARY_SAMPLE_ROWS:
            break
    return pa.concat_tables(out).slice(0, DICTIONARY_SAMPLE_ROWS)


def _moved(raw: np.ndarray, ms: np.ndarray) -> int:
    """Records whose stamped millisecond is later than their own (the running max moved them)."""
    return int(np.count_nonzero((raw >> LOGICAL_BITS) != ms)) if len(raw) else 0


def _gathered(batches: Iterable[pa.RecordBatch | pa.Table], rows: int, size: int) -> Iterator[pa.Table]:
    """``batches`` in order as tables of ``rows`` rows or ``size`` bytes, whichever comes first
    (the last one less), without copying; larger inputs pass as they are."""
    pending: list[pa.Table] = []
    n = nbytes = 0
    for b in batches:
        table = pa.Table.from_batches([b]) if isinstance(b, pa.RecordBatch) else b
        pending.append(table)
        n += table.num_rows
        nbytes += table.nbytes
        if n >= rows or nbytes >= size:
            yield pa.concat_tables(pending) if len(pending) > 1 else table
            pending, n, nbytes = [], 0, 0
    if pending:
        yield pa.concat_tables(pending) if len(pending) > 1 else pending[0]


def write_batches(spec: WriteSpec, batches: Iterable[pa.RecordBatch | pa.Table], task: str = "", *,
                  ordered: bool = False) -> list[ChunkInfo]:
    """Write all ``batches`` as time-sorted chunks (see :class:`ChunkWriter` for ``ordered``)."""
    writer = ChunkWriter(spec, task, ordered=ordered)
    try:
        for b in _gathered(batches, GATHER_ROWS, GATHER_BYTES):
            writer.add(b)
    except BaseException:
        writer.abort()
        raise
    return writer.finish()


