"""Exact cursor reads and reads by record id, on top of ``Stream.read`` and ``Stream.plan``.

``Stream.read`` takes millisecond bounds and orders by ``_tso``; consumers need exact positions.
A cursor here is ``(tso, segment, seq)`` in the total read order (``_tso``, ``_segment``,
``_seq``) — ``_tso`` alone is not enough: two segments may hold the same ``_tso``, and so may
two writer lanes of one segment. Invariants:

* :func:`read_after` returns records strictly after the cursor and at or below the stream's
  tick (records above the tick are not complete yet), in cursor order, and never skips one:
  when a count limit cuts a read, records that share the last ``_tso`` are dropped from the
  page rather than split (the limit may have kept one segment's record and not another's);
* :func:`fetch` reads records back by (``_segment``, ``_seq``), reading only the chunks of their
  segments that hold those sequence numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..maps.grouplog import ALL_SEGMENTS, Cursor
from ..read.reading import READ_ORDER, read_table
from ..schema import full_schema
from ..timestamps import physical

if TYPE_CHECKING:  # annotations only: api.metadata_live uses scan, and Stream uses metadata
    from .stream import Stream

#: Extra rows asked of ``Stream.read`` so that records at the cursor's own ``_tso`` (filtered
#: out afterwards) rarely force a second read.
_SLACK = 64
#: Ids further apart than this (ms) are fetched with separate plans, so reading back a few old
#: entries never walks the journal between them.
_CLUSTER_GAP_MS = 60_000


@dataclass(frozen=True)
class Page:
    """Records after a cursor: ``records`` in cursor order, read against tick ``bound``.

    ``complete`` is True when every record after the cursor and at or below ``bound`` is in
    ``records`` (no count limit cut the page), so the next read may start after ``bound``.
    """

    records: pa.Table
    start: Cursor
    bound: int
    complete: bool

    @property
    def end(self) -> Cursor:
        """The cursor after this page."""
        if self.complete:
            return max(Cursor(self.bound, ALL_SEGMENTS, ALL_SEGMENTS), self.start)
        if not self.records.num_rows:
            return self.start
        return Cursor(int(self.records["_tso"][-1].as_py()), int(self.records["_segment"][-1].as_py()),
                      int(self.records["_seq"][-1].as_py()))


def empty_records(stream: Stream) -> pa.Table:
    """An empty table with the stream's read schema (no store call)."""
    return full_schema(stream.schema or pa.schema([])).empty_table()


def after_mask(table: pa.Table, cursor: Cursor) -> pa.ChunkedArray:
    """Rows strictly after ``cursor`` in (``_tso``, ``_segment``, ``_seq``) order."""
    cursor = Cursor(*cursor)
    tso, seg, seq = table["_tso"], table["_segment"], table["_seq"]
    later = pc.greater(tso, cursor.tso)
    same_tso = pc.equal(tso, cursor.tso)
    later_seg = pc.and_(same_tso, pc.greater(seg, cursor.segment))
    later_seq = pc.and_(pc.and_(same_tso, pc.equal(seg, cursor.segment)), pc.greater(seq, cursor.seq))
    return pc.or_(pc.or_(later, later_seg), later_seq)


def read_after(stream: Stream, cursor: Cursor, *, count: int | None = None,
               until: int | None = None) -> Page:
    """Up to ``count`` records after ``cursor`` with ``_tso`` at or below the tick (and ``until``).

    Costs one stream refresh, then one ``Stream.read`` (a second, larger one only when more
    than ``_SLACK`` records share the cursor's millisecond or the last ``_tso`` of the page).
    """
    cursor = Cursor(*cursor)
    state = stream.refresh()
    bound = state.tick if until is None else min(state.tick, until)
    if count == 0 or bound < cursor.tso or (bound == cursor.tso and cursor.segment == ALL_SEGMENTS):
        return Page(empty_records(stream), cursor, max(bound, 0), count != 0)
    start, end = physical(max(cursor.tso, 0)), physical(bound) + 1
    limit = None if count is None else count + _SLACK
    while True:
        raw = stream.read(start=start, end=end, limit=limit)
        cut = limit is not None and raw.num_rows >= limit
        mask = pc.and_(after_mask(raw, cursor), pc.less_equal(raw["_tso"], bound))
        if cut:  # the limit may have split the records of the last _tso across segments
            mask = pc.and_(mask, pc.less(raw["_tso"], pc.max(raw["_tso"])))
        page = raw.filter(mask)
        if count is None or limit is None or not cut or page.num_rows >= count:
            break
        limit *= 2
    page = page.sort_by(READ_ORDER)
    # read() refreshed the handle; a tick below ours means it read an older state (only
    # possible if another thread refreshes the same handle), so do not claim completeness
    complete = not cut and stream.state.tick >= bound and (count is None or page.num_rows <= count)
    if count is not None and page.num_rows > count:
        page = page.slice(0, count)
    return Page(page, cursor, bound, complete)


def count_after(stream: Stream, cursor: Cursor, bound: int) -> int:
    """How many records lie after ``cursor`` and at or below ``bound``.

    Chunks wholly inside the range count from journal metadata; only chunks that straddle the
    cursor or the bound (at most two per segment) are read. Planning walks the journal between
    the cursor and now (one batched read per 32 commits): an admin-path cost.
    """
    cursor = Cursor(*cursor)
    if bound < cursor.tso:
        return 0
    stream.refresh()
    lo = max(cursor.tso - 1, 0)
    total = 0
    partial = []
    for c in stream.plan(lo, bound):
        if c.lo > cursor.tso and c.hi <= bound:
            total += c.rows
        else:
            partial.append(c)
    if partial and stream.schema is not None:
        table = read_table(stream.store, stream.schema, partial, lo, bound)
        total += int(pc.sum(after_mask(table, cursor).cast(pa.int64())).as_py() or 0)
    return total


def _clusters(keys: Sequence[tuple[int, int, int]]) -> list[list[tuple[int, int, int]]]:
    ordered = sorted(keys, key=lambda k: k[2])
    out: list[list[tuple[int, int, int]]] = []
    for k in ordered:
        if out and physical(k[2]) - physical(out[-1][-1][2]) <= _CLUSTER_GAP_MS:
            out[-1].append(k)
        else:
            out.append([k])
    return out


def fetch(stream: Stream, keys: Iterable[tuple[int, int, int]]) -> tuple[pa.Table, set[tuple[int, int]]]:
    """Records named by ``(segment, seq, tso)`` triples, in cursor order, and the keys not found.

    A key is not found when retention or truncation removed its record.
    """
    keys = list(keys)
    state = stream.refresh()
    schema = stream.schema
    wanted = {(k[0], k[1]) for k in keys}
    parts = []
    live = [k for k in keys if k[2] > state.head_tso]
    if schema is not None:
        for cluster in _clusters(live):
            lo, hi = cluster[0][2] - 1, cluster[-1][2]
            by_seg: dict[int, np.ndarray] = {}
            for seg in {k[0] for k in cluster}:
                by_seg[seg] = np.array(sorted(k[1] for k in cluster if k[0] == seg), dtype=np.int64)
            chunks = [c for c in stream.plan(lo, hi) if c.seg in by_seg and _holds(by_seg[c.seg], c.seq, c.rows)]
            if not chunks:
                continue
            table = read_table(stream.store, schema, chunks, lo, hi)
            mask = None
            for seg, seqs in by_seg.items():
                m = pc.and_(pc.equal(table["_segment"], seg), pc.is_in(table["_seq"], pa.array(seqs)))
                mask = m if mask is None else pc.or_(mask, m)
            parts.append(table.filter(mask))
    records = pa.concat_tables(parts).sort_by(READ_ORDER) if parts else empty_records(stream)
    found = set(zip(records["_segment"].to_pylist(), records["_seq"].to_pylist()))
    return records, wanted - found


def _holds(seqs: np.ndarray, first: int, rows: int) -> bool:
    """Whether a chunk numbering ``first .. first+rows-1`` holds one of the sorted ``seqs``."""
    i = int(np.searchsorted(seqs, first, side="left"))
    return i < len(seqs) and int(seqs[i]) < first + rows
