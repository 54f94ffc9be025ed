"""Reading records by ``_tso`` range from planned chunks (:mod:`~pyspark_tstream.planner` plans).

Reading a chunk applies its floor (``tso_i = max(raw_i, floor + i)``), numbers it
(``seq_i = seq + i``) and slices the range by binary search on the tsos (strictly increasing
within a chunk): no per-row Python, zero-copy slices of the decoded columns. A chunk that is a
view (``offset``) reads its rows ``[offset, offset + rows)``; an unsorted one (``sorted=False``)
is filtered by mask instead of sliced.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import CorruptChunkError
from .journal import Chunk
from .planner import ReadTask
from .schema import RAW_TSO, conform, full_schema
from .storage import Store
from .timestamps import LOGICAL_BITS, apply_floor

#: Chunks up to this size are fetched together in one batched call.
BATCH_FETCH_BYTES = 64 << 20
BATCH_ROWS = 65_536
#: The order of records in a read: by time, ties by identity (``_segment``, ``_seq``).
READ_ORDER = [("_tso", "ascending"), ("_segment", "ascending"), ("_seq", "ascending")]


def _decode(store: Store, chunk: Chunk, data: bytes) -> pa.Table:
    try:
        # a zero-copy Arrow buffer: through a Python file object (io.BytesIO) the same decode
        # costs ~20 % more CPU (every read goes through Python)
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptChunkError(
            f"chunk {store.uri(chunk.path)} is corrupt ({e}); put the file back if you have a copy, "
            f"else truncate the stream past it (`tstream fsck {store.display_url}` prints the command)",
            path=store.uri(chunk.path)) from e
    if chunk.offset or table.num_rows > chunk.rows:  # a view of part of a larger file
        table = table.slice(chunk.offset, chunk.rows)
    if table.num_rows != chunk.rows or RAW_TSO not in table.column_names:
        raise CorruptChunkError(
            f"chunk {store.uri(chunk.path)} has {table.num_rows} rows, the journal says {chunk.rows}; "
            f"it was overwritten or truncated (`tstream fsck {store.display_url}` lists the records "
            "it held and the command that truncates past them)", path=store.uri(chunk.path))
    return table


def _fetch(store: Store, chunks: Sequence[Chunk]) -> Iterator[tuple[Chunk, bytes]]:
    """Whole-object GETs, batched for small chunks (one call for many is ~10x faster on S3)."""
    group: list[Chunk] = []
    size = 0

    def flush() -> Iterator[tuple[Chunk, bytes]]:
        try:
            blobs = store.read_many([c.path for c in group])
        except FileNotFoundError as e:
            # read_many names the missing object's URI (no probe per chunk needed)
            missing = e.filename if isinstance(e.filename, str) else store.uri(group[0].path)
            raise CorruptChunkError(
                f"chunk {missing} named by the journal is missing; put the file back if you have a "
                f"copy, else truncate the stream past it (`tstream fsck {store.display_url}` prints "
                "the command)", path=missing) from e
        yield from zip(group, blobs)

    for c in chunks:
        if group and size + c.bytes > BATCH_FETCH_BYTES:
            yield from flush()
            group, size = [], 0
        group.append(c)
        size += c.bytes
    if group:
        yield from flush()


def chunk_tsos(store: Store, chunk: Chunk) -> np.ndarray:
    """A chunk's final ``_tso`` values, reading only its raw timestamp column (a planner's
    :data:`~pyspark_tstream.planner.TsoLoader` for cuts finer than the chunk's marks)."""
    return chunks_tsos(store, [chunk])[0]


def chunks_tsos(store: Store, chunks: Sequence[Chunk]) -> list[np.ndarray]:
    """Final ``_tso`` values of each chunk (one batched fetch, raw column only)."""
    out = []
    for chunk, data in _fetch(store, chunks):
        try:
            raw = pq.read_table(pa.BufferReader(data), columns=[RAW_TSO]).column(0).to_numpy()
        except (pa.ArrowException, OSError, ValueError, KeyError) as e:
            raise CorruptChunkError(f"chunk {store.uri(chunk.path)} is corrupt ({e}); restore it or "
                                    "truncate the stream past it", path=store.uri(chunk.path)) from e
        raw = raw[chunk.offset: chunk.offset + chunk.rows].astype(np.int64, copy=False)
        out.append(apply_floor(raw, chunk.floor))
    return out


def chunk_records(table: pa.Table, chunk: Chunk, lo: int, hi: int, schema: pa.Schema,
                  first_seq: int | None = None, end_seq: int | None = None) -> pa.Table | None:
    """The records of a decoded chunk with ``lo < _tso <= hi`` (and ``first_seq <= _seq <
    end_seq`` when given), with system columns."""
    raw = table.column(RAW_TSO).to_numpy()
    tso = apply_floor(raw.astype(np.int64, copy=False), chunk.floor)
    if not chunk.sorted:
        keep = (tso > lo) & (tso <= hi)
        seq = np.arange(chunk.seq, chunk.seq + chunk.rows, dtype=np.int64)
        if first_seq is not None:
            keep &= seq >= first_seq
        if end_seq is not None:
            keep &= seq < end_seq
        if not keep.any():
            return None
        idx = np.flatnonzero(keep)
        body = conform(table.drop_columns([RAW_TSO]).take(pa.array(idx)), schema)
        return _with_system(body, tso[idx], seq[idx], chunk.seg, schema)
    start = int(np.searchsorted(tso, lo, side="right"))
    stop = int(np.searchsorted(tso, hi, side="right"))
    if first_seq is not None:
        start = max(start, first_seq - chunk.seq)
    if end_seq is not None:
        stop = min(stop, end_seq - chunk.seq)
    if stop <= start:
        return None
    body = conform(table.drop_columns([RAW_TSO]).slice(start, stop - start), schema)
    return _with_system(body, tso[start:stop], np.arange(chunk.seq + start, chunk.seq + stop, dtype=np.int64),
                        chunk.seg, schema)


def _with_system(body: pa.Table, tso: np.ndarray, seq: np.ndarray, seg: int, schema: pa.Schema) -> pa.Table:
    ts = pa.array(tso >> LOGICAL_BITS, pa.int64()).view(pa.timestamp("ms", tz="UTC"))
    system = [ts, pa.array(tso, pa.int64()), pa.array(np.full(len(tso), seg, dtype=np.int64)), pa.array(seq)]
    return pa.Table.from_arrays(list(body.columns) + system, schema=full_schema(schema))


def read_task(store: Store, schema: pa.Schema, task: ReadTask) -> Iterator[pa.RecordBatch]:
    """Record batches of one task (what a Spark partition yields)."""
    starts, ends = dict(task.start_cut), dict(task.end_cut)
    for chunk, data in _fetch(store, task.chunks):
        part = chunk_records(_decode(store, chunk, data), chunk, task.lo, task.hi, schema,
                             starts.get(chunk.seg), ends.get(chunk.seg))
        if part is not None:
            yield from part.to_batches(max_chunksize=BATCH_ROWS)


def read_table(store: Store, schema: pa.Schema, chunks: Sequence[Chunk], lo: int, hi: int) -> pa.Table:
    """All records of ``chunks`` in ``(lo, hi]`` as one table, in :data:`READ_ORDER`."""
    parts = []
    for chunk, data in _fetch(store, chunks):
        part = chunk_records(_decode(store, chunk, data), chunk, lo, hi, schema)
        if part is not None:
            parts.append(part)
    if not parts:
        return full_schema(schema).empty_table()
    table = pa.concat_tables(parts)
    # chunks of one segment may overlap in time (writer lanes): ties on _tso go by identity
    return table.sort_by(READ_ORDER) if len(parts) > 1 else table

