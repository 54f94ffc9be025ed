"""Finding a Parquet file's footer at its end: the one definition of how a footer is fetched.

A Parquet file ends with its footer (a Thrift ``FileMetaData``), the footer's length as 4
little-endian bytes, and ``PAR1``. A reader that knows the file's size fetches its tail with one
ranged read of a guessed length (:func:`read_tail`) and a second only when the footer is longer
than the guess; :func:`footer_of` cuts the footer out of bytes that end a file.
"""

from __future__ import annotations

import struct

from ..store.storage import Store

MAGIC = b"PAR1"
#: Bytes read from a file's end to find its Parquet footer (a second read if it is bigger).
FOOTER_GUESS = 64 * 1024


def footer_size(file_tail: bytes) -> int | None:
    """How many bytes at the end of a file its footer, its length and ``PAR1`` take, from the
    file's last bytes; None when they do not end as a Parquet file does."""
    if len(file_tail) < 8 or file_tail[-4:] != MAGIC:
        return None
    return int(struct.unpack("<I", file_tail[-8:-4])[0]) + 8


def read_tail(store: Store, rel: str, size: int, guess: int) -> bytes:
    """The last bytes of the ``size``-byte file ``rel``, its whole footer among them: one ranged
    read of ``guess`` bytes, two when the footer is longer. A file that does not end as a Parquet
    file does comes back as read (the caller reports it)."""
    tail = store.read_range(rel, max(0, size - guess), size)
    need = footer_size(tail)
    if need is not None and need > len(tail):
        tail = store.read_range(rel, max(0, size - need), size)
    return tail


def footer_of(file_tail: bytes) -> bytes:
    """The serialized ``FileMetaData`` of a Parquet file (or its tail: ``... footer, length,
    PAR1``); ValueError when ``file_tail`` does not end as a Parquet file does."""
    need = footer_size(file_tail)
    if need is None:
        raise ValueError("not a Parquet file (no footer)")
    if need > len(file_tail):
        raise ValueError("the footer is longer than the bytes given")
    return file_tail[-need:-8]
