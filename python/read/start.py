"""Where a read starts, and what retention removed before it (Spark-free; both readers call it).

Every position is an exclusive ``_tso`` bound ``lo`` ("records after this"). Where a read ends
and which chunks it reads is :mod:`~pyspark_tstream.read.planner`'s job.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import DataLossError
from ..journal.entries import Chunk
from ..journal.state import StreamState
from ..store.storage import Store
from ..timestamps import iso, pack, physical
from ..timestamps import now_ms as wall_ms
from .reading import read_tsos

log = logging.getLogger("pyspark_tstream")


def start_bound(stream: Any, kind: str, *, timestamp_ms: int | None = None, ago_ms: int | None = None,
                tail: int | None = None, now_ms: int | None = None, cut: dict[int, int] | None = None) -> int:
    """The exclusive ``_tso`` bound a read starting at ``kind`` begins after."""
    state: StreamState = stream.refresh()
    if kind == "latest":
        return state.tick
    if kind == "timestamp" and timestamp_ms is not None:
        return max(state.head_tso, pack(timestamp_ms) - 1)
    if kind == "ago" and ago_ms is not None:
        return max(state.head_tso, pack((now_ms if now_ms is not None else wall_ms()) - ago_ms) - 1)
    if kind == "tail" and tail is not None:
        return int(stream.seek_tail(tail))
    if kind == "offsets" and cut:
        # records before the cut's earliest position in any listed segment are skipped in every
        # segment; listed segments are further filtered by _seq (the reader applies the cut)
        return max(state.head_tso, min(int(stream.cut_bound(cut, "startingOffsets")), state.tick))
    return state.head_tso  # earliest


def cut_bound(store: Store, chunks: Sequence[Chunk], cut: Mapping[int, int], tick: int) -> int:
    """The largest ``_tso`` bound (at most ``tick``) that skips nothing at or after ``cut`` in
    any segment; ``chunks``: a plan of the stream up to the tick."""
    return cut_range(store, chunks, cut, tick)[0]


def cut_range(store: Store, chunks: Sequence[Chunk], cut: Mapping[int, int], tick: int) -> tuple[int, int]:
    """``(bound, before)``: :func:`cut_bound`'s bound, and the largest ``_tso`` of a record
    before the cut in a segment it names (-1 if none), from one read of the chunks it crosses.

    Under writer lanes a record after the cut may be older than the one at it, so every chunk
    reaching past the cut counts: its first record past the cut is its oldest there.
    """
    bound, before = tick, -1
    cutting = []
    for c in chunks:
        if c.seg not in cut:
            continue
        if c.seq + c.rows <= cut[c.seg]:
            before = max(before, c.hi)  # every record of it lies before the cut
        elif c.seq >= cut[c.seg]:
            bound = min(bound, c.lo - 1)  # every record of it lies past the cut
        else:
            cutting.append(c)
    for c, tso in read_tsos(store, cutting):
        at = cut[c.seg] - c.seq
        # the cut's record and (in a view of merged lanes) any later one may be the smallest
        bound = min(bound, int(tso[at:].min()) - 1)
        before = max(before, int(tso[:at].max()))
    return bound, before


def check_data_loss(state: StreamState, lo: int, *, fail: bool, context: str = "",
                    journal: Any = None) -> int:
    """``lo``, or the head if retention removed records after ``lo`` (raise when ``fail``).

    With ``journal``, the lost ``_seq`` ranges of every segment (sealed ones included) come from
    the truncated entries' chunk metadata while garbage collection has not removed it yet;
    otherwise from the active segments' heads. The time range is always exact.
    """
    if lo >= state.head_tso:
        return lo
    ranges: dict[int, list[int]] = {}
    if journal is not None:
        first = journal.search_any(state, lo)
        for d in journal.deltas(state, first, state.head_pos, truncated=True):
            for c in d.chunks:
                if c.hi > lo and c.lo <= state.head_tso:
                    r = ranges.setdefault(c.seg, [c.seq, c.seq + c.rows])
                    r[0], r[1] = min(r[0], c.seq), max(r[1], c.seq + c.rows)
    for s in state.segments:
        if s.first_seq > 0:  # an active segment lost everything below its head
            ranges.setdefault(s.id, [0, s.first_seq])[1] = s.first_seq
    lost: list[dict[str, Any]] = [
        {"segment": seg, "seq_from": a, "seq_before": b, "from_tso": lo + 1, "to_tso": state.head_tso,
         "from_time": iso(physical(lo + 1)), "to_time": iso(physical(state.head_tso))}
        for seg, (a, b) in sorted(ranges.items())]
    text = ", ".join(f"segment {d['segment']} _seq {d['seq_from']}..{d['seq_before'] - 1}" for d in lost) \
        or "no segment metadata left"
    message = (f"records with _tso in ({lo}, {state.head_tso}] ({iso(physical(lo + 1))} .. "
               f"{iso(physical(state.head_tso))}) were removed by retention or truncation before "
               f"{context or 'this reader'} read them ({text})")
    if fail:
        raise DataLossError(message + "; restart from a later position or set failOnDataLoss=false to "
                            "skip them", lost=lost)
    log.warning("tstream: skipping lost data: %s", message)
    return state.head_tso
