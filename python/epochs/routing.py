"""Routing keys to segments, vectorized.

A record's routing position is a 64-bit hash of its key; a segment owns ``[lo, hi)`` of
``[0, 2**64)`` (shown to users as fractions of ``[0, 1)``). The hash must never change for a
stream's lifetime, or records of one key would land in two segments and lose their order, so it
is our own (splitmix64 over integers, a polynomial byte hash for strings and binaries), computed
with numpy over Arrow buffers: no per-row Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..arrow_arrays import numbers
from ..errors import SchemaMismatchError

KEY_SPACE = 1 << 64
_U64 = np.uint64
_P = _U64(0x100000001B3)  # FNV prime, as the multiplier of the polynomial byte hash


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x.astype(_U64) + _U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        out: np.ndarray = z ^ (z >> _U64(31))
        return out


def _filled(arr: pa.Array, value: object) -> pa.Array:
    """``arr`` with nulls replaced by ``value``; no call when there are none (the common case,
    and ``fill_null`` makes a ``pa.scalar``, which imports pandas: see :mod:`.arrow_arrays`)."""
    if not arr.null_count:
        return arr
    import pyarrow.compute as pc  # here, not at the top: planners import this module for KEY_SPACE

    return pc.fill_null(arr, value)


def _bytes_hash(arr: pa.Array) -> np.ndarray:
    """Polynomial hash of each value's bytes: ``sum(b_j * P**j) mod 2**64`` then splitmix64."""
    arr = arr.cast(pa.large_binary()) if not pa.types.is_large_binary(arr.type) else arr
    arr = _filled(arr, b"")
    n = len(arr)
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[arr.offset: arr.offset + n + 1]
    start, stop = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(buffers[2], dtype=np.uint8)[start:stop] if buffers[2] is not None else \
        np.zeros(0, dtype=np.uint8)
    offsets = offsets - start
    lengths = np.diff(offsets)
    out = np.zeros(n, dtype=_U64)
    if len(data):
        max_len = int(lengths.max())
        powers = np.ones(max_len, dtype=_U64)
        with np.errstate(over="ignore"):
            if max_len > 1:
                powers[1:] = np.cumprod(np.full(max_len - 1, _P, dtype=_U64))
            local = np.arange(len(data), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
            weighted = (data.astype(_U64) + _U64(1)) * powers[local]
        nonempty = lengths > 0
        sums = np.add.reduceat(weighted, offsets[:-1][nonempty]) if nonempty.any() else out[:0]
        out[nonempty] = sums
    with np.errstate(over="ignore"):
        out = out + lengths.astype(_U64)  # "" and b"\x00" must differ
    return _splitmix64(out)


def key_hash(column: pa.Array | pa.ChunkedArray, *, name: str = "key") -> np.ndarray:
    """64-bit routing hash of every value of ``column`` (nulls hash like a fixed value)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    t = column.type
    if pa.types.is_dictionary(t):
        column = column.dictionary_decode()
        t = column.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
            pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _bytes_hash(column.cast(pa.large_binary()))
    if pa.types.is_integer(t) or pa.types.is_temporal(t) or pa.types.is_boolean(t):
        ints = _filled(column.cast(pa.int64()) if not pa.types.is_temporal(t) else
                       column.view(pa.int64()) if t.bit_width == 64 else column.cast(pa.int64()), 0)
        return _splitmix64(numbers(ints, np.int64))
    if pa.types.is_floating(t):
        floats = numbers(_filled(column.cast(pa.float64()), 0.0), np.float64)
        return _splitmix64(floats.view(np.int64))
    if pa.types.is_decimal(t):
        return _bytes_hash(column.cast(pa.string()))
    raise SchemaMismatchError(
        f"keyColumn {name!r} has type {t}, which cannot route records; use a string, binary, "
        "integer, boolean, float, decimal, date or timestamp column"
    )


def route(hashes: np.ndarray, bounds: Sequence[int]) -> np.ndarray:
    """Index into ``bounds`` (sorted segment ``lo`` values, first 0) owning each hash."""
    lows = np.asarray(bounds, dtype=_U64)
    return np.searchsorted(lows, hashes, side="right") - 1


def fraction(position: int) -> float:
    """A key-space position as a fraction of ``[0, 1)`` for display."""
    return position / KEY_SPACE
