"""Compaction: a segment's runs of small chunks become macro-chunks; reads find them by ``_seq``.

What it does. A segment is a sequence of records numbered by ``_seq``; chunks are a storage
detail. A compaction rewrites a run of a segment's pieces (small chunks, or macro-chunks of an
earlier compaction), contiguous in ``_seq``, as one **macro-chunk**: the rows in ``_seq`` order,
the user columns as they read (conformed to the stream schema) and the raw timestamp column
holding each record's FINAL ``_tso`` (floor 0), so every record keeps its user columns,
``_tso``, ``_timestamp``, ``_segment`` and ``_seq`` bit for bit. Rows of a macro-chunk are not
sorted by ``_tso`` in general (writer lanes overlap in time): ``sorted`` says whether they are.

Where macro-chunks are found. Journal entries keep naming the small chunks; plans replace
them by views of macro-chunks (python/read/compacted.py), found in the macro map
(python/maps/macromap.py: per segment and ``_seq`` bucket, CAS-versioned shards) and summarized
per segment in the state (:class:`~pyspark_tstream.journal.compaction_state.SegmentSummary`).

Chunks a compaction passes over (too big to merge, or a few small ones at a bucket boundary)
are listed in the map as they are (with their floor; a map entry names a whole file, so a slice
of a shared file is rewritten as a macro-chunk of its own instead), so the map covers every compacted
``_seq``: every chunk committed below the compaction's scan position
(``state.compaction.pos``) is in the map version the state names for its segment. A plan
whose range starts below it reads those versions
(:func:`~pyspark_tstream.read.compacted.plan_from_map`, one batched read)
instead of the journal deltas of the compacted commits, and the journal only after.

One compaction, in store calls (O(chunks merged), never a listing), one function per step:

1. :func:`pending`: read the state, and the journal deltas since the last compaction's scan
   position (one batched read per ``FANOUT`` positions) to find each segment's small chunks
   after its compacted-up-to ``_seq``;
2. :func:`compact_segment`, bucket by bucket (:func:`compact_bucket`): read the macro map bucket
   (2 reads); :func:`adopt` what it holds beyond the compacted ``_seq``; :func:`choose` runs to
   merge (pure, :func:`~pyspark_tstream.compaction.policy.plan_groups`);
   :func:`merge_and_publish`: write each macro-chunk (data file) and a manifest naming the files
   it replaces (``_tstream/compact/<id>.json``), then publish the bucket's next version
   (create-if-absent; a loser re-reads, re-checks and gives up that bucket, deleting only its
   own unpublished files);
3. ONE journal commit (:class:`CompactRequest`), op ``compact``: the parts won (segment,
   ``_seq`` range, macro-chunk, manifest) and the new per-segment summaries. It adds no data
   chunk and changes no record.

A run that took longer than the orphan fence's margin since its first macro-chunk write checks
its macro-chunks exist before each map version it publishes and before its journal commit (one
batched existence call each; none otherwise), :mod:`~pyspark_tstream.store.fence`.

Safety. The map is published before the journal: a crash in between leaves a macro-chunk that
holds exactly the records of still-present small chunks (nothing is deleted without a journal
commit); the next compaction *adopts* it (commits it) when it ends after the segment's
compacted-up-to ``_seq``. Replaced files are deleted only by garbage collection
(:func:`~pyspark_tstream.compaction.gc.collect_replaced`, run by ``vacuum``/retention) from
manifests of compactions committed
longer ago than the grace period (python/compaction/gc.py), so readers that planned before
keep reading the old files.
Truncation's garbage collection also deletes the macro-chunks made by compactions below the
head (their records are all truncated). Two compactors: the bucket CAS lets one win each run;
the journal build drops an adopted part someone else already committed.

When. ``Stream.compact()`` / ``tstream compact`` on demand (``full``: pack every run below the
target), and automatically after data commits (every
:data:`~pyspark_tstream.compaction.policy.COMPACT_EVERY` positions, when the state says some
active segment has ``min`` small chunks pending — zero reads to decide), best-effort: a failure
is logged and retried later, never raised into the data commit. What to merge is the policy's
(python/compaction/policy.py: size-tiered, so each record is rewritten about
``log_min(target / chunk size)`` times).

Config (``compaction``, fixed at creation): ``target=128MB,min=16`` (the default, on) or
``off``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..chunkfile.checksums import WRITE_CHECKSUMS
from ..chunkfile.encoding import chunk_encodings
from ..errors import CorruptChunkError
from ..journal.compaction_state import (
    CompactInfo,
    CompactPart,
    SegmentSummary,
    compacted_upto,
    compaction_pos,
    segment_summaries,
)
from ..journal.entries import Entry
from ..journal.features import checksummed
from ..journal.journal import Journal
from ..journal.operations import Operation
from ..journal.state import StreamState, segment_number
from ..maps.macromap import Bucket, Macro, MacroMap, bucket_of, listable
from ..read.reading import check_times, decode_file, fetch_files, view_tsos
from ..schema import RAW_TSO, conform
from ..store import layout
from ..store.fence import Fence
from ..store.storage import Store
from .gc import discard_unpublished
from .manifest import Manifest
from .policy import NEVER_MERGED, CompactionPolicy, Piece, level_of, plan_groups

log = logging.getLogger("pyspark_tstream")

#: Rows per row group of a macro-chunk: the granularity of reading a view's rows only.
MACRO_ROW_GROUP = 65_536


# -- writing a macro-chunk -----------------------------------------------------------------------
def _write_macro(store: Store, schema: pa.Schema, seg: int, members: Sequence[Piece], compression: str,
                 progress: Callable[[int, int], None] | None) -> tuple[Macro, list[str]]:
    """Merge ``members`` (consecutive in ``_seq``) into one new file; returns it and what it replaces."""
    rel = layout.macro_chunk(segment_number(seg), uuid.uuid4().hex)
    out_schema = pa.schema(list(schema) + [pa.field(RAW_TSO, pa.int64(), nullable=False)])
    writer = None
    f: Any = None  # opened at the first row group: a failed read leaves no partial file
    lo, hi, last, ordered, rows = None, None, None, True, 0
    pending: list[pa.Table] = []
    buffered = 0

    def drain(final: bool) -> None:
        nonlocal writer, pending, buffered, f
        if not pending:
            return
        table = pa.concat_tables(pending)
        whole = table.num_rows if final else table.num_rows - table.num_rows % MACRO_ROW_GROUP
        if writer is None:
            f = store.open_output(rel)
            writer = pq.ParquetWriter(f, out_schema, write_statistics=[RAW_TSO],
                                      **chunk_encodings(table, compression), **WRITE_CHECKSUMS)
        if whole:
            writer.write_table(table.slice(0, whole), row_group_size=MACRO_ROW_GROUP)
        pending = [table.slice(whole)] if whole < table.num_rows else []
        buffered = table.num_rows - whole

    next_seq = members[0].chunk.seq
    try:
        for views, data in fetch_files(store, [p.chunk for p in members]):
            table, base = decode_file(store, views[0], data, views)
            for c in views:
                if c.seq != next_seq:  # a view's row in the macro-chunk is its _seq - first
                    raise RuntimeError(f"compaction of segment {seg}: pieces came out of _seq order "
                                       f"({c.seq}, expected {next_seq}); nothing was published")
                next_seq += c.rows
                tso = view_tsos(table, c, base)
                check_times(store, c, tso)
                body = conform(table.drop_columns([RAW_TSO]).slice(c.offset - base, c.rows), schema)
                if len(tso):
                    ordered = ordered and (c.sorted or bool(np.all(np.diff(tso) > 0))) \
                        and (last is None or last < int(tso[0]))
                    last = int(tso[-1])
                    lo = int(tso.min()) if lo is None else min(lo, int(tso.min()))
                    hi = int(tso.max()) if hi is None else max(hi, int(tso.max()))
                pending.append(body.append_column(out_schema.field(RAW_TSO), pa.array(tso, pa.int64())))
                buffered += c.rows
                rows += c.rows
                if buffered >= MACRO_ROW_GROUP:
                    drain(False)
                if progress is not None:
                    progress(c.rows, c.bytes)
        drain(True)
        if writer is not None:
            writer.close()
        size = f.tell() if f is not None else 0
        if f is not None:
            f.close()
            f = None
    except BaseException:
        if f is not None:
            try:
                f.close()
            finally:
                discard_unpublished(store, [rel])
        raise
    assert rows == sum(p.chunk.rows for p in members)
    level = max((p.level for p in members if p.level != NEVER_MERGED), default=0) + 1
    macro = Macro(first=members[0].first, rows=rows, path=rel, bytes=size, lo=lo or 0, hi=hi or 0,
                  sorted=ordered, level=level)
    # a shared file's slices are not its whole: other segments' slices may still be live in it
    # (python/write/shared.py), so it is not "replaced"; the manifest names it as a candidate
    # that vacuum deletes once no live slice names it (gc.dead_shared)
    return macro, [p.chunk.path for p in members if not getattr(p.chunk, "file_bytes", 0)]


@dataclass(frozen=True)
class Merged:
    """A macro-chunk written (not yet published): the pieces it merged and the files it replaces."""

    members: list[Piece]
    macro: Macro
    replaced: list[str]


def _merge_around(store: Store, schema: pa.Schema, seg: int, group: list[Piece], compression: str,
                  progress: Callable[[int, int], None] | None, new: list[Merged],
                  left: list[Piece], unreadable: list[Piece], sealed: bool) -> None:
    """Merge ``group`` into one macro-chunk (and its manifest, ``sealed`` when the stream
    declares checksums) appended to ``new``.

    A member that cannot be read (missing, corrupt, overwritten) is left as it is, in
    ``unreadable``, and the runs either side of it are merged instead (a run of one piece goes
    to ``left``). Readers then meet that chunk's error exactly as before, and ``tstream fsck``
    names the same remedy; one damaged chunk does not stop its segment's compaction for good.
    """
    try:
        macro, replaced = _write_macro(store, schema, seg, group, compression, progress)
    except CorruptChunkError as e:
        bad = next((i for i, x in enumerate(group) if store.uri(x.chunk.path) == e.path), None)
        if bad is None:
            raise
        log.warning("compaction: left %s as it is, it cannot be read (%s); see `tstream fsck`",
                    e.path, e)
        unreadable.append(group[bad])
        for run in (group[:bad], group[bad + 1:]):
            if len(run) > 1 or (run and not listable(run[0].chunk)):  # a lone slice too: see choose()
                _merge_around(store, schema, seg, run, compression, progress, new, left, unreadable, sealed)
            else:
                left.extend(run)
        return
    # shared files of slices merged here: vacuum deletes each once no live slice names it (gc.dead_shared)
    shared = {x.chunk.path: x.pos for x in group if x.chunk.shared and x.pos >= 0}
    store.write(layout.manifest(macro.path), Manifest(seg, macro.path, macro.first, macro.end, tuple(replaced),
                                                      shared).encode(sealed))
    new.append(Merged(group, macro, replaced))


def _listed(x: Piece) -> Macro:
    """A small chunk listed in the map as it is (merged into nothing), floor and all."""
    return Macro(x.first, x.chunk.rows, x.chunk.path, x.chunk.bytes, x.chunk.lo, x.chunk.hi, x.chunk.sorted, 0,
                 x.chunk.floor)


# -- the journal commit -------------------------------------------------------------------------
@dataclass
class CompactRequest:
    """The journal commit of a compaction: parts won, per-segment summaries, scan position."""

    parts: list[CompactPart]
    segs: dict[int, SegmentSummary]  # what this run settled, per segment
    scan_pos: int
    now: int = 0
    #: each segment's compacted-up-to ``_seq`` when this run planned: a part it merged wholly
    #: below it repacked macro-chunks (no other compactor adopts those, see below)
    planned_upto: dict[int, int] = field(default_factory=dict)
    #: since this run's first macro-chunk write or adoption (None: a commit of none)
    fence: Fence | None = None

    def __call__(self, state: StreamState, pos: int) -> Entry | None:
        comp = state.compaction
        had = comp.summaries
        # A part whose records the state already counts as compacted was committed by another
        # compactor: one that adopted this run's published macro-chunk (its commit landed first),
        # or the publisher of one this run adopted. Only a compactor that saw the macro-chunk in
        # the map can settle its range (a map update that overlaps it is declined), so naming it
        # again only repeats that entry, and a vacuum that collected the first naming has deleted
        # the manifest the second would name (fsck: "manifest missing").
        # A repack (macro-chunks merged into bigger ones, all below what was settled when this
        # run planned) is the exception: only this run wrote it (adoption takes macro-chunks
        # beyond the compacted _seq only, and a stale adopter's commit drops it by the test
        # above), and it must be named, or no vacuum ever collects the macro-chunks it replaced
        # and orphan cleanup takes them by age alone, inside the grace of readers that planned
        # on them.
        kept = [p for p in self.parts
                if p.end > (had[p.seg].settled_to if p.seg in had else 0)
                or (not p.adopted and p.end <= self.planned_upto.get(p.seg, 0))]
        segs = dict(had)
        changed = False
        for seg, new in self.segs.items():
            cur = had.get(seg)
            nxt = (cur or SegmentSummary(0)).merged(new)
            if cur is None or nxt.encode() != cur.encode():
                segs[seg] = nxt
                changed = True
        moved = self.scan_pos > comp.scan_pos
        if not kept and not changed and not moved:
            return None
        if self.fence is not None:
            # right before the conditional create: a run stalled past the orphan fence proves
            # the macro-chunks it names are still there (a rival's newer map version may no
            # longer list them, and cleanup then takes them after its grace)
            self.fence.check(p.macro for p in kept)
        active = {g.id for g in state.segments}
        # a sealed segment truncated past is dropped: no plan reaches its chunks any more
        segs = {seg: e for seg, e in segs.items() if seg in active or e.last_pos >= state.head_pos}
        state.compaction = comp.advanced(segs, max(comp.scan_pos, self.scan_pos))
        state.wall = max(state.wall, self.now)
        return Entry(pos=pos, op=Operation.COMPACT, wall=self.now, state=state,
                     info=CompactInfo(parts=tuple(kept)).encode())


# -- one compaction ------------------------------------------------------------------------------
@dataclass
class _SegPlan:
    """What one segment has pending: its small chunks after its compacted-up-to ``_seq``."""

    seg: int
    upto: int  # compacted-up-to _seq the plan starts from
    smalls: list[Piece] = field(default_factory=list)


@dataclass
class _Job:
    """One compaction run: what every step reads, and what they gather for the journal commit."""

    store: Store
    schema: pa.Schema
    compression: str
    state: StreamState
    policy: CompactionPolicy
    full: bool
    progress: Callable[[int, int], None] | None
    mm: MacroMap
    counts: dict[str, int]
    parts: list[CompactPart] = field(default_factory=list)
    #: since the run's first macro-chunk write or adoption (store/fence.py)
    fence: Fence | None = None


@dataclass
class _SegRun:
    """One segment's progress through its buckets."""

    plan: _SegPlan
    final: bool  # sealed: it gets no more chunks
    settled_to: int  # every _seq below this is merged, adopted or left as it is
    seen: tuple[int, int] = (-1, -1)  # newest (bucket, version) of the map this run published or adopted
    macro_end: int = 0  # end of the last macro-chunk in the map: no chunk above it is in one


class _Codec(Protocol):
    """The part of a stream's config compaction reads."""

    @property
    def compression(self) -> str: ...


class Compactable(Protocol):
    """What :func:`compact` needs of a stream (the API's
    :class:`~pyspark_tstream.api.context.StreamContext` is one): its store and journal, its
    newest state, user schema and config, and a journal commit."""

    store: Store
    journal: Journal

    def refresh(self) -> StreamState: ...

    @property
    def schema(self) -> pa.Schema | None: ...

    @property
    def config(self) -> _Codec: ...

    def commit_op(self, build: Callable[[StreamState, int], Entry | None]) -> Entry | None: ...


def compact(stream: Compactable, *, full: bool = False, policy: CompactionPolicy | None = None,
            progress: Callable[[int, int], None] | None = None,
            total: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Compact the stream once (see the module docstring); returns counts.

    ``progress(rows, bytes)`` is called as pieces are merged; ``total(rows, bytes)`` once with
    what the run will merge.
    """
    from ..timestamps import now_ms

    state: StreamState = stream.refresh()
    counts = {"macros": 0, "chunks": 0, "rows": 0, "bytes": 0, "adopted": 0, "lost": 0, "unreadable": 0}
    if stream.schema is None:
        return counts
    policy = policy or CompactionPolicy.parse(state.config.compaction) or CompactionPolicy()
    job = _Job(stream.store, stream.schema, stream.config.compression, state, policy, full, progress,
               MacroMap(stream.store, sealed=checksummed(state.features)), counts,
               fence=Fence(stream.store, "compaction"))
    scan = max(compaction_pos(state), state.head_pos)
    plans = pending(stream.journal, state, scan, policy, full=full)
    if total is not None:
        total(sum(x.chunk.rows for p in plans.values() for x in p.smalls),
              sum(x.chunk.bytes for p in plans.values() for x in p.smalls))
    summaries: dict[int, SegmentSummary] = {}
    next_scan = state.pos + 1
    for plan in sorted(plans.values(), key=lambda p: p.seg):
        summary, rescan = compact_segment(job, plan)
        if summary is not None:
            summaries[plan.seg] = summary
        if rescan is not None:  # (a sealed segment's are left only when another compactor won its map)
            next_scan = min(next_scan, rescan)
    if not job.parts and not summaries and next_scan <= scan:
        return counts
    stream.commit_op(CompactRequest(job.parts, summaries, next_scan, now_ms(),
                                    planned_upto={seg: p.upto for seg, p in plans.items()}, fence=job.fence))
    return counts


def pending(journal: Journal, state: StreamState, scan: int, policy: CompactionPolicy, *,
            full: bool) -> dict[int, _SegPlan]:
    """Step 1: each segment's small chunks after its compacted-up-to ``_seq``, from the journal
    deltas since the scan position (one batched read per ``FANOUT`` positions); with ``full``,
    every compacted segment too (its macro-chunks may still pack tighter)."""
    plans: dict[int, _SegPlan] = {}
    for d in journal.deltas(state, scan, state.pos):
        for c in d.chunks:
            p = plans.get(c.seg)
            if p is None:
                p = plans[c.seg] = _SegPlan(c.seg, compacted_upto(state, c.seg))
            if c.seq >= p.upto:
                p.smalls.append(Piece(c, 0, d.pos))
    if full:
        for seg, e in segment_summaries(state).items():
            plans.setdefault(seg, _SegPlan(seg, e.settled_to))
    for p in plans.values():
        p.smalls = [replace(x, level=level_of(x, policy)) for x in p.smalls]
    return plans


def compact_segment(job: _Job, plan: _SegPlan) -> tuple[SegmentSummary | None, int | None]:
    """Step 2: compact one segment bucket by bucket; returns its new summary (None: nothing
    settled) and the first journal position of a chunk it left pending (None: none)."""
    active = {g.id: g for g in job.state.segments}
    run = _SegRun(plan, plan.seg not in active, plan.upto)
    buckets = sorted({bucket_of(x.first) for x in plan.smalls}
                     | ({bucket_of(plan.upto - 1)} if plan.upto > 0 else set()))
    for b in buckets:
        if not compact_bucket(job, run, b, last=b == buckets[-1]):
            break  # lost the map to another compactor: later buckets wait for the winner's commit
    done = [x for x in plan.smalls if x.end <= run.settled_to]
    left = [x for x in plan.smalls if x.end > run.settled_to]
    summary = None
    if run.settled_to > plan.upto or run.seen != (-1, -1):
        g = active.get(plan.seg)
        bucket, version = run.seen
        summary = SegmentSummary(run.settled_to, max((x.pos for x in done), default=-1),
                                 (g.chunks - len(left)) if g is not None else 0, bucket, version,
                                 min(run.macro_end, run.settled_to))
    return summary, min((x.pos for x in left), default=None)


def compact_bucket(job: _Job, run: _SegRun, b: int, *, last: bool) -> bool:
    """Steps 2a–2d for one bucket of a segment: adopt what the map holds beyond the compacted
    ``_seq``, choose the runs, write their macro-chunks, publish the bucket's next version.
    False when another compactor won the bucket (this run's files are deleted)."""
    seg, plan = run.plan.seg, run.plan
    cur = job.mm.latest(seg, b)
    version = cur.v
    run.macro_end = max([run.macro_end] + [m.end for m in cur.macros])
    live = [m for m in cur.macros if m.hi > job.state.head_tso]  # truncated ones are garbage
    before = len(job.parts)
    adopted = adopt(job, seg, live, plan.upto)
    covered = [(m.first, m.end) for m in adopted]
    smalls = [x for x in plan.smalls if bucket_of(x.first) == b and not any(a <= x.first < e for a, e in covered)]
    final = run.final and last  # a sealed segment gets no more chunks: settle them all
    merges, passed, end = choose(job.policy, seg, live, smalls, run.settled_to, full=job.full, final=final)
    if merges or passed:
        won = merge_and_publish(job, seg, b, cur, merges, passed)
        if won is None:
            # nothing settles here this run, so its commit records no summary for the segment:
            # a part adopted here would still have vacuum delete what it replaced while readers
            # read those chunks (the next compaction adopts them from the winner's map)
            job.counts["adopted"] -= len(job.parts) - before
            del job.parts[before:]
            return False
        version = won.v
        run.macro_end = max([run.macro_end] + [m.end for m in won.macros])
    if adopted:
        end = max(end, max(m.end for m in adopted))
    run.settled_to = max(run.settled_to, end)
    if version >= 0:
        run.seen = max(run.seen, (b, version))
    return True


def adopt(job: _Job, seg: int, live: Sequence[Macro], upto: int) -> list[Macro]:
    """Step 2a: macro-chunks of the map beyond the compacted ``_seq`` were published by a
    compaction that has not reached the journal (crashed, or still running): this run commits
    them, and their records are not merged twice."""
    adopted = [m for m in live if m.end > upto]
    if adopted and job.fence is not None:
        job.fence.start()  # from here on only this run's commit keeps them if a rival drops them
    for m in adopted:
        if m.level == 0:
            # a chunk that run listed as it is (:func:`_listed`), not a macro-chunk it made: no
            # compaction to commit. As a part it had a manifest that never existed, and vacuum
            # then deleted "what its compaction replaced": the chunk itself, the only copy
            continue
        job.parts.append(_part(seg, m, adopted=True))
        job.counts["adopted"] += 1
    return adopted


def choose(policy: CompactionPolicy, seg: int, live: Sequence[Macro], smalls: Sequence[Piece], settled_to: int,
           *, full: bool, final: bool) -> tuple[list[list[Piece]], list[Macro], int]:
    """Step 2b, pure: the merges (groups of 2+ pieces, or a lone slice), the chunks listed as they are, and the
    ``_seq`` up to which the bucket is settled (merged, a macro, too big to merge, or sealed)."""
    pieces = sorted([Piece.of_macro(seg, m, policy) for m in live] + list(smalls), key=lambda x: x.first)
    groups = plan_groups(pieces, policy, full=full, final=final)
    merges = [g for g in groups if len(g) > 1]
    settled = [g for g in groups if len(g) > 1 or any(x.level != 0 for x in g)]
    end = max([g[-1].end for g in settled] + [settled_to])
    if final:
        end = max([end] + [x.end for x in smalls])
    # chunks left as they are below the settled end are listed too: the map then covers every
    # compacted _seq, so a planner can read it instead of the journal
    lone = [g[0] for g in groups if len(g) == 1 and g[0].pos >= 0 and g[0].end <= end]
    # but a map entry names a whole file: a slice of a shared file listed there would read as
    # all of that file, so a lone slice is rewritten as a macro-chunk of its own instead
    merges += [[x] for x in lone if not listable(x.chunk)]
    passed = [_listed(x) for x in lone if listable(x.chunk)]
    return merges, passed, end


def merge_and_publish(job: _Job, seg: int, b: int, cur: Bucket, merges: Sequence[list[Piece]],
                      passed: list[Macro]) -> Bucket | None:
    """Steps 2c–2d: write each merge's macro-chunk and manifest, then publish the bucket's next
    version (create-if-absent); on a lost race delete this run's files and return None."""
    store = job.store
    new: list[Merged] = []
    left: list[Piece] = []  # members of a merge left as they are (beside a damaged one)
    unreadable: list[Piece] = []
    if merges and job.fence is not None:
        job.fence.start()  # before the run's first macro-chunk write
    try:
        for g in merges:
            _merge_around(store, job.schema, seg, g, job.compression, job.progress, new, left, unreadable,
                          job.mm.sealed)
    except BaseException:
        discard_unpublished(store, [x.macro.path for x in new])
        raise
    # settled like the merges they belonged to: the map must list them, or a plan reading it
    # for these _seq would miss their records
    passed = passed + [_listed(x) for x in left + unreadable if x.pos >= 0]
    job.counts["unreadable"] += len(unreadable)
    # map entries merged here (a small chunk has a journal position; a big slice merged alone
    # is one too, not a map entry)
    gone = {x.chunk.path for n in new for x in n.members if x.level != 0 and x.pos < 0}
    dead = {m.path for m in cur.macros if m.hi <= job.state.head_tso}
    made = [n.macro for n in new]
    ranges = [(m.first, m.end) for m in made + passed]

    def change(version: Bucket) -> tuple[Macro, ...] | None:
        if job.fence is not None:
            # before each create of the version: unnamed until it is published, the macro-chunks
            # are kept from orphan cleanup only by its grace (store/fence.py)
            job.fence.check(m.path for m in made)
        have = {m.path for m in version.macros}
        if not gone <= have:
            return None  # another compactor merged them first
        keep = [m for m in version.macros if m.path not in gone and m.path not in dead]
        if any(m.first < e and a < m.end for m in keep for a, e in ranges):
            return None  # another compactor covered these records first
        return tuple(keep) + tuple(made) + tuple(passed)

    # an error here leaves the files (the version may be published): the next compaction
    # adopts them, or orphan cleanup removes them
    won = job.mm.update(seg, b, change)
    if won is None:
        discard_unpublished(store, [m.path for m in made])
        job.counts["lost"] += len(new)
        return None
    for n in new:
        job.parts.append(_part(seg, n.macro, replaced=len(n.replaced)))
        job.counts["macros"] += 1
        job.counts["chunks"] += sum(1 for x in n.members if x.level == 0 or x.pos >= 0)
        job.counts["rows"] += n.macro.rows
        job.counts["bytes"] += n.macro.bytes
    return won


def _part(seg: int, m: Macro, *, replaced: int | None = None, adopted: bool = False) -> CompactPart:
    """A part of the ``compact`` journal entry: one macro-chunk committed (merged or adopted)."""
    return CompactPart(seg, m.first, m.end, m.path, layout.manifest(m.path), m.rows, m.bytes, replaced, adopted)
