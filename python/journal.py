"""The journal: a totally ordered sequence of commits, one immutable object per position.

Invariants:

* Position ``n`` is taken by exactly one commit, through an atomic create-if-absent of
  ``_tstream/journal/…/<n>.json``; data files become visible only when an entry names them.
* Every entry carries the whole :class:`~pyspark_tstream.state.StreamState` after it, and the
  ``head`` object copies the newest entry. The head is a hint: a stale head only costs a failed
  conditional create (a committer then reads the entry that beat it) or a probe (a reader).
* The time index is a tree of fixed fan-out whose open parts live in the state; full nodes are
  written lazily by the next committer from committed state, so their content is deterministic
  and a crash or a race can only rewrite the same bytes. Level-1 nodes also hold the compacted
  deltas of their entries, so catching up reads one object per ``FANOUT`` commits.

Costs (store calls): open/refresh 2, poll with nothing new 1, commit 1 read + 1 conditional
create + 1 head write (+ 1 node write and 1 batched read every ``FANOUT`` commits), seek by
time/rows 1 + (index depth − 1).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from .errors import (CommitConflictError, CorruptMetadataError, StorageError, StreamExistsError,
                     StreamNotFoundError, UnsupportedFormatError)
from .shapes import check_chunk, check_entry, corrupt, is_int, need
from .state import StreamState
from .storage import Store

META = "_tstream"
HEAD = f"{META}/head.json"
ANCHOR = f"{META}/anchor.json"
FANOUT = 32
_DIR_SPAN = 100_000
#: On-store format written by this version; older versions are read, newer ones refused.
#: 1: first release (one floor chain per segment). 2: writer lanes (per-writer ``lanes`` in the
#: state; chunks of a segment may overlap in time) and the chunk trailing fields ``offset``,
#: ``sorted`` and ``marks``. Version 1 streams read and append unchanged.
FORMAT_VERSION = 2
MAX_ATTEMPTS = 1000
#: Extra conditional creates that settle an ambiguous journal create (after the store's retries).
RESOLVE_ATTEMPTS = 3

logger = logging.getLogger(__name__)

# columns of an index summary (each monotone over positions, so searchable):
# [position or node number, max _tso, tick, wall ms, rows so far, epoch, bytes so far]
COL_ID, COL_MAX_TSO, COL_TICK, COL_WALL, COL_ROWS, COL_EPOCH, COL_BYTES = range(7)


def entry_path(pos: int) -> str:
    return f"{META}/journal/{pos // _DIR_SPAN:06d}/{pos:012d}.json"


def node_path(level: int, node: int) -> str:
    return f"{META}/index/{level}/{node:012d}.json"


def check_version(v: Any, path: str) -> None:
    """Refuse metadata written by a newer tstream (it may mean something this one cannot read)."""
    if isinstance(v, int) and v > FORMAT_VERSION:
        raise UnsupportedFormatError(
            f"{path} has format version {v}, newer than this pyspark-tstream reads "
            f"({FORMAT_VERSION}); upgrade pyspark-tstream (pip install -U pyspark-tstream)",
            path=path, version=v)


@dataclass(frozen=True)
class Chunk:
    """A committed data chunk, or a view of part of one: where it is, how its records are
    numbered and timed.

    Trailing optional fields (format v2; v1 lists decode with the defaults): ``offset`` is the
    row inside the Parquet file where this chunk's records start (views into macro-chunks);
    ``sorted`` says final ``_tso`` strictly increases along the rows (else ``lo``/``hi`` are the
    min/max); ``marks`` is the final ``_tso`` of rows ``0, step, 2*step, …`` with
    ``step = timestamps.mark_step(rows)``, so a planner can cut inside the chunk without reading
    it (empty when unknown). Serialized only when not default; ``marks`` as differences from the
    previous mark (from ``lo`` for the first).
    """

    seg: int
    path: str
    rows: int
    bytes: int
    seq: int  # _seq of the first record
    floor: int  # tso_i = max(raw_i, floor + i)
    lo: int  # first _tso
    hi: int  # last _tso
    offset: int = 0
    sorted: bool = True
    marks: tuple[int, ...] = ()

    def to_json(self) -> list[Any]:
        out: list[Any] = [self.seg, self.path, self.rows, self.bytes, self.seq, self.floor, self.lo, self.hi]
        deltas = [m - p for m, p in zip(self.marks, (self.lo,) + self.marks[:-1])]
        tail: list[Any] = [self.offset, self.sorted, deltas]
        defaults: list[Any] = [0, True, []]
        while tail and tail[-1] == defaults[len(tail) - 1]:
            tail.pop()
        return out + tail

    @classmethod
    def from_json(cls, v: list[Any]) -> Chunk:
        marks: list[int] = []
        m = v[6]
        for d in (v[10] if len(v) > 10 else ()):
            m += d
            marks.append(m)
        return cls(*v[:8], offset=v[8] if len(v) > 8 else 0, sorted=v[9] if len(v) > 9 else True,
                   marks=tuple(marks))


@dataclass
class Entry:
    """One journal entry: what the commit did, and the state after it."""

    pos: int
    op: str
    wall: int
    state: StreamState
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex)
    writer: str | None = None
    batch: Any = None
    chunks: list[Chunk] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def delta_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"pos": self.pos, "op": self.op, "wall": self.wall, "nonce": self.nonce,
                             "chunks": [c.to_json() for c in self.chunks]}
        if self.writer is not None:
            d["writer"] = self.writer
            d["batch"] = self.batch
        if self.info:
            d["info"] = self.info
        return d

    def encode(self) -> bytes:
        d = self.delta_json()
        d["v"] = FORMAT_VERSION
        d["state"] = self.state.to_json()
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes, *, path: str) -> Entry:
        """The entry in ``data``; CorruptMetadataError (naming ``path``) if it is not one."""
        try:
            d = json.loads(data)
            check_entry(d)
            check_version(d.get("v"), path)
            return cls(pos=d["pos"], op=d["op"], wall=d["wall"], nonce=d["nonce"],
                       writer=d.get("writer"), batch=d.get("batch"),
                       chunks=[Chunk.from_json(c) for c in d["chunks"]], info=d.get("info", {}),
                       state=StreamState.from_json(d["state"]))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise corrupt("journal entry", path, e) from e


def newest_present(present: Callable[[int], bool], lo: int) -> int:
    """The largest ``p >= lo`` with ``present(p)``, given ``present(lo)`` and that presence is
    contiguous from ``lo``: exponential then binary search, O(log n) calls."""
    step, hi = 1, lo + 1
    while present(hi):
        lo, step = hi, step * 2
        hi = lo + step
    while hi - lo > 1:  # lo is present, hi is not
        mid = (lo + hi) // 2
        if present(mid):
            lo = mid
        else:
            hi = mid
    return lo


def decode_node(data: bytes, path: str, level: int | None = None) -> dict[str, Any]:
    """An index node; CorruptMetadataError (naming ``path`` and the remedy) if it is not one."""
    try:
        node = json.loads(data)
        need(isinstance(node, dict) and isinstance(node.get("items"), list) and node["items"], "the node")
        for i in node["items"]:
            need(isinstance(i, list) and len(i) >= 7 and all(is_int(x) for x in i), "an item")
        if level == 1 or "entries" in node:
            need(isinstance(node.get("entries"), list), "entries")
            node["deltas"] = [Delta.from_json(d) for d in node["entries"]]
        return node
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise corrupt("index node", path, e) from e


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
    def from_json(cls, d: dict[str, Any]) -> Delta:
        need(isinstance(d, dict) and is_int(d.get("pos")) and isinstance(d.get("chunks"), list), "a delta")
        for c in d["chunks"]:
            check_chunk(c)
        return cls(pos=d["pos"], op=d["op"], wall=d["wall"],
                   chunks=tuple(Chunk.from_json(c) for c in d["chunks"]),
                   writer=d.get("writer"), batch=d.get("batch"), info=d.get("info", {}))


def summary(entry: Entry) -> list[int]:
    s = entry.state
    return [entry.pos, s.max_tso, s.tick, max(entry.wall, s.wall), s.rows, s.epoch, s.bytes]


class Journal:
    """Reads and appends journal entries of one stream."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: Called with the work state before each conditional create: lazy writes of committed
        #: facts (sealed-segment shards, epoch records) that then leave the state.
        self.flushers: list[Callable[[StreamState], None]] = []

    # -- reading ------------------------------------------------------------------------------
    def _decode(self, data: bytes, rel: str) -> Entry:
        return Entry.decode(data, path=self.store.uri(rel))

    def read_entry(self, pos: int) -> Entry:
        rel = entry_path(pos)
        return self._decode(self.store.read(rel), rel)

    def try_entry(self, pos: int) -> Entry | None:
        """The entry at ``pos`` or None: one store call, the whole of a poll with nothing new."""
        rel = entry_path(pos)
        try:
            data = self.store.read(rel)
        except FileNotFoundError:
            return None
        return self._decode(data, rel)

    def head(self, known: Entry | None = None) -> Entry:
        """The newest entry: read the head hint, then probe past it (a stale hint is fine).

        ``known`` is an entry the caller already has; probing starts from the newer of the two.
        Hints are hints: a missing or unreadable head (or anchor) costs a search over journal
        positions, O(log n) reads (see :meth:`_search_newest`), and the next commit rewrites it.
        """
        entry: Entry | None = None
        try:
            entry = self._decode(self.store.read(HEAD), HEAD)
        except FileNotFoundError:
            pass
        except CorruptMetadataError as e:
            logger.warning("head hint %s is unreadable (%s); finding the newest journal entry by "
                           "search instead (the next commit rewrites the head)",
                           self.store.uri(HEAD), e.__cause__)
        if known is not None and (entry is None or known.pos > entry.pos):
            entry = known
        if entry is None:
            entry = self._search_newest()
        while True:
            nxt = self.try_entry(entry.pos + 1)
            if nxt is None:
                return entry
            entry = nxt

    def _present(self, pos: int) -> bool:
        try:
            self.store.read(entry_path(pos))
            return True
        except FileNotFoundError:
            return False

    def _search_newest(self) -> Entry:
        """The newest entry without the head hint: exponential then binary search over positions.

        Live entries are contiguous from the lowest one garbage collection kept to the newest,
        so ``present(p)`` is monotone above the lowest live position: O(log n) reads.
        """
        lo = self._lowest_live()
        if lo is None:
            raise StreamNotFoundError(
                f"no stream at {self.store.display_url}; create it with Stream.create, "
                "`tstream create` or a first write")
        return self.read_entry(newest_present(self._present, lo))

    def _lowest_live(self) -> int | None:
        """Where the live journal starts: the anchor, else entry 0 (never collected) when entry
        1 exists, else the lowest listed entry (only when GC ran and the anchor is lost)."""
        anchor = self._anchor_pos()
        if anchor is not None and self._present(anchor):
            return anchor
        has_zero = self._present(0)
        if has_zero and self._present(1):
            return 0
        listed = self._lowest_listed()  # GC deleted [1, x) or nothing but entry 0 exists
        return listed if listed is not None else (0 if has_zero else None)

    def _anchor_pos(self) -> int | None:
        try:
            pos = json.loads(self.store.read(ANCHOR))["pos"]
            if isinstance(pos, int) and not isinstance(pos, bool) and pos >= 0:
                return pos
            raise TypeError(f"pos is {pos!r}, not a non-negative integer")
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as e:
            logger.warning("anchor %s is unreadable (%s: %s); searching the journal instead "
                           "(`tstream repair` rewrites it)", self.store.uri(ANCHOR), type(e).__name__, e)
            return None

    def _lowest_listed(self) -> int | None:
        """The lowest entry position above 0 that a listing shows (2 list calls)."""
        for folder in self.store.list(f"{META}/journal"):
            positions = sorted(int(n[:-5]) for n in self.store.list(f"{META}/journal/{folder}")
                               if n.endswith(".json") and n[:-5].isdigit())
            above = [p for p in positions if p > 0]
            if above:
                return above[0]
        return None

    def read_node(self, level: int, node: int) -> dict[str, Any]:
        rel = node_path(level, node)
        try:
            return decode_node(self.store.read(rel), self.store.uri(rel), level)
        except FileNotFoundError as e:
            raise corrupt("index node", self.store.uri(rel), e) from e

    def deltas(self, state: StreamState, first: int, last: int, *, truncated: bool = False) -> list[Delta]:
        """Deltas of positions ``first..last`` (inclusive) using compacted nodes where flushed.

        ``state`` must be at least as new as ``last``. Costs one batched read for the flushed
        part and one for the rest. Positions before the head are skipped unless ``truncated``
        (garbage collection reads them once).
        """
        first = max(first, state.gc_pos if truncated else state.head_pos)
        if last < first:
            return []
        open0 = state.index[0][0][COL_ID] if state.index and state.index[0] else state.pos + 1
        out: list[Delta] = []
        flushed_last = min(last, open0 - 1)
        if first <= flushed_last:
            nodes = list(range(first // FANOUT, flushed_last // FANOUT + 1))
            rels = [node_path(1, n) for n in nodes]
            try:
                blobs = self.store.read_many(rels)
            except FileNotFoundError as e:
                missing = e.filename if isinstance(e.filename, str) else self.store.uri(rels[0])
                raise corrupt("index node", missing, e) from e
            for rel, data in zip(rels, blobs):
                node = decode_node(data, self.store.uri(rel), 1)
                out.extend(d for d in node["deltas"] if first <= d.pos <= flushed_last)
        rest = list(range(max(first, open0), last + 1))
        if rest:
            rels = [entry_path(p) for p in rest]
            for rel, data in zip(rels, self.store.read_many(rels)):
                e = self._decode(data, rel)
                out.append(Delta(pos=e.pos, op=e.op, wall=e.wall, chunks=tuple(e.chunks),
                                 writer=e.writer, batch=e.batch, info=e.info))
        return out

    def node_deltas(self, state: StreamState, node: int, known: Collection[int] = (),
                    read_node: Callable[[int, int], dict[str, Any]] | None = None) -> list[tuple[Delta, int]]:
        """``(delta, tick after it)`` of the positions of level-1 node ``node`` (``FANOUT`` of
        them, clipped to ``head_pos..state.pos``): one read, of the node when it is flushed
        (through ``read_node`` when given), else of the entries not in ``known`` (batched)."""
        lo, hi = max(node * FANOUT, state.head_pos), min(node * FANOUT + FANOUT - 1, state.pos)
        if hi < lo:
            return []
        open0 = state.index[0][0][COL_ID] if state.index and state.index[0] else state.pos + 1
        if hi < open0:
            content = (read_node or self.read_node)(1, node)
            ticks = {int(i[COL_ID]): int(i[COL_TICK]) for i in content["items"]}
            return [(Delta.from_json(d), ticks[d["pos"]]) for d in content["entries"] if lo <= d["pos"] <= hi]
        rest = [p for p in range(lo, hi + 1) if p not in known]
        rels = [entry_path(p) for p in rest]
        out = []
        for rel, data in zip(rels, self.store.read_many(rels)) if rels else ():
            e = self._decode(data, rel)
            out.append((Delta(pos=e.pos, op=e.op, wall=e.wall, chunks=tuple(e.chunks), writer=e.writer,
                              batch=e.batch, info=e.info), e.state.tick))
        return out

    # -- time index ---------------------------------------------------------------------------
    def search(self, state: StreamState, col: int, value: int,
               read_node: Callable[[int, int], dict[str, Any]] | None = None) -> int:
        """First journal position whose summary ``col`` exceeds ``value`` (``state.pos + 1`` if none).

        Summaries are monotone in every column used here (max _tso, tick, wall, rows), so this
        walks the open summaries from the oldest level down and reads one node per level
        (through ``read_node`` when given: a caller's cache of these immutable nodes).
        """
        for level in range(len(state.index) - 1, -1, -1):
            for item in state.index[level]:
                if item[col] > value:
                    while level > 0:
                        if (item[COL_ID] + 1) * FANOUT ** level <= state.head_pos:
                            return state.head_pos  # truncated (and maybe collected): the head
                        node = (read_node or self.read_node)(level, item[COL_ID])
                        item = next(i for i in node["items"] if i[col] > value)
                        level -= 1
                    return max(int(item[COL_ID]), state.head_pos)
        return state.pos + 1

    def search_any(self, state: StreamState, value: int) -> int:
        """Like ``search`` on max ``_tso``, also below the head (for loss reports); 0 if the
        index nodes there were already collected."""
        try:
            return self.search(StreamState.from_json({**state.to_json(), "head_pos": state.gc_pos}),
                               COL_MAX_TSO, value)
        except CorruptMetadataError:
            return state.gc_pos

    def _flush(self, state: StreamState) -> None:
        """Write every full open index level as a node; mutates ``state.index``."""
        level = 0
        while level < len(state.index) and len(state.index[level]) >= FANOUT:
            items = state.index[level]
            node_no = items[0][COL_ID] // FANOUT
            content: dict[str, Any] = {"level": level + 1, "node": node_no, "items": items}
            if level == 0:
                rels = [entry_path(i[COL_ID]) for i in items]
                content["entries"] = [self._decode(d, r).delta_json()
                                      for r, d in zip(rels, self.store.read_many(rels))]
            self.store.write(node_path(level + 1, node_no), json.dumps(content, separators=(",", ":")).encode())
            last = items[-1]
            state.index[level] = []
            if level + 1 == len(state.index):
                state.index.append([])
            state.index[level + 1].append([node_no] + list(last[1:]))
            level += 1

    # -- writing ------------------------------------------------------------------------------
    def create(self, entry: Entry) -> Entry:
        """Write entry 0; StreamExistsError if the stream exists."""
        entry.state.index = [[summary(entry)]]
        data = entry.encode()
        if not self._create_slot(0, data):
            existing = self.try_entry(0)
            if existing is None or existing.nonce != entry.nonce:
                raise StreamExistsError(
                    f"a stream already exists at {self.store.display_url}; open it with Stream.open")
        self._write_head(data)
        return entry

    def commit(self, build: Callable[[StreamState, int], Entry | None],
               state: StreamState | None = None) -> tuple[Entry | None, StreamState]:
        """Append the entry ``build(state, pos)`` makes, retrying on lost races.

        ``build`` gets a private copy of the newest known state and the position to take, and
        returns the entry (its ``state`` already advanced) or None when nothing must be written
        (e.g. the batch is a duplicate). A conditional create that reports "exists" may hide our
        own earlier attempt (an ambiguous outcome on an object store), so the winner's nonce is
        compared before treating it as a conflict.
        """
        if state is None:
            state = self.head().state
        for _ in range(MAX_ATTEMPTS):
            pos = state.pos + 1
            work = StreamState.from_json(json.loads(json.dumps(state.to_json())))
            entry = build(work, pos)
            if entry is None:
                return None, state
            entry.pos = pos
            entry.state.pos = pos
            # Only committed facts are flushed: what ``build`` just added stays pending in this
            # entry's state until a later commit, so an attempt that loses the race for ``pos``
            # has written nothing of its own (a rival scale's records would otherwise lose to
            # the loser's sealed-map and epoch records).
            fresh_sealed = entry.state.pending_sealed[len(state.pending_sealed):]
            fresh_epoch = entry.state.pending_epoch if entry.state.pending_epoch != state.pending_epoch else None
            entry.state.pending_sealed = entry.state.pending_sealed[:len(state.pending_sealed)]
            entry.state.pending_epoch = state.pending_epoch
            for flush in self.flushers:
                try:
                    flush(entry.state)
                except Exception as e:  # noqa: BLE001 - the facts stay pending in the state: retried
                    logger.warning("tstream: %s: writing committed sealed/epoch records failed (%s); they "
                                   "stay pending and the next commit writes them", self.store.display_url, e)
            entry.state.pending_sealed = entry.state.pending_sealed + fresh_sealed
            if fresh_epoch is not None:
                entry.state.pending_epoch = fresh_epoch
            self._flush(entry.state)
            if not entry.state.index:
                entry.state.index = [[]]
            entry.state.index[0].append(summary(entry))
            data = entry.encode()
            if self._create_slot(pos, data):
                self._write_head(data)
                self._publish(entry.state, fresh_sealed or fresh_epoch is not None)
                return entry, entry.state
            winner = self.try_entry(pos)
            if winner is None:
                raise CorruptMetadataError(
                    f"journal slot {self.store.uri(entry_path(pos))} reported as taken but is "
                    "missing; check the store's consistency", path=self.store.uri(entry_path(pos)))
            if winner.nonce == entry.nonce:
                self._write_head(data)
                self._publish(entry.state, fresh_sealed or fresh_epoch is not None)
                return entry, entry.state
            state = winner.state
        raise CommitConflictError(
            f"gave up after {MAX_ATTEMPTS} lost races for a journal slot on {self.store.display_url}",
            expected=state.pos + 1)

    def _publish(self, state: StreamState, fresh: bool) -> None:
        """Write the facts this commit made pending (sealed records, an epoch record) now that
        it won its slot, so every handle finds them at once. Best-effort: they stay pending in
        the state, and the next commit writes them again (the same bytes) and lets them go."""
        if not fresh:
            return
        copy = StreamState.from_json(json.loads(json.dumps(state.to_json())))
        try:
            for flush in self.flushers:
                flush(copy)
        except Exception as e:  # noqa: BLE001 - the commit landed; the next one retries this
            logger.warning("tstream: %s: writing sealed/epoch records after commit %d failed (%s); the "
                        "next commit writes them", self.store.display_url, state.pos, e)

    def _create_slot(self, pos: int, data: bytes) -> bool:
        """The conditional create of entry ``pos``; True if it created it, False if it exists.

        A transient store failure that outlives the store's retries leaves the outcome unknown (the
        PUT may have been applied; a refusal such as 403 is not ambiguous and is raised as is). Repeating the same conditional create settles it: it either creates
        the entry now or reports "exists", and the caller then compares nonces. If the store
        keeps failing, the error says the outcome is unknown: the caller must keep the batch's
        files (the sink's abort proves from the journal whether it may delete them).
        """
        rel = entry_path(pos)
        try:
            return self.store.put_if_absent(rel, data)
        except StorageError as first:
            if not first.retriable:
                raise  # refused (e.g. 403): the store did not apply it, nothing is ambiguous
            failure = first
        for attempt in range(RESOLVE_ATTEMPTS):
            time.sleep(self.store.retry.delay(attempt))
            try:
                return self.store.put_if_absent(rel, data)
            except StorageError as e:
                failure = e
        raise StorageError(
            f"commit to journal slot {self.store.uri(rel)} has an unknown outcome: the store kept "
            f"failing ({failure}); nothing was deleted. Retry the write with the same writer id and "
            "batch id (a committed batch is a no-op) and check the stream with `tstream fsck`",
            path=self.store.uri(rel), retriable=True) from failure

    def _write_head(self, data: bytes) -> None:
        # The head is a hint; the entry already committed. A failed hint write only makes the
        # next reader probe one more position, so it must not turn a commit into an error
        # (whatever the failure: the commit is durable and must be reported as such).
        try:
            self.store.write(HEAD, data)
        except Exception as e:  # noqa: BLE001 - see above
            logger.info("head hint %s not written (%s); readers probe past it",
                        self.store.uri(HEAD), e)
