"""Stream cuts checked against the stream they are used on, wherever a cut enters.

A stream cut (``{segment id: first _seq}``, docs/design.md §2) comes from a user: the
``startingOffsets``/``endingOffsets`` options, ``read``/``to_reader``/``truncate`` arguments, the
CLI. One that names a segment the stream never had, or a position past what a segment holds,
is a cut of another stream or a typo; read as given it skips records or truncates everything
up to the tick. So every cut is checked here first, and refused whole with the entry, the
segment's written range and the remedy, before anything reads or changes:

* every named segment is one of the stream's: active in the newest state, or sealed (the state's
  pending records, else the sealed map: O(1) reads per shard named);
* every position lies in ``[0, next_seq]`` of its segment (``next_seq`` itself: "after all of it");
* a cut names at least one segment.

Positions below a segment's head (truncated records) are valid: what they name is gone, and the
callers treat that as retention's (data-loss checks, a truncation that removes nothing more).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import InvalidCutError
from ..journal.state import StreamState, segment_number
from ..maps.sealed import SealedMap
from ..store.storage import Store


def _written(store: Store, state: StreamState, segment: int) -> int | None:
    """How many records ``segment`` ever held (its ``next_seq``), or None if the stream never had it."""
    for s in state.segments:
        if s.id == segment:
            return s.next_seq
    if segment < 0 or segment_number(segment) >= state.next_number:
        return None  # never created: no read needed
    rec = SealedMap(store).get(state, segment)
    if rec is None or rec.id != segment:
        return None
    return rec.next_seq


def check_cut(store: Store, state: StreamState, cut: Mapping[int, int], *, option: str, url: str) -> dict[int, int]:
    """``cut`` as ``{int: int}`` if it is a cut of this stream, else :class:`InvalidCutError`
    naming ``option``, the bad entry and what the segment holds. ``url`` names the stream."""
    if not cut:
        raise InvalidCutError(
            f"{option}={{}}: an empty stream cut names no segment; give {{segment: seq}} for the "
            f"segments of {url} (Stream.cut_at(time) or `tstream cut {url} --at TIME` makes one)",
            option=option, value={})
    out: dict[int, int] = {}
    active = sorted(s.id for s in state.segments)
    for segment, seq in cut.items():
        segment, seq = int(segment), int(seq)
        written = _written(store, state, segment)
        if written is None:
            raise InvalidCutError(
                f"{option}: segment {segment} is not a segment of {url} (its active segments: "
                f"{active}; sealed ones are listed by `tstream info {url}`); a cut of another stream, "
                f"or a typo? Stream.cut_at(time) makes a cut of this one", option=option, value=dict(cut))
        if not 0 <= seq <= written:
            raise InvalidCutError(
                f"{option}: position {seq} of segment {segment} lies outside what it holds (_seq 0 to "
                f"{written - 1}; {written} means after all of it), in {url}; Stream.cut_at(time) makes "
                f"a cut of this stream", option=option, value=dict(cut))
        out[segment] = seq
    return out
