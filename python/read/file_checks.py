"""Checking chunk files against the journal from their Parquet footers alone.

A file's footer says how many rows it holds and, in the raw timestamp column's statistics, the
range of their times: enough to tell a missing, cut-short or foreign file (another chunk's,
even of the same rows and bytes) from the one the journal recorded, at one ranged read per file
and no decode. fsck checks every file a read would open this way; the native read
(``read_native``), whose rows come from Spark's Parquet scan and so are never checked by
tstream's decoder, checks the files it planned before Spark opens them.

A footer says nothing of the pages' bytes: fsck also decodes every file whose footer is sound
(``pages=True``), which checks each page against its CRC32 where the file has them
(:mod:`~pyspark_tstream.chunkfile.checksums`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..chunkfile.checksums import page_problem
from ..errors import StorageError
from ..journal.entries import Chunk
from ..schema import RAW_TSO
from ..store.storage import Store
from ..timestamps import final_bounds
from .footers import footer, footer_times
from .ranged import group_span, source
from .reading import damaged, times_problem

#: Footers read at once (ranged reads of object stores are latency-bound).
THREADS = 16
#: Whole files fetched and decoded at once to check their pages (each held in memory meanwhile).
PAGE_THREADS = 4


def file_problem(store: Store, chunk: Chunk, size: int | None, slices: Sequence[Chunk] = ()) -> str | None:
    """What is wrong with the ``size``-byte file (None: absent) holding ``chunk``, judged from
    its footer: None when nothing is; else that it is missing, not Parquet, or holds other rows,
    bytes or times than the journal recorded. For a view of rows ``[offset, offset + rows)``
    of a larger file (a macro-chunk), that the file has those rows. For a shared file, each of
    its ``slices`` (the journal's chunks in it) must be its row groups or row ranges of them,
    timed as the journal says (:func:`slice_problem`)."""
    if size is None:
        return "missing"
    offset = int(getattr(chunk, "offset", 0))  # (a macro map entry has none)
    try:
        meta = footer(store, chunk.path, size)
        times = footer_times(meta, chunk) if offset == 0 and not getattr(chunk, "file_bytes", 0) else None
    except FileNotFoundError:
        return "missing"
    except StorageError:
        raise  # the store failed, not the file: no verdict on the file
    except Exception as e:  # noqa: BLE001 - any decode failure is a corrupt chunk
        return str(e) if isinstance(e, ValueError) and "no footer" in str(e) else \
            f"unreadable ({type(e).__name__}: {e})"
    if (rows := meta.num_rows) < offset + chunk.rows:
        return f"has {rows} rows, the journal says {offset + chunk.rows}"
    shared = int(getattr(chunk, "file_bytes", 0))  # a slice of a shared file: the file's size
    if shared and size != shared:
        return f"has {size} bytes, the journal says {shared}"
    if not shared and offset == 0 and rows == chunk.rows and size != chunk.bytes:
        return f"has {size} bytes, the journal says {chunk.bytes}"
    if (bad := span_problem(meta, chunk)) is not None:
        return bad
    for piece in slices if shared else ():
        if (bad := span_problem(meta, piece) or slice_problem(meta, piece, slices)) is not None:
            return bad
    return times_problem(chunk, *times) if times is not None else None


def slice_problem(meta: Any, chunk: Chunk, slices: Sequence[Chunk] = ()) -> str | None:
    """What is wrong with a slice of a shared file, judged from the file's footer ``meta``
    (``slices``: the journal's slices of that file). A self-contained slice (format v5, a span)
    is whole row groups of its own: they must start at its ``offset`` and hold exactly its rows,
    and their raw timestamps' statistics give the final times the journal recorded. A slice
    without a span may be a row range of row groups it shares with other slices (a small shared
    file is one row group): their statistics must hold a time at or before its first and,
    unless its floor set it, its last time; and where the journal's slices fill those row groups,
    none later than the latest of them. Another file of the same size (another task's) fails this."""
    names = meta.schema.to_arrow_schema().names
    end = chunk.offset + chunk.rows
    at, groups, whole = 0, [], True
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        if at < end and at + n > chunk.offset:
            groups.append((g, at, at + n))
            whole = whole and chunk.offset <= at and at + n <= end
        at += n
    rows = f"rows {chunk.offset}..{end - 1}"
    if not groups:
        return f"has no {rows}"
    if not whole and chunk.span is not None:
        return f"has {rows} in row groups shared with other rows where the journal says they are a slice of their own"
    if RAW_TSO not in names:
        return None
    col = names.index(RAW_TSO)
    stats = [meta.row_group(g).column(col).statistics for g, _, _ in groups]
    if any(st is None or not st.has_min_max for st in stats):
        return None
    least, most = min(int(st.min) for st in stats), max(int(st.max) for st in stats)
    if whole:
        first, last = final_bounds(least, most, chunk.rows, chunk.floor)
        bad = times_problem(chunk, first if chunk.sorted else None, last)
        return None if bad is None else f"{rows} " + bad
    # a raw time is at most its final one; the last is a raw time unless the floor made it
    if least > chunk.lo or (chunk.hi > chunk.floor + chunk.rows - 1 and most < chunk.hi):
        return (f"{rows} lie in row groups timed {least}..{most} (raw _tso), not holding the "
                f"{chunk.lo}..{chunk.hi} the journal says")
    lo, hi = groups[0][1], groups[-1][2]
    inside = [c for c in slices if lo <= c.offset and c.offset + c.rows <= hi]
    if sum(c.rows for c in inside) == hi - lo and most > max(c.hi for c in inside):
        return (f"{rows} lie in row groups timed up to {most} (raw _tso), later than any of their slices the "
                f"journal records ({max(c.hi for c in inside)})")
    return None


def span_problem(meta: Any, chunk: Chunk) -> str | None:
    """What is wrong with a format-v5 slice's span (``Chunk.span``), judged from its file's
    outer footer ``meta``: its rows' column chunks must lie inside it, else a read of the span
    alone would decode other bytes. None when it has no span or all is well."""
    span = getattr(chunk, "span", None)
    if span is None:
        return None
    at = 0
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        if at < chunk.offset + chunk.rows and at + n > chunk.offset:
            lo, hi = group_span(meta, g)
            if lo < span[0] or hi > span[1]:
                return (f"holds rows {chunk.offset}..{chunk.offset + chunk.rows - 1} at bytes {lo}..{hi}, outside "
                        f"the span {span[0]}..{span[1]} the journal says")
        at += n
    return None


def pages_problem(store: Store, chunk: Chunk) -> str | None:
    """What is wrong with the pages of ``chunk``'s file (see
    :func:`~pyspark_tstream.chunkfile.checksums.page_problem`): the whole file fetched and decoded."""
    try:
        data = store.read_many([chunk.path], mapped=True)[0]
    except FileNotFoundError:
        return "missing"
    return page_problem(source(data))


def file_problems(store: Store, chunks: Sequence[Chunk], sizes: Mapping[str, int] | None = None, *,
                  pages: bool = False) -> dict[str, tuple[Chunk, str | None]]:
    """Per file of ``chunks``: the chunk judged (of a file's views, the one reaching furthest
    into it) and what is wrong with the file (see :func:`file_problem`; with ``pages``, then
    :func:`pages_problem` of each file whose footer is sound). File sizes come from ``sizes``
    (a listing), else from the journal (a chunk alone in its file) or a size call."""
    furthest: dict[str, Chunk] = {}
    slices: dict[str, list[Chunk]] = {}  # a shared file's slices, each checked against its row groups
    for c in chunks:
        had = furthest.get(c.path)
        if had is None or _end(c) > _end(had):
            furthest[c.path] = c
        if int(getattr(c, "file_bytes", 0)):
            slices.setdefault(c.path, []).append(c)

    def judge(c: Chunk) -> tuple[Chunk, str | None]:
        mine = slices.get(c.path, ())
        if sizes is not None:
            return c, file_problem(store, c, sizes.get(c.path), mine)
        if _alone(c) or int(getattr(c, "file_bytes", 0)):
            try:
                if file_problem(store, c, int(getattr(c, "file_bytes", 0)) or c.bytes, mine) is None:
                    # its footer read at the size the journal recorded: one call where all is well
                    return c, None
            except StorageError:
                pass  # e.g. S3 refusing a range past the end of a shorter file: judge it by its size
        try:
            size: int | None = store.size(c.path)
        except FileNotFoundError:
            size = None
        return c, file_problem(store, c, size, mine)

    with ThreadPoolExecutor(THREADS) as pool:
        verdicts = {c.path: (c, bad) for c, bad in pool.map(judge, furthest.values())}
    if pages:
        sound = [c for c, bad in verdicts.values() if bad is None]
        with ThreadPoolExecutor(PAGE_THREADS) as pool:
            verdicts.update((c.path, (c, bad)) for c, bad in zip(sound, pool.map(
                lambda c: pages_problem(store, c), sound)) if bad is not None)
    return verdicts


def check_files(store: Store, chunks: Sequence[Chunk]) -> None:
    """Raise :class:`~pyspark_tstream.errors.CorruptChunkError` naming the first file of ``chunks`` that is not what the
    journal recorded: one store call per chunk file (its footer, at the size the journal
    recorded), two per macro-chunk and per damaged file (its size, then its footer)."""
    for path, (_, bad) in file_problems(store, chunks).items():
        if bad is not None:
            raise damaged(store, store.uri(path), bad)


def _alone(c: Chunk) -> bool:
    """Whether ``c`` is all of its file, so its ``bytes`` are the file's size (a view of a
    macro-chunk has a share of them)."""
    return c.floor != 0 and int(getattr(c, "offset", 0)) == 0


def _end(c: Chunk) -> int:
    return int(getattr(c, "offset", 0)) + c.rows
