"""Compaction: a segment's runs of small chunks become macro-chunks; reads find them by ``_seq``.

What it does. A segment is a sequence of records numbered by ``_seq``; chunks are a storage
detail. A compaction rewrites a run of a segment's pieces (small chunks, or macro-chunks of an
earlier compaction), contiguous in ``_seq``, as one **macro-chunk**: the rows in ``_seq`` order,
the user columns as they read (conformed to the stream schema) and the raw timestamp column
holding each record's FINAL ``_tso`` (floor 0), so every record keeps its user columns,
``_tso``, ``_timestamp``, ``_segment`` and ``_seq`` bit for bit. Rows of a macro-chunk are not
sorted by ``_tso`` in general (writer lanes overlap in time): ``sorted`` says whether they are.

Where macro-chunks are found. Journal entries keep naming the small chunks; plans replace
them by views of macro-chunks (python/compacted.py), found in the macro map (python/macromap.py:
per segment and ``_seq`` bucket, CAS-versioned shards) and summarized per segment in the state
(``state.compaction["segs"]``).

Chunks a compaction passes over (too big to merge, or a few small ones at a bucket boundary)
are listed in the map as they are (with their floor), so the map covers every compacted
``_seq``: every chunk committed below the compaction's scan position
(``state.compaction["pos"]``) is in the map version the state names for its segment. A plan
whose range starts below it reads those versions (:func:`~pyspark_tstream.read.compacted.plan_from_map`, one batched read)
instead of the journal deltas of the compacted commits, and the journal only after.

One compaction, in store calls (O(chunks merged), never a listing):

1. read the state, and the journal deltas since the last compaction's scan position (one
   batched read per ``FANOUT`` positions) to find each segment's small chunks after its
   compacted-up-to ``_seq``; read the macro map buckets involved (2 reads each);
2. per segment and bucket: choose runs to merge (:func:`plan_groups`), write each macro-chunk
   (data file) and a manifest naming the files it replaces (``_tstream/compact/<id>.json``),
   then publish the bucket's next version (create-if-absent; a loser re-reads, re-checks and
   gives up that bucket, deleting only its own unpublished files);
3. ONE journal commit, op ``compact``: the parts won (segment, ``_seq`` range, macro-chunk,
   manifest) and the new per-segment summary. It adds no data chunk and changes no record.

Safety. The map is published before the journal: a crash in between leaves a macro-chunk that
holds exactly the records of still-present small chunks (nothing is deleted without a journal
commit); the next compaction *adopts* it (commits it) when it ends after the segment's
compacted-up-to ``_seq``. Replaced files are deleted only by garbage collection
(:func:`~pyspark_tstream.compaction.gc.collect_replaced`, run by ``vacuum``/retention) from manifests of compactions committed
longer ago than the grace period (python/compaction_gc.py), so readers that planned before
keep reading the old files.
Truncation's garbage collection also deletes the macro-chunks made by compactions below the
head (their records are all truncated). Two compactors: the bucket CAS lets one win each run;
the journal build drops an adopted part someone else already committed.

When. ``Stream.compact()`` / ``tstream compact`` on demand (``full``: pack every run below the
target), and automatically after data commits (every :data:`COMPACT_EVERY` positions, when the
state says some active segment has ``min`` small chunks pending — zero reads to decide),
best-effort: a failure is logged and retried later, never raised into the data commit.
Automatic merges are size-tiered (a binary counter of base ``min``): ``min`` small chunks
make a level-1 macro-chunk, ``min`` level-``L`` ones a level-``L+1`` one, up to ``target``
bytes; so each record is rewritten about ``log_min(target / chunk size)`` times and a segment
holds at most about ``(min - 1)`` pieces per level plus the ones at ``target``.

Config (``compaction``, fixed at creation): ``target=128MB,min=16`` (the default, on) or
``off``.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..chunkfile.encoding import chunk_encodings
from ..errors import ConfigError, CorruptChunkError
from ..journal.entries import Chunk, Entry
from ..journal.journal import Journal
from ..journal.state import StreamState, segment_number
from ..keys import COMPACTION_DEFAULT
from ..maps.macromap import SPAN, Macro, MacroMap, bucket_of
from ..policytext import policy_parts
from ..read.compacted import compacted_upto, segment_summaries
from ..read.reading import check_times, decode_file, fetch_files, view_tsos
from ..schema import RAW_TSO, conform
from ..store.storage import Store
from ..units import size_bytes
from .gc import discard_unpublished, manifest_bytes, manifest_path

log = logging.getLogger("pyspark_tstream")

#: The policy of a stream whose config names none (streams created before compaction existed).
DEFAULT_POLICY = COMPACTION_DEFAULT
#: Automatic compaction is considered on every this-many-th journal position (amortized O(1)).
COMPACT_EVERY = 16
#: Rows per row group of a macro-chunk: the granularity of reading a view's rows only.
MACRO_ROW_GROUP = 65_536
_BIG = 1 << 30  # level of a piece that is never merged (already large)



@dataclass(frozen=True)
class CompactionPolicy:
    """Parsed ``compaction`` config: macro-chunk ``target`` bytes, ``min`` pieces per merge."""

    target: int = 128 << 20
    min: int = 16

    @classmethod
    @functools.lru_cache(maxsize=64)  # parsed on data commits; the text rarely changes
    def parse(cls, text: str | None) -> CompactionPolicy | None:
        """None when compaction is off; the default policy when ``text`` is None."""
        if text is None:
            text = DEFAULT_POLICY
        if text.strip().lower() in ("off", "false", "none", "no"):
            return None
        vals: dict[str, int] = {}
        for part in policy_parts(text):
            key, value = part.key, part.value
            if key == "target" and part.sep and (size := size_bytes(value)) is not None:
                vals["target"] = size
            elif key == "min" and part.sep and value.strip().isdigit() and int(value) >= 2:
                vals["min"] = int(value)
            elif key in ("on", "true", "yes") and not part.sep:
                continue
            else:
                raise ConfigError(
                    f"compaction={text!r}: bad part {part.text.strip()!r}; use target=<size like 128MB>,"
                    "min=<pieces per merge, 2 or more>, or off", option="compaction", value=text)
        if vals.get("target", 1) < 1 << 10:
            raise ConfigError(f"compaction={text!r}: target must be at least 1KB", option="compaction", value=text)
        return cls(**vals)


def due(state: StreamState, policy: CompactionPolicy) -> bool:
    """Whether some active segment has ``min`` small chunks pending: from the state, zero reads."""
    segs = segment_summaries(state)
    return any(g.chunks - (segs[str(g.id)][2] if str(g.id) in segs else 0) >= policy.min for g in state.segments)


# -- choosing what to merge ------------------------------------------------------------------------
@dataclass(frozen=True)
class Piece:
    """A run of a segment's records stored as one file: a small chunk or a macro-chunk."""

    chunk: Chunk  # the small chunk, or the whole macro-chunk as a view (floor 0)
    level: int  # 0: a small chunk; >= 1: a macro-chunk; _BIG: never merged
    pos: int = -1  # journal position of a small chunk

    @property
    def first(self) -> int:
        return self.chunk.seq

    @property
    def end(self) -> int:
        return self.chunk.seq + self.chunk.rows

    @classmethod
    def of_macro(cls, seg: int, m: Macro, policy: CompactionPolicy) -> Piece:
        c = Chunk(seg=seg, path=m.path, rows=m.rows, bytes=m.bytes, seq=m.first, floor=m.floor, lo=m.lo, hi=m.hi,
                  sorted=m.sorted)
        return cls(c, _BIG if m.floor or m.bytes >= policy.target // 2 else m.level)


def plan_groups(pieces: Sequence[Piece], policy: CompactionPolicy, *, full: bool, final: bool) -> list[list[Piece]]:
    """Split one bucket's pieces (in ``_seq`` order) into groups; a group of 2+ is one merge.

    ``full``: pack consecutive pieces below ``target / 2`` into as few groups of at most
    ``target`` bytes as fit. Otherwise size-tiered: ``min`` trailing groups of one level merge
    into one of the next level while they fit ``target``; ``final`` (a sealed segment, which
    gets no more chunks) also merges its trailing small chunks, however few.
    """
    def fits(ps: Sequence[Piece]) -> bool:
        return sum(p.chunk.bytes for p in ps) <= policy.target and sum(p.chunk.rows for p in ps) <= SPAN

    if full:
        out: list[list[Piece]] = []
        cur: list[Piece] = []
        for p in pieces:
            if p.level == _BIG or p.chunk.bytes >= policy.target // 2:
                out += [cur] if cur else []
                out.append([p])
                cur = []
                continue
            if cur and not fits(cur + [p]):
                out.append(cur)
                cur = []
            cur.append(p)
        return out + ([cur] if cur else [])
    stack: list[tuple[int, list[Piece]]] = []
    for p in pieces:
        stack.append((p.level, [p]))
        while len(stack) >= policy.min:
            tail = stack[-policy.min:]
            level = tail[-1][0]
            members = [m for _, ms in tail for m in ms]
            if level == _BIG or any(lv != level for lv, _ in tail) or not fits(members):
                break
            del stack[-policy.min:]
            stack.append((level + 1, members))
    if final:
        k = 0
        while k < len(stack) and stack[-1 - k][0] == 0:
            k += 1
        if k >= 2 and fits([m for _, ms in stack[-k:] for m in ms]):
            members = [m for _, ms in stack[-k:] for m in ms]
            del stack[-k:]
            stack.append((1, members))
    return [ms for _, ms in stack]


def _level(p: Piece, policy: CompactionPolicy) -> int:
    small = p.chunk.bytes < policy.target // policy.min and p.chunk.rows <= SPAN // policy.min
    return 0 if small else _BIG


# -- writing a macro-chunk -----------------------------------------------------------------------
def _write_macro(store: Store, schema: pa.Schema, seg: int, members: Sequence[Piece], compression: str,
                 progress: Callable[[int, int], None] | None) -> tuple[Macro, list[str]]:
    """Merge ``members`` (consecutive in ``_seq``) into one new file; returns it and what it replaces."""
    rel = f"data/{segment_number(seg)}/m-{uuid.uuid4().hex}.parquet"
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
                                      **chunk_encodings(table, compression))
        if whole:
            writer.write_table(table.slice(0, whole), row_group_size=MACRO_ROW_GROUP)
        pending = [table.slice(whole)] if whole < table.num_rows else []
        buffered = table.num_rows - whole

    try:
        for views, data in fetch_files(store, [p.chunk for p in members]):
            table, base = decode_file(store, views[0], data, views)
            for c in views:
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
    level = max((p.level for p in members if p.level != _BIG), default=0) + 1
    macro = Macro(first=members[0].first, rows=rows, path=rel, bytes=size, lo=lo or 0, hi=hi or 0,
                  sorted=ordered, level=level)
    return macro, [p.chunk.path for p in members]


def _merge_around(store: Store, schema: pa.Schema, seg: int, group: list[Piece], compression: str,
                  progress: Callable[[int, int], None] | None, new: list[tuple[list[Piece], Macro, list[str]]],
                  left: list[Piece], unreadable: list[Piece]) -> None:
    """Merge ``group`` into one macro-chunk (and its manifest) appended to ``new``.

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
            if len(run) > 1:
                _merge_around(store, schema, seg, run, compression, progress, new, left, unreadable)
            else:
                left.extend(run)
        return
    store.write(manifest_path(macro.path), manifest_bytes(seg, macro.path, macro.first, macro.end, replaced))
    new.append((group, macro, replaced))


def _listed(x: Piece) -> Macro:
    """A small chunk listed in the map as it is (merged into nothing), floor and all."""
    return Macro(x.first, x.chunk.rows, x.chunk.path, x.chunk.bytes, x.chunk.lo, x.chunk.hi, x.chunk.sorted, 0,
                 x.chunk.floor)


# -- the journal commit -------------------------------------------------------------------------
@dataclass
class CompactRequest:
    """The journal commit of a compaction: parts won, per-segment summaries, scan position."""

    parts: list[dict[str, Any]]
    # seg -> [compacted up to _seq, last position, chunks up to it, map bucket, its version,
    #         end of the last macro-chunk]
    segs: dict[int, list[int]]
    scan_pos: int
    now: int = 0

    def __call__(self, state: StreamState, pos: int) -> Entry | None:
        comp = json.loads(json.dumps(state.compaction)) if state.compaction else {}
        segs = comp.setdefault("segs", {})
        # A part whose records the state already counts as compacted was committed by another
        # compactor: one that adopted this run's published macro-chunk (its commit landed first),
        # or the publisher of one this run adopted. Only a compactor that saw the macro-chunk in
        # the map can settle its range (a map update that overlaps it is declined), so naming it
        # again only repeats that entry, and a vacuum that collected the first naming has deleted
        # the manifest the second would name (fsck: "manifest missing").
        kept = [p for p in self.parts if p["to"] > int(segs.get(str(p["seg"]), [0])[0])]
        changed = False
        for seg, (upto, last_pos, n, bucket, v, macro_end) in self.segs.items():
            cur = segs.get(str(seg), [0, -1, 0])
            known = tuple(cur[3:5]) if len(cur) >= 5 else (-1, -1)
            ends = cur[5] if len(cur) >= 6 else cur[0]
            nxt = [max(upto, cur[0]), max(last_pos, cur[1]), max(n, cur[2]), *max(known, (bucket, v)),
                   max(macro_end, ends)]
            if nxt != cur:
                segs[str(seg)] = nxt
                changed = True
        moved = self.scan_pos > comp.get("pos", 0)
        if not kept and not changed and not moved:
            return None
        comp["pos"] = max(comp.get("pos", 0), self.scan_pos)
        active = {g.id for g in state.segments}
        for seg in [s for s, e in segs.items() if int(s) not in active and e[1] < state.head_pos]:
            del segs[seg]  # sealed and truncated past: no plan reaches its chunks any more
        state.compaction = comp
        state.wall = max(state.wall, self.now)
        return Entry(pos=pos, op="compact", wall=self.now, state=state,
                     info={"rows": 0, "parts": kept})


# -- one compaction ------------------------------------------------------------------------------
@dataclass
class _SegPlan:
    seg: int
    upto: int  # compacted-up-to _seq the plan starts from
    smalls: list[Piece] = field(default_factory=list)


def compact(stream: Any, *, full: bool = False, policy: CompactionPolicy | None = None,
            progress: Callable[[int, int], None] | None = None,
            total: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Compact the stream once (see the module docstring); returns counts.

    ``progress(rows, bytes)`` is called as pieces are merged; ``total(rows, bytes)`` once with
    what the run will merge.
    """
    from ..timestamps import now_ms

    state: StreamState = stream.refresh()
    counts = {"macros": 0, "chunks": 0, "rows": 0, "bytes": 0, "adopted": 0, "lost": 0, "unreadable": 0}
    schema = stream.schema
    if schema is None:
        return counts
    policy = policy or CompactionPolicy.parse(state.config.get("compaction")) or CompactionPolicy()
    store: Store = stream.store
    journal: Journal = stream.journal
    mm = MacroMap(store)
    comp = state.compaction or {}
    scan = max(int(comp.get("pos", 0)), state.head_pos)
    plans: dict[int, _SegPlan] = {}
    for d in journal.deltas(state, scan, state.pos):
        for c in d.chunks:
            p = plans.get(c.seg)
            if p is None:
                p = plans[c.seg] = _SegPlan(c.seg, compacted_upto(state, c.seg))
            if c.seq >= p.upto:
                p.smalls.append(Piece(c, 0, d.pos))
    if full:  # macro-chunks of segments with nothing new may still pack tighter
        for s in segment_summaries(state):
            plans.setdefault(int(s), _SegPlan(int(s), compacted_upto(state, int(s))))
    for p in plans.values():
        p.smalls = [replace(x, level=_level(x, policy)) for x in p.smalls]
    if total is not None:
        total(sum(x.chunk.rows for p in plans.values() for x in p.smalls),
              sum(x.chunk.bytes for p in plans.values() for x in p.smalls))
    active = {g.id: g for g in state.segments}
    parts: list[dict[str, Any]] = []
    summaries: dict[int, list[int]] = {}
    next_scan = state.pos + 1
    for plan in sorted(plans.values(), key=lambda p: p.seg):
        seg = plan.seg
        final = seg not in active
        settled_to = plan.upto  # every _seq below this is merged, adopted or left as it is
        seen = (-1, -1)  # newest (bucket, version) of the map this run published or adopted
        macro_end = 0  # end of the last macro-chunk in the map: no chunk above it is in one
        last_pos = -1
        buckets = sorted({bucket_of(x.first) for x in plan.smalls}
                         | ({bucket_of(plan.upto - 1)} if plan.upto > 0 else set()))
        for b in buckets:
            cur = mm.latest(seg, b)
            version = (b, cur.v)
            macro_end = max([macro_end] + [m.end for m in cur.macros])
            live = [m for m in cur.macros if m.hi > state.head_tso]  # truncated ones are garbage
            # beyond the compacted _seq: published by a compaction that has not reached the
            # journal (crashed, or still running); its records must not be merged twice
            adopted = [m for m in live if m.end > plan.upto]
            for m in adopted:
                parts.append({"seg": seg, "from": m.first, "to": m.end, "macro": m.path,
                              "manifest": manifest_path(m.path), "rows": m.rows, "bytes": m.bytes,
                              "adopted": True})
                counts["adopted"] += 1
            covered = [(m.first, m.end) for m in adopted]
            smalls = [x for x in plan.smalls if bucket_of(x.first) == b
                      and not any(a <= x.first < e for a, e in covered)]
            pieces = sorted([Piece.of_macro(seg, m, policy) for m in live] + smalls, key=lambda x: x.first)
            groups = plan_groups(pieces, policy, full=full, final=final and b == buckets[-1])
            merges = [g for g in groups if len(g) > 1]
            # everything up to the last group that is settled (merged, a macro, or too big to merge)
            settled = [g for g in groups if len(g) > 1 or g[0].level != 0]
            end = max([g[-1].end for g in settled] + [settled_to])
            if final and b == buckets[-1]:  # a sealed segment gets no more chunks: settle them all
                end = max([end] + [x.end for x in smalls])
            # chunks left as they are below the settled end are listed too: the map then covers
            # every compacted _seq, so a planner can read it instead of the journal
            passed = [_listed(x) for g in groups if len(g) == 1 for x in g if x.pos >= 0 and x.end <= end]
            if merges or passed:
                new: list[tuple[list[Piece], Macro, list[str]]] = []
                left: list[Piece] = []  # members of a merge left as they are (beside a damaged one)
                unreadable: list[Piece] = []
                try:
                    for g in merges:
                        _merge_around(store, schema, seg, g, stream.config.compression, progress, new, left,
                                      unreadable)
                except BaseException:
                    discard_unpublished(store, [m.path for _, m, _ in new])
                    raise
                # settled like the merges they belonged to: the map must list them, or a plan
                # reading it for these _seq would miss their records
                passed += [_listed(x) for x in left + unreadable if x.pos >= 0]
                counts["unreadable"] += len(unreadable)
                gone = {x.chunk.path for g, _, _ in new for x in g if x.level != 0}
                dead = {m.path for m in cur.macros if m.hi <= state.head_tso}
                ranges = [(m.first, m.end) for _, m, _ in new] + [(m.first, m.end) for m in passed]

                def change(version: Any, gone: set[str] = gone, dead: set[str] = dead,
                           ranges: list[tuple[int, int]] = ranges, passed: list[Macro] = passed,
                           new: list[tuple[list[Piece], Macro, list[str]]] = new) -> tuple[Macro, ...] | None:
                    have = {m.path for m in version.macros}
                    if not gone <= have:
                        return None  # another compactor merged them first
                    keep = [m for m in version.macros if m.path not in gone and m.path not in dead]
                    if any(m.first < e and a < m.end for m in keep for a, e in ranges):
                        return None  # another compactor covered these records first
                    return tuple(keep) + tuple(m for _, m, _ in new) + tuple(passed)

                try:
                    won = mm.update(seg, b, change)
                except BaseException:
                    # outcome unknown (the version may be published): leave the files, which
                    # the next compaction adopts or orphan cleanup removes
                    raise
                if won is not None:
                    version = (b, won.v)
                    macro_end = max([macro_end] + [m.end for m in won.macros])
                if won is None:
                    discard_unpublished(store, [m.path for _, m, _ in new])
                    counts["lost"] += len(new)
                    break  # later buckets of this segment wait for the winner's commit
                for g, macro, replaced in new:
                    parts.append({"seg": seg, "from": macro.first, "to": macro.end, "macro": macro.path,
                                  "manifest": manifest_path(macro.path), "rows": macro.rows,
                                  "bytes": macro.bytes, "replaced": len(replaced)})
                    counts["macros"] += 1
                    counts["chunks"] += sum(1 for x in g if x.level == 0)
                    counts["rows"] += macro.rows
                    counts["bytes"] += macro.bytes
            if adopted:
                end = max(end, max(m.end for m in adopted))
            settled_to = max(settled_to, end)
            if version[1] >= 0:
                seen = max(seen, version)
        done = [x for x in plan.smalls if x.end <= settled_to]
        left = [x for x in plan.smalls if x.end > settled_to]
        if done:
            last_pos = max(x.pos for x in done)
        if settled_to > plan.upto or seen[1] >= 0:
            g = active.get(seg)
            summaries[seg] = [settled_to, last_pos, (g.chunks - len(left)) if g is not None else 0, *seen,
                              min(macro_end, settled_to)]
        if left:  # (a sealed segment's are left only when another compactor won its map)
            next_scan = min(next_scan, min(x.pos for x in left))
    if not parts and not summaries and next_scan <= scan:
        return counts
    stream._commit_op(CompactRequest(parts, summaries, next_scan, now_ms()))
    return counts
