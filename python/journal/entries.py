"""Journal entries on the store: their format and reading them back.

One job: entry I/O. An entry is one immutable JSON object per journal position
(:func:`~pyspark_tstream.store.layout.entry`) holding what its commit did (a
:class:`Chunk` list and info) and the whole :class:`~pyspark_tstream.journal.state.StreamState` after
it; the head hint copies the newest one. Readers treat the head (and the ``anchor`` that names
the oldest entry garbage collection kept) as hints: a stale or lost hint costs probes or an
O(log n) search, never a wrong answer. Entries carry a format version; newer ones are refused
(:func:`check_version`). Committing entries is :mod:`~pyspark_tstream.journal.journal`'s job.

Costs (store calls): the newest entry 2 (head + one probe past it), a poll with nothing new 1.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from ..errors import CorruptMetadataError, corrupt, error, newer_format
from ..store import layout
from ..store.storage import Store
from ..store.versions import newest_present, probe_past
from .packing import expand, pack
from .shapes import check_delta, check_entry, is_int, need
from .state import StreamState

#: On-store format written by this version; older versions are read, newer ones refused.
#: 1: first release (one floor chain per segment). 2: writer lanes (per-writer ``lanes`` in the
#: state; chunks of a segment may overlap in time) and the chunk trailing fields ``offset``,
#: ``sorted`` and ``marks``. 3: wide writes (a chunk may be a *slice* of a file several segments
#: share: the trailing field ``file_bytes``; an entry of many chunks stores them packed, see
#: :mod:`.packing`). 4: group commit (an entry may fold several writers' requests: ``folds``,
#: and ``state.folded``, the ids folded lately, which a version-3 committer would drop).
#: 5: self-contained slices (each slice of a shared file is a Parquet file of its own inside
#: it, read with one ranged read: the chunk trailing fields ``span_start`` and ``span_bytes``;
#: a version-4 reader would fetch the shared file's footer instead, correct but ×7-17 the bytes,
#: and drop the span on a rewrite). Version 1 to 4 streams read and append unchanged (their
#: slices, without a span, read through the file's footer).
FORMAT_VERSION = 5

#: An entry (or index node delta) with at least this many chunks stores them packed (format v3,
#: :mod:`.packing`).
PACK_MIN = 8

logger = logging.getLogger(__name__)


def check_version(v: Any, path: str) -> None:
    """Refuse metadata written by a newer tstream (it may mean something this one cannot read)."""
    if isinstance(v, int) and v > FORMAT_VERSION:
        raise newer_format(path, v, FORMAT_VERSION)


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

    Format v3: ``file_bytes`` > 0 makes the chunk a *slice* of a shared file (a Spark task's one
    file holding the rows of every segment it wrote, each segment's rows in row groups of their
    own): its rows are ``[offset, offset + rows)`` of that ``file_bytes``-byte file and ``bytes``
    is the compressed size of its row groups. ``floor`` counts the chunk's own rows
    (``tso_i = max(raw_i, floor + i)``, ``i`` from 0 at ``offset``), as for any chunk.

    Format v5: ``span_bytes`` > 0 says the slice's bytes ``[span_start, span_start +
    span_bytes)`` of its shared file are a Parquet file of their own (its row groups and its own
    footer), whose first row is row ``offset`` of the whole file: a read fetches that span alone
    (python/write/shared.py, python/read/ranged.py). A slice without a span (v3, v4) reads
    through the whole file's footer.
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
    file_bytes: int = 0
    span_start: int = 0
    span_bytes: int = 0

    #: The stored list's positions, in order (one definition for both directions).
    FIELDS: ClassVar[tuple[str, ...]] = ("seg", "path", "rows", "bytes", "seq", "floor", "lo", "hi", "offset",
                                         "sorted", "marks", "file_bytes", "span_start", "span_bytes")
    #: The trailing fields stored only when not default, with their stored defaults.
    OPTIONAL: ClassVar[dict[str, Any]] = {"offset": 0, "sorted": True, "marks": [], "file_bytes": 0,
                                          "span_start": 0, "span_bytes": 0}

    @property
    def shared(self) -> bool:
        """Whether this chunk is a slice of a file other chunks (of other segments) share."""
        return self.file_bytes > 0

    @property
    def span(self) -> tuple[int, int] | None:
        """The byte range ``[start, end)`` of its shared file holding this slice as a Parquet
        file of its own (format v5), None when it has none."""
        return (self.span_start, self.span_start + self.span_bytes) if self.span_bytes > 0 else None

    def to_json(self) -> list[Any]:
        stored = {name: getattr(self, name) for name in self.FIELDS}
        stored["marks"] = [m - p for m, p in zip(self.marks, (self.lo,) + self.marks[:-1])]
        values = [stored[name] for name in self.FIELDS]
        while len(values) > len(self.FIELDS) - len(self.OPTIONAL) and \
                values[-1] == self.OPTIONAL[self.FIELDS[len(values) - 1]]:
            values.pop()
        return values

    @classmethod
    def from_json(cls, v: list[Any]) -> Chunk:
        stored = dict(zip(cls.FIELDS, v))
        marks: list[int] = []
        m = stored["lo"]
        for d in stored.get("marks", ()):
            m += d
            marks.append(m)
        stored["marks"] = tuple(marks)
        return cls(**stored)


class Fold(NamedTuple):
    """One request a group-commit entry folded (format v4), stored as the list
    ``[rid, writer, batch, chunks, info]``: its id, its dedupe key, how many of the entry's
    chunks are its (consecutive, in fold order) and its own ``info``."""

    rid: str
    writer: str | None
    batch: Any
    chunks: int
    info: dict[str, Any]


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
    #: Group commit (format v4): the requests this entry folded, in order (:class:`Fold`); their
    #: chunks are consecutive runs of ``chunks``. Empty for an entry of one commit
    #: (``writer``/``batch``/``info`` are then its).
    folds: list[Fold] = field(default_factory=list)

    def delta_json(self) -> dict[str, Any]:
        return _with_folds(_delta(self.pos, self.op, self.wall, self.nonce, self.chunks, self.writer, self.batch,
                                  self.info), [list(f) for f in self.folds])  # the stored form: lists

    def encode(self) -> bytes:
        d = self.delta_json()
        d["v"] = FORMAT_VERSION
        d["state"] = self.state.to_json()
        return json.dumps(d, separators=(",", ":")).encode()

    @staticmethod
    def decode_delta(data: bytes, *, path: str) -> dict[str, Any]:
        """:meth:`delta_json` of the entry in ``data``, its state neither checked nor built (an
        index flush copies what entries did, and decoding their states was half a commit's
        CPU); CorruptMetadataError (naming ``path``) if the delta is not one."""
        try:
            d = expand(json.loads(data))
            check_delta(d)
            check_version(d.get("v"), path)
            chunks = [Chunk.from_json(c) for c in d["chunks"]]
            return _with_folds(_delta(d["pos"], d["op"], d["wall"], d["nonce"], chunks, d.get("writer"),
                                      d.get("batch"), d.get("info", {})), check_folds(d.get("folds", []), len(chunks)))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise corrupt("journal entry", path, e, layout.stream_url(path)) from e

    @classmethod
    def decode(cls, data: bytes, *, path: str) -> Entry:
        """The entry in ``data``; CorruptMetadataError (naming ``path``) if it is not one."""
        try:
            d = expand(json.loads(data))
            check_entry(d)
            check_version(d.get("v"), path)
            chunks = [Chunk.from_json(c) for c in d["chunks"]]
            return cls(pos=d["pos"], op=d["op"], wall=d["wall"], nonce=d["nonce"],
                       writer=d.get("writer"), batch=d.get("batch"),
                       chunks=chunks, info=d.get("info", {}),
                       state=StreamState.from_json(d["state"]),
                       folds=[Fold(*f) for f in check_folds(d.get("folds", []), len(chunks))])
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise corrupt("journal entry", path, e, layout.stream_url(path)) from e


def _delta(pos: int, op: str, wall: int, nonce: str, chunks: Sequence[Chunk], writer: str | None, batch: Any,
           info: dict[str, Any]) -> dict[str, Any]:
    """What an entry did, as stored (in entries and in level-1 index nodes, byte for byte)."""
    d: dict[str, Any] = {"pos": pos, "op": op, "wall": wall, "nonce": nonce}
    if len(chunks) >= PACK_MIN:
        d["chunks"], d["packed"] = [], pack([c.to_json() for c in chunks])
    else:
        d["chunks"] = [c.to_json() for c in chunks]
    if writer is not None:
        d["writer"] = writer
        d["batch"] = batch
    if info:
        d["info"] = info
    return d


def _with_folds(d: dict[str, Any], folds: list[list[Any]]) -> dict[str, Any]:
    if folds:
        d["folds"] = folds
    return d


def check_folds(folds: Any, chunks: int) -> list[list[Any]]:
    """The ``folds`` of an entry, shape-checked: ``[id, writer, batch, chunk count, info]`` each,
    whose chunk counts add up to the entry's ``chunks`` (TypeError otherwise)."""
    need(isinstance(folds, list) and all(
        isinstance(f, list) and len(f) == 5 and isinstance(f[0], str) and (f[1] is None or isinstance(f[1], str))
        and is_int(f[3]) and f[3] >= 0 and isinstance(f[4], dict) for f in folds), "the entry's folds")
    need(not folds or sum(f[3] for f in folds) == chunks, "the entry's folds (chunk counts)")
    checked: list[list[Any]] = folds
    return checked


#: Stored bytes of this many entries are kept after this handle read or committed them: a
#: time-index flush needs the deltas of the last FANOUT positions, which a lone writer committed
#: itself (reading them back was a batched GET every 32 commits on its critical path).
RECENT_ENTRIES = 64


class EntryLog:
    """Reads the journal entries of one stream (never writes them)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._recent: dict[int, bytes] = {}  # position -> stored bytes, oldest first

    def remember(self, pos: int, data: bytes) -> None:
        """Keep the stored bytes of committed entry ``pos`` (entries are immutable) for
        :meth:`read_deltas`; the oldest beyond :data:`RECENT_ENTRIES` are dropped."""
        recent = self._recent
        recent[pos] = data
        while len(recent) > RECENT_ENTRIES:
            recent.pop(next(iter(recent)), None)

    def _decode(self, data: bytes, rel: str) -> Entry:
        return Entry.decode(data, path=self.store.uri(rel))

    def read_entries(self, positions: Sequence[int]) -> list[Entry]:
        """The entries at ``positions``, in that order: one batched read."""
        rels = [layout.entry(p) for p in positions]
        return [self._decode(data, rel) for rel, data in zip(rels, self.store.read_many(rels))] if rels else []

    def read_deltas(self, positions: Sequence[int]) -> list[dict[str, Any]]:
        """:meth:`Entry.delta_json` of the entries at ``positions``, in that order: one batched
        read of those this handle has not kept (:meth:`remember`; none: no read), states not
        decoded. A kept entry decodes from the very bytes the store holds."""
        kept = dict(self._recent)
        missing = [p for p in positions if p not in kept]
        if missing:
            kept.update(zip(missing, self.store.read_many([layout.entry(p) for p in missing])))
        return [Entry.decode_delta(kept[p], path=self.store.uri(layout.entry(p))) for p in positions]

    def read_entry(self, pos: int) -> Entry:
        """The entry at ``pos`` (FileNotFoundError if it is absent)."""
        rel = layout.entry(pos)
        return self._decode(self.store.read(rel), rel)

    def try_entry(self, pos: int) -> Entry | None:
        """The entry at ``pos`` or None: one store call, the whole of a poll with nothing new."""
        rel = layout.entry(pos)
        try:
            data = self.store.read(rel)
        except FileNotFoundError:
            return None
        entry = self._decode(data, rel)
        self.remember(pos, data)
        return entry

    def head(self, known: Entry | None = None) -> Entry:
        """The newest entry: read the head hint, then probe past it (a stale hint is fine).

        ``known`` is an entry the caller already has; probing starts from the newer of the two.
        Hints are hints: a missing or unreadable head (or anchor) costs a search over journal
        positions, O(log n) reads (see :meth:`_search_newest`), and the next commit rewrites it.
        """
        entry: Entry | None = None
        try:
            data = self.store.read(layout.HEAD)
            entry = self._decode(data, layout.HEAD)
            self.remember(entry.pos, data)  # the hint is a copy of that entry's stored bytes
        except FileNotFoundError:
            pass
        except CorruptMetadataError as e:
            logger.warning("head hint %s is unreadable (%s); finding the newest journal entry by "
                           "search instead (the next commit rewrites the head)",
                           self.store.uri(layout.HEAD), e.__cause__)
        if known is not None and (entry is None or known.pos > entry.pos):
            entry = known
        if entry is None:
            entry = self._search_newest()
        return probe_past(entry, lambda e: self.try_entry(e.pos + 1))

    def _present(self, pos: int) -> bool:
        try:
            self.store.read(layout.entry(pos))
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
            raise error("TSTREAM_STREAM_NOT_FOUND", url=self.store.display_url)
        return self.read_entry(newest_present(self._present, lo))

    def newest_stored(self) -> int | None:
        """The newest position whose entry object exists, readable or not (None: no journal).
        O(log n) existence reads, no decoding: what ``repair`` needs when the newest entry is
        torn and no hint holds a copy of it."""
        lo = self._lowest_live()
        return None if lo is None else newest_present(self._present, lo)

    def _lowest_live(self) -> int | None:
        """Where the live journal starts: the anchor, else entry 0 (never collected) when entry
        1 exists, else the lowest listed entry (only when GC ran and the anchor is lost)."""
        anchor = self._anchor_pos()
        if anchor is not None and self._present(anchor):
            return anchor
        has_zero = self._present(0)
        if has_zero and self._present(1):
            return 0
        listed = self.lowest_listed()  # GC deleted [1, x) or nothing but entry 0 exists
        return listed if listed is not None else (0 if has_zero else None)

    def _anchor_pos(self) -> int | None:
        try:
            pos = json.loads(self.store.read(layout.ANCHOR))["pos"]
            if isinstance(pos, int) and not isinstance(pos, bool) and pos >= 0:
                return pos
            raise TypeError(f"pos is {pos!r}, not a non-negative integer")
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as e:
            logger.warning("anchor %s is unreadable (%s: %s); searching the journal instead "
                           "(`tstream repair` rewrites it)", self.store.uri(layout.ANCHOR), type(e).__name__, e)
            return None

    def lowest_listed(self) -> int | None:
        """The lowest entry position above 0 that a listing shows (2 list calls)."""
        for folder in self.store.list(layout.JOURNAL):
            listed = (layout.numbered_name(n) for n in self.store.list(layout.journal_folder(folder)))
            above = sorted(p for p in listed if p is not None and p > 0)
            if above:
                return above[0]
        return None
