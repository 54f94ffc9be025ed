"""Reading slices of a shared file: ranged reads, not the whole object.

Format v5 (:func:`fetch_spans`): a slice with a span is a Parquet file of its own inside the
shared file (python/write/shared.py). A read of it fetches exactly its span, one ranged read
(spans of one file next to each other or nearly: one read for all), and decodes it as a
:class:`Span`: about its own bytes, plus its own footer of a few hundred bytes.

Formats v3 and v4 (:func:`fetch_ranges`), slices without a span: a slice of a shared file
(``Chunk.file_bytes`` > 0) is the row groups of one segment in a file holding every segment a
Spark task wrote. A read of that segment fetches the footer (one ranged read of the file's
tail, whose size the journal recorded) and the byte range of the row groups its slices cover
(one more), never the rest of the file; the footer read was most of it (×7.6-16.8 the slice's
own bytes for ~9 kB slices of 64-segment files), which format v5 removes.

The bytes come back as a :class:`Sparse` file, which the decoders open like the whole file's
bytes (:func:`source`); a read outside the fetched ranges fails as a corrupt file would.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..chunkfile.footer import FOOTER_GUESS, footer_size, read_tail
from ..store.ranged_file import RangedFile
from ..store.storage import Store

#: Bytes read from a shared file's end to find its Parquet footer: at most
#: :data:`~pyspark_tstream.chunkfile.footer.FOOTER_GUESS`, at least this, else an eighth of the file.
FOOTER_MIN = 8 * 1024


def footer_guess(size: int) -> int:
    """How much of a ``size``-byte shared file's tail to read for its footer: a footer is
    ~100 bytes a column chunk, a small share of a file of small row groups (and reading too
    little costs one more read, too much costs bytes)."""
    return min(FOOTER_GUESS, max(FOOTER_MIN, size // 8))
#: Views needing less than this share of a shared file's bytes fetch only their row groups.
RANGED_SHARE = 0.5


class Sparse:
    """Byte ranges of one ``size``-byte file (its footer and some row groups)."""

    def __init__(self, size: int, parts: dict[int, bytes]) -> None:
        self.size, self.parts = size, parts

    def fetch(self, start: int, end: int) -> bytes:
        if end == self.size and start < self.size - len(self.parts[max(self.parts)]):
            # pyarrow reads a footer as up to 64 kB of the file's end, and parses only the footer
            return _padded(self.parts[max(self.parts)], self.size, start, end)
        out, at = [], start
        while at < end:
            part = next(((a, d) for a, d in self.parts.items() if a <= at < a + len(d)), None)
            if part is None:
                raise OSError(f"bytes {at}..{end} of the file were not fetched (its footer names other "
                              "row groups)")
            a, d = part
            out.append(d[at - a:end - a])
            at = a + len(d)
        return b"".join(out)

    def reader(self) -> Any:
        return pa.PythonFile(RangedFile(self.size, self.fetch), mode="r")

    def __len__(self) -> int:
        return sum(len(d) for d in self.parts.values())


class Span:
    """A slice's own Parquet file (format v5): its bytes, and ``first_row``, the row of the
    whole shared file its first row is (the slice's ``offset``)."""

    def __init__(self, data: Any, first_row: int) -> None:
        self.data, self.first_row = data, first_row

    def __len__(self) -> int:
        return len(self.data)


def source(data: Any) -> Any:
    """What pyarrow opens for fetched file bytes: a zero-copy buffer, or a sparse file's reader."""
    if isinstance(data, Sparse):
        return data.reader()
    return pa.BufferReader(data.data if isinstance(data, Span) else data)


def first_row(data: Any) -> int:
    """The row of its whole file that fetched bytes start at: a :class:`Span`'s first row, else 0."""
    return data.first_row if isinstance(data, Span) else 0


def by_span(views: Sequence[Any]) -> dict[tuple[int, int], list[Any]]:
    """``views`` (format-v5 slices of one file) by their span ``(start, end)``, in file order."""
    out: dict[tuple[int, int], list[Any]] = {}
    for v in sorted(views, key=lambda v: v.span):
        out.setdefault(v.span, []).append(v)
    return out


def wants_spans(views: Sequence[Any]) -> bool:
    """Whether ``views`` (of one file) are format-v5 slices whose spans cover little enough of
    it that fetching the spans alone pays (else the whole file is fetched, and cut into spans)."""
    size = views[0].file_bytes
    if size <= 0 or any(v.span_bytes <= 0 for v in views):
        return False
    spans = {(v.span_start, v.span_bytes) for v in views}  # views of one span count once
    return bool(sum(n for _, n in spans) < RANGED_SHARE * size)


def split_spans(views: Sequence[Any], data: Any, at: int = 0) -> list[tuple[list[Any], Span]]:
    """``(views of a span, Span)`` for each span of ``views`` in ``data``, bytes of their file
    from byte ``at`` on (zero-copy slices). A span's first row is its slices' ``offset``."""
    buf = pa.py_buffer(data)
    out = []
    for (start, end), vs in by_span(views).items():
        # clamped to the bytes there are: a file shorter than the journal says fails to decode
        a = min(max(start - at, 0), len(buf))
        out.append((vs, Span(buf.slice(a, max(0, min(end - at, len(buf)) - a)), min(v.offset for v in vs))))
    return out


#: Spans of one file less than this apart are fetched by one ranged read, the bytes between
#: them included: a store call costs more than that (an S3 round trip moves MBs in its time).
SPAN_GAP = 64 * 1024


def fetch_spans(store: Store, rel: str, views: Sequence[Any]) -> list[tuple[list[Any], Span]]:
    """The spans of ``views`` (format-v5 slices of the file ``rel``): one ranged read per run of
    adjacent, overlapping or nearly adjacent spans (under :data:`SPAN_GAP` apart; slices of
    consecutive segments lie next to each other)."""
    runs: list[list[int]] = []
    for start, end in by_span(views):
        if runs and start <= runs[-1][1] + SPAN_GAP:
            runs[-1][1] = max(runs[-1][1], end)
        else:
            runs.append([start, end])
    out: list[tuple[list[Any], Span]] = []
    for start, end in runs:
        data = store.read_range(rel, start, end)  # short when the file is: its decode then fails
        inside = [v for v in views if start <= v.span[0] and v.span[1] <= end]
        out += split_spans(inside, data, start)
    return out


def wants_ranges(views: Sequence[Any]) -> bool:
    """Whether ``views`` (of one file) are format-v3/v4 slices of a shared file (no span)
    covering little enough of it that fetching their row groups alone pays. Format-v5 slices
    that :func:`wants_spans` declines cover most of their file (their spans are the file but
    its footers): one read of the whole file costs less than a footer read and a ranged one."""
    # the views' fields read in C: a shared file has a view a segment
    size = views[0].file_bytes
    return size > 0 and set(map(_FILE_BYTES, views)) == {size} and max(map(_SPAN_BYTES, views)) <= 0 and \
        sum(map(_BYTES, views)) + footer_guess(size) < RANGED_SHARE * size


_FILE_BYTES, _SPAN_BYTES, _BYTES = attrgetter("file_bytes"), attrgetter("span_bytes"), attrgetter("bytes")


def group_span(meta: pq.FileMetaData, g: int) -> tuple[int, int]:
    """The byte range ``[start, end)`` of row group ``g``'s column chunks."""
    rg = meta.row_group(g)
    lo, hi = None, 0
    for i in range(rg.num_columns):
        col = rg.column(i)
        start = col.dictionary_page_offset if col.has_dictionary_page and col.dictionary_page_offset else \
            col.data_page_offset
        lo = start if lo is None else min(lo, start)
        hi = max(hi, start + col.total_compressed_size)
    return lo or 0, hi


def fetch_ranges(store: Store, rel: str, size: int, views: Sequence[Any]) -> Sparse:
    """The footer and the row groups ``views`` cover of the ``size``-byte file ``rel``: two
    ranged reads (three when the footer is over :func:`footer_guess`)."""
    tail = read_tail(store, rel, size, footer_guess(size))
    if footer_size(tail) is None:
        return Sparse(size, {max(0, size - len(tail)): tail})  # the decoder reports it
    parts = {size - len(tail): tail}
    meta = pq.ParquetFile(RangedFile(size, lambda a, b: _padded(tail, size, a, b))).metadata
    first = min(v.offset for v in views)
    stop = max(v.offset + v.rows for v in views)
    at, spans = 0, []
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        if at < stop and at + n > first:
            spans.append(group_span(meta, g))
        at += n
    if spans:
        # the tail read may already hold the last row groups (the last segment of a shared file
        # sits just before the footer): fetch only what lies before it, so the tail stays the
        # part at the highest offset, which Sparse.fetch takes for the footer
        lo, hi = min(s for s, _ in spans), min(max(e for _, e in spans), size - len(tail))
        if lo < hi:
            parts[lo] = store.read_range(rel, lo, hi)
    return Sparse(size, parts)


def _padded(tail: bytes, size: int, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of a ``size``-byte file of which only ``tail`` was read, zeros
    before it: pyarrow reads up to 64 kB from a file's end for its footer but parses only the
    footer's own bytes, which the tail holds."""
    at = size - len(tail)
    pad = max(0, min(end, at) - start)
    return bytes(pad) + tail[max(0, start - at):max(0, end - at)]
