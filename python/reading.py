"""Reading records of planned chunks by ``_tso`` range (planning lives in :mod:`.planner`).

Reading a chunk applies its floor (``tso_i = max(raw_i, floor + i)``), numbers it
(``seq_i = seq + i``) and slices the range by binary search on the tsos (strictly increasing
within a chunk): no per-row Python, zero-copy slices of the decoded columns.

A chunk may be a *view* of rows ``[offset, offset + rows)`` of a macro-chunk (python/
compaction.py): a plan names small chunks, and :func:`~pyspark_tstream.compacted.substitute`
replaces those compacted since by views. Views of one file are fetched and decoded once, only
the row groups they cover; a view whose ``_tso`` is not strictly increasing (``sorted=False``:
several writer lanes merged) is filtered by a mask instead of a binary search.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import CorruptChunkError
from .entries import Chunk
from .schema import RAW_TSO, conform, full_schema
from .storage import Store
from .timestamps import LOGICAL_BITS, apply_floor

if TYPE_CHECKING:  # the planner makes tasks; reading only reads them
    from .planner import ReadTask

#: Chunks up to this size are fetched together in one batched call.
BATCH_FETCH_BYTES = 64 << 20
BATCH_ROWS = 65_536
#: The order of records in a read: by time, ties by identity (``_segment``, ``_seq``).
READ_ORDER = [("_tso", "ascending"), ("_segment", "ascending"), ("_seq", "ascending")]


def decode_file(store: Store, chunk: Chunk, data: bytes, views: Sequence[Chunk] = ()) -> tuple[pa.Table, int]:
    """Decode a chunk's file: ``(table, first row)``, only the row groups ``views`` cover."""
    views = views or (chunk,)
    try:
        # a zero-copy Arrow buffer: through a Python file object (io.BytesIO) the same decode
        # costs ~20 % more CPU (every read goes through Python)
        if len(views) == 1 and chunk.offset == 0 and chunk.floor != 0:
            table, base = pq.read_table(pa.BufferReader(data)), 0  # a plain small chunk: all of it
        else:
            f = pq.ParquetFile(pa.BufferReader(data))
            starts = np.cumsum([0] + [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)])
            first = min(v.offset for v in views)
            stop = max(v.offset + v.rows for v in views)
            groups = [i for i in range(f.num_row_groups) if starts[i] < stop and starts[i + 1] > first]
            if len(groups) == f.num_row_groups:
                table, base = f.read(), 0
            else:
                table, base = f.read_row_groups(groups), int(starts[groups[0]]) if groups else 0
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptChunkError(
            f"chunk {store.uri(chunk.path)} is corrupt ({e}); put the file back if you have a copy, "
            f"else truncate the stream past it (`tstream fsck {store.display_url}` prints the command)",
            path=store.uri(chunk.path)) from e
    short = [v for v in views if v.offset + v.rows > base + table.num_rows]
    if (len(views) == 1 and chunk.offset == 0 and chunk.floor != 0 and table.num_rows != chunk.rows) \
            or short or RAW_TSO not in table.column_names:
        raise CorruptChunkError(
            f"chunk {store.uri(chunk.path)} has {table.num_rows} rows, the journal says "
            f"{max(v.offset + v.rows for v in views)}; it was overwritten or truncated (`tstream fsck "
            f"{store.display_url}` lists the records it held and the command that truncates past them)",
            path=store.uri(chunk.path))
    return table, base


def fetch_files(store: Store, chunks: Sequence[Chunk]) -> Iterator[tuple[list[Chunk], bytes]]:
    """Whole-object GETs, batched for small chunks (one call for many is ~10x faster on S3).

    Views of the same file come together, fetched once: ``(views, bytes)`` per file.
    """
    by_path: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_path.setdefault(c.path, []).append(c)
    group: list[list[Chunk]] = []
    size = 0

    def flush() -> Iterator[tuple[list[Chunk], bytes]]:
        try:
            blobs = store.read_many([views[0].path for views in group])
        except FileNotFoundError as e:
            # read_many names the missing object's URI (no probe per chunk needed)
            missing = e.filename if isinstance(e.filename, str) else store.uri(group[0][0].path)
            raise CorruptChunkError(
                f"chunk {missing} named by the journal is missing; put the file back if you have a "
                f"copy, else truncate the stream past it (`tstream fsck {store.display_url}` prints "
                "the command)", path=missing) from e
        yield from zip(group, blobs)

    for views in by_path.values():
        bytes_ = sum(c.bytes for c in views)
        if group and size + bytes_ > BATCH_FETCH_BYTES:
            yield from flush()
            group, size = [], 0
        group.append(views)
        size += bytes_
    if group:
        yield from flush()


def view_tsos(table: pa.Table, chunk: Chunk, base: int = 0) -> np.ndarray:
    """Final ``_tso`` of a chunk's rows, from its decoded file (``base``: the table's first row)."""
    col = table.column(RAW_TSO)
    raw = (col.chunk(0) if col.num_chunks == 1 else col).to_numpy()
    raw = raw[chunk.offset - base: chunk.offset - base + chunk.rows].astype(np.int64, copy=False)
    # tso_j = max(raw_j, floor + j) over the rows j of the file; usually the floor is below
    # every raw timestamp (a floor only raises records its writer stamped late): then the raw
    # column is the answer, zero-copy, without the floor's two arrays
    top = chunk.floor + chunk.offset + len(raw) - 1
    if len(raw) and int(raw.min()) >= top:
        return raw
    return apply_floor(raw, chunk.floor + chunk.offset)


def read_tsos(store: Store, chunks: Sequence[Chunk]) -> Iterator[tuple[Chunk, np.ndarray]]:
    """Final ``_tso`` of each chunk (or view), reading only the raw timestamp column."""
    for views, data in fetch_files(store, chunks):
        try:
            raw = pq.read_table(pa.BufferReader(data), columns=[RAW_TSO])
        except (pa.ArrowException, OSError, ValueError, KeyError) as e:
            raise CorruptChunkError(
                f"chunk {store.uri(views[0].path)} is corrupt ({e}); put the file back if you have a "
                f"copy, else truncate the stream past it (`tstream fsck {store.display_url}` prints "
                "the command)", path=store.uri(views[0].path)) from e
        for c in views:
            yield c, view_tsos(raw, c)


def chunk_tsos(store: Store, chunk: Chunk) -> np.ndarray:
    """A chunk's final ``_tso`` values, reading only its raw timestamp column (a planner's
    :data:`~pyspark_tstream.planner.TsoLoader` for cuts finer than the chunk's marks)."""
    return chunks_tsos(store, [chunk])[0]


def chunks_tsos(store: Store, chunks: Sequence[Chunk]) -> list[np.ndarray]:
    """Final ``_tso`` values of each chunk, in the order given (one batched fetch)."""
    got = {id(c): tso for c, tso in read_tsos(store, chunks)}
    return [got[id(c)] for c in chunks]


def chunk_records(table: pa.Table, chunk: Chunk, lo: int, hi: int, schema: pa.Schema,
                  first_seq: int | None = None, end_seq: int | None = None, base: int = 0) -> pa.Table | None:
    """The records of a decoded chunk with ``lo < _tso <= hi`` (and ``first_seq <= _seq <
    end_seq`` when given), with system columns. ``table`` holds the chunk's file from row
    ``base`` on; the chunk's rows are ``[offset, offset + rows)`` of that file."""
    tso = view_tsos(table, chunk, base)
    at = chunk.offset - base
    if chunk.sorted:
        start = int(np.searchsorted(tso, lo, side="right"))
        stop = int(np.searchsorted(tso, hi, side="right"))
        if first_seq is not None:
            start = max(start, first_seq - chunk.seq)
        if end_seq is not None:
            stop = min(stop, end_seq - chunk.seq)
        if stop <= start:
            return None
        body = table.drop_columns([RAW_TSO]).slice(at + start, stop - start)
        part = tso[start:stop]
        seq = np.arange(chunk.seq + start, chunk.seq + stop, dtype=np.int64)
    else:  # lanes merged: times overlap along the rows, so keep by mask
        mask = (tso > lo) & (tso <= hi)
        if first_seq is not None and first_seq > chunk.seq:
            mask[:first_seq - chunk.seq] = False
        if end_seq is not None and end_seq < chunk.seq + chunk.rows:
            mask[max(end_seq - chunk.seq, 0):] = False
        idx = np.flatnonzero(mask)
        if not len(idx):
            return None
        a, b = int(idx[0]), int(idx[-1]) + 1
        body = table.drop_columns([RAW_TSO])
        body = body.slice(at + a, b - a) if b - a == len(idx) else body.take(pa.array(idx + at))
        part = tso[idx]
        seq = idx.astype(np.int64) + chunk.seq
    body = conform(body, schema)
    n = len(part)
    ts = pa.array(part >> LOGICAL_BITS, pa.int64()).view(pa.timestamp("ms", tz="UTC"))
    system = [ts, pa.array(part, pa.int64()), pa.array(np.full(n, chunk.seg, dtype=np.int64)), pa.array(seq)]
    return pa.Table.from_arrays(list(body.columns) + system, schema=full_schema(schema))


def _records(store: Store, schema: pa.Schema, chunks: Sequence[Chunk], lo: int, hi: int,
             starts: dict[int, int], ends: dict[int, int]) -> Iterator[tuple[Chunk, pa.Table]]:
    for views, data in fetch_files(store, chunks):
        table, base = decode_file(store, views[0], data, views)
        for chunk in views:
            part = chunk_records(table, chunk, lo, hi, schema, starts.get(chunk.seg), ends.get(chunk.seg), base)
            if part is not None:
                yield chunk, part


def read_task(store: Store, schema: pa.Schema, task: ReadTask) -> Iterator[pa.RecordBatch]:
    """Record batches of one task (what a Spark partition yields)."""
    for _, part in _records(store, schema, task.chunks, task.lo, task.hi, dict(task.start_cut), dict(task.end_cut)):
        yield from part.to_batches(max_chunksize=BATCH_ROWS)


def read_table(store: Store, schema: pa.Schema, chunks: Sequence[Chunk], lo: int, hi: int) -> pa.Table:
    """All records of ``chunks`` in ``(lo, hi]`` as one table, in :data:`READ_ORDER`."""
    parts, ordered = [], True
    for chunk, part in _records(store, schema, chunks, lo, hi, {}, {}):
        parts.append(part)
        ordered = ordered and chunk.sorted
    if not parts:
        return full_schema(schema).empty_table()
    table = pa.concat_tables(parts)
    if len(parts) == 1 and ordered:
        return table
    # chunks of one segment overlap in time (writer lanes): ties on _tso go by identity
    return table.sort_by(READ_ORDER)

