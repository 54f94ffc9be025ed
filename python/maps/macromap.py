"""The macro map: which macro-chunk holds which ``_seq`` range of a segment, sharded by bucket.

A macro-chunk (python/compaction/compact.py) holds a run of a segment's records, contiguous in
``_seq``. The map records every live macro-chunk under its segment and **bucket** — the
``_seq`` range ``[k * SPAN, (k + 1) * SPAN)`` its first record falls in. A macro-chunk never has
more than ``SPAN`` rows, so the records of ``_seq`` ``q`` are in a macro-chunk of bucket
``q // SPAN`` or ``q // SPAN - 1``: a lookup reads at most two buckets per segment.

Each bucket is a chain of immutable versions ``_tstream/macros/<segment>/<k>/<v>.json`` taken
with create-if-absent, plus an overwritable head hint (the pattern of python/maps/sealed.py): a
version is built from its predecessor, so concurrent compactors can never lose an update, and
the loser of a race re-reads and re-checks. Finding the newest costs the head read plus one
probe. A version names only whole macro-chunks whose files were fully written before it.

Invariant: a ``_seq`` range listed in the newest version is readable from the listed file;
files a newer version dropped stay until garbage collection's grace period has passed after the
compaction's journal commit.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..codec import DEFAULT, INT, STR, ListRecord, custom, record, stored
from ..errors import CorruptMetadataError, corrupt
from ..journal import seal
from ..journal.ahead import Ahead
from ..journal.entries import Chunk
from ..journal.features import WRITES, check_object
from ..journal.state import segment_number
from ..store import layout
from ..store.races import LOST, Lost, until_won
from ..store.storage import Store
from ..store.versions import newest_version

#: Rows of ``_seq`` per bucket, and the most rows a macro-chunk may hold.
SPAN = 1 << 22
#: The bucket document's format, stored as ``"format"`` (no key: 1). 1: the first form. 2: a
#: bucket may be :attr:`Bucket.partial` (``"partial": 1``); a reader that ignored the mark would
#: read the bucket as all of the compacted history and skip the records left to the journal.
#: Only a bucket that needs more than the first form (a partial one) carries the key, so every
#: other bucket keeps format 1's bytes; a bucket of a newer format is refused
#: (UnsupportedFormatError), never read as an older one.
MACRO_KIND = "macro map bucket"
MACRO_FORMAT_VERSION = WRITES[MACRO_KIND]


def bucket_of(seq: int) -> int:
    """The bucket whose range ``[k·SPAN, (k+1)·SPAN)`` holds ``_seq`` ``seq``."""
    return seq // SPAN


def listable(chunk: Chunk) -> bool:
    """Whether ``chunk`` may be listed in the map as it is. An entry names a whole file (no
    offset or span), so a slice of a shared file never is: it would read as all of its file.
    Compaction rewrites such a slice as a macro-chunk instead; repair leaves it to the journal
    (:attr:`Bucket.partial`)."""
    return not chunk.shared


#: ``sorted``, stored as 0 or 1.
_FLAG = custom(int, bool, lambda v: type(v) is int)


@record
@dataclass(frozen=True)
class Macro(ListRecord):
    """One macro-chunk: records ``[first, first + rows)`` of its segment, in ``_seq`` order."""

    first: int = stored(INT)
    rows: int = stored(INT)
    path: str = stored(STR)
    bytes: int = stored(INT)
    lo: int = stored(INT)  # min _tso
    hi: int = stored(INT)  # max _tso
    sorted: bool = stored(_FLAG)  # _tso strictly increasing along the rows
    level: int = stored(INT)  # merge generation: 1 for a macro of small chunks, +1 per merge of macros
    #: not 0: a chunk left as it is (too big to merge, or passed over), listed so that the map
    #: covers every compacted ``_seq``; its records keep their floor
    floor: int = stored(INT, default=0, omit=DEFAULT)

    @property
    def end(self) -> int:
        return self.first + self.rows



@dataclass(frozen=True)
class Bucket:
    """One version of a bucket: its live macro-chunks, by first ``_seq``.

    ``partial``: some compacted ``_seq`` of the bucket is in no entry but read from the
    journal's chunks (slices of shared files that repair listed in place of a lost macro-chunk,
    which no entry can name: :func:`listable`), so a plan cannot read the bucket instead of the
    journal. Stored as ``"partial": 1`` only when set (with ``"format"``:
    :data:`MACRO_FORMAT_VERSION`), and kept by every later version.
    """

    seg: int
    bucket: int
    v: int
    macros: tuple[Macro, ...]
    partial: bool = False

    def to_bytes(self, sealed: bool = False) -> bytes:
        """The stored bytes (``sealed``: the stream declares checksums)."""
        doc: dict[str, Any] = {"seg": self.seg, "bucket": self.bucket, "v": self.v,
                               "macros": [m.to_json() for m in self.macros]}
        if self.partial:
            doc["partial"] = 1
            doc["format"] = MACRO_FORMAT_VERSION
        return seal.encode(doc, sealed)


class MacroMap:
    """Reads and updates the macro map of one stream."""

    def __init__(self, store: Store, *, sealed: bool = False, exact: bool = False) -> None:
        self.store = store
        #: a committed version :meth:`covering_many` is told of and does not find is corrupt
        #: metadata naming it (fsck), instead of searched past (reads: the bucket's other
        #: versions and its head copy still answer)
        self.exact = exact
        #: the stream declares checksums: versions this handle writes are sealed, and those it
        #: reads must be (:mod:`~pyspark_tstream.journal.seal`)
        self.sealed = sealed

    def decode(self, data: bytes, rel: str) -> Bucket:
        """The bucket version in ``data`` (read from ``rel``); CorruptMetadataError if it is not
        one, UnsupportedFormatError if a newer tstream wrote it (:data:`MACRO_FORMAT_VERSION`)."""
        try:
            d = seal.unseal(data, required=self.sealed)
            fmt = d.get("format", 1)
            if not isinstance(fmt, int) or isinstance(fmt, bool):
                raise TypeError(f"format {fmt!r} is not an integer")
            check_object(MACRO_KIND, fmt, self.store.uri(rel))
            macros = tuple(Macro.checked(m, "a macro-chunk entry") for m in d["macros"])
            return Bucket(int(d["seg"]), int(d["bucket"]), int(d["v"]), macros, bool(d.get("partial", 0)))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
            raise corrupt("macro map bucket", self.store.uri(rel), e, self.store.display_url) from e

    def latest(self, seg: int, bucket: int) -> Bucket:
        """Newest version of a bucket (``v = -1`` and no macros if it has none): 2 reads."""
        head = layout.macro_head(segment_number(seg), bucket)
        try:
            cur = self.decode(self.store.read(head), head)
        except (FileNotFoundError, CorruptMetadataError):  # a hint: search the versions instead
            cur = Bucket(seg, bucket, -1, ())

        def rel(v: int) -> str:
            return layout.macro_version(segment_number(seg), bucket, v)

        # the head may lag (another compactor's version, or a lost hint write) or be gone
        return newest_version(lambda v: self.decode(self.store.read(rel(v)), rel(v)),
                              lambda v: self.store.exists(rel(v)), cur.v, cur)

    def covering(self, seg: int, ranges: Iterable[tuple[int, int]],
                 read: dict[int, Bucket] | None = None) -> list[Macro]:
        """The macro-chunks of ``seg`` that hold any of the ``_seq`` ranges ``[a, b)`` asked.

        Reads the bucket of each range's start, and the one before it only when a range is not
        found there (a macro-chunk starting in the previous bucket): 2 reads per bucket.
        """
        ranges = list(ranges)
        seen: dict[int, Bucket] = dict(read or {})  # versions the caller already has
        found: dict[str, Macro] = {}

        def scan(bucket: int, todo: list[tuple[int, int]]) -> list[tuple[int, int]]:
            if bucket < 0:
                return []
            if bucket not in seen:
                seen[bucket] = self.latest(seg, bucket)
            left = []
            for a, b in todo:
                m = next((m for m in seen[bucket].macros if m.first <= a and b <= m.end), None)
                if m is None:
                    left.append((a, b))
                else:
                    found[m.path] = m
            return left

        missing: dict[int, list[tuple[int, int]]] = {}
        for a, b in ranges:
            missing.setdefault(bucket_of(a), []).append((a, b))
        for bucket, todo in sorted(missing.items()):
            left = scan(bucket, todo)
            if left:
                scan(bucket - 1, left)
        return sorted(found.values(), key=lambda m: m.first)

    def covering_many(self, ranges: dict[int, list[tuple[int, int]]],
                      known: dict[int, tuple[int, int]], ahead: Ahead | None = None) -> dict[int, list[Macro]]:
        """:meth:`covering` for several segments; ``known`` names a committed (bucket, version)
        per segment, read exactly (immutable, all in one batched call) instead of head + probe,
        taken from ``ahead`` where they were read ahead (:func:`~pyspark_tstream.read.compacted.named_versions`).

        A committed version may be older than the newest, which is fine: the files it names stay
        until garbage collection's grace period has passed after the commit that replaced them.
        """
        out: dict[int, list[Macro]] = {seg: [] for seg in ranges}
        exact = {seg: bv for seg, bv in known.items()
                 if seg in ranges and any(bucket_of(a) == bv[0] for a, _ in ranges[seg])}
        rels = [layout.macro_version(segment_number(seg), b, v) for seg, (b, v) in exact.items()]
        try:
            blobs = self._read_exact(rels, ahead)
        except FileNotFoundError as lost:
            if self.exact:
                where = lost.filename if isinstance(lost.filename, str) else self.store.uri(rels[0])
                raise corrupt("macro map bucket", where, lost, self.store.display_url) from lost
            blobs, exact = [], {}
        rest: dict[int, list[tuple[int, int]]] = {}
        have: dict[int, Bucket] = {}
        for (seg, (_b, _)), rel, data in zip(exact.items(), rels, blobs):
            version = have[seg] = self.decode(data, rel)
            for a, e in ranges[seg]:
                m = next((m for m in version.macros if m.first <= a and e <= m.end), None)
                if m is not None:
                    if m not in out[seg]:
                        out[seg].append(m)
                else:
                    rest.setdefault(seg, []).append((a, e))
        for seg, rs in ranges.items():
            todo = rest.get(seg, []) if seg in exact else rs
            if todo:  # the committed version stands for its bucket: only older buckets are read
                read = {exact[seg][0]: have[seg]} if seg in have else None
                out[seg] += [m for m in self.covering(seg, todo, read) if m not in out[seg]]
            out[seg].sort(key=lambda m: m.first)
        return out

    def _read_exact(self, rels: list[str], ahead: Ahead | None) -> list[bytes]:
        """``rels`` in one batched call (those read ahead taken from ``ahead``); FileNotFoundError
        naming the first one absent."""
        if ahead is None:
            return self.store.read_many(rels)
        got = ahead.take_present(rels)
        for rel, data in zip(rels, got):
            if data is None:
                raise FileNotFoundError(errno.ENOENT, "no such object", self.store.uri(rel))
        return [data for data in got if data is not None]

    def update(self, seg: int, bucket: int, change: Callable[[Bucket], tuple[Macro, ...] | None], *,
               partial: bool = False) -> Bucket | None:
        """Publish ``change(newest)`` as the next version; None if ``change`` declines (returns None).
        The version is :attr:`~Bucket.partial` if ``partial`` or the newest was.

        ``change`` is called again on the winner's version after a lost race, so it must check
        its preconditions against the version it is given. The head hint is written after the
        version (best effort: readers and compactors probe past a stale one).
        """
        cur = [self.latest(seg, bucket)]

        def attempt() -> Bucket | None | Lost:
            macros = change(cur[0])
            if macros is None:
                return None
            nxt = Bucket(seg, bucket, cur[0].v + 1, tuple(sorted(macros, key=lambda m: m.first)),
                         partial or cur[0].partial)
            data = nxt.to_bytes(self.sealed)
            rel = layout.macro_version(segment_number(seg), bucket, nxt.v)
            if self.store.put_if_absent(rel, data):
                try:  # a hint: readers and compactors probe past a stale one
                    self.store.write(layout.macro_head(segment_number(seg), bucket), data)
                except OSError:
                    pass
                return nxt
            try:  # "exists" may hide our own create whose answer was lost (object stores)
                if self.store.read(rel) == data:
                    return nxt
            except FileNotFoundError:
                pass
            cur[0] = self.latest(seg, bucket)
            return LOST

        return until_won(attempt, what=f"the macro map of segment {seg}", expected=lambda: cur[0].v + 1)
