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

from ..journal.ahead import Ahead
from ..journal.entries import Chunk
from ..journal.journal import Journal
from ..journal.state import StreamState
from ..journal.timeindex import COL_ROWS, FANOUT, Delta, first_node, first_open
from ..store import layout
from .compacted import named_versions

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
        #: index nodes and macro-map versions read ahead (immutable: handed out as often as
        #: asked) for the searches, walks and substitutions of a plan, which clears them after
        #: (a window is long-lived)
        self.ahead = Ahead(journal.store, once=False)

    def search(self, state: StreamState, col: int, value: int) -> int:
        """``Journal.search``, keeping the index nodes it reads (a few per level, immutable)."""
        return self.journal.search(state, col, value, lambda level, node: self._index_node(level, node, state))

    def _index_node(self, level: int, node: int, state: StreamState | None = None) -> dict[str, Any]:
        got = self._index.get((level, node))
        if got is None:
            # a level-1 node's chunks may be compacted: the map versions the state names ride in
            # its batch (held in ``ahead`` for the plan's substitution), not a round trip after
            rel = layout.index_node(level, node)
            named = named_versions(state, node * FANOUT) if state is not None and level == 1 else []
            missing = [r for r in (rel, *named) if r not in self.ahead]
            if named and missing:
                self.ahead.fetch(missing)
            got = self._index[(level, node)] = self.journal.read_node(level, node,
                                                                     self.ahead if rel in self.ahead else None)
            while len(self._index) > INDEX_NODES:
                self._index.popitem(last=False)
        else:
            self._index.move_to_end((level, node))
        return got

    def search_ahead(self, state: StreamState, col: int, value: int) -> list[str]:
        """What a plan from :meth:`search` of ``col`` for ``value`` on ``state`` reads first, for
        a caller to fetch into ``ahead`` in a batch it sends anyway (a read's refresh: a cold
        seek's round trips saved): the search's first index node unless the window has it, and
        when that is a level-1 node or an open position, the map versions the state names that
        the plan's substitution may need (:func:`~pyspark_tstream.read.compacted.named_versions`)."""
        first = first_node(state, col, value)
        if first is None:
            return []
        level, node = first
        if level == 0:
            return named_versions(state, node)
        rels = [] if first in self._index else [layout.index_node(level, node)]
        return rels + (named_versions(state, node * FANOUT) if level == 1 else [])

    def tail_ahead(self, state: StreamState, n: int) -> list[str]:
        """What a tail of ``n`` records on ``state`` reads first (:func:`~.planner.tail_bound`'s
        first span), for a caller to fetch into ``ahead`` in a batch it sends anyway: when
        the state's open level-1 summaries name the node the span starts in, every flushed node
        from it on (at most ``FANOUT - 1``: those summaries) and the map versions the state names
        for them; else the search's first node (:meth:`search_ahead`)."""
        first = first_node(state, COL_ROWS, max(state.rows - n - 1, -1))
        if first is None or first[0] != 1:
            return self.search_ahead(state, COL_ROWS, max(state.rows - n - 1, -1))
        # (the walk starts a position before the search's: in the node before it, 1 time in FANOUT)
        start = max(first[1] * FANOUT, state.head_pos) // FANOUT
        return [*self._unread_nodes(state, range(start, first_open(state) // FANOUT)),
                *named_versions(state, start * FANOUT)]

    def _unread_nodes(self, state: StreamState, nodes: range) -> list[str]:
        """The flushed level-1 nodes of ``nodes`` this window neither holds nor read ahead."""
        flushed = first_open(state) // FANOUT  # nodes below it are written
        return [layout.index_node(1, k) for k in nodes if k < flushed and k not in self._nodes
                and (1, k) not in self._index and layout.index_node(1, k) not in self.ahead]

    def read_ahead(self, state: StreamState, nodes: range) -> None:
        """Fetch the flushed level-1 nodes of ``nodes`` this window lacks into ``ahead`` in
        one batch (with the map versions the state names for them), for a walk over them that
        would read them one at a time (a tail's span)."""
        rels = self._unread_nodes(state, nodes)
        if len(rels) > 1:
            named = named_versions(state, nodes.start * FANOUT)
            self.ahead.fetch([r for r in (*rels, *named) if r not in self.ahead])

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
            got = self.journal.node_deltas(state, n, read_node=lambda level, k: self._index_node(level, k, state))
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
