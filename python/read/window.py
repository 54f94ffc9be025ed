"""The bounded cache a planner reads journal positions through: index nodes, deltas, exact ``_tso``.

Invariant: a :class:`Window` holds only immutable things (whole flushed level-1 nodes, committed
entries of the unflushed tail, index nodes on a search path, a chunk's final ``_tso`` column)
and at most a fixed amount of each (:data:`WINDOW_NODES`, :data:`INDEX_NODES`,
:data:`EXACT_ROWS`), so a long-lived reader (the streaming source keeps one across
micro-batches) never holds the history, only a window ahead of its position.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from ..journal.entries import Chunk
from ..journal.journal import Journal
from ..journal.state import StreamState
from ..journal.timeindex import FANOUT, Delta, first_open

#: Nodes a :class:`Window` keeps (x ``FANOUT`` entries): what one limited batch walks, many times.
WINDOW_NODES = 64
#: Index nodes a :class:`Window` keeps from searches (a search reads one per level).
INDEX_NODES = 16
#: Rows of exact ``_tso`` columns a :class:`Window` keeps for cuts finer than marks (8 bytes each).
EXACT_ROWS = 4_000_000

#: Final ``_tso`` of a chunk's rows (a read of its data file): for cuts finer than its marks.
TsoLoader = Callable[[Chunk], np.ndarray]


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

    def node(self, state: StreamState, n: int, first: int = 0) -> list[tuple[Delta, int]]:
        """``(delta, tick after it)`` of node ``n``'s positions in ``head_pos..state.pos``;
        of a node not yet flushed, only those from ``first`` on (each is an entry to decode:
        a read of the newest few commits decodes those, not the node's older ones)."""
        got = self._nodes.get(n)
        if got is not None:
            return [(d, tick) for d, tick in got if state.head_pos <= d.pos <= state.pos]
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
        known = {p for p in range(lo, hi + 1) if p in self._open or p < first}
        fresh = self.journal.node_deltas(state, n, known)
        for d, tick in fresh:
            self._open[d.pos] = (d, tick)
        return [self._open[p] for p in sorted(self._open) if max(lo, first) <= p <= hi and
                state.head_pos <= p <= state.pos]

    def forget_before(self, pos: int) -> None:
        """Drop what lies wholly before journal position ``pos`` (a reader moved past it)."""
        for n in [n for n in self._nodes if (n + 1) * FANOUT <= pos]:
            del self._nodes[n]
        for p in [p for p in self._open if p < pos]:
            del self._open[p]
        # the unflushed tail is bounded by FANOUT plus what one plan walks; keep it so too
        while len(self._open) > self.max_nodes * FANOUT:
            del self._open[min(self._open)]
