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
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import CommitConflictError, CorruptMetadataError, StreamExistsError, StreamNotFoundError
from .state import StreamState
from .storage import Store

META = "_tstream"
HEAD = f"{META}/head.json"
ANCHOR = f"{META}/anchor.json"
FANOUT = 32
#: On-store format written by this version; entries of older versions still read, newer fail.
FORMAT_VERSION = 2
_DIR_SPAN = 100_000
MAX_ATTEMPTS = 1000

# columns of an index summary (each monotone over positions, so searchable):
# [position or node number, max _tso, tick, wall ms, rows so far, epoch, bytes so far]
COL_ID, COL_MAX_TSO, COL_TICK, COL_WALL, COL_ROWS, COL_EPOCH, COL_BYTES = range(7)


def entry_path(pos: int) -> str:
    return f"{META}/journal/{pos // _DIR_SPAN:06d}/{pos:012d}.json"


def node_path(level: int, node: int) -> str:
    return f"{META}/index/{level}/{node:012d}.json"


@dataclass(frozen=True)
class Chunk:
    """A committed data chunk: where it is and how its records are numbered and timed."""

    seg: int
    path: str
    rows: int
    bytes: int
    seq: int  # _seq of the first record
    floor: int  # tso_i = max(raw_i, floor + i)
    lo: int  # first _tso
    hi: int  # last _tso
    # optional trailing fields (format v2; serialized only when not the default):
    offset: int = 0  # row of the file where this chunk's records start (a view of a macro-chunk)
    sorted: bool = True  # final _tso strictly increasing along the rows (False: filter by mask)
    marks: tuple[int, ...] = ()  # sample of final _tso at fixed row steps (issue 10)

    def to_json(self) -> list[Any]:
        v: list[Any] = [self.seg, self.path, self.rows, self.bytes, self.seq, self.floor, self.lo, self.hi]
        if self.marks:
            v += [self.offset, self.sorted, list(self.marks)]
        elif not self.sorted:
            v += [self.offset, self.sorted]
        elif self.offset:
            v.append(self.offset)
        return v

    @classmethod
    def from_json(cls, v: list[Any]) -> Chunk:
        if len(v) <= 8:
            return cls(*v)
        return cls(*v[:8], int(v[8]), bool(v[9]) if len(v) > 9 else True,
                   tuple(v[10]) if len(v) > 10 else ())


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
        try:
            d = json.loads(data)
            if int(d.get("v", 1)) > FORMAT_VERSION:
                raise CorruptMetadataError(
                    f"journal record {path} has format version {d['v']}, newer than this "
                    f"pyspark-tstream reads ({FORMAT_VERSION}); upgrade pyspark-tstream", path=path)
            return cls(pos=d["pos"], op=d["op"], wall=d["wall"], nonce=d["nonce"],
                       writer=d.get("writer"), batch=d.get("batch"),
                       chunks=[Chunk.from_json(c) for c in d["chunks"]], info=d.get("info", {}),
                       state=StreamState.from_json(d["state"]))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptMetadataError(
                f"journal record {path} is unreadable ({type(e).__name__}: {e}); restore it from a "
                "backup or truncate the stream before it", path=path) from e


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
        """
        try:
            entry = self._decode(self.store.read(HEAD), HEAD)
            if known is not None and known.pos > entry.pos:
                entry = known
        except FileNotFoundError:
            entry = known or self._anchor_entry()
            if entry is None:
                raise StreamNotFoundError(
                    f"no stream at {self.store.display_url}; create it with Stream.create, "
                    "`tstream create` or a first write") from None
        while True:
            nxt = self.try_entry(entry.pos + 1)
            if nxt is None:
                return entry
            entry = nxt

    def _anchor_entry(self) -> Entry | None:
        """Where to probe from without a head: the oldest entry garbage collection kept."""
        try:
            pos = int(json.loads(self.store.read(ANCHOR))["pos"])
        except FileNotFoundError:
            pos = 0
        return self.try_entry(pos)

    def read_node(self, level: int, node: int) -> dict[str, Any]:
        rel = node_path(level, node)
        try:
            return json.loads(self.store.read(rel))
        except FileNotFoundError as e:
            raise CorruptMetadataError(
                f"index node {self.store.uri(rel)} is missing; the journal is intact, so rebuild "
                "the index with `tstream repair`", path=self.store.uri(rel)) from e
        except ValueError as e:
            raise CorruptMetadataError(f"index node {self.store.uri(rel)} is unreadable: {e}",
                                       path=self.store.uri(rel)) from e

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
            for rel, data in zip(rels, self.store.read_many(rels)):
                try:
                    node = json.loads(data)
                except ValueError as e:
                    raise CorruptMetadataError(f"index node {self.store.uri(rel)} is unreadable: {e}",
                                               path=self.store.uri(rel)) from e
                out.extend(Delta.from_json(d) for d in node["entries"] if first <= d["pos"] <= flushed_last)
        rest = list(range(max(first, open0), last + 1))
        if rest:
            rels = [entry_path(p) for p in rest]
            for rel, data in zip(rels, self.store.read_many(rels)):
                e = self._decode(data, rel)
                out.append(Delta(pos=e.pos, op=e.op, wall=e.wall, chunks=tuple(e.chunks),
                                 writer=e.writer, batch=e.batch, info=e.info))
        return out

    # -- time index ---------------------------------------------------------------------------
    def search(self, state: StreamState, col: int, value: int) -> int:
        """First journal position whose summary ``col`` exceeds ``value`` (``state.pos + 1`` if none).

        Summaries are monotone in every column used here (max _tso, tick, wall, rows), so this
        walks the open summaries from the oldest level down and reads one node per level.
        """
        for level in range(len(state.index) - 1, -1, -1):
            for item in state.index[level]:
                if item[col] > value:
                    while level > 0:
                        if (item[COL_ID] + 1) * FANOUT ** level <= state.head_pos:
                            return state.head_pos  # truncated (and maybe collected): the head
                        node = self.read_node(level, item[COL_ID])
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
        if not self.store.put_if_absent(entry_path(0), data):
            existing = self.try_entry(0)
            if existing is None or existing.nonce != entry.nonce:
                raise StreamExistsError(
                    f"a stream already exists at {self.store.display_url}; open it with Stream.open")
        self.store.write(HEAD, data)
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
            for flush in self.flushers:
                flush(entry.state)
            self._flush(entry.state)
            if not entry.state.index:
                entry.state.index = [[]]
            entry.state.index[0].append(summary(entry))
            data = entry.encode()
            if self.store.put_if_absent(entry_path(pos), data):
                self._write_head(data)
                return entry, entry.state
            winner = self.try_entry(pos)
            if winner is None:
                raise CorruptMetadataError(
                    f"journal slot {self.store.uri(entry_path(pos))} reported as taken but is "
                    "missing; check the store's consistency", path=self.store.uri(entry_path(pos)))
            if winner.nonce == entry.nonce:
                self._write_head(data)
                return entry, entry.state
            state = winner.state
        raise CommitConflictError(
            f"gave up after {MAX_ATTEMPTS} lost races for a journal slot on {self.store.display_url}",
            expected=state.pos + 1)

    def _write_head(self, data: bytes) -> None:
        # The head is a hint; the entry already committed. A failed hint write only makes the
        # next reader probe one more position, so it must not turn a commit into an error.
        try:
            self.store.write(HEAD, data)
        except OSError:
            pass
