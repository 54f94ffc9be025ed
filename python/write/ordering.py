"""Putting a sink task's buffered run of rows in client-time order, as cheaply as its shape allows.

The writer (:mod:`.writing`) orders each unordered run by client time (stable) before stamping
it (docs/design.md §3.2). Most runs need little or no work: a run whose rows arrived in order
needs no sort at all (one O(n) check), one made of a few time-ordered stretches (input files or
topic partitions read out of time order) is sorted by a merge of its stretches and put in order by
zero-copy slices, and only a shuffled run pays a full sort and a take. Every path gives exactly
the order of a stable sort of the client times, so where a record lands never depends on the
path taken.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ..arrow_arrays import int64s

#: A run whose time order is at most this many stretches of its rows is reordered by slicing.
REORDER_SLICES_MAX = 64
#: Runs with more than one descent in this many rows are sorted as unique (time, position) keys:
#: a shuffled run sorts faster so; fewer descents (a few stretches) merge faster stably.
KEY_SORT_ROWS_PER_DESCENT = 128


def ascending(ms: np.ndarray) -> bool:
    """Whether client times ``ms`` are already in order (ties allowed)."""
    return len(ms) < 2 or bool(np.all(ms[1:] >= ms[:-1]))


def time_order(ms: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """The stable order of client times ``ms`` (None when they are in it already) and ``ms`` in it.

    A shuffled run is sorted as the keys ``(ms - min) * n + position``: unique, so an unstable
    (and faster, vectorised) sort of them is the stable order of ``ms``, and the sorted times
    come back from the keys without a gather. Runs whose keys would not fit in 64 bits (times
    spanning centuries in a million rows) and runs of a few ordered stretches use numpy's
    stable sort, which merges the stretches.
    """
    n = len(ms)
    if n < 2:
        return None, ms
    descents = int(np.count_nonzero(ms[1:] < ms[:-1]))
    if descents == 0:
        return None, ms
    lo = int(ms.min())
    span = int(ms.max()) - lo + 1
    if descents * KEY_SORT_ROWS_PER_DESCENT > n and span <= (2 ** 63 - 1) // n:
        keys = (ms.astype(np.int64) - lo) * n + np.arange(n, dtype=np.int64)
        keys.sort()
        order = keys % n
        return order, keys // n + lo
    order = np.argsort(ms, kind="stable")
    return order, ms[order]


def in_order(body: pa.Table, order: np.ndarray | None, rows: int) -> Iterator[pa.Table]:
    """``body.take(order)`` (``body`` if ``order`` is None), ``rows`` rows at a time.

    A run often holds whole time-sorted stretches (input files or topic partitions, each in
    order, read in another order): then zero-copy slices put it in order. Otherwise each piece
    is taken on its own, so a sorted run costs one piece of memory on top of the run, not a copy
    of it.
    """
    if order is not None:
        cuts = np.flatnonzero(np.diff(order) != 1) + 1
        if len(cuts) >= REORDER_SLICES_MAX:
            for at in range(0, len(order), rows):
                yield body.take(int64s(order[at: at + rows]))
            return
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(order)]))
        body = pa.concat_tables([body.slice(int(order[a]), int(b - a)) for a, b in zip(starts, ends)])
    for at in range(0, body.num_rows, rows):
        yield body.slice(at, rows)
