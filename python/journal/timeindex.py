"""The time index: a tree of journal-position summaries, searchable by time, tick, wall or rows.

One job: find journal positions by any monotone column of their summaries, and give the
deltas (entries without their state) of a range of positions cheaply. Every entry has a
summary (:func:`summary`, columns ``COL_*``); summaries are monotone over positions in every
searchable column. Level 0 holds one summary per position; a node of level ``k + 1`` holds
``FANOUT`` summaries of level ``k``. The open (not yet full) part of every level lives in the
state; full parts are written as immutable nodes by the next committer, from committed state
only, so a crash or a race can only rewrite the same bytes. Level-1 nodes also hold the
deltas of their ``FANOUT`` entries, so catching up reads one object per ``FANOUT`` commits.

Costs (store calls): a search 1 + (depth − 1) node reads; deltas of a range one batched read of
its flushed nodes and one of the rest; a flush one batched entry read and one write per level.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptMetadataError, corrupt
from ..store import layout
from . import seal
from .ahead import Ahead
from .entries import Chunk, Entry, EntryLog
from .features import checksummed
from .packing import expand
from .shapes import check_delta, is_int, need
from .state import StreamState
from .summary import FIRST_SUMMARY_COLUMNS, Summary

FANOUT = 32

#: Positions of a :class:`~.summary.Summary`'s columns, naming the column :meth:`TimeIndex.search`
#: searches (a summary's own columns are read by name).
COL_ID, COL_MAX_TSO, COL_TICK, COL_WALL, COL_ROWS, COL_EPOCH, COL_BYTES = (
    Summary._fields.index(name) for name in ("id", "max_tso", "tick", "wall", "rows", "epoch", "bytes"))


def decode_node(data: bytes, path: str, level: int | None = None, *, deltas: bool = False,
                sealed: bool = False) -> dict[str, Any]:
    """An index node; CorruptMetadataError (naming ``path`` and the remedy) if it is not one
    (or its checksum does not match; ``sealed``: its stream declares checksums, so it has one).

    Its summaries are checked; a level-1 node's entries are decoded into ``node["deltas"]``
    only when ``deltas`` is asked for (:func:`node_entries` does it later): a search reads
    one node per level and uses only the summaries, and checking 32 entries' chunks there
    doubled the CPU of a seek over 1,000 commits.
    """
    try:
        node = seal.unseal(data, required=sealed)
        need(isinstance(node, dict) and isinstance(node.get("items"), list) and node["items"], "the node")
        for i in node["items"]:
            need(isinstance(i, list) and len(i) >= FIRST_SUMMARY_COLUMNS and all(is_int(x) for x in i), "an item")
        node["items"] = [Summary.decode(i) for i in node["items"]]
        if level == 1 or "entries" in node:
            need(isinstance(node.get("entries"), list), "entries")
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise corrupt("index node", path, e, layout.stream_url(path)) from e
    if deltas and "entries" in node:
        node["deltas"] = node_entries(node, path)
    checked: dict[str, Any] = node
    return checked


def node_entries(node: dict[str, Any], path: str) -> list[Delta]:
    """The deltas a level-1 node (from :func:`decode_node`) holds, shape-checked.

    CorruptMetadataError naming ``path`` and the remedy if one is not a delta.
    """
    try:
        return [Delta.from_json(d) for d in node["entries"]]
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise corrupt("index node", path, e, layout.stream_url(path)) from e


@dataclass(frozen=True)
class Delta:
    """An entry without its state: enough to plan reads."""

    pos: int
    op: str
    wall: int
    chunks: tuple[Chunk, ...]
    writer: str | None = None
    batch: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, e: Entry) -> Delta:
        return cls(pos=e.pos, op=e.op, wall=e.wall, chunks=tuple(e.chunks), writer=e.writer, batch=e.batch,
                   info=e.info)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Delta:
        check_delta(d)  # a node holds each entry's delta_json: the entry's own shape check
        return cls.of_checked(expand(d))  # packed chunks are checked as they are unpacked

    @classmethod
    def of_checked(cls, d: dict[str, Any]) -> Delta:
        """The delta of a checked, expanded delta_json (``EntryLog.read_deltas(expanded=True)``)."""
        return cls(pos=d["pos"], op=d["op"], wall=d["wall"],
                   chunks=tuple(map(Chunk.from_json, d["chunks"])),
                   writer=d.get("writer"), batch=d.get("batch"), info=d.get("info", {}))


def summary(entry: Entry) -> Summary:
    """The index summary of ``entry``."""
    s = entry.state
    return Summary(id=entry.pos, max_tso=s.max_tso, tick=s.tick, wall=max(entry.wall, s.wall), rows=s.rows,
                   epoch=s.epoch, bytes=s.bytes)


def first_open(state: StreamState) -> int:
    """The first position whose summary is still open in ``state`` (not yet in a node)."""
    return state.index[0][0].id if state.index and state.index[0] else state.pos + 1


def open_positions(state: StreamState) -> range:
    """The live positions whose deltas are still only in their entries (a read of the newest
    records reads them: :meth:`TimeIndex.deltas`)."""
    return range(max(first_open(state), state.head_pos), state.pos + 1)


def _open_summary(state: StreamState, col: int, value: int) -> tuple[int, Summary] | None:
    """``(level, summary)``: the first open summary of ``state`` (oldest level first) whose
    ``col`` exceeds ``value``, where a search starts; None if there is none."""
    for level in range(len(state.index) - 1, -1, -1):
        for item in state.index[level]:
            if item[col] > value:
                return level, item
    return None


def first_node(state: StreamState, col: int, value: int) -> tuple[int, int] | None:
    """``(level, node)``: the index node :meth:`TimeIndex.search` of ``col`` for ``value``
    reads first on ``state`` (the state names it), so that a caller can fetch it ahead in a
    batch it sends anyway; ``(0, position)`` when it reads none and finds that open position;
    None when it finds none, or the head."""
    found = _open_summary(state, col, value)
    if found is None or (found[1].id + 1) * FANOUT ** found[0] <= state.head_pos:
        return None
    return found[0], found[1].id


class TimeIndex:
    """Searches and flushes the time index of the entries ``log`` reads."""

    def __init__(self, log: EntryLog) -> None:
        self.log = log
        self.store = log.store

    def read_node(self, level: int, node: int, ahead: Ahead | None = None) -> dict[str, Any]:
        """Index node ``node`` of ``level`` (CorruptMetadataError if it is missing or unreadable);
        from ``ahead`` when it was read ahead there."""
        rel = layout.index_node(level, node)
        try:
            data = ahead.take(rel) if ahead is not None else self.store.read(rel)
            return decode_node(data, self.store.uri(rel), level)
        except FileNotFoundError as e:
            raise corrupt("index node", self.store.uri(rel), e, self.store.display_url) from e

    def deltas(self, state: StreamState, first: int, last: int, *, truncated: bool = False) -> list[Delta]:
        """Deltas of positions ``first..last`` (inclusive) using compacted nodes where flushed.

        ``state`` must be at least as new as ``last``. Costs one batched read for the flushed
        part and one for the rest. Positions before the head are skipped unless ``truncated``
        (garbage collection reads them once).
        """
        first = max(first, state.gc_pos if truncated else state.head_pos)
        if last < first:
            return []
        open0 = first_open(state)
        out: list[Delta] = []
        flushed_last = min(last, open0 - 1)
        if first <= flushed_last:
            nodes = list(range(first // FANOUT, flushed_last // FANOUT + 1))
            rels = [layout.index_node(1, n) for n in nodes]
            try:
                blobs = self.store.read_many(rels)
            except FileNotFoundError as e:
                missing = e.filename if isinstance(e.filename, str) else self.store.uri(rels[0])
                raise corrupt("index node", missing, e, self.store.display_url) from e
            for rel, data in zip(rels, blobs):
                node = decode_node(data, self.store.uri(rel), 1, deltas=True, sealed=checksummed(state.features))
                out.extend(d for d in node["deltas"] if first <= d.pos <= flushed_last)
        # what the entries did, without their states (a v6 entry's state is rebuilt, not read)
        out.extend(Delta.of_checked(d) for d in self.log.read_deltas(range(max(first, open0), last + 1),
                                                                     expanded=True))
        return out

    def node_deltas(self, state: StreamState, node: int, known: Collection[int] = (),
                    read_node: Callable[[int, int], dict[str, Any]] | None = None) -> list[tuple[Delta, int]]:
        """``(delta, tick after it)`` of the positions of level-1 node ``node`` (``FANOUT`` of
        them, clipped to ``head_pos..state.pos``): one read, of the node when it is flushed
        (through ``read_node`` when given), else of the entries not in ``known`` (batched)."""
        lo, hi = max(node * FANOUT, state.head_pos), min(node * FANOUT + FANOUT - 1, state.pos)
        if hi < lo:
            return []
        open0 = first_open(state)
        if hi < open0:
            content = (read_node or self.read_node)(1, node)
            path = self.store.uri(layout.index_node(1, node))
            ticks = {i.id: i.tick for i in content["items"]}
            kept = [d for d in node_entries(content, path) if lo <= d.pos <= hi]
            if any(d.pos not in ticks for d in kept):
                raise corrupt("index node", path, ValueError("an entry has no summary"), self.store.display_url)
            return [(d, ticks[d.pos]) for d in kept]
        rest = [p for p in range(lo, hi + 1) if p not in known]
        # open positions: their ticks are in the state's open summaries, their deltas in the entries
        ticks = {int(i[COL_ID]): int(i[COL_TICK]) for i in (state.index[0] if state.index else [])}
        if any(p not in ticks for p in rest):  # not open in this state: the entries' own states
            return [(Delta.of(e), e.state.tick) for e in self.log.read_entries(rest)]
        return [(Delta.of_checked(d), ticks[p]) for p, d in zip(rest, self.log.read_deltas(rest, expanded=True))]

    def search(self, state: StreamState, col: int, value: int,
               read_node: Callable[[int, int], dict[str, Any]] | None = None) -> int:
        """First journal position whose summary ``col`` exceeds ``value`` (``state.pos + 1`` if none).

        Summaries are monotone in every column used here (max _tso, tick, wall, rows), so this
        walks the open summaries from the oldest level down and reads one node per level
        (through ``read_node`` when given: a caller's cache of these immutable nodes).
        """
        found = _open_summary(state, col, value)
        if found is None:
            return state.pos + 1
        level, item = found
        while level > 0:
            if (item.id + 1) * FANOUT ** level <= state.head_pos:
                return state.head_pos  # truncated (and maybe collected): the head
            node = (read_node or self.read_node)(level, item.id)
            item = next(i for i in node["items"] if i[col] > value)
            level -= 1
        return max(item.id, state.head_pos)

    def search_any(self, state: StreamState, value: int) -> int:
        """Like ``search`` on max ``_tso``, also below the head (for loss reports); 0 if the
        index nodes there were already collected."""
        try:
            return self.search(StreamState.from_json({**state.to_json(), "head_pos": state.gc_pos}),
                               COL_MAX_TSO, value)
        except CorruptMetadataError:
            return state.gc_pos

    def flush(self, state: StreamState, kept_from: int = 0) -> None:
        """Write every full open index level as a node; mutates ``state.index``.

        A level-1 node holds the deltas of its entries that garbage collection kept: entry 0
        and those from ``kept_from`` on (the committed ``meta_gc_pos``: the node's bytes must
        follow from committed facts only, so racing flushes write the same node). Collection
        keeps the entries of the open node now (``retention.meta_gc_target``), but streams
        an older release collected may lack some below ``meta_gc_pos``, and no reader asks a
        node for a position below it.
        """
        level = 0
        while level < len(state.index) and len(state.index[level]) >= FANOUT:
            items = state.index[level]
            node_no = items[0].id // FANOUT
            content: dict[str, Any] = {"level": level + 1, "node": node_no, "items": [i.encode() for i in items]}
            if level == 0:
                content["entries"] = self.log.read_deltas([i.id for i in items if i.id == 0 or i.id >= kept_from])
            self.store.write(layout.index_node(level + 1, node_no), seal.encode(content, checksummed(state.features)))
            last = items[-1]
            state.index[level] = []
            if level + 1 == len(state.index):
                state.index.append([])
            state.index[level + 1].append(last._replace(id=node_no))
            level += 1
