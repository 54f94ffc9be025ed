"""The read planner, pure: a ``_tso`` range → journal positions → chunks → a cut → read tasks.

Every read goes through :func:`plan`: ``Stream.read``, the CLI, ``startingTail``, the batch
reader and the streaming source. It reads only journal metadata (never data files), through a
:class:`Window` of cached index nodes, and keeps these invariants:

* **Where to start.** Positions before the first one whose running max ``_tso`` exceeds ``lo``
  hold nothing after ``lo`` (the time index finds it in ≤ depth reads).
* **Where to stop (sound under writer lanes).** Chunks of one segment overlap in time, so a later
  position may hold records older than an earlier one's — but a chunk committed at position
  ``q`` has a floor above the tick published at ``q - 1``. Once positions up to ``P`` are read,
  no later position holds a record at or below ``tick(P)`` (summary column ``COL_TICK``). The
  walk reads one level-1 node (``FANOUT`` positions) at a time and stops as soon as the end it
  would choose is at or below the tick reached: a read costs what it returns plus the writers'
  tick lag, not the history behind it.
* **Limits that hold.** A limited batch ``(lo, end]`` ends on a millisecond boundary (``|
  LOGICAL_MASK``, never above ``hi``) chosen so that an upper bound of its rows, bytes and files
  is within the limits. Upper bounds come from chunk metadata: whole chunks, and inside a chunk
  its ``marks`` (the final ``_tso`` every ``mark_step(rows)`` rows), so a cut inside a chunk is
  exact to a few rows without reading it; when that is too coarse for the limit (more than
  ``REFINE_FRACTION`` of it), the chunks the cut falls in are counted exactly from their
  ``_tso`` column (a :class:`Window` with a loader; cached, bounded). Bytes are estimated in
  proportion to rows; files are the chunks a batch touches. A batch always makes progress: when
  even the first millisecond with records exceeds a limit it is the batch — one millisecond
  holding more records than the limit is the only overshoot.

Costs (store calls): a plan of ``(lo, hi]`` is the index descent for the start (nodes cached in
the :class:`Window`), then one read per ``FANOUT`` positions walked; the walk stops at ``hi``'s
tick, or at the limit. Compaction plugs in at two places: an unlimited read takes the compacted
part of its range from the macro map (:func:`~pyspark_tstream.read.compacted.plan_from_map`, one
read instead of a journal walk), and every plan's chunks pass through :func:`substitute_views`
(chunks compacted since the plan's positions were committed become views of macro-chunks).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..journal.entries import Chunk
from ..journal.journal import Journal
from ..journal.state import StreamState
from ..journal.timeindex import COL_MAX_TSO, COL_ROWS, FANOUT, Delta, first_open
from ..timestamps import LOGICAL_MASK, mark_step
from .compacted import plan_from_map, substitute
from .reading import ReadTask

#: Nodes a :class:`Window` keeps (x ``FANOUT`` entries): what one limited batch walks, many times.
WINDOW_NODES = 64
#: Index nodes a :class:`Window` keeps from searches (a search reads one per level).
INDEX_NODES = 16
#: Rows of exact ``_tso`` columns a :class:`Window` keeps for cuts finer than marks (8 bytes each).
EXACT_ROWS = 4_000_000
#: Marks are refined by reading a chunk's ``_tso`` column only when their uncertainty at the cut
#: exceeds this fraction of the record limit (else the batch is at most that much short of it).
REFINE_FRACTION = 0.125

#: Final ``_tso`` of a chunk's rows (a read of its data file): for cuts finer than its marks.
TsoLoader = Callable[[Chunk], np.ndarray]


@dataclass(frozen=True)
class Limits:
    """Per-batch read limits; None means unlimited."""

    max_records: int | None = None
    max_bytes: int | None = None
    max_files: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.max_records is None and self.max_bytes is None and self.max_files is None


@dataclass(frozen=True)
class Plan:
    """Chunks that may hold records with ``lo < _tso <= hi`` (commit order); ``hi`` is the end
    chosen (the requested one, or earlier under a limit)."""

    lo: int
    hi: int
    chunks: tuple[Chunk, ...]
    first_pos: int
    last_pos: int  # last journal position walked


# -- journal positions ------------------------------------------------------------------------

class Window:
    """Journal deltas by level-1 node, with a bounded cache (at most ``max_nodes`` nodes).

    A long-lived reader (the streaming source) keeps one and moves it forward with
    :meth:`forget_before`; it never holds the history, only a window ahead of its position.
    Only whole flushed nodes and committed entries are cached: both are immutable.
    """

    def __init__(self, journal: Journal, max_nodes: int = WINDOW_NODES, load: TsoLoader | None = None) -> None:
        self.journal = journal
        self.max_nodes = max_nodes
        self.load = load
        self._nodes: OrderedDict[int, list[tuple[Delta, int]]] = OrderedDict()
        self._open: dict[int, tuple[Delta, int]] = {}  # entries of the unflushed tail, by position
        self._tsos: OrderedDict[Chunk, np.ndarray] = OrderedDict()
        self._index: OrderedDict[tuple[int, int], dict[str, Any]] = OrderedDict()  # search path

    def search(self, state: StreamState, col: int, value: int) -> int:
        """``Journal.search``, keeping the index nodes it reads (a few per level, immutable)."""
        return self.journal.search(state, col, value, self._index_node)

    def _index_node(self, level: int, node: int) -> dict[str, Any]:
        got = self._index.get((level, node))
        if got is None:
            got = self._index[(level, node)] = self.journal.read_node(level, node)
            while len(self._index) > INDEX_NODES:
                self._index.popitem(last=False)
        else:
            self._index.move_to_end((level, node))
        return got

    @property
    def cached_entries(self) -> int:
        """Journal entries held (bounded by ``max_nodes`` nodes plus the unflushed tail)."""
        return sum(len(v) for v in self._nodes.values()) + len(self._open)

    @property
    def cached_rows(self) -> int:
        """Exact ``_tso`` values held (bounded by ``EXACT_ROWS`` plus one chunk)."""
        return sum(len(v) for v in self._tsos.values())

    def exact(self, c: Chunk) -> np.ndarray | None:
        """``c``'s final ``_tso`` values (cached), or None without a loader."""
        if self.load is None or not c.sorted:
            return None
        got = self._tsos.get(c)
        if got is None:
            got = self._tsos[c] = self.load(c)
            while self.cached_rows > EXACT_ROWS and len(self._tsos) > 1:
                self._tsos.popitem(last=False)
        else:
            self._tsos.move_to_end(c)
        return got

    def node(self, state: StreamState, n: int) -> list[tuple[Delta, int]]:
        """``(delta, tick after it)`` of node ``n``'s positions in ``head_pos..state.pos``."""
        got = self._nodes.get(n)
        if got is not None:
            return [x for x in got if x[0].pos >= state.head_pos and x[0].pos <= state.pos]
        lo, hi = n * FANOUT, n * FANOUT + FANOUT - 1
        open0 = first_open(state)
        if hi < open0:  # flushed: one node read, immutable, cached whole
            got = self.journal.node_deltas(state, n, read_node=self._index_node)
            for p in range(lo, hi + 1):
                self._open.pop(p, None)
            if len(got) == FANOUT:
                self._nodes[n] = got
                while len(self._nodes) > self.max_nodes:
                    self._nodes.popitem(last=False)
            return got
        known = {p for p in range(lo, hi + 1) if p in self._open}
        fresh = self.journal.node_deltas(state, n, known)
        for x in fresh:
            self._open[x[0].pos] = x
        return sorted((x for p, x in self._open.items() if lo <= p <= hi and state.head_pos <= p <= state.pos),
                      key=lambda x: x[0].pos)

    def forget_before(self, pos: int) -> None:
        """Drop what lies wholly before journal position ``pos`` (a reader moved past it)."""
        for n in [n for n in self._nodes if (n + 1) * FANOUT <= pos]:
            del self._nodes[n]
        for p in [p for p in self._open if p < pos]:
            del self._open[p]
        # the unflushed tail is bounded by FANOUT plus what one plan walks; keep it so too
        while len(self._open) > self.max_nodes * FANOUT:
            del self._open[min(self._open)]


# -- counting inside chunks -------------------------------------------------------------------

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

    With ``exact`` (a :meth:`Window.exact`), chunks whose marks are too coarse for the limit at
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


# -- the plan ---------------------------------------------------------------------------------

def substitute_views(store: Any, state: StreamState, chunks: list[Chunk]) -> list[Chunk]:
    """Replace planned small chunks by views of the macro-chunks that now hold their records
    (``Chunk`` with ``offset``/``sorted``; :func:`~pyspark_tstream.read.compacted.substitute`).
    :func:`plan` calls it at exactly one place, after collecting chunks."""
    return substitute(store, state, chunks)


def plan(window: Window, state: StreamState, lo: int, hi: int, limits: Limits = Limits(), *,
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
        mapped = plan_from_map(journal.store, state, first, lo, hi)
        if mapped is not None:
            chunks, upto = mapped
            rest = [c for c in plan(window, state, lo, hi, first_pos=max(first, upto)).chunks
                    if c.path not in {m.path for m in chunks}]
            return Plan(lo, hi, tuple(chunks) + tuple(rest), first, last)
    found: list[Chunk] = []
    end, walked = hi, first - 1
    for n in range(first // FANOUT, last // FANOUT + 1):
        reached = None
        for d, tick in window.node(state, n):
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
    chunks = substitute_views(journal.store, state, [c for c in found if c.lo <= end])
    return Plan(lo, end, tuple(chunks), first, walked)


def plan_chunks(journal: Journal, state: StreamState, lo: int, hi: int,
                first_pos: int | None = None, last_pos: int | None = None) -> list[Chunk]:
    """Chunks that may hold records with ``lo < _tso <= hi``, in commit order (no limit)."""
    return list(plan(Window(journal), state, lo, hi, first_pos=first_pos, last_pos=last_pos).chunks)


# -- the tail -----------------------------------------------------------------------------------

def tail_bound(journal: Journal, state: StreamState, n: int,
               tsos: Callable[[Sequence[Chunk], int], np.ndarray]) -> int:
    """Exclusive ``_tso`` bound such that the last ``n`` records at or below the tick follow it.

    Walks back from the head by row counts (``COL_ROWS``), doubling the span until it holds
    ``n`` records at or below the tick and no earlier position can hold a later one;
    ``tsos(chunks, tick)`` gives the chunks' final ``_tso`` at or below the tick (a data read
    of the chunks in the span only).
    """
    if n <= 0:
        return state.tick
    want = n
    window = Window(journal)  # one cache for every search and node of the walk
    while True:
        first = window.search(state, COL_ROWS, max(state.rows - want - 1, -1))
        start = max(first - 1, state.head_pos)
        chunks = [c for k in range(start // FANOUT, state.pos // FANOUT + 1)
                  for d, _ in window.node(state, k) if d.pos >= start for c in d.chunks if c.lo <= state.tick]
        found = tsos(chunks, state.tick)
        if len(found) >= n or first <= state.head_pos:
            if len(found) < n:
                return state.head_tso
            bound = int(np.partition(found, len(found) - n)[len(found) - n]) - 1
            if window.search(state, COL_MAX_TSO, bound) >= start:
                return bound
        want *= 2


# -- tasks ------------------------------------------------------------------------------------

#: One task per this much data by default (like spark.sql.files.maxPartitionBytes).
TARGET_PARTITION_BYTES = 128 << 20
#: Below this per task, more tasks cost more than they save: a Python task costs ~40 ms however
#: little it reads, and reading costs ~5 ms per MB of chunk (decode in Python, rows in the JVM).
#: At 4 MB a small micro-batch ran in two waves of tasks on 2 cores instead of one: the
#: steady-state benchmark's 17 MB micro-batches took 0.27–0.31 s, at 8 MB 0.24–0.27 s
#: (tests/benchmarks/bench_stream_steady.py).
MIN_PARTITION_BYTES = 8 << 20
#: Task slots assumed when Spark's default parallelism cannot be known.
DEFAULT_PARALLELISM = 8


def partition_count(total_bytes: int, chunks: int, *, parallelism: int | None = None,
                    min_partitions: int | None = None, max_partitions: int | None = None) -> int:
    """How many tasks a read of ``total_bytes`` in ``chunks`` chunks gets.

    One per ``TARGET_PARTITION_BYTES``, and at least ``parallelism`` (Spark's default
    parallelism, else ``DEFAULT_PARALLELISM``) while each still gets ``MIN_PARTITION_BYTES``;
    then at least ``min_partitions`` and at most ``max_partitions``; never more than chunks.
    """
    slots = parallelism or DEFAULT_PARALLELISM
    n = max(-(-total_bytes // TARGET_PARTITION_BYTES), min(slots, total_bytes // MIN_PARTITION_BYTES), 1)
    if min_partitions is not None:
        n = max(n, min_partitions)
    if max_partitions is not None:
        n = min(n, max_partitions)
    return max(1, min(n, chunks))


def pack_tasks(chunks: Sequence[Chunk], lo: int, hi: int, *, max_tasks: int,
               start_cut: dict[int, int] | None = None, end_cut: dict[int, int] | None = None) -> list[ReadTask]:
    """Group chunks into at most ``max_tasks`` tasks of similar size (largest first into the
    emptiest); a segment's chunks stay in commit order inside a task."""
    if not chunks:
        return []
    n = max(1, min(max_tasks, len(chunks)))
    sizes = [0] * n
    placed: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(chunks)), key=lambda i: -chunks[i].bytes):
        b = sizes.index(min(sizes))
        placed[b].append(i)
        sizes[b] += max(chunks[i].bytes, 1)
    sc = tuple(sorted((start_cut or {}).items()))
    ec = tuple(sorted((end_cut or {}).items()))
    return [ReadTask(tuple(chunks[i] for i in sorted(p)), lo, hi, sc, ec) for p in placed if p]


def plan_tasks(chunks: Sequence[Chunk], lo: int, hi: int, *, parallelism: int | None = None,
               min_partitions: int | None = None, max_partitions: int | None = None,
               start_cut: dict[int, int] | None = None, end_cut: dict[int, int] | None = None) -> list[ReadTask]:
    """The read tasks of a plan (see :func:`partition_count` for how many)."""
    total = sum(max(c.bytes, 1) for c in chunks)
    n = partition_count(total, len(chunks), parallelism=parallelism, min_partitions=min_partitions,
                        max_partitions=max_partitions)
    return pack_tasks(chunks, lo, hi, max_tasks=n, start_cut=start_cut, end_cut=end_cut)
