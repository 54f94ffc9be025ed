"""numpy arrays into Arrow without pyarrow's pandas shim.

``pa.array`` (and ``pa.scalar``) first ask whether their argument is a pandas object, and the
first such question in a process imports pandas when it is installed: ~0.2 s in a PySpark
worker, which starts with only pyarrow and numpy loaded, i.e. more than a task's decode of a
50 MB chunk. Reading and writing tasks therefore build their Arrow arrays from numpy buffers
here (zero-copy, as ``pa.array`` of a contiguous int64 array is); ``tests/test_startup.py``
checks that no task imports pandas.
"""

from __future__ import annotations

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
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
        pa.types.is_large_binary(t)
