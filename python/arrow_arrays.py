"""numpy arrays into Arrow without pyarrow's pandas shim.

``pa.array`` (and ``pa.scalar``) first ask whether their argument is a pandas object, and the
first such question in a process imports pandas when it is installed: ~0.2 s in a PySpark
worker, which starts with only pyarrow and numpy loaded, i.e. more than a task's decode of a
50 MB chunk. Reading and writing tasks therefore build their Arrow arrays from numpy buffers
here (zero-copy, as ``pa.array`` of a contiguous int64 array is), and the Rows PySpark 4.0 hands
a stream sink become Arrow through :func:`from_pylist`; ``tests/test_startup.py`` checks that
no task imports pandas.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa


def int64s(values: np.ndarray) -> pa.Array:
    """``values`` as an Arrow int64 array without nulls (zero-copy when contiguous int64)."""
    arr = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(arr), [None, pa.py_buffer(arr)])


def numbers(arr: pa.Array | pa.ChunkedArray, dtype: type | np.dtype) -> np.ndarray:
    """A fixed-width Arrow array without nulls as numpy ``dtype`` values (``to_numpy`` imports
    pandas too): zero-copy for one chunk, one copy for several."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks != 1:
            return np.concatenate([numbers(c, dtype) for c in arr.chunks] or [np.zeros(0, dtype)])
        arr = arr.chunk(0)
    if arr.null_count:
        raise ValueError(f"numbers() of an array with {arr.null_count} null(s)")
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * np.dtype(dtype).itemsize)


def is_text(t: pa.DataType) -> bool:
    """A variable-width string or binary type (plain or large): values held as offsets and bytes."""
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t))


#: Days from 0001-01-01 (``date.toordinal`` 1) to 1970-01-01: Arrow's date32 epoch.
_EPOCH_ORDINAL = 719_163
_NUMBERS = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
            pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
            pa.float32(): np.float32, pa.float64(): np.float64}


def from_pylist(values: list[Any], t: pa.DataType) -> pa.Array:
    """Python values (``None`` for null) as an Arrow array of type ``t``, as ``pa.array`` makes it.

    Booleans, numbers, strings, binaries, dates and microsecond timestamps are built from numpy
    buffers, so a PySpark worker converting rows does not import pandas (see the module
    docstring); other types (decimals, nested ones), and values these cannot take, go through
    ``pa.array``, which converts them or raises its own error. A microsecond timestamp with a time
    zone takes a naive ``datetime`` as local time (how PySpark hands a TIMESTAMP to Python).
    """
    n = len(values)
    null_count = values.count(None)  # counted in C; the mask only when there are nulls
    if null_count == n:
        return pa.nulls(n, t)
    nulls = np.fromiter(map(_is_none, values), dtype=bool, count=n) if null_count else None
    try:
        buffers = _buffers([v for v in values if v is not None] if null_count else values, t)
    except (TypeError, ValueError, OverflowError, AttributeError):
        buffers = None
    if buffers is None:
        return pa.array(values, type=t)
    if nulls is not None:
        buffers = _spread(buffers, nulls, t)
    if pa.types.is_boolean(t):
        buffers = [np.packbits(buffers[0], bitorder="little")]
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if nulls is not None else None
    return pa.Array.from_buffers(t, n, [validity, *(pa.py_buffer(b) for b in buffers)], null_count=null_count)


def _is_none(v: Any) -> bool:
    return v is None


def _buffers(present: list[Any], t: pa.DataType) -> list[Any] | None:
    """The data buffers of non-null ``present`` values of type ``t`` (None: not a type built here)."""
    n = len(present)
    if pa.types.is_boolean(t):
        if not set(map(type, present)) <= {bool}:
            return None
        return [np.fromiter(present, dtype=bool, count=n)]
    if t in _NUMBERS:
        kinds = {int} if pa.types.is_integer(t) else {int, float}
        if not set(map(type, present)) <= kinds:
            return None  # numpy would truncate a float, or parse a string, where pa.array raises
        return [np.fromiter(present, dtype=_NUMBERS[t], count=n)]
    if pa.types.is_date32(t):
        return [np.fromiter((v.toordinal() - _EPOCH_ORDINAL for v in present), np.int32, count=n)]
    if pa.types.is_timestamp(t) and t.unit == "us":
        return [_micros(present, t.tz is not None)]
    if pa.types.is_string(t) or pa.types.is_binary(t):
        pieces = list(map(str.encode, present)) if pa.types.is_string(t) else present
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=n), out=offsets[1:])
        if offsets[-1] >= 2**31:  # only a large_string/large_binary holds that
            return None
        return [offsets.astype(np.int32), b"".join(pieces)]
    return None


def _spread(buffers: list[Any], nulls: np.ndarray, t: pa.DataType) -> list[Any]:
    """Buffers of the non-null values laid out over all rows (a null's slot empty)."""
    if pa.types.is_string(t) or pa.types.is_binary(t):
        offsets = np.zeros(len(nulls) + 1, dtype=np.int32)
        lengths = np.zeros(len(nulls), dtype=np.int32)
        lengths[~nulls] = np.diff(buffers[0])
        np.cumsum(lengths, out=offsets[1:])
        return [offsets, buffers[1]]
    data = np.zeros(len(nulls), dtype=buffers[0].dtype)
    data[~nulls] = buffers[0]
    return [data]


def _micros(present: list[datetime], zoned: bool) -> np.ndarray:
    """Microseconds since the epoch of each datetime: for a zoned type a naive one is local time
    (``datetime.timestamp``), for a type without a zone the wall time it shows (an aware one's in
    UTC, as ``pa.array``). The whole seconds come from ``timestamp()``'s float, which is off by
    far less than half a second, and the microseconds from the field, so the result is exact."""
    if zoned:
        secs = (v.timestamp() for v in present)
    else:
        secs = (v.timestamp() if v.tzinfo is not None else v.replace(tzinfo=timezone.utc).timestamp()
                for v in present)
    seconds = np.fromiter(secs, dtype=np.float64, count=len(present))
    micro = np.fromiter((v.microsecond for v in present), dtype=np.int64, count=len(present))
    return np.round(seconds - micro / 1e6).astype(np.int64) * 1_000_000 + micro
