"""A read-only, seekable file served by ranged reads, for pyarrow.

pyarrow opens a Parquet file through a file object; handed one whose reads are ranged store
requests (or slices of bytes already read), it fetches a footer or a few columns, never the whole
object. Nothing here calls the store itself: the caller passes the fetch function.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any


class RangedFile(io.RawIOBase):
    """A read-only, seekable file of ``size`` bytes served by ``fetch(start, end)``: pyarrow
    reads a Parquet footer or a few columns through it with ranged requests, not the whole
    object (``fetch`` may be :meth:`~pyspark_tstream.store.storage.Store.read_range` of one
    object, or bytes already read)."""

    def __init__(self, size: int, fetch: Callable[[int, int], bytes]) -> None:
        self._size, self._fetch, self._at = size, fetch, 0

    @classmethod
    def of_tail(cls, size: int, tail: bytes) -> RangedFile:
        """The ``size``-byte file of which only the last ``len(tail)`` bytes were read (a footer)."""
        def fetch(start: int, end: int) -> bytes:
            at = start - (size - len(tail))
            if at < 0:
                raise OSError("footer larger than the bytes read")
            return tail[at:end - (size - len(tail))]
        return cls(size, fetch)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._at = offset if whence == 0 else (self._at + offset if whence == 1 else self._size + offset)
        return self._at

    def tell(self) -> int:
        return self._at

    def readinto(self, b: Any) -> int:
        end = min(self._size, self._at + len(b))
        if end <= self._at:
            return 0
        data = self._fetch(self._at, end)
        b[:len(data)] = data
        self._at += len(data)
        return len(data)
