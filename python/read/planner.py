"""The read planner: a ``_tso`` range → journal positions → chunks → where the batch ends.

Every read goes through :func:`plan`: ``Stream.read``, the CLI, ``startingTail``, the batch
reader and the streaming source. It reads only journal metadata (never data files), through a
:class:`~pyspark_tstream.read.window.Window` of cached index nodes, and composes the parts that
each keep one invariant: the window (read/window.py: bounded, immutable caches), the choice of
end (read/ends.py: limits that hold, from ``marks``), and, once planned, the packing into read
tasks (read/tasks.py, called by the Spark readers). It keeps these invariants itself:

* **Where to start.** Positions before the first one whose running max ``_tso`` exceeds ``lo``
  hold nothing after ``lo`` (the time index finds it in ≤ depth reads).
* **Where to stop (sound under writer lanes).** Chunks of one segment overlap in time, so a later
  position may hold records older than an earlier one's — but a chunk committed at position
  ``q`` has a floor above the tick published at ``q - 1``. Once positions up to ``P`` are read,
  no later position holds a record at or below ``tick(P)`` (summary column ``COL_TICK``). The
  walk reads one level-1 node (``FANOUT`` positions) at a time and stops as soon as the end it
  would choose (:func:`~pyspark_tstream.read.ends.choose_end`) is at or below the tick reached:
  a read costs what it returns plus the writers' tick lag, not the history behind it.

Costs (store calls): a plan of ``(lo, hi]`` is the index descent for the start (nodes cached in
the window), then one read per ``FANOUT`` positions walked; the walk stops at ``hi``'s tick, or
at the limit. Compaction plugs in at two places: an unlimited read takes the compacted part of
its range from the macro map (:func:`~pyspark_tstream.read.compacted.plan_from_map`, one read
instead of a journal walk), and every plan's chunks pass through
:func:`~pyspark_tstream.read.compacted.substitute` (chunks compacted since the plan's positions
were committed become views of macro-chunks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..journal.entries import Chunk
from ..journal.journal import Journal
from ..journal.state import StreamState
from ..journal.timeindex import COL_MAX_TSO, COL_ROWS, FANOUT
from .compacted import plan_from_map, substitute
from .ends import Limits, choose_end, end_with_at_least
from .window import Window


@dataclass(frozen=True)
class Plan:
    """Chunks that may hold records with ``lo < _tso <= hi`` (commit order); ``hi`` is the end
    chosen (the requested one, or earlier under a limit)."""

    lo: int
    hi: int
    chunks: tuple[Chunk, ...]
    first_pos: int
    last_pos: int  # last journal position walked


# -- the plan ---------------------------------------------------------------------------------

def plan(window: Window, state: StreamState, lo: int, hi: int, limits: Limits = Limits(), *,  # noqa: B008 - frozen
         at_least: int | None = None, first_pos: int | None = None, last_pos: int | None = None) -> Plan:
    """Plan ``(lo, hi]``, lazily: walk journal nodes forward from ``lo`` and stop as soon as the
    end (``hi``, or what ``limits`` or ``at_least`` records allow) is at or below the tick
    reached (see the module docstring for why that is sound with overlapping chunks)."""
    journal = window.journal
    first = window.search(state, COL_MAX_TSO, lo) if first_pos is None else max(first_pos, state.head_pos)
    last = state.pos if last_pos is None else min(last_pos, state.pos)
    if hi <= lo or last < first:
        return Plan(lo, max(lo, hi), (), first, first - 1)
    if limits.unlimited and at_least is None and first_pos is None and last_pos is None:
        # compacted commits: the macro map names their records in one read, so a full read of
        # a long, compacted history does not walk its journal (see compacted.plan_from_map)
        mapped = plan_from_map(journal.store, state, first, lo, hi, window.ahead)
        if mapped is not None:
            chunks, upto = mapped
            rest = [c for c in plan(window, state, lo, hi, first_pos=max(first, upto)).chunks
                    if c.path not in {m.path for m in chunks}]
            return Plan(lo, hi, tuple(chunks) + tuple(rest), first, last)
    found: list[Chunk] = []
    end, walked = hi, first - 1
    for n in range(first // FANOUT, last // FANOUT + 1):
        reached = None
        for d, tick in window.node(state, n, first):
            if first <= d.pos <= last:
                found.extend(c for c in d.chunks if c.hi > lo and c.lo <= hi)
                walked, reached = d.pos, tick
        if reached is None:
            continue
        if at_least is not None:
            end = end_with_at_least(found, lo, hi, at_least)
        elif not limits.unlimited:
            end = choose_end(found, lo, hi, limits, window.exact if window.load is not None else None)
        if end <= reached:
            break
    # chunks compacted since their positions were committed become views of macro-chunks
    chunks = substitute(journal.store, state, [c for c in found if c.lo <= end], ahead=window.ahead)
    window.ahead.clear()  # read ahead for this plan's substitution only
    return Plan(lo, end, tuple(chunks), first, walked)


def plan_chunks(journal: Journal, state: StreamState, lo: int, hi: int,
                first_pos: int | None = None, last_pos: int | None = None) -> list[Chunk]:
    """Chunks that may hold records with ``lo < _tso <= hi``, in commit order (no limit)."""
    return list(plan(Window(journal), state, lo, hi, first_pos=first_pos, last_pos=last_pos).chunks)


# -- the tail -----------------------------------------------------------------------------------

def tail_bound(journal: Journal, state: StreamState, n: int,
               tsos: Callable[[Sequence[Chunk], int], np.ndarray], window: Window | None = None) -> int:
    """Exclusive ``_tso`` bound such that the last ``n`` records at or below the tick follow it.

    Walks back from the head by row counts (``COL_ROWS``), doubling the span until it holds
    ``n`` records at or below the tick and no earlier position can hold a later one;
    ``tsos(chunks, tick)`` gives the chunks' final ``_tso`` at or below the tick (a data read
    of the chunks in the span only). ``window``: the cache every search and node of the walk
    goes through (a new one if not given; ``tsos`` may take what it read ahead).
    """
    if n <= 0:
        return state.tick
    want = n
    window = window or Window(journal)
    while True:
        first = window.search(state, COL_ROWS, max(state.rows - want - 1, -1))
        start = max(first - 1, state.head_pos)
        window.read_ahead(state, range(start // FANOUT, state.pos // FANOUT + 1))  # one batch, not one a node
        # a chunk wholly at or below the head is truncated: garbage collection may have deleted
        # it (a shared file whose other slices were compacted), and its records are not the tail
        chunks = [c for k in range(start // FANOUT, state.pos // FANOUT + 1)
                  for d, _ in window.node(state, k) if d.pos >= start for c in d.chunks
                  if c.lo <= state.tick and c.hi > state.head_tso]
        found = tsos(chunks, state.tick)
        found = found[found > state.head_tso]
        if len(found) >= n or first <= state.head_pos:
            if len(found) < n:
                return state.head_tso
            bound = int(np.partition(found, len(found) - n)[len(found) - n]) - 1
            if window.search(state, COL_MAX_TSO, bound) >= start:
                return bound
        want *= 2


