"""The records of planned chunks in read order, window by window, in bounded memory.

:func:`~pyspark_tstream.read.reading.read_table` gathers a whole range, then sorts it: chunks of
different segments (and writer lanes of one segment) overlap in time, so no record can be
returned before every chunk that may hold an earlier one has been read. :func:`sweep` returns
the same records in the same order (:data:`~pyspark_tstream.read.reading.READ_ORDER`) without
holding them all: it walks ``(lo, hi]`` in consecutive windows of ``_tso`` and sorts one window
at a time; windows follow one another in time, so the tables it yields are in read order.

A window ``(a, b]`` ends before the first record of the next chunk not yet opened (so every
record in it lies in an open chunk) and at the ``window_rows``-th record after ``a`` of the open
chunks. A chunk's file is fetched when the walk reaches its first record (small files in
batches, :func:`~pyspark_tstream.read.reading.fetch_files`) and dropped once the walk passes its
last; the other views of a file open with its first (it is decoded already), so a window ends
before the next file's first record, not the next slice's. Memory: about ``window_rows``
records, one fetch batch of chunk files (memory-mapped when local), and per open file its
decoded timestamps and the projected columns of a small file's row groups, or of one row group
of a big file (:class:`~pyspark_tstream.read.reading.FileRows`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter

import numpy as np
import pyarrow as pa

from ..errors import CorruptChunkError
from ..journal.entries import Chunk
from ..store.storage import Store
from .ranged import Span, Sparse
from .reading import BATCH_ROWS, READ_ORDER, FileRows, compacted_since, fetch_files


class _Files:
    """The chunk files of a sweep: fetched in the order the walk needs them, dropped after."""

    def __init__(self, store: Store, views: Sequence[Chunk], columns: Sequence[str] | None) -> None:
        self.store, self.columns = store, columns
        # views come by first record: fetch_files returns their files in the order they are opened
        self.fetched = fetch_files(store, views)
        # by the id of each view: fetch_files hands out a file's views together, or a span's
        # (format v5: one ranged read may return several slices' own files)
        self.waiting: dict[int, tuple[list[Chunk], bytes | Span | Sparse]] = {}

    def rows(self, view: Chunk) -> FileRows:
        """The decoded file of ``view`` (fetched now)."""
        while id(view) not in self.waiting:
            views, data = next(self.fetched)
            for v in views:
                self.waiting[id(v)] = (views, data)
        views, data = self.waiting[id(view)]
        for v in views:
            self.waiting.pop(id(v), None)
        return FileRows(self.store, views, data, self.columns)

    def refetch(self, views: Sequence[Chunk]) -> None:
        """Fetch ``views`` (the walk's unopened rest, substituted after a missing file) from now on."""
        self.fetched = fetch_files(self.store, views)
        self.waiting.clear()


class _Open:
    """An open file of the sweep: its decoded rows, the views of the walk it holds that it has
    not passed yet, their greatest ``_tso`` and all their final ``_tso`` sorted (a file's views
    are walked together: a window costs a few array operations a file, not a view)."""

    def __init__(self, rows: FileRows, views: Sequence[Chunk]) -> None:
        self.rows, self.views = rows, views
        self.his = rows.layout_of(views).his
        tso = rows.tsos_of(views)
        # a view's own times are sorted when it says so: a file of one such view needs no sort,
        # and several sorted runs merge (a stable sort of runs)
        self.tso = tso if len(views) == 1 and views[0].sorted else np.sort(tso, kind="stable")

    def after(self, a: int, k: int) -> np.ndarray:
        """The (up to) ``k`` least ``_tso`` above ``a`` of its views."""
        s = int(np.searchsorted(self.tso, a, side="right"))
        return self.tso[s:s + k]

    def passed(self, b: int) -> bool:
        """Drop the views the walk has passed at ``b`` (all their records at or before it);
        whether none is left (the file can go)."""
        keep = self.his > b
        if not bool(keep.any()):
            return True
        if not bool(keep.all()):
            self.views = [v for v, k in zip(self.views, keep.tolist()) if k]
            self.his = self.his[keep]
        return False


_LO = attrgetter("lo")


def _kth_after(files: Sequence[_Open], a: int, k: int) -> int | None:
    """The ``k``-th smallest ``_tso`` above ``a`` among the open files' views (None: fewer than ``k``)."""
    parts = [f.after(a, k) for f in files]
    found = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return int(np.partition(found, k - 1)[k - 1]) if len(found) >= k else None


def sweep(store: Store, schema: pa.Schema, chunks: Sequence[Chunk], lo: int, hi: int, *,
          columns: Sequence[str] | None = None, starts: Mapping[int, int] | None = None,
          ends: Mapping[int, int] | None = None, window_rows: int = BATCH_ROWS) -> Iterator[pa.Table]:
    """The records of ``chunks`` in ``(lo, hi]`` in read order: tables of about ``window_rows``
    records (never empty) with ``schema``'s user columns then the system columns.

    ``columns`` names the user columns to decode (None: all; ``schema`` should hold the same);
    in the segments ``starts``/``ends`` list, only ``_seq`` from ``starts[seg]`` and before
    ``ends[seg]`` are kept (a read from or to a stream cut). Same records and order as
    :func:`~pyspark_tstream.read.reading.read_table` of the same arguments.
    """
    starts, ends = starts or {}, ends or {}
    views = sorted((c for c in chunks if c.hi > lo and c.lo <= hi), key=_LO)
    files = _Files(store, views, columns)
    open_files: list[_Open] = []
    opened: set[int] = set()  # views opened with an earlier view of their file
    pending: list[pa.Table] = []
    held = 0  # rows in pending
    i, a = 0, lo
    replanned = False
    while a < hi:
        while i < len(views) and id(views[i]) in opened:
            i += 1
        if not open_files and i >= len(views):
            break
        if not open_files:  # nothing before the next chunk's first record
            a = max(a, views[i].lo - 1)
        while i < len(views) and (id(views[i]) in opened or views[i].lo <= a + 1):
            if id(views[i]) in opened:
                i += 1
                continue
            try:
                rows = files.rows(views[i])
            except CorruptChunkError as e:
                # a lazy reader consumed past the grace period: a compaction replaced planned
                # files and a vacuum deleted them. Nothing of an unopened view was yielded, so
                # the rest reads from the macro-chunks that hold those records now (once; a file
                # no compaction replaced still fails, naming it), as read_table's tasks do
                fresh = None if replanned or not isinstance(e.__cause__, FileNotFoundError) else \
                    compacted_since(store, [v for v in views[i:] if id(v) not in opened])
                if fresh is None:
                    raise
                replanned = True
                views[i:] = sorted((c for c in fresh if c.hi > lo and c.lo <= hi), key=_LO)
                files.refetch(views[i:])
                continue
            # the other views of its file open with it: the file is decoded already, and a window
            # then ends before the next file's first record, not before the next slice's (a
            # fetched file or span holds only views of the walk, each in one of them, so none
            # of them is open yet)
            opened.update(map(id, rows.views))
            open_files.append(_Open(rows, rows.views))
            i += 1
        while i < len(views) and id(views[i]) in opened:
            i += 1
        b = min(hi, views[i].lo - 1 if i < len(views) else hi)
        kth = _kth_after(open_files, a, window_rows)
        b = b if kth is None else min(b, kth)
        parts, sources, in_order = [], [], True
        for f in open_files:
            got, ordered = f.rows.ordered_records(f.views, a, b, schema, starts, ends)
            parts += got
            if got:
                sources.append(f.views)
                in_order = in_order and ordered
        if parts:
            window = pa.concat_tables(parts)
            if len(sources) > 1 or not in_order:
                window = window.sort_by(READ_ORDER)  # chunks overlap in time: ties by identity
            pending.append(window)
            held += window.num_rows
            if held >= window_rows:
                yield pa.concat_tables(pending)
                pending, held = [], 0
        open_files = [f for f in open_files if not f.passed(b)]
        a = b
    if pending:
        yield pa.concat_tables(pending)
