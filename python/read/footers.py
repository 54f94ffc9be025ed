"""A chunk file's footer read alone: its row count and its records' time bounds, without its data.

One job: what a Parquet footer says of a chunk file, read by one ranged read of its tail
(:mod:`~pyspark_tstream.chunkfile.footer`). File checks (fsck's ``--footers-only``) and
garbage collection of shared files use it; a read of records never needs it.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from ..chunkfile.footer import FOOTER_GUESS, footer_size, read_tail
from ..journal.entries import Chunk
from ..schema import RAW_TSO
from ..store.ranged_file import RangedFile
from ..store.storage import Store
from ..timestamps import final_bounds


def footer(store: Store, rel: str, size: int, guess: int = FOOTER_GUESS) -> pq.FileMetaData:
    """The footer of a ``size``-byte Parquet file: one ranged read of its last ``guess`` bytes
    (two when the footer is bigger, :func:`~pyspark_tstream.chunkfile.footer.read_tail`);
    ValueError when it has no Parquet footer."""
    tail = read_tail(store, rel, size, guess)
    if footer_size(tail) is None:
        raise ValueError("not a Parquet file (no footer)")
    return pq.ParquetFile(RangedFile.of_tail(size, tail)).metadata


def footer_rows(store: Store, rel: str, size: int, guess: int = FOOTER_GUESS) -> int:
    """The rows a ``size``-byte Parquet file's footer records (see :func:`footer`)."""
    return int(footer(store, rel, size, guess).num_rows)


def footer_times(meta: pq.FileMetaData, chunk: Chunk) -> tuple[int | None, int] | None:
    """The least and greatest final ``_tso`` of a chunk stored alone in a file (all its rows,
    from its first), from the footer's statistics of the raw timestamps; None where they are
    absent. The greatest is exact: ``max(raw_max, floor + rows - 1)``. The least is exact for a
    macro-chunk (floor 0: raw is final) and a sorted chunk; otherwise it is only a lower bound,
    which proves nothing, and is None.
    """
    names = meta.schema.to_arrow_schema().names
    if RAW_TSO not in names or meta.num_rows != chunk.rows or not meta.num_row_groups:
        return None
    col = names.index(RAW_TSO)
    stats = [meta.row_group(g).column(col).statistics for g in range(meta.num_row_groups)]
    if any(st is None or not st.has_min_max for st in stats):
        return None
    first, last = final_bounds(min(int(st.min) for st in stats), max(int(st.max) for st in stats), chunk.rows,
                               chunk.floor)
    return (first if chunk.sorted or chunk.floor == 0 else None), last
