"""Per-column Parquet encoding choices for chunk files, decided on a sample of their first rows.

Shared by the writer tasks (:mod:`.writing`) and compaction (:mod:`.compaction`), so a chunk
and the macro-chunk that later holds its rows are encoded by the same rules.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: A string column is dictionary-encoded when its values repeat this many times on average.
DICTIONARY_REPEATS = 4
#: Rows whose distinct values decide it (a repeated key shows up well within this many rows).
DICTIONARY_SAMPLE_ROWS = 16_384
#: Bytes of each column compressed on trial to decide whether the codec pays for itself.
CODEC_SAMPLE_BYTES = 256 << 10
#: A column keeps the stream's codec only if the trial saves at least this fraction.
CODEC_MIN_SAVING = 0.10


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
