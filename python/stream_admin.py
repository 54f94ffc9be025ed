"""Stream operations beyond append and read: epochs and scaling, cuts, truncation, retention.

A mixin of :class:`~pyspark_tstream.stream.Stream` (kept apart so each module stays about one
concern). Every operation is one journal commit plus O(segments touched) store calls; only
``vacuum(orphans=True)`` lists folders.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any


from .errors import ConfigError
from .grouplog import group_positions
from .journal import COL_MAX_TSO, COL_WALL, Entry
from .compaction_gc import collect_replaced, gc_position
from .reading import read_tsos
from .retention import (RetentionPolicy, TruncateRequest, collect_garbage, first_seq_after, gc_target,
                        orphan_files, retention_bound)
from .routing import KEY_SPACE, fraction
from .scaling import ScaleRequest, fraction_ranges, read_epoch, read_epochs, split_ranges
from .state import Segment, StreamState, segment_epoch, segment_id
from .timestamps import now_ms, pack, to_ms

if TYPE_CHECKING:
    from .journal import Journal
    from .sealed import SealedMap
    from .storage import Store

TimeLike = int | str | datetime | None
#: Chunks of a truncation stay this long for readers that planned before it.
GC_GRACE_MS = 10 * 60_000
#: Unreferenced data files younger than this may belong to a commit still in flight.
ORPHAN_GRACE_MS = 6 * 3_600_000


def initial_segments(n: int, epoch: int = 0, first_number: int = 0) -> list[Segment]:
    """``n`` segments splitting the key space evenly."""
    bounds = [i * KEY_SPACE // n for i in range(n)] + [KEY_SPACE]
    return [Segment(id=segment_id(epoch, first_number + i), lo=bounds[i], hi=bounds[i + 1]) for i in range(n)]



class StreamAdmin:
    """Scaling, cuts, truncation and retention of a :class:`~pyspark_tstream.stream.Stream`."""

    store: Store
    journal: Journal
    sealed_map: SealedMap

    if TYPE_CHECKING:  # provided by Stream; declared here for type checkers only
        def refresh(self) -> StreamState: ...
        @property
        def state(self) -> StreamState: ...
        def _commit_op(self, build: Any) -> Entry | None: ...
        def plan(self, lo: int, hi: int, *, first_pos: int | None = None, last_pos: int | None = None) -> list: ...
        def seek_tail(self, n: int) -> int: ...

    # -- epochs and scaling ------------------------------------------------------------------
    def scale(self, *, split: int | None = None, parts: int = 2, merge: Sequence[int] | None = None,
              seal: Sequence[int] | None = None, ranges: Sequence[tuple[float, float]] | None = None) -> dict:
        """Split a segment into ``parts``, merge adjacent segments, or seal/create explicitly.

        One journal commit: the sealed segments stop taking records; their successors own the
        same key range in a new epoch. Returns ``{"epoch", "sealed", "created"}``.
        """
        state = self.refresh()
        if split is not None:
            seg = state.segment(split)
            if seg is None:
                raise ConfigError(f"cannot split segment {split}: not active (active: "
                                  f"{[g.id for g in state.segments]})", option="split", value=split)
            req = ScaleRequest([split], split_ranges(seg, parts), now_ms())
        elif merge is not None:
            segs = sorted((g for g in state.segments if g.id in set(merge)), key=lambda g: g.lo)
            if len(segs) != len(set(merge)) or len(segs) < 2:
                raise ConfigError(f"cannot merge {list(merge)}: give 2 or more active, adjacent segments",
                                  option="merge", value=list(merge))
            req = ScaleRequest(list(merge), [(segs[0].lo, segs[-1].hi)], now_ms())
        elif seal is not None and ranges is not None:
            req = ScaleRequest(list(seal), fraction_ranges(ranges), now_ms())
        else:
            raise ConfigError("scale needs split=<segment>, merge=[segments] or seal=[...] with ranges=[...]",
                              option="scale")
        entry = self._commit_op(req)
        assert entry is not None
        return {"epoch": entry.state.epoch, "sealed": entry.info["sealed"], "created": entry.info["created"]}

    def successors(self, segment: int) -> list[int]:
        """Segments that took over ``segment``'s key range when it was sealed ([] if active)."""
        rec = self.sealed_map.get(self.state, segment)
        return list(rec["successors"]) if rec else []

    def predecessors(self, segment: int) -> list[int]:
        """Segments ``segment`` replaced (from its creation epoch's record)."""
        epoch = segment_epoch(segment)
        if epoch == 0:
            return []
        return list(read_epoch(self.store, self.state, epoch)["predecessors"].get(str(segment), []))

    def sealed_info(self, segment: int) -> dict | None:
        """Final size, rows, last ``_seq``/``_tso`` and sealing epoch of a sealed segment."""
        return self.sealed_map.get(self.state, segment)

    def epoch_at(self, when: TimeLike) -> int:
        """The epoch in force at ``when`` (a time like :meth:`read` takes)."""
        state = self.refresh()
        pos = self.journal.search(state, COL_WALL, to_ms(when, option="when"))
        return self._epoch_before(state, pos)

    def _epoch_before(self, state: StreamState, pos: int) -> int:
        """The epoch after journal position ``pos - 1`` (one entry read)."""
        if pos > state.pos:
            return state.epoch
        prev = self.journal.try_entry(pos - 1) if pos > state.head_pos else None
        return prev.state.epoch if prev is not None else (self.journal.try_entry(pos) or self._entry).state.epoch

    def segments_at(self, when: TimeLike) -> list[dict[str, Any]]:
        """Active segments (id and key range) at ``when``."""
        state = self.refresh()
        epoch = self.epoch_at(when)
        if epoch == state.epoch:
            return [{"id": g.id, "key_range": [fraction(g.lo), fraction(g.hi)]} for g in state.segments]
        rec = read_epoch(self.store, state, epoch)
        if rec.get("segments") is None:
            return [{"id": g.id, "key_range": [fraction(g.lo), fraction(g.hi)]}
                    for g in initial_segments(int(state.config["segments"]))]
        return [{"id": i, "key_range": [fraction(lo), fraction(hi)]} for i, lo, hi in rec["segments"]]

    def segments_between(self, start: TimeLike, end: TimeLike) -> list[int]:
        """Every segment that was active at some time in ``[start, end]`` (epoch records only:
        one read per ``EPOCH_CHUNK`` epochs in between, no data)."""
        state = self.refresh()
        first, last = self.epoch_at(start), self.epoch_at(end)
        out: set[int] = set()
        if last == state.epoch:
            out.update(g.id for g in state.segments)
        for rec in read_epochs(self.store, state, first, min(last, state.epoch - 1)):
            if rec.get("segments") is None:  # epoch 0 of a stream never scaled
                out.update(g.id for g in initial_segments(int(state.config["segments"])))
            else:
                out.update(i for i, _, _ in rec["segments"])
        return sorted(out)

    # -- cuts, truncation, retention ---------------------------------------------------------
    def cut_at(self, when: TimeLike) -> dict[int, int]:
        """Stream cut at ``when``: per active segment, the first ``_seq`` at or after that time."""
        state = self.refresh()
        bound = min(pack(to_ms(when, option="when")) - 1, state.tick)
        return first_seq_after(self.store, self.journal, state, bound)

    def truncate(self, before: TimeLike | dict[int, int], *, reason: str = "manual") -> StreamState:
        """Drop records before ``before`` (a time, or a stream cut {segment: seq}).

        Records become unreadable at once; their files go at the next :meth:`vacuum` (or the
        retention check) after a grace period. The head never moves past the tick.
        """
        state = self.refresh()
        if isinstance(before, dict):
            bound = self._cut_bound(state, {int(k): int(v) for k, v in before.items()})
        else:
            bound = pack(to_ms(before, option="before")) - 1
        return self._truncate_to(bound, reason)

    def _truncate_to(self, bound: int, reason: str) -> StreamState:
        """Move the head to the ``_tso`` bound (clamped to the tick); O(segments) store calls."""
        state = self.refresh()
        bound = min(bound, state.tick)
        if bound <= state.head_tso:
            return state
        cut = first_seq_after(self.store, self.journal, state, bound)
        head_pos = self.journal.search(state, COL_MAX_TSO, bound)
        self._commit_op(TruncateRequest(bound, cut, head_pos, now_ms(), reason))
        return self.state

    def cut_bound(self, cut: dict[int, int]) -> int:
        """The largest ``_tso`` bound that removes nothing at or after ``cut`` in any segment."""
        return self._cut_bound(self.refresh(), cut)

    def _cut_bound(self, state: StreamState, cut: dict[int, int]) -> int:
        """The largest ``_tso`` bound that removes nothing at or after ``cut`` in any segment.

        Under writer lanes a record after the cut may be older than the one at it, so every
        chunk reaching past the cut counts: its first record past the cut is its oldest there.
        """
        bound = state.tick
        cutting = []
        for c in self.plan(state.head_tso, state.tick):
            if c.seg not in cut or c.seq + c.rows <= cut[c.seg]:
                continue
            if c.seq >= cut[c.seg]:
                bound = min(bound, c.lo - 1)  # every record of it lies past the cut
            else:
                cutting.append(c)
        for c, tso in read_tsos(self.store, cutting):
            # the cut's record and (in a view of merged lanes) any later one may be the smallest
            bound = min(bound, int(tso[cut[c.seg] - c.seq:].min()) - 1)
        return bound

    def trim(self, *, maxlen: int | None = None, max_age: str | None = None, max_bytes: int | None = None,
             gc_grace_ms: int = GC_GRACE_MS) -> StreamState:
        """Apply the stream's ``retention`` policy (or the limits given), then collect garbage.

        ``maxlen`` keeps the newest N records (Redis ``XTRIM MAXLEN``), ``max_age`` a duration,
        ``max_bytes`` a size. Consumer groups hold the head back when the policy says
        ``groups=true``.
        """
        state = self.refresh()
        policy = RetentionPolicy.parse(state.config.get("retention")) or RetentionPolicy()
        if maxlen is not None or max_age is not None or max_bytes is not None:
            policy = RetentionPolicy(
                age_ms=to_ms("-" + max_age, option="max_age", now=0) * -1 if max_age else policy.age_ms,
                size=max_bytes if max_bytes is not None else policy.size,
                count=maxlen if maxlen is not None else policy.count, groups=policy.groups)
        tail = self.seek_tail(policy.count) if policy.count is not None else None
        floor = self._group_floor() if policy.groups else None
        bound = retention_bound(self.journal, state, policy, now_ms(), floor, tail)
        if bound > state.head_tso:
            self._truncate_to(bound, "retention")
        self.vacuum(grace_ms=gc_grace_ms)
        return self.state

    def _group_floor(self) -> int | None:
        positions = group_positions(self.store)
        return min(positions.values()) if positions else None

    def vacuum(self, grace_ms: int = GC_GRACE_MS, *, orphans: bool = False,
               orphan_grace_ms: int = ORPHAN_GRACE_MS) -> dict[str, int]:
        """Delete files and metadata of records truncated at least ``grace_ms`` ago.

        With ``orphans``, also delete data files no commit names (failed or duplicate task
        attempts) older than ``orphan_grace_ms``; that part lists the data folders.
        """
        state = self.refresh()
        upto = gc_target(state, now_ms(), grace_ms)
        counts = collect_garbage(self.store, self.journal, state, upto)
        replaced, compact_gc = collect_replaced(self.store, self.journal, state,
                                                gc_position(self.journal, state, now_ms(), grace_ms))
        counts["replaced"] = replaced
        if orphans:
            found = orphan_files(self.store, self.journal, self.refresh(), now_ms(), orphan_grace_ms)
            self.store.delete(found)
            counts = {**counts, "orphans": len(found)}
        old_compact_gc = int((state.compaction or {}).get("gc", 0))
        if upto > state.gc_pos or state.meta_gc_pos < state.gc_pos or compact_gc > old_compact_gc:
            old_gc = state.gc_pos

            def mark(st: StreamState, pos: int) -> Entry | None:
                done = int((st.compaction or {}).get("gc", 0))
                if st.gc_pos >= upto and st.meta_gc_pos >= old_gc and done >= compact_gc:
                    return None
                st.gc_pos = max(st.gc_pos, upto)
                st.meta_gc_pos = max(st.meta_gc_pos, old_gc)
                if compact_gc > done:
                    st.compaction = {**st.compaction, "gc": compact_gc}
                return Entry(pos=pos, op="gc", wall=now_ms(), state=st, info=counts)
            self._commit_op(mark)
        return counts
