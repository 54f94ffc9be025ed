"""The records of planned chunks in read order, window by window, in bounded memory.

:func:`~pyspark_tstream.read.reading.read_table` gathers a whole range, then sorts it: chunks of
different segments (and writer lanes of one segment) overlap in time, so no record can be
returned before every chunk that may hold an earlier one has been read. :func:`sweep` returns
the same records in the same order (:data:`~pyspark_tstream.read.reading.READ_ORDER`) without
holding them all: it walks ``(lo, hi]`` in consecutive windows of ``_tso`` and returns the
records of about ``window_rows`` at a time, sorted once (windows follow one another in time, so
one sort of several windows' records is each window's sort, in order); a run of windows each
of one sorted chunk needs none.

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
from itertools import repeat
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
        # fetch_files hands out a file's views together, or a span's (format v5: one ranged
        # read may return several slices' own files): each fetched file waits under a number,
        # dropped once opened, and each view names its file's number by the view's id (set in
        # C, not a view at a time)
        self.waiting: dict[int, tuple[list[Chunk], bytes | Span | Sparse]] = {}
        self.file_of: dict[int, int] = {}

    def rows(self, view: Chunk) -> FileRows:
        """The decoded file of ``view`` (fetched now; not yet opened)."""
        while id(view) not in self.file_of:
            views, data = next(self.fetched)
            number = len(self.file_of)  # grows by each file's views: one number a file
            self.file_of.update(zip(map(id, views), repeat(number)))
            self.waiting[number] = (views, data)
        views, data = self.waiting.pop(self.file_of[id(view)])  # a file opens once (with all its views)
        # in file order (they come by first record): a shared file's slices are then cut from
        # its decode as one run of rows, not gathered row by row
        return FileRows(self.store, sorted(views, key=_OFFSET), data, self.columns)

    def refetch(self, views: Sequence[Chunk]) -> None:
        """Fetch ``views`` (the walk's unopened rest, substituted after a missing file) from now on."""
        self.fetched = fetch_files(self.store, views)
        self.waiting.clear()
        self.file_of.clear()


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


_LO, _HI, _OFFSET = attrgetter("lo"), attrgetter("hi"), attrgetter("offset")


class _Order:
    """The views of a walk, by first record, and which of them are open (a file's views open
    together): the next one to open is found by a search in C, not a step a view."""

    def __init__(self, views: list[Chunk]) -> None:
        self.views = views
        self._index(bytearray(len(views)))

    def _index(self, opened: bytearray) -> None:
        self.opened = opened
        self.marks = np.frombuffer(opened, dtype=np.uint8)  # the same bytes, marked as an array
        self.place = dict(zip(map(id, self.views), range(len(self.views))))

    def next(self, i: int) -> int:
        """The first unopened view at or after ``i`` (``len(views)``: none)."""
        at = self.opened.find(0, i)
        return len(self.views) if at < 0 else at

    def open(self, views: Sequence[Chunk]) -> None:
        """Mark ``views`` (of the walk) open."""
        self.marks[np.fromiter(map(self.place.__getitem__, map(id, views)), dtype=np.intp, count=len(views))] = 1

    def unopened(self, i: int) -> list[Chunk]:
        """The views from ``i`` on not open yet."""
        return [v for v, done in zip(self.views[i:], self.opened[i:]) if not done]

    def replace(self, i: int, views: list[Chunk]) -> None:
        """Walk ``views`` (none open) from ``i`` on instead of the rest."""
        self.views[i:] = views
        self._index(self.opened[:i] + bytearray(len(views)))  # a new buffer: the old one is viewed


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
    order = _Order(_by_first_record(chunks, lo, hi))
    views = order.views
    files = _Files(store, views, columns)
    open_files: list[_Open] = []
    pending: list[pa.Table] = []  # the parts of windows walked, not yet returned
    held, unsorted = 0, False  # rows in pending; whether some window's are not in read order
    i, a = 0, lo
    replanned = False
    while a < hi:
        i = order.next(i)  # views opened with an earlier view of their file are passed
        if not open_files and i >= len(views):
            break
        if not open_files:  # nothing before the next chunk's first record
            a = max(a, views[i].lo - 1)
        while i < len(views) and views[i].lo <= a + 1:
            try:
                rows = files.rows(views[i])
            except CorruptChunkError as e:
                # a lazy reader consumed past the grace period: a compaction replaced planned
                # files and a vacuum deleted them. Nothing of an unopened view was yielded, so
                # the rest reads from the macro-chunks that hold those records now (once; a file
                # no compaction replaced still fails, naming it), as read_table's tasks do
                fresh = None if replanned or not isinstance(e.__cause__, FileNotFoundError) else \
                    compacted_since(store, order.unopened(i))
                if fresh is None:
                    raise
                replanned = True
                order.replace(i, _by_first_record(fresh, lo, hi))
                files.refetch(views[i:])
                i = order.next(i)
                continue
            # the other views of its file open with it: the file is decoded already, and a window
            # then ends before the next file's first record, not before the next slice's (a
            # fetched file or span holds only views of the walk, each in one of them, so none
            # of them is open yet)
            order.open(rows.views)
            open_files.append(_Open(rows, rows.views))
            i = order.next(i + 1)
        b = min(hi, views[i].lo - 1 if i < len(views) else hi)
        kth = _kth_after(open_files, a, window_rows)
        b = b if kth is None else min(b, kth)
        sources = 0
        for f in open_files:
            got, ordered = f.rows.ordered_records(f.views, a, b, schema, starts, ends)
            pending += got
            held += sum(t.num_rows for t in got)
            sources += bool(got)
            unsorted = unsorted or (bool(got) and not ordered)
        unsorted = unsorted or sources > 1
        if held >= window_rows:
            yield _in_order(pending, unsorted)
            pending, held, unsorted = [], 0, False
        open_files = [f for f in open_files if not f.passed(b)]
        a = b
    if pending:
        yield _in_order(pending, unsorted)


def _by_first_record(chunks: Sequence[Chunk], lo: int, hi: int) -> list[Chunk]:
    """The chunks holding records in ``(lo, hi]``, by first record (ties in the order given),
    their times compared as arrays (a plan of fresh data has a chunk a segment and append)."""
    los = np.fromiter(map(_LO, chunks), dtype=np.int64, count=len(chunks))
    his = np.fromiter(map(_HI, chunks), dtype=np.int64, count=len(chunks))
    inside = np.flatnonzero((his > lo) & (los <= hi))
    order = inside[np.argsort(los[inside], kind="stable")]
    return list(map(chunks.__getitem__, order.tolist()))


def _in_order(parts: list[pa.Table], unsorted: bool) -> pa.Table:
    """The records of consecutive windows' ``parts`` in read order: sorted once, when some
    window's were not (windows follow one another in time, so one sort of their records is
    each window's sort; chunks overlap in time: ties by identity)."""
    table = pa.concat_tables(parts)
    return table.sort_by(READ_ORDER) if unsorted else table
