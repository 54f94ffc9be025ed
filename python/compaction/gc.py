"""Deleting what compactions made obsolete: replaced files, truncated macro-chunks, orphan manifests.

Every compaction writes, next to its macro-chunk, a manifest naming the files it replaces
(``_tstream/compact/<id>.json``). Replaced files are deleted only from manifests of compactions
committed longer ago than the grace period (:func:`collect_replaced`), so readers that planned
before keep reading them; deleting twice is harmless, so a crash only repeats work. Manifests
that no committed or adopted compaction names (a compactor killed before publishing) are
removed by orphan cleanup (:func:`orphan_manifests`) once older than the grace.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..journal.compaction_state import CompactPart, compact_parts, replaced_gc_start, segment_summaries
from ..journal.journal import Journal
from ..journal.state import StreamState, segment_number
from ..journal.timeindex import COL_WALL
from ..maps.macromap import MacroMap
from ..store import layout
from ..store.storage import Store
from .manifest import Manifest
from .shared_gc import dead_shared, readable

log = logging.getLogger("pyspark_tstream")


def holds_its_records(store: Store, part: CompactPart) -> bool:
    """Whether a committed part's macro-chunk is there and readable with the rows its compaction
    recorded (:func:`~.shared_gc.readable`)."""
    return readable(store, part.macro, part.rows)


@dataclass(frozen=True)
class CommittedPart:
    """A macro-chunk a compaction committed: segment, ``_seq`` range, file, size, merge level."""

    seg: int
    first: int
    end: int
    path: str
    bytes: int
    level: int


@dataclass
class CompactionParts:
    """The macro-chunks the journal's compactions committed, walked in commit order."""

    #: per segment, the parts still in use (none of them replaced by a later one)
    live: dict[int, list[CommittedPart]]
    #: macro-chunk -> its part, and the earlier parts it replaced (merged macro-chunks)
    parts: dict[str, CommittedPart]
    merged: dict[str, list[CommittedPart]]


def committed_parts(deltas: Sequence[Any]) -> CompactionParts:
    """The compaction parts of the journal ``deltas`` (commit order).

    Each committed part replaces the earlier parts its ``_seq`` range overlaps (a merge of
    macro-chunks) and is a level above them. A part committed twice (adopted) keeps its level.
    """
    out = CompactionParts({}, {}, {})
    for d in deltas:
        if d.op != "compact":
            continue
        for p in compact_parts(d.info):
            have = out.live.setdefault(p.seg, [])
            inside = [q for q in have if q.first < p.end and p.first < q.end]
            same = next((q for q in inside if q.path == p.macro), None)
            level = same.level if same else max((q.level for q in inside), default=0) + 1
            part = CommittedPart(p.seg, p.first, p.end, p.macro, p.bytes, level)
            out.parts[part.path] = part
            out.merged[part.path] = [q for q in inside if q.path != part.path]
            out.live[p.seg] = [q for q in have if q not in inside] + [part]
    return out


def replaced_by(deltas: Sequence[Any], macros: set[str]) -> dict[str, list[str]]:
    """What the manifest of each macro-chunk in ``macros`` named, from the journal ``deltas``
    (commit order, from the head on): the earlier macro-chunks its compaction merged, and the
    data chunks of its ``_seq`` range none of those holds, by ``_seq``. For a manifest that is lost."""
    chunks: dict[int, list[tuple[int, str]]] = {}
    for d in deltas:
        for c in d.chunks:  # a compaction commits no data chunk
            if not c.shared:  # a shared file goes with its last live slice (shared_gc.dead_shared)
                chunks.setdefault(c.seg, []).append((c.seq, c.path))
    for cs in chunks.values():
        cs.sort()
    walk = committed_parts(deltas)
    out: dict[str, list[str]] = {}
    for path in macros & set(walk.parts):
        part, merged = walk.parts[path], walk.merged[path]
        cs = chunks.get(part.seg, [])
        held = cs[bisect.bisect_left(cs, (part.first, "")):bisect.bisect_left(cs, (part.end, ""))]
        smalls = [(seq, rel) for seq, rel in held if not any(q.first <= seq < q.end for q in merged)]
        out[path] = [rel for _, rel in sorted(smalls + [(q.first, q.path) for q in merged])]
    return out


def discard_unpublished(store: Store, paths: Sequence[str]) -> None:
    """Delete files this compaction wrote and never published (best effort)."""
    try:
        store.delete(list(paths) + [layout.manifest(p) for p in paths])
    except OSError as e:
        log.warning("tstream: could not delete unpublished macro-chunks %s (%s); orphan cleanup "
                    "(`tstream vacuum --orphans`) removes them", list(paths), e)




def gc_position(journal: Journal, state: StreamState, now: int, grace_ms: int) -> int:
    """First journal position newer than ``grace_ms``: compactions below it are old enough."""
    probe = StreamState.from_json({**state.to_json(), "head_pos": state.gc_pos})
    try:
        return journal.search(probe, COL_WALL, now - grace_ms)
    except Exception:  # noqa: BLE001 - index nodes below the head already collected: nothing older is known
        return state.gc_pos


def collect_replaced(store: Store, journal: Journal, state: StreamState, upto: int) -> tuple[int, int]:
    """Delete files replaced by compactions at positions below ``upto``: ``(files, new gc pos)``.

    Reads the deltas from the last run (one batched read per ``FANOUT`` positions) and one
    manifest per compaction part; deleting twice is harmless, so a crash only repeats work.
    The caller commits the returned position (``state.compaction.gc``).
    """
    first = replaced_gc_start(state)
    upto = min(upto, state.pos + 1)
    if upto <= first:
        return 0, first
    parts = [(d.pos, p) for d in journal.deltas(state, first, upto - 1, truncated=True)
             if d.op == "compact" for p in compact_parts(d.info) if p.manifest]
    lists: dict[str, list[str] | None] = {}
    candidates: dict[str, int] = {}  # shared files of merged slices -> the position that committed them
    for _, p in parts:
        try:
            raw: bytes | None = store.read(p.manifest)
        except FileNotFoundError:
            raw = None
        found = Manifest.read(raw, p.macro)  # None: missing or unreadable
        lists[p.macro] = None if found is None else list(found.replaced)
        if found is not None:
            candidates.update(found.shared)
    missing = [p for pos, p in parts if lists[p.macro] is None and pos >= state.head_pos]
    lists.update(_unlisted(store, journal, state, missing))  # before any deletes: it checks files
    # before the manifests go: a crash after them would forget the candidates (deleting twice is harmless)
    dead = dead_shared(store, journal, state, upto, candidates)
    files = 0
    for _, p in parts:
        replaced = lists[p.macro] or []
        store.delete(replaced)
        files += len(replaced)
    store.delete(dead)
    files += len(dead)
    store.delete([p.manifest for _, p in parts])
    return files, upto


def _unlisted(store: Store, journal: Journal, state: StreamState, parts: list[CompactPart]) -> dict[str, list[str]]:
    """What each compaction in ``parts``, whose manifest is missing or unreadable, replaced, as
    the journal tells it (:func:`replaced_by`; reads the deltas from the head on, so only then).

    A manifest is missing when an earlier run deleted it and crashed before committing its
    position (the files are gone: deleting again is harmless) or when it was lost. Nothing is
    named for a macro-chunk that is gone or unreadable itself (:func:`holds_its_records`): what
    it replaced may be all that holds its records (``tstream fsck`` reports it). Compactions
    below the head merged only truncated
    records, whose files truncation's garbage collection deletes.
    """
    if not parts:
        return {}
    named = replaced_by(journal.deltas(state, state.head_pos, state.pos), {p.macro for p in parts})
    out = {}
    for p in parts:
        # never the part's own file: a part naming a chunk listed as it is (which older versions'
        # compactions committed when they adopted one) "replaced" exactly that chunk
        replaced = [r for r in named.get(p.macro, []) if r != p.macro]
        if replaced and holds_its_records(store, p):
            log.warning("tstream: compaction manifest %s is missing or unreadable (lost, or deleted by a vacuum "
                        "that stopped before recording its progress); deleting the %d file(s) the journal says its "
                        "compaction replaced", store.uri(p.manifest), len(replaced))
            out[p.macro] = replaced
    return out


def macros_created(deltas: Sequence[Any]) -> list[str]:
    """Macro-chunks (and their manifests) made by the compactions among ``deltas``."""
    return [x for d in deltas if d.op == "compact" for p in compact_parts(d.info) if p.macro
            for x in (p.macro, p.manifest)]


def aged(store: Store, rel: str, now: int, grace_ms: int) -> bool:
    """Whether ``rel`` was last modified at least ``grace_ms`` before ``now``; False if it is
    gone. Orphan cleanup lists, then asks each file's age: a concurrent vacuum may delete one
    in between, and a file already gone needs no deleting (it must not fail this vacuum)."""
    try:
        return now - store.modified_ms(rel) >= grace_ms
    except FileNotFoundError:
        return False


def live_macros(store: Store, seg_number: int, named: tuple[int, int] | None, now: int, grace_ms: int) -> set[str]:
    """Every macro-chunk that a map version of segment ``seg_number`` a compaction may still
    commit lists (orphan cleanup only: lists the segment's buckets). ``named`` is the (bucket,
    version) the state names for the segment, None if none.

    Those are each bucket's newest version (the next compaction adopts it) and the versions
    between the named one and the newest published less than ``grace_ms`` before ``now`` (the
    orphan grace: a compaction commits within it, as a writer does its files): a compaction
    commits the version it published even when a rival published a newer one since. When that
    rival merged the macro-chunks into one and died before its commit, the newest version no
    longer lists them, yet the first compaction's commit, landing before or after this cleanup,
    names them as its parts. (Versions up to the named one need nothing: a compaction whose
    commit lands after the named version's settles none of the ``_seq`` that commit settled,
    and what that commit's compaction replaced waits for its collection.) Beside the newest: no
    call while the state names the newest version, else one age probe per version walked back
    (newest first, versions being numbered in publication order) and one batched read.
    """
    mm = MacroMap(store)
    out: set[str] = set()
    for name in store.list(layout.macro_segment_folder(seg_number)):
        if not name.isdigit():
            continue
        bucket = int(name)
        newest = mm.latest(seg_number, bucket)
        out.update(m.path for m in newest.macros)
        floor = named[1] if named is not None and bucket == named[0] else -1
        rels = []
        for v in range(newest.v - 1, floor, -1):
            rel = layout.macro_version(seg_number, bucket, v)
            if aged(store, rel, now, grace_ms):
                break
            rels.append(rel)
        for rel, data in zip(rels, store.read_present(rels)):
            if data is not None:
                out.update(m.path for m in mm.decode(data, rel).macros)
    return out


def awaiting_collection(store: Store, uncollected: Sequence[Any]) -> set[str]:
    """The files that compactions not yet collected replaced (their manifests' lists):
    plans made before those compactions may still read them until vacuum collects them after
    its grace, so orphan cleanup keeps them, whatever their age. One batched read of the
    manifests of ``uncollected`` (the deltas from the replaced-files GC position on).

    Small chunks are named by their entries anyway; this is what keeps the macro-chunks a later
    compaction repacked, which no entry names once the map has dropped them.
    """
    parts = [p for d in uncollected if d.op == "compact" for p in compact_parts(d.info) if p.manifest]
    out: set[str] = set()
    for p, raw in zip(parts, store.read_present([p.manifest for p in parts])):
        found = Manifest.read(raw, p.macro)
        out.update(found.replaced if found is not None else ())
    return out


def committed_macros(store: Store, state: StreamState) -> set[str]:
    """Every macro-chunk of the map versions ``state`` names (orphan cleanup only): plans read
    those versions exactly, and a compaction that died between publishing a newer version and
    its journal commit may have re-merged their macro-chunks, so the newest version alone does
    not name them. One batched read."""
    rels = [layout.macro_version(segment_number(seg), s.bucket, s.version)
            for seg, s in segment_summaries(state).items() if s.bucket is not None and s.version is not None]
    mm = MacroMap(store)
    out: set[str] = set()
    for rel, data in zip(rels, store.read_many(rels)):
        out.update(m.path for m in mm.decode(data, rel).macros)
    return out


def orphan_manifests(store: Store, uncollected: Sequence[Any], live: set[str], now: int, grace_ms: int) -> list[str]:
    """Manifests no compaction still needs, older than ``grace_ms`` (orphan cleanup lists them).

    A manifest is needed while its compaction's commit is not yet collected (``uncollected``:
    the journal deltas from the replaced-files GC position on; the manifest names the files to
    delete) or while its macro-chunk is in the map (``live``: a published, uncommitted
    compaction is adopted with its manifest). What is left was written by a compactor that died
    before publishing: its macro-chunk is an orphan data file, and this its orphan manifest.
    """
    named = {p.manifest for d in uncollected if d.op == "compact" for p in compact_parts(d.info) if p.manifest}
    named |= {layout.manifest(m) for m in live}
    out = []
    for name in store.list(layout.MANIFESTS):
        rel = layout.manifest_file(name)
        if name.endswith(".json") and rel not in named and aged(store, rel, now, grace_ms):
            out.append(rel)
    return out
