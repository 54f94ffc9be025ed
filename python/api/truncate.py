"""Dropping old records: stream cuts, truncation, retention and garbage collection of files.

One job: move the stream's head forward and reclaim what lies behind it. Truncation is one
journal commit (O(segments) store calls) and never passes the tick; records become unreadable
at once, their files go at a later :meth:`Truncation.vacuum` once ``GC_GRACE_MS`` passed (readers
that planned before the truncation may still be reading them). Only ``vacuum(orphans=True)``
lists data folders; every vacuum lists the (small) folder of group commit's request objects
(:mod:`~pyspark_tstream.write.requests`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..compaction.gc import collect_replaced, gc_position
from ..journal.entries import Entry
from ..journal.op_info import GcInfo
from ..journal.operations import Operation
from ..journal.state import StreamState
from ..journal.timeindex import COL_MAX_TSO
from ..maintain.retention import (
    RetentionPolicy,
    TruncateRequest,
    collect_garbage,
    first_seq_after,
    gc_target,
    meta_gc_target,
    orphan_files,
    retention_bound,
)
from ..maps.grouplog import group_positions
from ..read.cuts import check_cut
from ..read.start import cut_bound, cut_range
from ..timestamps import TimeLike, now_ms, pack, to_ms
from ..write.requests import named_since, pending_chunks, stale_requests
from .config import GC_GRACE_MS, ORPHAN_GRACE_MS, check_graces
from .context import StreamContext
from .read import Reader
from .results import Cut


class Truncation:
    """Cuts, truncation, retention and GC through a context; ``reader`` plans the chunks a cut
    crosses and finds the tail a ``maxlen`` keeps."""

    def __init__(self, ctx: StreamContext, reader: Reader) -> None:
        self.ctx = ctx
        self.reader = reader

    def cut_at(self, when: TimeLike) -> Cut:
        """Stream cut at ``when``: per active segment, the first ``_seq`` at or after that time."""
        h = self.ctx
        state = h.refresh()
        bound = min(pack(to_ms(when, option="when")) - 1, state.tick)
        return Cut(first_seq_after(h.store, h.journal, state, bound))

    def truncate(self, before: TimeLike | Mapping[int, int], *, reason: str = "manual") -> StreamState:
        """Drop records before ``before`` (a time, or a stream cut {segment: seq}).

        The public :meth:`~pyspark_tstream.api.stream.Stream.truncate` documents the arguments.
        """
        state = self.ctx.refresh()
        if isinstance(before, Mapping):
            cut = check_cut(self.ctx.store, state, before, option="cut", url=self.ctx.url)
            # only what the cut names, and what lies before it in time: never past the newest
            # record it removes from a segment it names (a cut at a segment's end is not "the tick")
            bound, removed = cut_range(self.ctx.store, self.reader.plan(state.head_tso, state.tick), cut, state.tick)
            bound = min(bound, removed)
        else:
            bound = pack(to_ms(before, option="before")) - 1
        return self.truncate_to(bound, reason)

    def truncate_to(self, bound: int, reason: str) -> StreamState:
        """Move the head to the ``_tso`` bound (clamped to the tick); O(segments) store calls."""
        h = self.ctx
        state = h.refresh()
        bound = min(bound, state.tick)
        if bound <= state.head_tso:
            return state
        cut = first_seq_after(h.store, h.journal, state, bound)
        head_pos = h.journal.search(state, COL_MAX_TSO, bound)
        h.commit_op(TruncateRequest(bound, cut, head_pos, now_ms(), reason))
        return h.state

    def check_cut(self, cut: Mapping[Any, Any], option: str) -> Cut:
        """``cut`` if it is a cut of this stream (:func:`~pyspark_tstream.read.cuts.check_cut`),
        else :class:`~pyspark_tstream.errors.InvalidCutError` naming ``option``."""
        h = self.ctx
        return Cut(check_cut(h.store, h.refresh(), cut, option=option, url=h.url))

    def cut_bound(self, cut: Mapping[Any, Any], option: str = "cut") -> int:
        """The largest ``_tso`` bound that removes nothing at or after ``cut`` in any segment
        (:func:`~pyspark_tstream.read.start.cut_bound`), the cut checked on the same state."""
        h = self.ctx
        state = h.refresh()
        checked = check_cut(h.store, state, cut, option=option, url=h.url)
        return cut_bound(h.store, self.reader.plan(state.head_tso, state.tick), checked, state.tick)

    def trim(self, *, maxlen: int | None = None, max_age: str | None = None, max_bytes: int | None = None,
             gc_grace_ms: int = GC_GRACE_MS) -> StreamState:
        """Apply the stream's ``retention`` policy (or the limits given), then collect garbage.

        The public :meth:`~pyspark_tstream.api.stream.Stream.trim` documents the arguments.
        """
        h = self.ctx
        state = h.refresh()
        policy = RetentionPolicy.parse(state.config.retention) or RetentionPolicy()
        if maxlen is not None or max_age is not None or max_bytes is not None:
            policy = RetentionPolicy(
                age_ms=to_ms("-" + max_age, option="max_age", now=0) * -1 if max_age else policy.age_ms,
                size=max_bytes if max_bytes is not None else policy.size,
                count=maxlen if maxlen is not None else policy.count, groups=policy.groups)
        tail = self.reader.seek_tail(policy.count) if policy.count is not None else None
        floor = self._group_floor() if policy.groups else None
        bound = retention_bound(h.journal, state, policy, now_ms(), floor, tail)
        if bound > state.head_tso:
            self.truncate_to(bound, "retention")
        self.vacuum(grace_ms=gc_grace_ms)
        return h.state

    def _group_floor(self) -> int | None:
        """The oldest position a consumer group still needs (None without groups)."""
        positions = group_positions(self.ctx.store)
        return min(positions.values()) if positions else None

    def vacuum(self, grace_ms: int = GC_GRACE_MS, *, orphans: bool = False,
               orphan_grace_ms: int = ORPHAN_GRACE_MS, unsafe_orphan_grace: bool = False) -> GcInfo:
        """Delete files and metadata of records truncated at least ``grace_ms`` ago.

        The public :meth:`~pyspark_tstream.api.stream.Stream.vacuum` documents the arguments.
        """
        check_graces(grace_ms, orphan_grace_ms, orphans=orphans, unsafe_orphan_grace=unsafe_orphan_grace)
        h = self.ctx
        store, journal = h.store, h.journal
        state = h.refresh()
        upto = gc_target(state, now_ms(), grace_ms)
        old_gc = meta_gc_target(journal, state)  # format v6: entries the checkpoints need stay
        done_gc = collect_garbage(store, journal, state, upto, old_gc)
        older = gc_position(journal, state, now_ms(), grace_ms)
        replaced, compact_gc = collect_replaced(store, journal, state, older)
        # group commit's request objects no slot can fold any more (their writers crashed)
        stale = stale_requests(store, state, older)
        store.delete(stale)
        done_gc = replace(done_gc, replaced=replaced, requests=len(stale))
        if orphans:
            scanned = h.refresh()
            found = orphan_files(store, journal, scanned, now_ms(), orphan_grace_ms)
            # a pending request's chunks are named by no entry yet (listed after the data files;
            # one folded and deleted since the scan's state is named by an entry since then)
            keep = pending_chunks(store)
            keep |= named_since(journal, scanned, h.refresh())
            found = [f for f in found if f not in keep]
            store.delete(found)
            done_gc = replace(done_gc, orphans=len(found))
        old_compact_gc = state.compaction.replaced_gc
        if upto > state.gc_pos or state.meta_gc_pos < old_gc or compact_gc > old_compact_gc:

            def mark(st: StreamState, pos: int) -> Entry | None:
                done = st.compaction.replaced_gc
                if st.gc_pos >= upto and st.meta_gc_pos >= old_gc and done >= compact_gc:
                    return None
                st.gc_pos = max(st.gc_pos, upto)
                st.meta_gc_pos = max(st.meta_gc_pos, old_gc)
                if compact_gc > done:
                    st.compaction = st.compaction.collected(compact_gc)
                return Entry(pos=pos, op=Operation.GC, wall=now_ms(), state=st, info=done_gc.encode())
            h.commit_op(mark)
        return done_gc
