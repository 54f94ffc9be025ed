"""Writer tasks: route records to segments, stamp raw hybrid timestamps, write Parquet chunks.

Runs wherever the data is (a Spark task or the Python API caller). Nothing here is visible to
readers: a chunk only counts once a journal entry names it, so a failed or duplicate task attempt
leaves at most an orphan file. All per-record work is vectorized (numpy / Arrow compute).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import SchemaMismatchError, TimestampError
from .routing import key_hash, route
from .schema import RAW_TSO, conform
from .storage import Store
from .timestamps import MAX_MS, MarkSampler, now_ms, raw_hybrid

ROW_GROUP_ROWS = 131_072
#: A string column is dictionary-encoded when its values repeat this many times on average.
DICTIONARY_REPEATS = 4
#: Rows whose distinct values decide it (a repeated key shows up well within this many rows).
DICTIONARY_SAMPLE_ROWS = 16_384
#: Bytes of each column compressed on trial to decide whether the codec pays for itself.
CODEC_SAMPLE_BYTES = 256 << 10
#: A column keeps the stream's codec only if the trial saves at least this fraction.
CODEC_MIN_SAVING = 0.10
#: Without a key column, batches smaller than this go to one segment (fewer, larger files).
SPREAD_MIN_ROWS = 65_536


@dataclass(frozen=True)
class ChunkInfo:
    """A written, not yet committed chunk (what a Spark task sends to the driver)."""

    seg: int
    path: str
    rows: int
    bytes: int
    raw_lo: int  # first raw hybrid timestamp
    raw_hi: int  # last raw hybrid timestamp
    order: int = 0  # position among the task's chunks of one segment, for deterministic floors
    task: str = ""
    key: str | None = None  # routing column, so a committer can re-route after a scale
    key_lo: int = 0  # the key range the chunk was routed to
    key_hi: int = 1 << 64
    marks: tuple[int, ...] = ()  # raw timestamps of the mark rows (timestamps.raw_marks)

    def to_json(self) -> dict[str, Any]:
        return {"seg": self.seg, "path": self.path, "rows": self.rows, "bytes": self.bytes,
                "raw_lo": self.raw_lo, "raw_hi": self.raw_hi, "order": self.order, "task": self.task,
                "key": self.key, "key_lo": self.key_lo, "key_hi": self.key_hi, "marks": list(self.marks)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ChunkInfo:
        return cls(**{**d, "marks": tuple(d.get("marks", ()))})


@dataclass(frozen=True)
class WriteSpec:
    """Everything a writer task needs; pickles to Spark workers.

    Built on the driver by :meth:`pyspark_tstream.stream.Stream.write_spec`.
    """

    store: Store
    schema: pa.Schema
    segment_ids: tuple[int, ...]
    bounds: tuple[int, ...]
    key: str | None = None
    timestamp: str | None = None
    timestamping: str = "client-prefer"
    uncapped: bool = False
    compression: str = "snappy"
    writer_tag: str = "w"
    options: dict[str, Any] = field(default_factory=dict)

    def check_input(self, schema: pa.Schema) -> None:
        """Fail before any write if the key or timestamp column is unusable."""
        names = schema.names
        if self.key is not None and self.key not in names:
            raise SchemaMismatchError(
                f"keyColumn {self.key!r} is not a column of the data; columns: {names}")
        if self.timestamp is not None:
            if self.timestamp not in names:
                raise TimestampError(
                    f"timestampColumn {self.timestamp!r} is not a column of the data; columns: {names}")
            t = schema.field(self.timestamp).type
            if not (pa.types.is_timestamp(t) or pa.types.is_integer(t) or pa.types.is_date(t)):
                raise TimestampError(
                    f"timestampColumn {self.timestamp!r} has type {t}; use a TIMESTAMP column or "
                    "BIGINT epoch milliseconds")
        elif self.timestamping == "client-require":
            raise TimestampError(
                "timestamping=client-require needs a client timestamp: set timestampColumn "
                "(nothing was written)")


def client_ms(spec: WriteSpec, table: pa.Table, arrival: int) -> np.ndarray:
    """Millisecond time of each record under the stream's timestamping mode."""
    n = table.num_rows
    if spec.timestamping == "arrival" or spec.timestamp is None:
        return np.full(n, arrival, dtype=np.int64)
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
    ms = col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if n:
        lo, hi = int(ms.min()), int(ms.max())
        if lo < 0 or hi > MAX_MS:
            bad = lo if lo < 0 else hi
            raise TimestampError(
                f"timestampColumn {spec.timestamp!r} holds {bad}, outside epoch ms 0..{MAX_MS} "
                "(1970..4199); fix or drop such records (nothing was written)")
    if not spec.uncapped:
        ms = np.minimum(ms, arrival)
    return ms


def dictionary_columns(table: pa.Table) -> list[str]:
    """String columns worth dictionary-encoding: in a sample, each value repeats 4 times on average.

    Decided on a chunk's first rows. Dictionary-encoding a column of mostly distinct values
    (payloads, ids) costs a hash of every value and then falls back to plain pages anyway; a
    low-cardinality column (device, key, status) gets much smaller and faster to decode.
    """
    sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
    out = []
    for fl in sample.schema:
        if pa.types.is_string(fl.type) or pa.types.is_large_string(fl.type):
            col = sample.column(fl.name)
            if col.length() and pc.count_distinct(col, mode="all").as_py() * DICTIONARY_REPEATS <= col.length():
                out.append(fl.name)
    return out


def column_codecs(table: pa.Table, codec: str, skip: Sequence[str] = ()) -> dict[str, str]:
    """The stream's codec per column, or ``none`` where a trial on a sample saves under 10 %.

    Decided on a chunk's first row group. Fast codecs (snappy, lz4) barely shrink random-looking
    values (hashes, hex or base64 payloads, random numbers) yet cost a full compress and
    decompress pass; such columns are stored uncompressed. Dictionary-encoded columns (``skip``)
    always keep the codec.
    """
    if codec == "none":
        return {name: "none" for name in table.column_names}
    out = {}
    for name in table.column_names:
        out[name] = codec
        if name in skip:
            continue
        sample = _value_bytes(table.column(name))
        if sample is not None and len(sample) >= 4096 and \
                len(pa.compress(sample, codec=codec, asbytes=True)) > (1 - CODEC_MIN_SAVING) * len(sample):
            out[name] = "none"
    return out


def _value_bytes(col: pa.ChunkedArray, limit: int = CODEC_SAMPLE_BYTES) -> bytes | None:
    """Up to ``limit`` bytes of a column's values as plain Parquet pages hold them.

    None for types whose pages are not their values' bytes (booleans, nested types).
    """
    t = col.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        width, offsets = 0, np.int32
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        width, offsets = 0, np.int64
    elif pa.types.is_primitive(t) and not (pa.types.is_boolean(t) or pa.types.is_null(t)):
        width, offsets = t.bit_width // 8, None
    else:
        return None
    parts, size = [], 0
    for arr in col.chunks:
        if size >= limit:
            break
        bufs = arr.buffers()
        if offsets is None:
            start, stop = arr.offset * width, (arr.offset + len(arr)) * width
        else:
            ends = np.frombuffer(bufs[1], dtype=offsets)[arr.offset: arr.offset + len(arr) + 1]
            start, stop = (int(ends[0]), int(ends[-1])) if len(ends) else (0, 0)
        data = bufs[-1]
        if data is not None and stop > start:
            parts.append(data.slice(start, min(stop - start, limit - size)).to_pybytes())
            size += len(parts[-1])
    return b"".join(parts)


class ChunkWriter:
    """Streams record batches of one task into one Parquet chunk per segment.

    ``add`` routes each batch and appends it to that segment's open file in row groups;
    ``finish`` closes the files and returns their :class:`ChunkInfo`. Raw timestamps keep the
    running-max rule across batches of the same segment.
    """

    def __init__(self, spec: WriteSpec, task: str = "") -> None:
        self.spec = spec
        self.task = task or uuid.uuid4().hex[:8]
        self.arrival = now_ms()
        self._prev: dict[int, int] = {}
        self._buffers: dict[int, list[pa.Table]] = {}
        self._buffered: dict[int, int] = {}
        self._writers: dict[int, tuple[Any, Any, str]] = {}
        self._rows: dict[int, int] = {}
        self._first: dict[int, int] = {}
        self._marks: dict[int, MarkSampler] = {}
        self._rotate = 0
        self._checked = False
        self._hash_distinct = True  # until a batch shows mostly distinct keys

    def add(self, data: pa.RecordBatch | pa.Table) -> None:
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if table.num_rows == 0:
            return
        if not self._checked:
            self.spec.check_input(table.schema)
            self._checked = True
        ms = client_ms(self.spec, table, self.arrival)
        body = conform(table.select([c for c in table.column_names if c in self.spec.schema.names]),
                       self.spec.schema)
        segs = self._route(table)
        if len(self.spec.segment_ids) == 1 or (segs == segs[0]).all():
            self._append(int(segs[0]), body, ms)
            return
        # segment indices are small: a stable sort of int16 is a radix sort (~8x an int64 sort)
        order = np.argsort(segs.astype(np.int16) if len(self.spec.segment_ids) < 1 << 15 else segs,
                           kind="stable")
        sorted_segs = segs[order]
        cuts = np.flatnonzero(np.diff(sorted_segs)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(order)]))
        taken = body.take(pa.array(order))
        ms_sorted = ms[order]
        for s, e in zip(starts, ends):
            self._append(int(sorted_segs[s]), taken.slice(s, e - s), ms_sorted[s:e])

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
        return (np.arange(n, dtype=np.int64) * nseg) // n

    def _key_segments(self, column: pa.ChunkedArray) -> np.ndarray:
        """Segment index of each record, by the routing hash of its key.

        String and binary keys usually repeat (devices, users, tenants), so each distinct value
        is hashed and routed once and the result gathered back: the same hash, for ~40 % less
        work with 1000 keys per 10k-row batch. After a batch whose keys are mostly distinct, the
        writer hashes every value.
        """
        key, bounds, t = self.spec.key or "", self.spec.bounds, column.type
        if self._hash_distinct and (pa.types.is_string(t) or pa.types.is_large_string(t) or
                                    pa.types.is_binary(t) or pa.types.is_large_binary(t)):
            arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
            enc = pc.dictionary_encode(arr, null_encoding="encode")  # a null key hashes like ""
            if len(enc.dictionary) * 2 <= len(arr):
                return route(key_hash(enc.dictionary, name=key), bounds)[enc.indices.to_numpy()]
            self._hash_distinct = False
        return route(key_hash(column, name=key), bounds)

    def _append(self, idx: int, body: pa.Table, ms: np.ndarray) -> None:
        prev = self._prev.get(idx)
        raw = raw_hybrid(ms)
        if prev is not None and len(raw):
            # keep the running max across batches: a_i >= prev + 1 + i
            raw = np.maximum(raw, prev + 1 + np.arange(len(raw), dtype=np.int64))
        if len(raw):
            self._prev[idx] = int(raw[-1])
            self._first.setdefault(idx, int(raw[0]))
        self._marks.setdefault(idx, MarkSampler()).add(raw)
        part = body.append_column(pa.field(RAW_TSO, pa.int64(), nullable=False), pa.array(raw, pa.int64()))
        self._buffers.setdefault(idx, []).append(part)
        self._buffered[idx] = self._buffered.get(idx, 0) + part.num_rows
        self._rows[idx] = self._rows.get(idx, 0) + part.num_rows
        if self._buffered[idx] >= ROW_GROUP_ROWS:
            self._drain(idx)

    def _drain(self, idx: int, final: bool = False) -> None:
        parts = self._buffers.pop(idx, [])
        self._buffered[idx] = 0
        if not parts:
            return
        table = pa.concat_tables(parts)
        if not final:
            # only whole row groups: writing the overshoot of each drain made a tiny row group
            # (a few hundred rows, each with its own pages and dictionary) after every full one
            whole = table.num_rows - table.num_rows % ROW_GROUP_ROWS
            if whole < table.num_rows:
                self._buffers[idx] = [table.slice(whole)]
                self._buffered[idx] = table.num_rows - whole
                table = table.slice(0, whole)
        if idx not in self._writers:
            seg = self.spec.segment_ids[idx]
            rel = f"data/{seg & 0xFFFFFFFF}/{self.spec.writer_tag}-{self.task}-{uuid.uuid4().hex}.parquet"
            f = self.spec.store.open_output(rel)
            dict_cols = dictionary_columns(table)
            w = pq.ParquetWriter(f, table.schema, compression=column_codecs(table, self.spec.compression, dict_cols),
                                 use_dictionary=dict_cols or False, write_statistics=[RAW_TSO])
            self._writers[idx] = (w, f, rel)
        self._writers[idx][0].write_table(table, row_group_size=ROW_GROUP_ROWS)

    def finish(self) -> list[ChunkInfo]:
        """Close every open chunk; returns them in segment order."""
        out = []
        for idx in sorted(self._rows):
            self._drain(idx, final=True)
            w, f, rel = self._writers.pop(idx)
            w.close()
            size = f.tell()
            f.close()
            bounds = self.spec.bounds
            out.append(ChunkInfo(seg=self.spec.segment_ids[idx], path=rel, rows=self._rows[idx],
                                 bytes=size, raw_lo=self._first[idx], raw_hi=self._prev[idx],
                                 task=self.task, key=self.spec.key, key_lo=bounds[idx],
                                 key_hi=bounds[idx + 1] if idx + 1 < len(bounds) else 1 << 64,
                                 marks=self._marks.pop(idx).marks()))
        self._rows.clear()
        return out

    def abort(self) -> list[str]:
        """Close and forget open files; returns their paths (orphans until cleaned)."""
        paths = []
        for w, f, rel in self._writers.values():
            try:
                w.close()
            finally:
                f.close()
            paths.append(rel)
        self._writers.clear()
        return paths


def write_batches(spec: WriteSpec, batches: Iterable[pa.RecordBatch | pa.Table], task: str = "") -> list[ChunkInfo]:
    """Write all ``batches`` as chunks (one per segment touched)."""
    writer = ChunkWriter(spec, task)
    try:
        for b in batches:
            writer.add(b)
    except BaseException:
        writer.abort()
        raise
    return writer.finish()


