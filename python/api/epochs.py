"""A stream's epochs: scaling segments and answering which segments held which keys when.

One job: the segment history. :meth:`Epochs.scale` is one journal commit that seals segments
and creates their successors in a new epoch; the other methods read the sealed map and epoch
records (O(1) or one read per ``EPOCH_CHUNK`` epochs, never data files).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..epochs.routing import KEY_SPACE, fraction
from ..epochs.scaling import ScaleRequest, fraction_ranges, read_epoch, read_epochs, split_ranges
from ..errors import ConfigError
from ..journal.op_info import ScaleInfo
from ..journal.scale_records import SealedRecord
from ..journal.state import Segment, StreamState, segment_epoch, segment_id
from ..journal.timeindex import COL_WALL
from ..timestamps import TimeLike, now_ms, to_ms
from .context import StreamContext
from .results import ScaleResult, SegmentRange


def initial_segments(n: int, epoch: int = 0, first_number: int = 0) -> list[Segment]:
    """``n`` segments splitting the key space evenly."""
    bounds = [i * KEY_SPACE // n for i in range(n)] + [KEY_SPACE]
    return [Segment(id=segment_id(epoch, first_number + i), lo=bounds[i], hi=bounds[i + 1]) for i in range(n)]


def _ranges(segments: Sequence[tuple[int, int, int]]) -> list[SegmentRange]:
    return [SegmentRange(i, (fraction(lo), fraction(hi))) for i, lo, hi in segments]


class Epochs:
    """Scaling and segment history through a :class:`~pyspark_tstream.api.context.StreamContext`."""

    def __init__(self, ctx: StreamContext) -> None:
        self.ctx = ctx

    def scale(self, *, split: int | None = None, parts: int = 2, merge: Sequence[int] | None = None,
              seal: Sequence[int] | None = None, ranges: Sequence[tuple[float, float]] | None = None) -> ScaleResult:
        """Split a segment into ``parts``, merge adjacent segments, or seal/create explicitly.

        The public :meth:`~pyspark_tstream.api.stream.Stream.scale` documents the arguments.
        """
        state = self.ctx.refresh()
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
        entry = self.ctx.commit_op(req)
        assert entry is not None
        info = ScaleInfo.decode(entry.info)
        return ScaleResult(entry.state.epoch, info.sealed, info.created)

    def successors(self, segment: int) -> list[int]:
        """Segments that took over ``segment``'s key range when it was sealed ([] if active)."""
        rec = self.ctx.sealed_map.get(self.ctx.state, segment)
        return list(rec.successors) if rec else []

    def predecessors(self, segment: int) -> list[int]:
        """Segments ``segment`` replaced (from its creation epoch's record)."""
        epoch = segment_epoch(segment)
        if epoch == 0:
            return []
        return list((read_epoch(self.ctx.store, self.ctx.state, epoch).predecessors or {}).get(segment, ()))

    def sealed_info(self, segment: int) -> SealedRecord | None:
        """Final size, rows, last ``_seq``/``_tso`` and sealing epoch of a sealed segment."""
        return self.ctx.sealed_map.get(self.ctx.state, segment)

    def epoch_at(self, when: TimeLike) -> int:
        """The epoch in force at ``when`` (a time like ``Stream.read`` takes)."""
        state = self.ctx.refresh()
        pos = self.ctx.journal.search(state, COL_WALL, to_ms(when, option="when"))
        return self.epoch_before(state, pos)

    def epoch_before(self, state: StreamState, pos: int) -> int:
        """The epoch after journal position ``pos - 1`` (one entry read)."""
        if pos > state.pos:
            return state.epoch
        journal = self.ctx.journal
        prev = journal.try_entry(pos - 1) if pos > state.head_pos else None
        return prev.state.epoch if prev is not None else (journal.try_entry(pos) or self.ctx.entry).state.epoch

    def segments_at(self, when: TimeLike) -> list[SegmentRange]:
        """Active segments (id and key range) at ``when``."""
        state = self.ctx.refresh()
        epoch = self.epoch_at(when)
        if epoch == state.epoch:
            return _ranges([(g.id, g.lo, g.hi) for g in state.segments])
        rec = read_epoch(self.ctx.store, state, epoch)
        if rec.segments is None:
            return _ranges([(g.id, g.lo, g.hi) for g in initial_segments(state.config.segments)])
        return _ranges(rec.segments)

    def segments_between(self, start: TimeLike, end: TimeLike) -> list[int]:
        """Every segment that was active at some time in ``[start, end]`` (epoch records only:
        one read per ``EPOCH_CHUNK`` epochs in between, no data)."""
        state = self.ctx.refresh()
        first, last = self.epoch_at(start), self.epoch_at(end)
        out: set[int] = set()
        if last == state.epoch:
            out.update(g.id for g in state.segments)
        for rec in read_epochs(self.ctx.store, state, first, min(last, state.epoch - 1)):
            if rec.segments is None:  # epoch 0 of a stream never scaled
                out.update(g.id for g in initial_segments(state.config.segments))
            else:
                out.update(i for i, _, _ in rec.segments)
        return sorted(out)
