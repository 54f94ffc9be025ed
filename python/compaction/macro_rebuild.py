"""The macro map as the journal determines it: what ``fsck`` checks a damaged map against and
``repair`` writes back.

The map (python/maps/macromap.py) is derived data: every macro-chunk a read needs was committed by a
journal entry of op ``compact`` (its part names the segment, ``_seq`` range, file and size), and
every chunk a compaction listed as it is (a "passed" chunk) is a data chunk of the journal below
the segment's compacted-up-to ``_seq``. So the live content of every bucket follows from the
journal deltas at positions ``[head_pos, pos]`` (older positions hold only truncated records):

1. walk the committed parts of each segment in commit order; a part replaces the parts whose
   ``_seq`` ranges it covers (a later merge of macro-chunks), and is one level above them;
2. keep the parts that hold a live record (a chunk of their range with ``_tso`` above the head);
3. list every live chunk below the compacted-up-to ``_seq`` that no kept part covers, as it is;
4. a kept part whose file is gone or unreadable while all the files it replaced are still
   there (not yet collected) is replaced by them: the macro-chunks it merged (each checked the
   same way) and its small chunks, listed as they are. The records stay readable.

A map entry names a whole file (:func:`~pyspark_tstream.maps.macromap.listable`): a slice of a
shared file among the chunks of steps 3 and 4 is left out, and its bucket marked
:attr:`~pyspark_tstream.maps.macromap.Bucket.partial`, so plans read it from the journal's chunk
(with its offset and span) instead of reading the map alone.

A map built this way covers every compacted ``_seq`` a read can ask for, with the same files a
healthy map names (or the small chunks they replaced), so reads return the same records. It
does not list a macro-chunk published by a compactor that died before its journal commit: the
small chunks it merged are all still there, and orphan cleanup removes its file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow.parquet as pq

from ..chunkfile.checksums import VERIFY_CHECKSUMS
from ..errors import CorruptMetadataError, UnsupportedFormatError
from ..journal.compaction_state import compacted_upto, segment_summaries
from ..journal.entries import Chunk
from ..journal.features import checksummed
from ..journal.state import StreamState, segment_number
from ..journal.timeindex import Delta
from ..maps.macromap import Bucket, Macro, MacroMap, bucket_of, listable
from ..schema import RAW_TSO
from ..store import layout
from ..store.ranged_file import RangedFile
from ..store.storage import Store
from .gc import CommittedPart, committed_parts
from .manifest import Manifest


@dataclass
class Expected:
    """The live entries of each ``(segment, bucket)`` as the journal determines them.

    ``entries`` hold :class:`~pyspark_tstream.maps.macromap.Macro` records whose ``lo``, ``hi`` and
    ``sorted`` are placeholders for macro-chunks (``floor == 0``) until :meth:`complete` reads
    them from the files; chunks listed as they are carry their journal values.
    """

    entries: dict[tuple[int, int], list[Macro]] = field(default_factory=dict)
    #: macro-chunk (gone or unreadable) -> its committed part, and the files listed in its place,
    #: which its compaction's manifest names for garbage collection: repair takes them out (step 4)
    fallback: dict[str, tuple[CommittedPart, list[str]]] = field(default_factory=dict)
    #: ``(segment, bucket)`` holding a live slice no entry can name: read from the journal
    partial: set[tuple[int, int]] = field(default_factory=set)

    def segment(self, seg: int) -> list[Macro]:
        """Every entry of ``seg``, by first ``_seq``."""
        return sorted((m for (s, _), ms in self.entries.items() if s == seg for m in ms), key=lambda m: m.first)

    def covering_many(self, ranges: dict[int, list[tuple[int, int]]],
                      known: dict[int, tuple[int, int]], ahead: object = None) -> dict[int, list[Macro]]:
        """:meth:`MacroMap.covering_many`'s answer from this map (no store calls, so nothing
        read ``ahead`` is used), so that :func:`~pyspark_tstream.read.compacted.substitute` can
        plan against it."""
        out: dict[int, list[Macro]] = {}
        for seg, rs in ranges.items():
            ms = self.segment(seg)
            out[seg] = [m for m in ms if any(m.first <= a and b <= m.end for a, b in rs)]
        return out

    def differs(self, seg: int, bucket: int, version: Bucket) -> bool:
        """Whether a bucket ``version`` lacks an entry this map needs (same ``_seq`` range and file)."""
        have = {(m.first, m.rows, m.path) for m in version.macros}
        if (seg, bucket) in self.partial and not version.partial:
            return True
        return any((m.first, m.rows, m.path) not in have for m in self.entries.get((seg, bucket), []))

    def damaged(self, store: Store, segs: set[int], where: tuple[int, int] | None,
                broken: CorruptMetadataError | None) -> list[tuple[int, int, str]]:
        """``(segment, bucket, why)`` for each stored bucket of ``segs`` that differs from this
        map, and the bucket ``where`` whose version plans read failed to decode (``broken``):
        2 reads per bucket."""
        mm = MacroMap(store)
        out = []
        for seg, bucket in sorted({k for k in self.entries.keys() | self.partial if k[0] in segs}
                                  | ({where} if where else set())):
            why = None
            try:
                cur = mm.latest(seg, bucket)
                lost = sorted(m.path for m in cur.macros if m.path in self.fallback)
                if cur.v < 0:
                    why = "is missing"
                elif lost:
                    why = (f"names macro-chunk {store.uri(lost[0])}, which is gone or unreadable, while the "
                           "files it replaced are all still there (repair lists them again and keeps them from "
                           "vacuum)")
                elif (seg, bucket) in self.partial and not cur.partial:
                    why = ("is not marked as leaving slices of shared files to the journal (an entry would read "
                           "one as its whole file)")
                elif self.differs(seg, bucket, cur):
                    why = "does not name macro-chunks the journal committed (a version or its head hint is lost)"
            except UnsupportedFormatError:
                raise  # a newer tstream's bucket: not damage, and no repair of ours may overwrite it
            except CorruptMetadataError as e:
                why = f"is unreadable ({e.path.rsplit('/', 1)[-1]})"
            if why is None and (seg, bucket) == where and broken is not None:
                why = f"has an unreadable version ({broken.path.rsplit('/', 1)[-1]}) that plans read"
            if why is not None:
                out.append((seg, bucket, why))
        return out

    def complete(self, store: Store, seg: int, bucket: int) -> tuple[Macro, ...]:
        """The bucket's entries with each macro-chunk's ``_tso`` range and order read from its
        file (the raw timestamp column, with ranged reads): what a compaction recorded."""
        out = []
        for m in self.entries.get((seg, bucket), []):
            if m.floor == 0:
                try:
                    lo, hi, ordered = _tso_facts(store, m.path)
                except FileNotFoundError:
                    lo, hi, ordered = m.lo, m.hi, False  # lost: fsck reports the file itself
                m = Macro(m.first, m.rows, m.path, m.bytes, lo, hi, ordered, m.level)
            out.append(m)
        return tuple(out)


def expected(state: StreamState, deltas: Sequence[Delta], exists: Callable[[str], bool]) -> Expected:
    """The map the journal ``deltas`` (positions ``[head_pos, pos]``) determine; ``exists(path)``
    says whether a data file is there and readable (step 4 of the module docstring)."""
    segs = set(segment_summaries(state))
    chunks: dict[int, list[Chunk]] = {s: [] for s in segs}
    for d in deltas:
        for c in d.chunks:
            if c.seg in segs and c.floor != 0 and c.seq < compacted_upto(state, c.seg):
                chunks[c.seg].append(c)
    walk = committed_parts(deltas)
    out = Expected()
    for seg in segs:
        live = sorted({c.seq: c for c in chunks[seg] if c.hi > state.head_tso}.values(), key=lambda c: c.seq)
        firsts = np.array([c.seq for c in live], dtype=np.int64)

        def held(first: int, end: int) -> list[Chunk]:
            i, j = np.searchsorted(firsts, [first, end]).tolist()  # noqa: B023 - called in this iteration only
            return live[i:j]  # noqa: B023 - called in this iteration only

        def pieces(q: CommittedPart) -> list[CommittedPart | Chunk] | None:
            """``q``, or (gone) what it replaced that holds live records, or None: some are gone."""
            if exists(q.path):
                return [q]
            subs: list[CommittedPart | Chunk] = []
            for r in walk.merged.get(q.path, []):
                if held(r.first, r.end):
                    got = pieces(r)
                    if got is None:
                        return None
                    subs += got
            smalls = [c for c in held(q.first, q.end)
                      if not any(r.first <= c.seq < r.end for r in walk.merged.get(q.path, []))]
            if not all(exists(c.path) for c in smalls):
                return None
            out.fallback[q.path] = (q, [x.path for x in subs if isinstance(x, CommittedPart)]
                                    + [c.path for c in smalls])
            return subs + smalls

        listed: list[Macro] = []
        covered: set[int] = set()
        for q in sorted(walk.live.get(seg, []), key=lambda q: q.first):
            if not held(q.first, q.end):
                continue  # every record it holds is truncated
            for x in pieces(q) or [q]:  # None: records lost (fsck reports the file)
                if isinstance(x, CommittedPart):
                    h = held(x.first, x.end)
                    listed.append(Macro(x.first, x.end - x.first, x.path, x.bytes, min(c.lo for c in h),
                                        max(c.hi for c in h), False, x.level))
                    covered.update(c.seq for c in h)
        unlisted = [c for c in live if c.seq not in covered]
        listed += [Macro(c.seq, c.rows, c.path, c.bytes, c.lo, c.hi, c.sorted, 0, c.floor)
                   for c in unlisted if listable(c)]
        out.partial.update((seg, bucket_of(c.seq)) for c in unlisted if not listable(c))
        for m in listed:
            out.entries.setdefault((seg, bucket_of(m.first)), []).append(m)
    for ms in out.entries.values():
        ms.sort(key=lambda m: m.first)
    return out


def bucket_of_error(e: CorruptMetadataError, segs: Sequence[int]) -> tuple[int, int] | None:
    """The ``(segment, bucket)`` of an unreadable map version named in ``e``, if it is one."""
    path = str(getattr(e, "path", ""))
    where = layout.macro_bucket_of(path)
    if where is None:
        return None
    number, bucket = where
    seg = next((s for s in segs if segment_number(s) == number), None)
    return None if seg is None else (seg, bucket)


def rewrite(store: Store, state: StreamState, seg: int, bucket: int, want: Expected) -> list[str]:
    """Make the bucket's newest version, and the version the state names, hold ``want``'s
    entries; returns what was written, for the repair report.

    Costs a listing of the bucket, a read of those two versions and of the newest, plus the raw
    timestamp column of each macro-chunk listed (ranged reads). First the small chunks listed in place of a
    lost macro-chunk are taken out of its compaction's manifest (afterwards nothing would tell a
    later run that vacuum may still delete them). An unreadable version is overwritten in place
    (nothing can read it), and so is the version the state names when it lacks an entry (plans
    read that version directly: one naming a lost file fails them); a missing one the state
    names is written, and version 0 with it, so a search for the newest that starts without the
    head hint finds the chain; a readable newest version that lacks an entry is followed by a
    new one (:meth:`MacroMap.update`, as compactors publish, so a compactor's version published
    meanwhile is never overwritten). Run it while no compaction runs: a compactor that read the
    bucket before the repair may publish a version built on the damaged one (fsck sees it).
    """
    mm = MacroMap(store, sealed=checksummed(state.features))
    macros = want.complete(store, seg, bucket)
    listed = {m.path for m in macros}
    # first: once a version lists the small chunks, nothing tells a later run that the
    # manifest of the lost macro-chunk still names them for deletion
    done = _release(store, [(part, files) for part, files in want.fallback.values() if set(files) & listed],
                    mm.sealed)
    present = sorted(v for n in store.list(layout.macro_bucket_folder(segment_number(seg), bucket))
                     if (v := layout.numbered_name(n)) is not None)

    def content(v: int) -> bytes:
        return Bucket(seg, bucket, v, macros, (seg, bucket) in want.partial).to_bytes(mm.sealed)

    def read(v: int) -> Bucket | None:
        rel = layout.macro_version(segment_number(seg), bucket, v)
        try:
            return mm.decode(store.read(rel), rel)
        except UnsupportedFormatError:
            raise  # a newer tstream's version: never overwritten as unreadable
        except (CorruptMetadataError, FileNotFoundError):
            return None

    e = segment_summaries(state).get(seg)
    named_version = e.map_version if e is not None else None
    named = named_version[1] if named_version is not None and named_version[0] == bucket else -1
    for v in sorted({v for v in (named, present[-1] if present else -1) if v >= 0}):
        have = read(v)
        if have is None or (v == named and want.differs(seg, bucket, have)):
            what = "missing" if v not in present else "unreadable" if have is None else "stale"
            written = sorted({0, v} - set(present)) if what == "missing" else [v]
            for w in written:
                store.write(layout.macro_version(segment_number(seg), bucket, w), content(w))
                done.append(f"macro map of segment {seg} bucket {bucket}: {what} version {w} rebuilt from the journal")
            present = sorted(set(present) | set(written))
    newest = read(present[-1]) if present else None
    if newest is not None:  # the search for the newest starts here, past any damaged older one
        store.write(layout.macro_head(segment_number(seg), bucket), newest.to_bytes(mm.sealed))
    # a newest version that still lacks an entry gets a successor, published as compactors
    # publish theirs (create-if-absent, re-checked on a rival's version after a lost race)
    won = mm.update(seg, bucket, lambda cur: macros if want.differs(seg, bucket, cur) else None,
                    partial=(seg, bucket) in want.partial)
    if won is not None:
        done.append(f"macro map of segment {seg} bucket {bucket}: version {won.v} rebuilt from the journal")
    return done


def _release(store: Store, fallback: list[tuple[CommittedPart, list[str]]], sealed: bool) -> list[str]:
    """Take the files listed in place of a lost or unreadable macro-chunk out of its compaction's
    manifest, so that garbage collection never deletes the only copy of their records (an
    unreadable manifest is written naming nothing)."""
    done = []
    for part, files in sorted(fallback, key=lambda pf: pf[0].path):
        rel = layout.manifest(part.path)
        try:
            raw = store.read(rel)
        except FileNotFoundError:
            continue  # collected already, or lost: nothing will delete the files
        found = Manifest.read(raw, part.path)
        named = None if found is None else list(found.replaced)
        keep = [p for p in named or [] if p not in set(files)]
        if keep != named:
            store.write(rel, Manifest(part.seg, part.path, part.first, part.end, tuple(keep)).encode(sealed))
            done.append(f"compaction manifest {rel}: {len(files)} file(s) listed in place of the lost or "
                        f"unreadable macro-chunk {part.path} kept from garbage collection")
    return done


def _tso_facts(store: Store, rel: str) -> tuple[int, int, bool]:
    """``(min, max, strictly increasing)`` of a macro-chunk's raw timestamp column."""
    size = store.size(rel)
    column = pq.ParquetFile(RangedFile(size, lambda a, b: store.read_range(rel, a, b)), **VERIFY_CHECKSUMS).read(
        columns=[RAW_TSO])[RAW_TSO]
    tso = column.to_numpy()
    if not len(tso):
        return 0, 0, True
    return int(tso.min()), int(tso.max()), bool(np.all(np.diff(tso) > 0))


__all__ = ["Expected", "bucket_of_error", "expected", "rewrite"]
