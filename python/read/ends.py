"""Where a read or micro-batch ends: the largest end whose batch fits the limits, from chunk metadata.

Invariant (limits that hold): a limited batch ``(lo, end]`` ends on a millisecond boundary
(``| LOGICAL_MASK``, never above ``hi``) chosen so that an upper bound of its rows, bytes and
files is within the limits. Upper bounds come from chunk metadata: whole chunks, and inside a
chunk its ``marks`` (the final ``_tso`` every ``mark_step(rows)`` rows), so a cut inside a chunk
is exact to a few rows without reading it; when that is too coarse for the limit (more than
:data:`REFINE_FRACTION` of it), the chunks the cut falls in are counted exactly from their
``_tso`` column (a :meth:`~pyspark_tstream.read.window.Window.exact`; cached, bounded). Bytes are
estimated in proportion to rows; files are the chunks a batch touches. A batch always makes
progress: when even the first millisecond with records exceeds a limit it is the batch — one
millisecond holding more records than the limit is the only overshoot. Pure: chunks in, an end
out, no store calls but the ``exact`` callback's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..journal.entries import Chunk
from ..timestamps import LOGICAL_MASK, mark_step

#: Marks are refined by reading a chunk's ``_tso`` column only when their uncertainty at the cut
#: exceeds this fraction of the record limit (else the batch is at most that much short of it).
REFINE_FRACTION = 0.125


@dataclass(frozen=True)
class Limits:
    """Per-batch read limits; None means unlimited."""

    max_records: int | None = None
    max_bytes: int | None = None
    max_files: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.max_records is None and self.max_bytes is None and self.max_files is None


def _at_or_below(c: Chunk, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of how many of ``c``'s records have ``_tso <= b`` (vectorized)."""
    lo_n = np.where(b >= c.hi, c.rows, np.where(b >= c.lo, 1, 0)).astype(np.int64)
    hi_n = np.where(b >= c.hi, c.rows, np.where(b >= c.lo, max(c.rows - 1, 1), 0)).astype(np.int64)
    if c.sorted and c.rows > 1:
        inside = (b >= c.lo) & (b < c.hi)
        # strictly increasing integers: row i lies in [lo + i, hi - (rows - 1 - i)]
        hi_n = np.where(inside, np.minimum(hi_n, b - c.lo + 1), hi_n)
        lo_n = np.where(inside, np.maximum(lo_n, c.rows - (c.hi - b)), lo_n)
        if c.marks:
            step = mark_step(c.rows)
            k = np.searchsorted(np.asarray(c.marks, dtype=np.int64), b, side="right")
            # marks[k-1] <= b < marks[k]: rows 0..(k-1)*step are in, row k*step is out
            hi_n = np.where(inside, np.minimum(hi_n, k * step), hi_n)
            lo_n = np.where(inside, np.maximum(lo_n, (k - 1) * step + 1), lo_n)
    return lo_n, hi_n


def _in_range(c: Chunk, lo: int, b: np.ndarray, exact: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of how many of ``c``'s records lie in ``(lo, b]`` for each ``b`` (equal bounds
    when the chunk's ``exact`` final ``_tso`` values are known)."""
    if exact is not None:
        n = np.searchsorted(exact, b, side="right") - np.searchsorted(exact, lo, side="right")
        return n, n
    b_lo, b_hi = _at_or_below(c, b)
    l_lo, l_hi = _at_or_below(c, np.asarray([lo], dtype=np.int64))
    return np.maximum(b_lo - l_hi[0], 0), np.maximum(b_hi - l_lo[0], 0)


def _candidates(chunks: Sequence[Chunk], lo: int, hi: int) -> np.ndarray:
    """Possible batch ends in ``(lo, hi]``: the end of every millisecond where a chunk starts,
    ends, or has a mark, or just before one (ends never split a millisecond)."""
    pts = [hi]
    for c in chunks:
        pts += [c.lo - 1, c.hi, *c.marks, *(m - 1 for m in c.marks)]
    a = np.minimum(np.asarray(pts, dtype=np.int64) | LOGICAL_MASK, hi)
    return np.unique(a[a > lo])


def choose_end(chunks: Sequence[Chunk], lo: int, hi: int, limits: Limits,
               exact: Callable[[Chunk], np.ndarray | None] | None = None) -> int:
    """The largest end ``b <= hi`` whose batch ``(lo, b]`` fits ``limits`` by upper bounds, or
    the first millisecond when even it does not (progress; the one allowed overshoot).

    With ``exact`` (a :meth:`~pyspark_tstream.read.window.Window.exact`), chunks whose marks are
    too coarse for the limit at
    the cut are counted exactly from their ``_tso`` column, and their own milliseconds become
    candidate ends: the batch then ends within one millisecond's records of the limit.
    """
    if hi <= lo:
        return lo
    if limits.unlimited or not chunks:
        return hi
    cands = _candidates(chunks, lo, hi)
    known: dict[Chunk, np.ndarray] = {}
    while True:
        rows = np.zeros(len(cands), dtype=np.int64)
        slack = np.zeros(len(cands), dtype=np.int64)
        size = np.zeros(len(cands), dtype=np.float64)
        files = np.zeros(len(cands), dtype=np.int64)
        for c in chunks:
            low, up = _in_range(c, lo, cands, known.get(c))
            rows += up
            slack += up - low
            size += up * (c.bytes / max(c.rows, 1))
            files += up > 0
        ok = np.ones(len(cands), dtype=bool)
        if limits.max_records is not None:
            ok &= rows <= limits.max_records
        if limits.max_bytes is not None:
            ok &= size <= limits.max_bytes
        if limits.max_files is not None:
            ok &= files <= limits.max_files
        # bounds grow with b: the fitting ends are a prefix
        fit = int(np.argmin(ok)) if not ok.all() else len(cands)
        if fit == len(cands) or exact is None:
            break
        if limits.max_records is not None:
            cap = float(limits.max_records)
        elif limits.max_bytes is not None:  # the byte limit in rows of these chunks
            cap = limits.max_bytes * sum(c.rows for c in chunks) / max(sum(c.bytes for c in chunks), 1)
        else:
            break  # a files limit counts whole chunks: nothing to refine
        if slack[fit] <= REFINE_FRACTION * cap:
            break
        b_ok, b_fail = (int(cands[fit - 1]) if fit else lo), int(cands[fit])
        added = []
        for c in chunks:
            if c not in known and c.lo <= b_fail and c.hi > b_ok:
                low, up = _in_range(c, lo, np.asarray([b_fail], dtype=np.int64))
                arr = exact(c) if up[0] > low[0] else None
                if arr is not None:
                    known[c] = arr
                    added.append(arr[(arr > b_ok) & (arr <= b_fail)] | LOGICAL_MASK)
        if not added:
            break
        cands = np.unique(np.concatenate([cands, *added]))
        cands = cands[(cands > lo) & (cands <= hi)]
    if fit > 0 and rows[fit - 1] > 0:
        return int(cands[fit - 1])
    # nothing fits but an empty batch: take the first millisecond with records (progress)
    return int(cands[fit]) if fit < len(cands) else hi


def end_with_at_least(chunks: Sequence[Chunk], lo: int, hi: int, n: int) -> int:
    """The smallest candidate end whose ``(lo, b]`` surely holds ``n`` records (else ``hi``)."""
    if hi <= lo or not chunks:
        return hi
    cands = _candidates(chunks, lo, hi)
    rows = np.zeros(len(cands), dtype=np.int64)
    for c in chunks:
        rows += _in_range(c, lo, cands)[0]
    enough = np.flatnonzero(rows >= n)
    return int(cands[enough[0]]) if len(enough) else hi
