"""Reading records of planned chunks by ``_tso`` range (planning lives in :mod:`.planner`).

Reading a chunk applies its floor (``tso_i = max(raw_i, floor + i)``), numbers it
(``seq_i = seq + i``) and slices the range by binary search on the tsos (strictly increasing
within a chunk): no per-row Python, zero-copy slices of the decoded columns.

A chunk may be a *view* of rows ``[offset, offset + rows)`` of a macro-chunk
(python/compaction/compact.py): a plan names small chunks, and :func:`~pyspark_tstream.read.compacted.substitute`
replaces those compacted since by views. Views of one file are fetched once; a read decodes the
raw timestamps of the row groups they cover, then the user columns one row group at a time, only
where kept rows are (memory stays one row group, whatever the chunk size); a view whose ``_tso``
is not strictly increasing (``sorted=False``: several writer lanes merged) is filtered by a mask
instead of a binary search. Local chunk files are memory-mapped, not copied.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..arrow_arrays import int64s, numbers
from ..chunkfile.checksums import VERIFY_CHECKSUMS, describe
from ..chunkfile.dictionary_pages import decode_dictionaries
from ..errors import CorruptChunkError
from ..journal.entries import Chunk
from ..schema import RAW_TSO, conform, full_schema
from ..store.storage import Store
from ..timestamps import LOGICAL_BITS, apply_floor
from .grouped import (
    GROUPED_DECODE_BYTES,
    Layout,
    cut,
    dictionary_columns,
    final_tsos,
    first_bad,
    grouped_bytes,
    keep,
    stamped,
    threaded,
    view_fields,
)
from .ranged import Span, Sparse, fetch_ranges, fetch_spans, first_row, source, wants_ranges, wants_spans
from .task import ReadTask

#: Chunks up to this size are fetched together in one batched call.
BATCH_FETCH_BYTES = 64 << 20
BATCH_ROWS = 65_536
#: The order of records in a read: by time, ties by identity (``_segment``, ``_seq``).
READ_ORDER = [("_tso", "ascending"), ("_segment", "ascending"), ("_seq", "ascending")]

_BYTES = attrgetter("bytes")


def times_problem(chunk: Chunk, first: int | None, last: int) -> str | None:
    """What is wrong when a chunk's records are timed ``first``..``last`` (least and greatest;
    ``first`` None: unknown) outside the range the journal recorded for it, else None: the
    file holds other records (and a planner pruning by ``lo``/``hi`` would be wrong about it)."""
    if (first is None or first >= chunk.lo) and last <= chunk.hi:
        return None
    return (f"holds records timed {'?' if first is None else first}..{last} (_tso), outside the "
            f"{chunk.lo}..{chunk.hi} the journal says")


def _advice(store: Store) -> str:
    """What to do about a chunk that cannot be read (fsck tells which remedy applies)."""
    return (f"run `tstream fsck {store.display_url}`: it says whether `tstream repair` can read its records "
            "from the files a compaction replaced, or lists them and the command that truncates the stream "
            "past them")


def damaged(store: Store, uri: str, what: str) -> CorruptChunkError:
    """The error for the chunk file at ``uri`` that is ``what`` (missing, corrupt, ...), with
    the remedies: the file itself, else what fsck says."""
    return CorruptChunkError(f"chunk {uri} {what}; put the file back if you have a copy, else {_advice(store)}",
                             path=uri)


def _corrupt(store: Store, chunk: Chunk, e: Exception) -> CorruptChunkError:
    return damaged(store, store.uri(chunk.path), describe(e))


def _overwritten(store: Store, chunk: Chunk, rows: int, expected: int) -> CorruptChunkError:
    return CorruptChunkError(
        f"chunk {store.uri(chunk.path)} has {rows} rows, the journal says {expected}; it was "
        f"overwritten or truncated: {_advice(store)}", path=store.uri(chunk.path))


def _checked_raw(store: Store, chunk: Chunk, table: pa.Table) -> pa.Table:
    """``table`` with its raw timestamps in one piece, which a writer never leaves null.

    A decoded file holds a piece per row group; each view of a macro-chunk reads its rows of
    the column, and pieces would be joined once per view (200 views of a 1M-row file: 62 ms,
    against 1.3 ms joined once here). A null means the file is not what a writer stored.
    """
    col = table.column(RAW_TSO)
    if col.null_count:
        raise _corrupt(store, chunk, ValueError(f"{col.null_count} null value(s) in its {RAW_TSO} column"))
    if col.num_chunks == 1:
        return table
    return table.set_column(table.schema.get_field_index(RAW_TSO), table.schema.field(RAW_TSO),
                            col.combine_chunks())


def _whole(chunk: Chunk, views: Sequence[Chunk]) -> bool:
    """A plain chunk read alone: its file holds exactly its rows (a macro-chunk's views and a
    shared file's slices do not)."""
    return len(views) == 1 and chunk.offset == 0 and chunk.floor != 0 and not chunk.shared


def decode_file(store: Store, chunk: Chunk, data: bytes | Span | Sparse,
                views: Sequence[Chunk] = ()) -> tuple[pa.Table, int]:
    """Decode a chunk's file: ``(table, first row)``, only the row groups ``views`` cover."""
    views = views or (chunk,)
    try:
        # a zero-copy Arrow buffer: through a Python file object (io.BytesIO) the same decode
        # costs ~20 % more CPU (every read goes through Python)
        if _whole(chunk, views):
            table, base = pq.read_table(source(data), **VERIFY_CHECKSUMS), 0  # a plain small chunk: all of it
        else:
            f = pq.ParquetFile(source(data), **VERIFY_CHECKSUMS)
            starts = _group_starts(f, first_row(data))
            groups = _covering(starts, views)
            if len(groups) == f.num_row_groups:
                table, base = f.read(), int(starts[0])
            else:
                table, base = f.read_row_groups(groups), int(starts[groups[0]]) if groups else 0
    except (pa.ArrowException, OSError, ValueError) as e:
        raise _corrupt(store, chunk, e) from e
    short = [v for v in views if v.offset + v.rows > base + table.num_rows]
    if (_whole(chunk, views) and table.num_rows != chunk.rows) or short or RAW_TSO not in table.column_names:
        raise _overwritten(store, chunk, table.num_rows, max(v.offset + v.rows for v in views))
    return _checked_raw(store, chunk, table), base


def _group_starts(f: pq.ParquetFile, first: int = 0) -> np.ndarray:
    """First row of each row group, then the file's row count (rows numbered from ``first``:
    a slice's own file, :class:`~.ranged.Span`, starts at its row of the whole file)."""
    meta = f.metadata
    return np.cumsum([first] + [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])


def _covering(starts: np.ndarray, views: Sequence[Chunk]) -> list[int]:
    """The row groups holding any row of ``views``."""
    return _rows_covering(starts, min(v.offset for v in views), max(v.offset + v.rows for v in views))


def _rows_covering(starts: np.ndarray, first: int, stop: int) -> list[int]:
    """The row groups holding any of rows ``[first, stop)``."""
    return [i for i in range(len(starts) - 1) if starts[i] < stop and starts[i + 1] > first]


def fetch_files(store: Store, chunks: Sequence[Chunk]) -> Iterator[tuple[list[Chunk], bytes | Span | Sparse]]:
    """Whole-object GETs, batched for small chunks (one call for many is ~10x faster on S3).

    Views of the same file come together, fetched once: ``(views, bytes)`` per file, files in
    the order of their first view in ``chunks``. Slices
    covering little of a shared file fetch their spans only, one ranged read per run of adjacent
    spans, and come per span (format v5: ``bytes`` is then a :class:`~.ranged.Span`, the
    slice's own Parquet file), or the file's footer and their row groups (v3/v4: ``bytes`` is
    then a :class:`~.ranged.Sparse` file). A shared file fetched whole is decoded through its
    outer footer, as one file (one footer to parse, not one a slice).
    """
    by_path: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_path.setdefault(c.path, []).append(c)
    group: list[list[Chunk]] = []
    size = 0

    def flush() -> Iterator[tuple[list[Chunk], bytes | Span | Sparse]]:
        try:
            blobs = store.read_many([views[0].path for views in group], mapped=True)
        except FileNotFoundError as e:
            # read_many names the missing object's URI (no probe per chunk needed)
            missing = e.filename if isinstance(e.filename, str) else store.uri(group[0][0].path)
            raise damaged(store, missing, "named by the journal is missing") from e
        yield from zip(group, blobs)

    for views in by_path.values():
        spans = wants_spans(views)
        ranges = not spans and wants_ranges(views)
        if (spans or ranges) and group:
            # files come in the order of their first view (compaction writes its pieces in that
            # order and records them so): the batched files before this one go first
            yield from flush()
            group, size = [], 0
        if spans:
            try:
                yield from fetch_spans(store, views[0].path, views)
            except FileNotFoundError as e:
                raise damaged(store, store.uri(views[0].path), "named by the journal is missing") from e
            continue
        if ranges:
            try:
                yield views, fetch_ranges(store, views[0].path, views[0].file_bytes, views)
            except FileNotFoundError as e:
                raise damaged(store, store.uri(views[0].path), "named by the journal is missing") from e
            continue
        bytes_ = sum(map(_BYTES, views))  # in C: a shared file has a view a segment
        if group and size + bytes_ > BATCH_FETCH_BYTES:
            yield from flush()
            group, size = [], 0
        group.append(views)
        size += bytes_
    if group:
        yield from flush()


def view_tsos(table: pa.Table, chunk: Chunk, base: int = 0) -> np.ndarray:
    """Final ``_tso`` of a chunk's rows, from its decoded file (``base``: the table's first row)."""
    col = table.column(RAW_TSO)
    raw = numbers(col, np.int64)[chunk.offset - base: chunk.offset - base + chunk.rows]
    # tso_i = max(raw_i, floor + i) over the chunk's rows i (a slice's from its offset; a
    # macro-chunk view's floor is 0); usually the floor is below every raw timestamp (a floor
    # only raises records its writer stamped late): then the raw column is the answer,
    # zero-copy, without the floor's two arrays
    top = chunk.floor + len(raw) - 1
    if len(raw) and int(raw.min()) >= top:
        return raw
    return apply_floor(raw, chunk.floor)


def check_times(store: Store, chunk: Chunk, tso: np.ndarray) -> None:
    """Raise if a chunk's final ``_tso`` fall outside the range its commit recorded (``lo``..``hi``).

    A file overwritten with another chunk of the same row count decodes cleanly and passes the
    row check; its times give it away. Reads and compaction check each chunk, so compaction
    never turns such damage into a macro-chunk that looks sound, and a read fails instead of
    returning other records.
    """
    if not len(tso):
        return
    lo, hi = (int(tso[0]), int(tso[-1])) if chunk.sorted else (int(tso.min()), int(tso.max()))
    if (problem := times_problem(chunk, lo, hi)) is not None:
        raise CorruptChunkError(f"chunk {store.uri(chunk.path)} {problem}; it was overwritten: {_advice(store)}",
                                path=store.uri(chunk.path))


def read_tsos(store: Store, chunks: Sequence[Chunk]) -> Iterator[tuple[Chunk, np.ndarray]]:
    """Final ``_tso`` of each chunk (or view), reading only the raw timestamp column."""
    for views, data in fetch_files(store, chunks):
        try:
            if isinstance(data, (Sparse, Span)):  # some row groups of a shared file: only those
                f = pq.ParquetFile(source(data), **VERIFY_CHECKSUMS)
                starts = _group_starts(f, first_row(data))
                groups = _covering(starts, views)
                raw, base = f.read_row_groups(groups, columns=[RAW_TSO]), int(starts[groups[0]]) if groups else 0
            else:
                raw, base = pq.read_table(source(data), columns=[RAW_TSO], **VERIFY_CHECKSUMS), 0
        except (pa.ArrowException, OSError, ValueError, KeyError) as e:
            raise _corrupt(store, views[0], e) from e
        if any(c.offset + c.rows > base + raw.num_rows for c in views):
            raise _overwritten(store, views[0], base + raw.num_rows, max(c.offset + c.rows for c in views))
        raw = _checked_raw(store, views[0], raw)
        for c in views:
            yield c, view_tsos(raw, c, base)


def chunk_tsos(store: Store, chunk: Chunk) -> np.ndarray:
    """A chunk's final ``_tso`` values, reading only its raw timestamp column (a planner's
    :data:`~pyspark_tstream.read.window.TsoLoader` for cuts finer than the chunk's marks)."""
    return chunks_tsos(store, [chunk])[0]


def chunks_tsos(store: Store, chunks: Sequence[Chunk]) -> list[np.ndarray]:
    """Final ``_tso`` values of each chunk, in the order given (one batched fetch)."""
    got = {id(c): tso for c, tso in read_tsos(store, chunks)}
    return [got[id(c)] for c in chunks]


def select(tso: np.ndarray, chunk: Chunk, lo: int, hi: int, first_seq: int | None = None,
           end_seq: int | None = None) -> tuple[int, int, np.ndarray | None] | None:
    """Which rows of a chunk (or view) with final ``_tso`` values ``tso`` a read keeps.

    ``lo < _tso <= hi`` and ``first_seq <= _seq < end_seq`` (when given). Returns ``(a, b,
    None)`` for the contiguous rows ``[a, b)`` (a sorted chunk: two binary searches), ``(a, b,
    idx)`` for the rows ``idx`` within ``[a, b)`` (lanes merged: by mask), None for no row.
    """
    if chunk.sorted:
        start = int(np.searchsorted(tso, lo, side="right"))
        stop = int(np.searchsorted(tso, hi, side="right"))
        if first_seq is not None:
            start = max(start, first_seq - chunk.seq)
        if end_seq is not None:
            stop = min(stop, end_seq - chunk.seq)
        return (start, stop, None) if stop > start else None
    # lanes merged: times overlap along the rows, so keep by mask
    mask = (tso > lo) & (tso <= hi)
    if first_seq is not None and first_seq > chunk.seq:
        mask[:first_seq - chunk.seq] = False
    if end_seq is not None and end_seq < chunk.seq + chunk.rows:
        mask[max(end_seq - chunk.seq, 0):] = False
    idx = np.flatnonzero(mask)
    if not len(idx):
        return None
    a, b = int(idx[0]), int(idx[-1]) + 1
    return (a, b, None) if b - a == len(idx) else (a, b, idx)


def assemble(body: pa.Table, tso: np.ndarray, seq: np.ndarray, seg: int, schema: pa.Schema) -> pa.Table:
    """Records with system columns: ``body`` (user columns of the rows kept) and their
    ``_tso``/``_seq`` values, in segment ``seg``."""
    body = conform(body, schema)
    ts = int64s(tso >> LOGICAL_BITS).view(pa.timestamp("ms", tz="UTC"))
    system = [ts, int64s(tso), int64s(np.full(len(tso), seg, dtype=np.int64)), int64s(seq)]
    return pa.Table.from_arrays(list(body.columns) + system, schema=full_schema(schema))


def chunk_records(table: pa.Table, chunk: Chunk, lo: int, hi: int, schema: pa.Schema,
                  first_seq: int | None = None, end_seq: int | None = None, base: int = 0) -> pa.Table | None:
    """The records of a decoded chunk with ``lo < _tso <= hi`` (and ``first_seq <= _seq <
    end_seq`` when given), with system columns. ``table`` holds the chunk's file from row
    ``base`` on; the chunk's rows are ``[offset, offset + rows)`` of that file."""
    tso = view_tsos(table, chunk, base)
    pick = select(tso, chunk, lo, hi, first_seq, end_seq)
    if pick is None:
        return None
    a, b, idx = pick
    at = chunk.offset - base
    body = table.drop_columns([RAW_TSO])
    if idx is None:
        return assemble(body.slice(at + a, b - a), tso[a:b],
                        np.arange(chunk.seq + a, chunk.seq + b, dtype=np.int64), chunk.seg, schema)
    return assemble(body.take(int64s(idx + at)), tso[idx], idx.astype(np.int64) + chunk.seq, chunk.seg, schema)


class FileRows:
    """One fetched chunk file, decoded as few times as its reads need.

    Only the raw timestamp column of the groups a read covers is decoded up front (a read
    needs every ``_tso`` to choose its rows), with every view's final ``_tso`` and their check
    against the journal in one vectorised pass (:mod:`.grouped`). The user columns are decoded
    where kept rows are: the row groups of a small file (a shared file's slices, a small chunk)
    in one call, cut into the records of all its views at once (:meth:`records_of`); a big file's
    (a macro-chunk) one row group at a time as the kept rows reach it (:meth:`records`), so a
    read holds one decoded row group, not a whole macro-chunk, and Spark starts receiving batches
    after the first group. String columns that a row group holds dictionary-encoded decode
    through their dictionary (:mod:`.dictionary_pages`).
    """

    def __init__(self, store: Store, views: Sequence[Chunk], data: bytes | Span | Sparse,
                 columns: Sequence[str] | None = None) -> None:
        # ``columns``: the user columns to decode (None: all); a projection decodes no other
        self.store, self.views = store, views
        fields = view_fields(views)
        first, expected = int(fields[:, 0].min()), int((fields[:, 0] + fields[:, 1]).max())
        try:
            self.file = pq.ParquetFile(source(data), **VERIFY_CHECKSUMS)
            self.starts = _group_starts(self.file, first_row(data))
            self.groups = _rows_covering(self.starts, first, expected)
            self.base = int(self.starts[self.groups[0]]) if self.groups else 0
            self.schema = self.file.schema_arrow
            names = self.schema.names
            raw = self.file.read_row_groups(self.groups, columns=[RAW_TSO], use_threads=threaded(
                self.file.metadata, self.groups)) if RAW_TSO in names else None
        except (pa.ArrowException, OSError, ValueError) as e:
            raise _corrupt(store, views[0], e) from e
        rows = int(self.starts[-1])
        if raw is None or expected > rows or (_whole(views[0], views) and rows != views[0].rows):
            raise _overwritten(store, views[0], rows, expected)
        self.raw = _checked_raw(store, views[0], raw)
        self.columns = [n for n in names if n != RAW_TSO and (columns is None or n in columns)]
        self.data = data
        self._by_dictionary: dict[tuple[str, ...], pq.ParquetFile] = {}
        self._group: tuple[int, pa.Table] | None = None
        # the user columns of row groups [g0, g1), conformed to a schema: (g0, g1, schema, table)
        self._decoded: tuple[int, int, pa.Schema, pa.Table] | None = None
        self.layout = Layout.of(views, self.base, fields)  # of all its views, in the order given
        self._layout: tuple[tuple[int, ...], Layout] | None = None
        self.final = self._final()

    def _final(self) -> np.ndarray | None:
        """Final ``_tso`` of every decoded row, every view's checked against its commit's range
        (None when views overlap: :meth:`tsos` then times each view alone)."""
        raw = numbers(self.raw.column(RAW_TSO), np.int64)
        layout = self.layout
        final = final_tsos(raw, layout)
        if final is not None and (bad := first_bad(final, layout)) is not None:
            view = self.views[bad]
            check_times(self.store, view, view_tsos(self.raw, view, self.base))
        return final

    def group(self, g: int) -> pa.Table:
        """User columns of row group ``g`` (the last one decoded is kept)."""
        if self._group is None or self._group[0] != g:
            self._group = (g, self._decode(range(g, g + 1)))
        return self._group[1]

    def _decode(self, groups: Sequence[int]) -> pa.Table:
        # string columns their dictionary holds whole decode as indices, then a take of the
        # dictionary: half the CPU (dictionary_pages says which columns and why)
        try:
            names = dictionary_columns(self.file.metadata, groups, self.schema, self.columns)
            threads = threaded(self.file.metadata, groups)
            if not names:
                return self.file.read_row_groups(list(groups), columns=self.columns, use_threads=threads)
            f = self._by_dictionary.get(names)
            if f is None:  # shares the footer already parsed, and the bytes (zero-copy)
                f = self._by_dictionary[names] = pq.ParquetFile(source(self.data), metadata=self.file.metadata,
                                                                 read_dictionary=list(names), **VERIFY_CHECKSUMS)
            table = f.read_row_groups(list(groups), columns=self.columns, use_threads=threads)
            return decode_dictionaries(table, names)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise _corrupt(self.store, self.views[0], e) from e

    def _body(self, first: int, last: int, schema: pa.Schema) -> tuple[int, pa.Table] | None:
        """The user columns (conformed to ``schema``) of row groups holding decoded rows
        ``first``..``last``, decoded in one call, and the decoded row they start at; None when
        those groups are too big to hold at once (then :meth:`records` reads a group at a time).
        A file of several views decodes all its covered groups on the first call (its later
        reads, a sweep's next windows, take theirs from the same decode)."""
        starts, base = self.starts, self.base
        g0 = int(np.searchsorted(starts, first + base, side="right")) - 1
        g1 = int(np.searchsorted(starts, last + base, side="right"))
        got = self._decoded
        if got is None or not (got[0] <= g0 and g1 <= got[1]):
            want = (self.groups[0], self.groups[-1] + 1) if len(self.views) > 1 else (g0, g1)
            if len(self.views) > 1 and grouped_bytes(self.file.metadata, range(*want)) > GROUPED_DECODE_BYTES:
                want = (g0, g1)
            if grouped_bytes(self.file.metadata, range(*want)) > GROUPED_DECODE_BYTES:
                return None
            self._decoded = got = (*want, schema, conform(self._decode(range(*want)), schema))
        elif not (got[2] is schema or got[2].equals(schema)):
            self._decoded = got = (got[0], got[1], schema, conform(self._decode(range(got[0], got[1])), schema))
        return int(starts[got[0]]) - base, got[3]

    def layout_of(self, views: Sequence[Chunk]) -> Layout:
        """The :class:`~.grouped.Layout` of ``views`` (of this file; the last asked is kept)."""
        if views is self.views:
            return self.layout
        key = tuple(id(v) for v in views)
        if self._layout is None or self._layout[0] != key:
            self._layout = (key, Layout.of(views, self.base))
        return self._layout[1]

    def tsos_of(self, views: Sequence[Chunk]) -> np.ndarray:
        """Final ``_tso`` of the rows of ``views`` (of this file), view after view, checked."""
        if self.final is not None:
            got: np.ndarray = self.final[self.layout_of(views).at]
            return got
        return np.concatenate([self.tsos(v) for v in views]) if views else np.zeros(0, dtype=np.int64)

    def tsos(self, view: Chunk) -> np.ndarray:
        """Final ``_tso`` of ``view``'s rows, checked against the range its commit recorded."""
        if self.final is not None:  # checked when the file was opened
            at = view.offset - self.base
            return self.final[at:at + view.rows]
        tso = view_tsos(self.raw, view, self.base)
        check_times(self.store, view, tso)
        return tso

    def records_of(self, views: Sequence[Chunk], lo: int, hi: int, schema: pa.Schema,
                   starts: Mapping[int, int], ends: Mapping[int, int]) -> Iterator[pa.Table]:
        """The records of ``views`` (of this file) in range, view after view, each view's rows
        in file order: one table, cut from one decode of the row groups holding them
        (:mod:`.grouped`); from a file too big to decode at once, one table per view and row
        group (:meth:`records`)."""
        yield from self.ordered_records(views, lo, hi, schema, starts, ends)[0]

    def ordered_records(self, views: Sequence[Chunk], lo: int, hi: int, schema: pa.Schema,
                        starts: Mapping[int, int], ends: Mapping[int, int]) -> tuple[list[pa.Table], bool]:
        """:meth:`records_of`'s tables, and whether they are in :data:`READ_ORDER` (one sorted
        view's are: its file order is read order; several views' records are sorted by the
        caller, once for all it gathers)."""
        alone = len(views) == 1 and views[0].sorted  # one sorted view: file order is read order
        if self.final is not None:
            rows, seq, seg = keep(self.final, self.layout_of(views), lo, hi, starts, ends)
            if not len(rows):
                return [], True
            body = self._body(int(rows.min()), int(rows.max()), schema)
            if body is not None:
                at, table = body
                return [stamped(cut(table, rows - at), self.final[rows], seq, seg, schema)], alone
        return [part for view in views for part in
                self.records(view, lo, hi, schema, starts.get(view.seg), ends.get(view.seg))], alone

    def records(self, view: Chunk, lo: int, hi: int, schema: pa.Schema, first_seq: int | None,
                end_seq: int | None, tso: np.ndarray | None = None) -> Iterator[pa.Table]:
        """The records of ``view`` in range, one table per row group they span (``schema``: the
        user columns to return; ``tso``: :meth:`tsos` of ``view``, when the caller has them)."""
        tso = self.tsos(view) if tso is None else tso
        pick = select(tso, view, lo, hi, first_seq, end_seq)
        if pick is None:
            return
        a, b, idx = pick
        starts, at = self.starts, view.offset
        first = int(np.searchsorted(starts, at + a, side="right")) - 1
        for g in range(first, len(starts) - 1):
            g0, g1 = int(starts[g]), int(starts[g + 1])
            r0, r1 = max(at + a, g0) - at, min(at + b, g1) - at  # view rows in this group
            if r1 <= r0:
                break
            if idx is None:
                body = self.group(g).slice(at + r0 - g0, r1 - r0)
                yield assemble(body, tso[r0:r1], np.arange(view.seq + r0, view.seq + r1, dtype=np.int64),
                               view.seg, schema)
                continue
            sel = idx[np.searchsorted(idx, r0):np.searchsorted(idx, r1)]
            if len(sel):
                group = self.group(g)
                # a table without columns (nothing projected) keeps its row count only through slice
                body = group.take(int64s(sel + (at - g0))) if group.num_columns else group.slice(0, len(sel))
                yield assemble(body, tso[sel], sel.astype(np.int64) + view.seq, view.seg, schema)


def _records(store: Store, schema: pa.Schema, chunks: Sequence[Chunk], lo: int, hi: int,
             starts: dict[int, int], ends: dict[int, int], *,
             again: bool = True) -> Iterator[tuple[Sequence[Chunk], pa.Table]]:
    done: list[Sequence[Chunk]] = []  # views whose records were all yielded
    try:
        for views, data in fetch_files(store, chunks):
            for part in FileRows(store, views, data).records_of(views, lo, hi, schema, starts, ends):
                yield views, part
            done.append(views)
    except CorruptChunkError as e:
        # A missing file fails its fetch before any of its records is yielded. A task that
        # stalls past the grace period after its plan (85 s on an overloaded machine is enough)
        # finds the files a compaction replaced since deleted by a vacuum:
        # their records are in macro-chunks the newest state names. Once; what no compaction
        # replaced (a truncated or lost file) still fails, naming the file.
        yielded = {id(c) for views in done for c in views}
        rest = [c for c in chunks if id(c) not in yielded]
        fresh = compacted_since(store, rest) if again and isinstance(e.__cause__, FileNotFoundError) else None
        if fresh is None:
            raise
        yield from _records(store, schema, fresh, lo, hi, starts, ends, again=False)


def compacted_since(store: Store, chunks: Sequence[Chunk]) -> list[Chunk] | None:
    """``chunks`` with those compacted since their plan replaced by views of the macro-chunks
    that hold their records now (the newest state's map), or None if none was."""
    # imported here: an executor loads the journal only on this rare path
    from ..journal.journal import Journal
    from .compacted import substitute

    fresh = substitute(store, Journal(store).head().state, chunks)
    return fresh if [c.path for c in fresh] != [c.path for c in chunks] else None


def read_task(store: Store, schema: pa.Schema, task: ReadTask) -> Iterator[pa.RecordBatch]:
    """Record batches of one task (what a Spark partition yields)."""
    for _, part in _records(store, schema, task.chunks, task.lo, task.hi, dict(task.start_cut), dict(task.end_cut)):
        yield from part.to_batches(max_chunksize=BATCH_ROWS)


def read_table(store: Store, schema: pa.Schema, chunks: Sequence[Chunk], lo: int, hi: int,
               starts: dict[int, int] | None = None, ends: dict[int, int] | None = None) -> pa.Table:
    """All records of ``chunks`` in ``(lo, hi]`` as one table, in :data:`READ_ORDER`; in the
    segments ``starts``/``ends`` list, only ``_seq`` from ``starts[seg]`` and before ``ends[seg]``."""
    parts: list[pa.Table] = []
    sources: list[Sequence[Chunk]] = []
    for views, part in _records(store, schema, chunks, lo, hi, starts or {}, ends or {}):
        parts.append(part)
        if not sources or sources[-1] is not views:
            sources.append(views)
    if not parts:
        return full_schema(schema).empty_table()
    table = pa.concat_tables(parts)
    if len(sources) == 1 and len(sources[0]) == 1 and sources[0][0].sorted:  # one sorted chunk's row groups
        return table
    # chunks of one segment overlap in time (writer lanes): ties on _tso go by identity
    return table.sort_by(READ_ORDER)

