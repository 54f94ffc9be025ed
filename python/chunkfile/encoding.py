"""Per-column Parquet encoding choices for chunk files, decided on a sample of their first rows.

Shared by the writer tasks (:mod:`.writing`) and compaction (:mod:`.compaction`) through
:func:`chunk_encodings`, so a chunk and the macro-chunk that later holds its rows are encoded by
the same rules. Any choice here is a plain Parquet encoding every reader decodes (pyarrow,
Spark's vectorized reader, DuckDB): it changes size and speed, never what a chunk holds, so
chunks written before and after a change read alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .dictionary_pages import DICTIONARY_PAGE_BYTES

#: A string column is dictionary-encoded when its values repeat this many times on average.
DICTIONARY_REPEATS = 4
#: Rows whose distinct values decide it (a repeated key shows up well within this many rows).
DICTIONARY_SAMPLE_ROWS = 16_384
#: Bytes of each column compressed on trial to decide whether the codec pays for itself.
CODEC_SAMPLE_BYTES = 256 << 10
#: A column keeps the stream's codec only if the trial saves at least this fraction.
CODEC_MIN_SAVING = 0.10
#: An integer or temporal column is delta-encoded when that stores it in at most this fraction of
#: its plain size (an increasing or jittered timestamp does; random ids do not, and decode faster
#: plain).
DELTA_MAX_FRACTION = 0.5
#: Arrow's DELTA_BINARY_PACKED writer: blocks of 256 deltas, each of 4 bit-packed miniblocks.
_DELTA_BLOCK, _DELTA_MINIBLOCKS = 256, 4


def chunk_encodings(table: pa.Table, codec: str) -> dict[str, Any]:
    """``ParquetWriter`` keyword arguments for a chunk file whose first rows are ``table``.

    String columns whose values repeat are dictionary-encoded (:func:`dictionary_columns`);
    integer and temporal columns that deltas store in half their size or less are
    DELTA_BINARY_PACKED (:func:`delta_columns`: timestamps, the raw hybrid timestamps,
    counters), which also encodes ~2x and decodes ~5x faster than compressing them; every other
    column gets the stream's ``codec`` where a trial shows it pays (:func:`column_codecs`).
    """
    dict_cols = dictionary_columns(table)
    delta = delta_columns(table, skip=dict_cols)
    codecs = column_codecs(table, codec, dict_cols + delta)
    codecs.update({c: "none" for c in delta})  # a codec barely shrinks packed deltas
    return {"compression": codecs, "use_dictionary": dict_cols or False,
            "dictionary_pagesize_limit": DICTIONARY_PAGE_BYTES,
            "column_encoding": dict.fromkeys(delta, "DELTA_BINARY_PACKED") or None}


def delta_columns(table: pa.Table, skip: Sequence[str] = ()) -> list[str]:
    """Integer and temporal columns that DELTA_BINARY_PACKED stores in at most half their size.

    Decided on a chunk's first rows by computing the encoding's size (deltas, a minimum per
    block, a bit width per miniblock), which costs a few numpy passes over the sample.
    """
    sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
    out = []
    for fl in sample.schema:
        if fl.name in skip or _physical_width(fl.type) is None:
            continue
        values = _physical_values(sample.column(fl.name))
        if len(values) >= _DELTA_BLOCK and \
                delta_packed_bytes(values) <= DELTA_MAX_FRACTION * values.size * values.itemsize:
            out.append(fl.name)
    return out


def delta_packed_bytes(values: np.ndarray) -> int:
    """Bytes DELTA_BINARY_PACKED stores ``values`` (non-null, in order) in, headers estimated."""
    if values.size < 2:
        return 16
    deltas = np.diff(values.astype(np.int64))  # wraps like the encoder's arithmetic
    blocks = -(-deltas.size // _DELTA_BLOCK)
    padded = np.empty(blocks * _DELTA_BLOCK, dtype=np.int64)
    padded[:deltas.size] = deltas
    padded[deltas.size:] = deltas[-1]  # padding never widens a miniblock
    grid = padded.reshape(blocks, _DELTA_BLOCK)
    mins = grid.min(axis=1)
    spans = (grid - mins[:, None]).view(np.uint64)
    widest = spans.reshape(blocks, _DELTA_MINIBLOCKS, -1).max(axis=2)
    miniblock = _DELTA_BLOCK // _DELTA_MINIBLOCKS
    # per block: its minimum as a zigzag varint and one width byte per miniblock
    zigzag = ((mins << 1) ^ (mins >> 63)).view(np.uint64)
    header = (np.maximum(_bit_length(zigzag), 1) + 6) // 7 + _DELTA_MINIBLOCKS
    return int(_bit_length(widest).sum()) * miniblock // 8 + int(header.sum()) + 16


def _bit_length(values: np.ndarray) -> np.ndarray:
    """Bits needed for each unsigned 64-bit value (0 for 0)."""
    out = np.zeros(values.shape, dtype=np.int64)
    rest = values.astype(np.uint64, copy=True)
    for shift in (32, 16, 8, 4, 2, 1):  # a binary search per element, vectorised
        big = rest >= (np.uint64(1) << np.uint64(shift))
        out += np.where(big, shift, 0)
        rest = np.where(big, rest >> np.uint64(shift), rest)
    return out + (rest > 0)


def _physical_width(t: pa.DataType) -> int | None:
    """Bytes of the Parquet INT32/INT64 value an Arrow type is stored as; None for other types."""
    if pa.types.is_integer(t) and t.bit_width >= 32:
        return int(t.bit_width) // 8
    if pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_time64(t):
        return 8
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return 4
    return None


def _physical_values(col: pa.ChunkedArray) -> np.ndarray:
    """The non-null values of an integer or temporal column as signed integers of its width."""
    width = _physical_width(col.type)
    dtype = np.int64 if width == 8 else np.int32
    parts = []
    for arr in col.chunks:
        if arr.null_count:
            arr = arr.drop_null()
        if len(arr):
            parts.append(np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset: arr.offset + len(arr)])
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


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
            if col.length() and _distinct_at_most(col, col.length() // DICTIONARY_REPEATS):
                out.append(fl.name)
    return out


def _distinct_at_most(col: pa.ChunkedArray, limit: int) -> bool:
    """Whether ``col`` holds at most ``limit`` distinct values (null counts as one).

    A column of mostly distinct values (payloads, ids) shows more than ``limit`` in its first
    ``limit + 1`` rows already: hashing those instead of the whole sample decides it at a
    quarter of the cost (2 ms of a chunk's 4 ms of sampling for 64-byte payloads). The answer
    is the same: a prefix never holds more distinct values than the whole.
    """
    if col.length() > limit + 1 and len(pc.unique(col.slice(0, limit + 1))) > limit:
        return False
    return len(pc.unique(col)) <= limit


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
