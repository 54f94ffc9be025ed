"""Page checksums of chunk files: every writer stores a CRC32 per page, every decode checks it.

Bytes changed inside a page after it was written (a disk, a bad copy, a buggy tool) decode as
other values: a flipped bit of a plain-encoded number is another number, and nothing else in a
file covers a page's bytes (the footer holds sizes, row counts and statistics). Parquet's page
header has an optional ``crc``, the CRC32 of the page's bytes as stored (after compression).
Every writer of a chunk file sets it (:data:`WRITE_CHECKSUMS`), every decoder of one checks it
(:data:`VERIFY_CHECKSUMS`), so a damaged page fails the read (a
:class:`~pyspark_tstream.errors.CorruptChunkError`) instead of returning a wrong value.

The CRC sits in each page's header, inside the page bytes: a format-v5 slice (a whole Parquet
file inside a shared object) keeps its CRCs when its outer footer is built, which moves no page.
Files written before page checksums have no CRC in their page headers: pyarrow skips the check
for such a page, so they read as before, checked by their footers only (sizes, rows, times).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: ``ParquetWriter`` / ``write_table`` keyword arguments of every chunk writer.
WRITE_CHECKSUMS: dict[str, Any] = {"write_page_checksum": True}
#: ``ParquetFile`` / ``read_table`` keyword arguments of every chunk decoder.
VERIFY_CHECKSUMS: dict[str, Any] = {"page_checksum_verification": True}
#: What pyarrow's message for a page whose CRC does not match starts with.
_MISMATCH = "could not verify page integrity"


def is_mismatch(e: BaseException) -> bool:
    """Whether ``e`` (from a decode) is a page whose bytes do not match its CRC."""
    return isinstance(e, OSError) and _MISMATCH in str(e)


def describe(e: BaseException) -> str:
    """What a decode failure ``e`` says about the file, in a chunk error's words."""
    if is_mismatch(e):
        return f"has a damaged page (its bytes do not match the page's CRC32: {e})"
    return f"is corrupt ({e})"


def page_problem(source: Any) -> str | None:
    """What is wrong with the pages of the Parquet file ``source`` (what ``pq.ParquetFile``
    opens), or None: every page of every column decoded, CRCs checked where pages have them.

    pyarrow checks a CRC only while decoding the page, so this decodes the file, one column
    chunk at a time (memory: one decoded column chunk), naming the first that fails.
    """
    try:
        f = pq.ParquetFile(source, **VERIFY_CHECKSUMS)
        names = f.schema_arrow.names
    except (pa.ArrowException, OSError, ValueError) as e:
        return f"unreadable ({type(e).__name__}: {e})"
    for g in range(f.num_row_groups):
        for name in names:
            try:
                f.read_row_group(g, columns=[name])
            except (pa.ArrowException, OSError, ValueError) as e:
                why = "has a damaged page (its bytes do not match the page's CRC32)" if is_mismatch(e) else \
                    f"is unreadable ({type(e).__name__}: {e})"
                return f"{why} in column {name!r} of row group {g}"
    return None
