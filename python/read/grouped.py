"""Many views of one decoded file at once: their final ``_tso``, the rows a read keeps, one table.

A shared file (format v3-v5) holds one slice per segment its writer wrote: at 64 segments a
small append's file is ~60 slices of a few rows each. Decoding, timing, selecting and stamping
them one slice at a time costs a Python pass (and pyarrow's per-call overhead) per slice, which
dwarfs the rows themselves. Here a file's views are handled together: their positions in the
decoded table as arrays (:class:`Layout`), the final ``_tso`` of every decoded row in one
vectorised pass (:func:`final_tsos`), their times checked against the journal in one more
(:func:`first_bad`), and the rows a read keeps chosen by one mask (:func:`keep`), so a read of a
file returns one table, cut from the decoded columns without a copy where the kept rows are one
run (a full read of fresh data) and by one ``take`` otherwise.

Semantics are exactly the per-view ones of :mod:`.reading` (``select``, ``view_tsos``,
``check_times``): a row is kept when ``lo < _tso <= hi`` and, in a segment a cut names,
``first_seq <= _seq < end_seq``; rows come view by view in the order given, each view's rows in
file order (so a segment's records keep their commit order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..arrow_arrays import int64s
from ..chunkfile.dictionary_pages import dictionary_read_columns
from ..journal.entries import Chunk
from ..schema import full_schema
from ..timestamps import LOGICAL_BITS

#: A file's covered row groups are decoded in one call when they hold at most this many bytes
#: uncompressed (a shared file of small slices); bigger files (macro-chunks) are decoded one row
#: group at a time, so a read never holds more than one big row group of user columns.
GROUPED_DECODE_BYTES = 32 << 20
#: Below this many rows decoded at once, string columns decode straight to strings: choosing
#: which to read through their dictionary costs a look at every row group's column chunks,
#: more than the dictionary read saves on a few rows.
DICTIONARY_MIN_ROWS = 16_384

_LOWEST = np.iinfo(np.int64).min
_HIGHEST = np.iinfo(np.int64).max


def grouped_bytes(meta: pq.FileMetaData, groups: Iterable[int]) -> int:
    """Uncompressed bytes of row groups ``groups`` (what decoding them at once holds)."""
    return sum(meta.row_group(g).total_byte_size for g in groups)


#: Row groups of fewer rows than this (together) decode on the calling thread.
THREADED_DECODE_ROWS = 65_536


def threaded(meta: pq.FileMetaData, groups: Iterable[int]) -> bool:
    """Whether decoding row groups ``groups`` pays for pyarrow's thread pool: not for a few
    thousand rows (a fresh append's file), which decode in less time than the hand-off costs."""
    return bool(sum(meta.row_group(g).num_rows for g in groups) >= THREADED_DECODE_ROWS)


def dictionary_columns(meta: pq.FileMetaData, groups: Sequence[int], schema: pa.Schema,
                       columns: Sequence[str]) -> tuple[str, ...]:
    """Columns of ``columns`` to read through their dictionary in every row group of ``groups``
    (see :func:`~pyspark_tstream.chunkfile.dictionary_pages.dictionary_read_columns`); none
    when they hold fewer than :data:`DICTIONARY_MIN_ROWS` rows (one group: whatever its size)."""
    if not groups or (len(groups) > 1 and sum(meta.row_group(g).num_rows for g in groups) < DICTIONARY_MIN_ROWS):
        return ()
    common = set(dictionary_read_columns(meta.row_group(groups[0]), schema))
    for g in groups[1:]:
        common &= set(dictionary_read_columns(meta.row_group(g), schema))
    return tuple(n for n in columns if n in common)


def view_fields(views: Sequence[Chunk]) -> np.ndarray:
    """``offset, rows, floor, seq, seg, lo, hi`` of each view, a row a view (what a file's
    views are handled by: one pass over the views, the rest on arrays)."""
    return np.fromiter(chain.from_iterable(map(_FIELDS, views)), dtype=np.int64, count=7 * len(views)).reshape(
        len(views), 7)


#: The fields :func:`view_fields` takes of a view, read in C (a shared file has a view a segment).
_FIELDS = attrgetter("offset", "rows", "floor", "seq", "seg", "lo", "hi")


@dataclass(frozen=True)
class Layout:
    """Views of one decoded table, as arrays (one entry per view, in the order given).

    ``starts``: the row of the decoded table where each view's rows begin; ``rows``, ``floors``,
    ``seqs``, ``segs``, ``los``, ``his``: the views' fields. ``at``: every view's rows, as rows of
    the decoded table, view after view; ``first``: where each view's rows begin in ``at``.
    """

    views: tuple[Chunk, ...]
    starts: np.ndarray
    rows: np.ndarray
    floors: np.ndarray
    seqs: np.ndarray
    segs: np.ndarray
    los: np.ndarray
    his: np.ndarray
    at: np.ndarray
    first: np.ndarray

    @classmethod
    def of(cls, views: Sequence[Chunk], base: int, fields: np.ndarray | None = None) -> Layout:
        """The layout of ``views`` in a table holding their file from row ``base`` on
        (``fields``: their :func:`view_fields`, when the caller has them)."""
        fields = view_fields(views) if fields is None else fields
        starts, rows = fields[:, 0] - base, fields[:, 1]
        first = np.cumsum(rows) - rows
        at = np.arange(int(rows.sum()), dtype=np.int64) + np.repeat(starts - first, rows)
        return cls(tuple(views), starts, rows, fields[:, 2], fields[:, 3], fields[:, 4], fields[:, 5],
                   fields[:, 6], at, first)

    def per_row(self, values: np.ndarray) -> np.ndarray:
        """A value per view, repeated for each of its rows (aligned with ``at``)."""
        return np.repeat(values, self.rows)


def final_tsos(raw: np.ndarray, layout: Layout) -> np.ndarray | None:
    """Final ``_tso`` of every decoded row, ``max(raw_i, floor + i)`` with ``i`` counted in
    its view (rows no view covers: their raw value), or None when views overlap (then each
    view's floor applies to its own rows only: the caller times them one by one)."""
    order = np.argsort(layout.starts, kind="stable")
    s, e = layout.starts[order], layout.starts[order] + layout.rows[order]
    if len(s) > 1 and bool((s[1:] < e[:-1]).any()):
        return None
    at = layout.at
    if not len(at):
        return raw
    floor = layout.per_row(layout.floors - layout.starts) + at
    stamped = raw[at]
    if bool((stamped >= floor).all()):  # the usual case: no floor lifts a record
        return raw
    out: np.ndarray = raw.copy()
    out[at] = np.maximum(stamped, floor)
    return out


def first_bad(final: np.ndarray, layout: Layout) -> int | None:
    """The index of the first view whose final ``_tso`` fall outside the ``lo``..``hi`` its
    commit recorded (a file overwritten with other records), else None."""
    full = layout.rows > 0
    if not bool(full.any()):
        return None
    times = final[layout.at]
    firsts = layout.first[full]
    least = np.minimum.reduceat(times, firsts)
    most = np.maximum.reduceat(times, firsts)
    bad = np.flatnonzero((least < layout.los[full]) | (most > layout.his[full]))
    return int(np.flatnonzero(full)[bad[0]]) if len(bad) else None


def keep(final: np.ndarray, layout: Layout, lo: int, hi: int, starts: Mapping[int, int],
         ends: Mapping[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of the decoded table a read keeps, view after view: ``(rows, _seq, _segment)``.

    ``lo < _tso <= hi``; in segments ``starts``/``ends`` name, ``starts[seg] <= _seq <
    ends[seg]`` (the per-view rules of :func:`~pyspark_tstream.read.reading.select`).
    """
    at = layout.at
    times = final[at]
    mask = (times > lo) & (times <= hi)
    seq = at + layout.per_row(layout.seqs - layout.starts)
    segs = layout.segs.tolist() if starts or ends else []
    if starts and any(s in starts for s in segs):
        mask &= seq >= layout.per_row(np.array([starts.get(s, _LOWEST) for s in segs], dtype=np.int64))
    if ends and any(s in ends for s in segs):
        mask &= seq < layout.per_row(np.array([ends.get(s, _HIGHEST) for s in segs], dtype=np.int64))
    if bool(mask.all()):
        return at, seq, layout.per_row(layout.segs)
    return at[mask], seq[mask], layout.per_row(layout.segs)[mask]


def cut(body: pa.Table, rows: np.ndarray) -> pa.Table:
    """Rows ``rows`` of ``body``: a zero-copy slice when they are one ascending run, else a take."""
    n = len(rows)
    if n and int(rows[-1]) - int(rows[0]) == n - 1 and (n == 1 or bool((np.diff(rows) == 1).all())):
        return body.slice(int(rows[0]), n)
    if not body.num_columns:  # a table without columns keeps its row count only through slice
        return body.slice(0, n)
    return body.take(int64s(rows))


def stamped(body: pa.Table, tso: np.ndarray, seq: np.ndarray, seg: np.ndarray, schema: pa.Schema) -> pa.Table:
    """``body`` (user columns already conformed to ``schema``) with the system columns."""
    ts = int64s(tso >> LOGICAL_BITS).view(pa.timestamp("ms", tz="UTC"))
    system = [ts, int64s(tso), int64s(seg), int64s(seq)]
    return pa.Table.from_arrays(list(body.columns) + system, schema=full_schema(schema))
