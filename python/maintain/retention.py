"""The rules of dropping old records: stream cuts, retention bounds, truncate commits, garbage.

Pure functions of a store, journal and state; :mod:`~pyspark_tstream.api.truncate` drives
them for a ``Stream``.

Invariants:

* truncation moves the head forward only, to a ``_tso`` bound at or below the tick: records
  with ``_tso <= head_tso`` become unreadable at once (one journal entry, O(segments) work) and
  their files are garbage, deleted later by :func:`collect_garbage`;
* retention never removes what a registered consumer group has not consumed;
* a reader whose position fell behind the head learns exactly which segments, ``_seq`` ranges
  and times it lost (see :func:`pyspark_tstream.read.start.check_data_loss`).

Retention config (``retention``): comma-separated ``age=7d``, ``size=10GB``, ``count=1000000``,
``groups=true`` (consumption-based: keep what any consumer group still needs).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compaction.gc import (
    aged,
    awaiting_collection,
    committed_macros,
    live_macros,
    macros_created,
    orphan_manifests,
)
from ..errors import ConfigError, TimestampError
from ..journal.checkpoint import entries_gc_target
from ..journal.compaction_state import replaced_gc_start, segment_summaries
from ..journal.entries import Chunk, Entry, encode_anchor
from ..journal.features import checksummed
from ..journal.journal import Journal
from ..journal.op_info import GcInfo, TruncateInfo
from ..journal.operations import Operation
from ..journal.state import StreamState, Truncation, segment_number
from ..journal.timeindex import COL_BYTES, COL_MAX_TSO, COL_TICK, FANOUT
from ..policytext import policy_parts
from ..read.compacted import substitute
from ..read.reading import read_tsos
from ..store import layout
from ..store.storage import Store
from ..timestamps import pack, parse_duration_ms
from ..units import size_bytes


def parse_size(text: str) -> int:
    """Bytes of the retention ``size`` part; ConfigError naming it otherwise."""
    size = size_bytes(text)
    if size is None:
        raise ConfigError(f"retention size {text!r} is not a size like 500MB or 10GB", option="retention", value=text)
    return size


#: The parts of a ``retention`` text and the fields they set.
_RETENTION_FIELDS = {"age": "age_ms", "size": "size", "count": "count", "groups": "groups"}
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _count(text: str, value: str) -> int:
    word = value.strip()
    if not word.isdigit():
        raise ConfigError(f"retention={text!r}: count={word!r} is not a record count (a whole number, 0 or more, "
                          "like count=1000000)", option="retention", value=text)
    return int(word)


def _flag(text: str, value: str) -> bool:
    word = value.strip().lower()
    if word not in _TRUE + _FALSE:
        raise ConfigError(f"retention={text!r}: groups={value.strip()!r} is not true or false", option="retention",
                          value=text)
    return word in _TRUE


@dataclass(frozen=True)
class RetentionPolicy:
    """Parsed ``retention`` config."""

    age_ms: int | None = None
    size: int | None = None
    count: int | None = None
    groups: bool = False

    @classmethod
    @functools.lru_cache(maxsize=64)  # parsed on every data commit; the text rarely changes
    def parse(cls, text: str | None) -> RetentionPolicy | None:
        """The policy of a ``retention`` config text; None when there is none."""
        if not text:
            return None
        vals: dict[str, Any] = {}
        for part in policy_parts(text):
            key, value = part.key, part.value
            if not part.sep and re.match(r"^\s*\d", part.text):  # a bare duration: age
                key, value = "age", part.text
            field_name = _RETENTION_FIELDS.get(key)
            if field_name is None:
                raise ConfigError(
                    f"retention={text!r}: unknown part {part.text!r}; use age=7d, size=10GB, count=N, groups=true",
                    option="retention", value=text)
            if field_name in vals:  # one would silently override the other
                raise ConfigError(f"retention={text!r}: {key} is given twice; give each of age, size, count, "
                                  "groups at most once", option="retention", value=text)
            if key == "age":
                try:
                    vals[field_name] = parse_duration_ms(value.strip(), option="age")
                except TimestampError as e:
                    raise ConfigError(f"retention={text!r}: {e}", option="retention", value=text) from e
            elif key == "size":
                vals[field_name] = parse_size(value)
            elif key == "count":
                vals[field_name] = _count(text, value)
            else:
                vals[field_name] = _flag(text, value)
        return cls(**vals)


def first_seq_after(store: Store, journal: Journal, state: StreamState, bound: int) -> dict[int, int]:
    """Per segment, the first ``_seq`` whose ``_tso`` exceeds ``bound`` (``bound <= tick``).

    Covers the segments active at the bound (a Pravega stream cut) and those active now. Under
    writer lanes a segment's times are not monotone along ``_seq``: the cut is the longest
    prefix of the segment whose records are all at or below the bound (a slower lane's record
    at or below the bound committed after it lies after the cut).

    Entries up to ``q`` (the last whose max ``_tso`` is at or below the bound) hold only records
    below it: their counts come from entry ``q``'s state. Entries after the first tick at or
    above the bound hold none, so their chunks start after everything scanned. Only the few in
    between are scanned, and of those only chunks that straddle the bound are opened (raw
    timestamp column only). O(segments) reads.
    """
    out = {s.id: s.first_seq for s in state.segments}
    q = journal.search(state, COL_MAX_TSO, bound) - 1
    r = min(journal.search(state, COL_TICK, bound - 1), state.pos)
    base = journal.try_entry(q) if q >= state.head_pos else None
    if base is not None:  # the segments active at the bound, sealed since or not
        for seg in base.state.segments:
            out[seg.id] = max(out.get(seg.id, 0), seg.next_seq)
    after: dict[int, int] = {}  # per segment, the first _seq seen above the bound
    straddling = []
    for d in journal.deltas(state, max(q + 1, state.head_pos), r):
        for c in d.chunks:
            out.setdefault(c.seg, 0)
            out[c.seg] = max(out[c.seg], c.seq + c.rows)
            if c.hi <= bound:
                continue
            if c.lo > bound:
                after[c.seg] = min(after.get(c.seg, c.seq), c.seq)
            else:
                straddling.append(c)
    # a chunk's own times increase (views of merged lanes excepted: the first record above the
    # bound is found by mask), so its records at or below the bound usually come first
    for c, tso in read_tsos(store, substitute(store, state, straddling)):
        above = np.flatnonzero(tso > bound)
        if len(above):
            k = c.seq + int(above[0])
            after[c.seg] = min(after.get(c.seg, k), k)
    for seg_id, first in after.items():
        active = state.segment(seg_id)
        out[seg_id] = max(min(out[seg_id], first), active.first_seq if active else 0)
    return out


@dataclass
class TruncateRequest:
    """Move the head to ``bound`` (records with ``_tso <= bound`` go)."""

    bound: int
    cut: dict[int, int]
    head_pos: int
    now: int = 0
    reason: str = "manual"

    def __call__(self, state: StreamState, pos: int) -> Entry | None:
        bound = min(self.bound, state.tick)
        if bound <= state.head_tso:
            return None
        state.head_tso = bound
        state.head_pos = max(state.head_pos, min(self.head_pos, pos))
        for s in state.segments:
            if s.id in self.cut:
                s.first_seq = max(s.first_seq, self.cut[s.id])
        state.first_tso = max(state.first_tso, bound + 1)
        state.wall = max(state.wall, self.now)
        state.truncations = (state.truncations + [Truncation(state.wall, state.head_pos)])[-16:]
        return Entry(pos=pos, op=Operation.TRUNCATE, wall=self.now, state=state,
                     info=TruncateInfo(bound, self.cut, self.reason).encode())


def retention_bound(journal: Journal, state: StreamState, policy: RetentionPolicy, now: int,
                    group_floor: int | None, tail_bound: int | None) -> int:
    """The head a retention policy calls for (never above the tick or a group's position)."""
    bound = state.head_tso
    if policy.age_ms is not None:
        bound = max(bound, pack(now - policy.age_ms) - 1)
    if policy.size is not None and state.bytes > policy.size:
        p = journal.search(state, COL_BYTES, state.bytes - policy.size)
        if p > state.head_pos:
            bound = max(bound, _max_tso_before(journal, state, p))
    if tail_bound is not None:
        bound = max(bound, tail_bound)
    if policy.groups and group_floor is not None:
        bound = min(bound, group_floor)
    return min(bound, state.tick)


def _max_tso_before(journal: Journal, state: StreamState, p: int) -> int:
    entry = journal.try_entry(p - 1)
    if entry is not None:
        return entry.state.max_tso
    return max((c.hi for d in journal.deltas(state, p - 1, p - 1) for c in d.chunks), default=state.head_tso)


def gc_target(state: StreamState, now: int, grace_ms: int) -> int:
    """The head position of the newest truncation older than ``grace_ms`` (readers that planned
    before a truncation may still be reading its chunks for a while)."""
    return max((t.head_pos for t in state.truncations if now - t.wall >= grace_ms), default=state.gc_pos)


def meta_gc_target(journal: Journal, state: StreamState) -> int:
    """Journal entries below this go in the next garbage collection: those below ``gc_pos``,
    except the ones a rebuild of the state from its checkpoints still needs (format v6,
    :func:`~pyspark_tstream.journal.checkpoint.entries_gc_target`) and the ones the open
    level-0 index node still needs: the commit that fills it copies their deltas into the node
    (``TimeIndex.flush``), so collecting one would fail every later commit of the stream (found
    by the simulation's ``checkpoints`` profile, seed 205,476: a truncation near the newest
    entry, then two vacuums)."""
    target = max(state.meta_gc_pos, entries_gc_target(state, journal.log.mark_of))
    open_node = state.index[0] if state.index else []
    if not open_node or open_node[0].id >= target:
        return target
    first = open_node[0].id
    m = state.checkpoint
    if m is None:  # format 5 and older: every entry holds the whole state
        return max(state.meta_gc_pos, first)
    # format v6: still a bound a rebuild allows, the entry after a checkpoint (every later entry
    # names that checkpoint or a newer one, all kept): the newest of the two the state knows
    # that is not past the open node, else nothing new this run
    fits = [c + 1 for c in (m.pos, m.prev) if c + 1 <= first]
    return max(state.meta_gc_pos, max(fits, default=state.meta_gc_pos))


def collect_garbage(store: Store, journal: Journal, state: StreamState, upto: int,
                    meta_upto: int | None = None) -> GcInfo:
    """Delete garbage below ``upto``; returns what it deleted. O(garbage), never lists.

    Chunks of positions ``[gc_pos, upto)`` go now; journal entries and index nodes lag one run
    behind (``[meta_gc_pos, gc_pos)``), so a crash at any point leaves every entry a re-run needs.
    The caller commits ``gc_pos = upto, meta_gc_pos = meta_upto`` (:func:`meta_gc_target`, computed
    when not given); deleting twice is harmless.
    """
    upto = min(upto, state.head_pos)
    if meta_upto is None:
        meta_upto = meta_gc_target(journal, state)
    if upto <= state.gc_pos and state.meta_gc_pos >= meta_upto:
        return GcInfo()
    paths: list[str] = []
    if upto > state.gc_pos:
        old = journal.deltas(state, state.gc_pos, upto - 1, truncated=True)
        paths = [c.path for d in old for c in d.chunks if c.hi <= state.head_tso and not c.shared]
        # a shared file goes when no slice of it is left: its slices are all in one entry
        paths += _dead_shared([c for d in old for c in d.chunks if c.shared], state.head_tso)
        # compactions below the head merged only records below it: their macro-chunks go too
        paths += macros_created(old)
        store.delete(paths)
    # readers that lost the head hint probe forward from the anchor, which must still exist
    store.write(layout.ANCHOR, encode_anchor(state.gc_pos, checksummed(state.features)))
    gone = range(max(state.meta_gc_pos, 1), meta_upto)
    entries = [layout.entry(p) for p in gone]
    nodes = [layout.index_node(1, n) for n in range(state.meta_gc_pos // FANOUT, meta_upto // FANOUT)]
    # checkpoints of the state (format v6) below the one the oldest entry left names
    older = [layout.checkpoint(p) for p in range(max(state.meta_gc_pos - 1, 1), meta_upto - 1)] \
        if state.checkpoint is not None else []
    store.delete(entries + nodes + older)
    return GcInfo(chunks=len(paths), entries=len(entries), nodes=len(nodes))


def orphan_files(store: Store, journal: Journal, state: StreamState, now: int, grace_ms: int) -> list[str]:
    """Data files no journal entry names (failed or duplicate task attempts), older than grace,
    and the manifests of compactions that died before publishing. Only names the stream's
    writers make (:func:`~pyspark_tstream.store.layout.is_own_data_name`) in segment folders
    (``data/<number>/``) are candidates: anything else there is someone else's.

    The one operation that lists folders (``data/<segment>/``): orphans are by definition not in
    any metadata. Run it rarely (``vacuum(orphans=True)``, ``tstream vacuum``).
    """
    # one read of the deltas for both: live chunks from the head on, and the manifests of
    # compactions whose replaced files are not collected yet (which may lie below the head)
    gc_first = replaced_gc_start(state)
    lo = min(gc_first, state.head_pos)
    deltas = journal.deltas(state, lo, state.pos, truncated=True) if lo <= state.pos else []
    referenced = {c.path for d in deltas if d.pos >= state.head_pos for c in d.chunks}
    # a shared file below the head that a slice above the truncation still needs stays
    referenced |= {c.path for d in deltas for c in d.chunks if c.shared and c.hi > state.head_tso}
    uncollected = [d for d in deltas if d.pos >= gc_first]
    referenced |= awaiting_collection(store, uncollected)
    # macro-chunks are named by the macro map, not by journal entries: by the versions the state
    # names, and by newer ones a compaction published (its journal commit, or an adoption, to come)
    live = committed_macros(store, state)
    named = {segment_number(seg): (s.bucket, s.version) for seg, s in segment_summaries(state).items()
             if s.bucket is not None and s.version is not None}
    out = []
    for segdir in store.list(layout.DATA):
        if not segdir.isdigit():
            continue  # not a segment's folder: nothing this stream wrote
        live |= live_macros(store, int(segdir), named.get(int(segdir)), now, grace_ms)
        for name in store.list(layout.data_folder(segdir)):
            rel = layout.data_file(segdir, name)
            # only names this stream's writers make: a user's file, or a folder (another stream
            # created inside this one), is not this stream's to delete
            if not layout.is_own_data_name(name):
                continue
            if rel not in referenced and rel not in live and aged(store, rel, now, grace_ms):
                out.append(rel)
    return out + orphan_manifests(store, uncollected, live, now, grace_ms)


def _dead_shared(slices: Sequence[Chunk], head_tso: int) -> list[str]:
    """The shared files among ``slices`` (all slices of each, from the one entry that
    committed it) none of whose slices outlives the truncation at ``head_tso``."""
    live: dict[str, bool] = {}
    for c in slices:
        live[c.path] = live.get(c.path, False) or c.hi > head_tso
    return [p for p, alive in live.items() if not alive]
