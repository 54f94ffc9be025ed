"""Where compacted records are read: views of macro-chunks standing in for planned small chunks.

Journal entries keep naming the small chunks a compaction (python/compaction/compact.py) replaced; a plan
made from journal positions calls :func:`substitute`, which replaces the chunks compacted since
by *views* of macro-chunks (``Chunk.offset`` = row offset in the file, ``floor`` 0), one view per
run of consecutive chunks, found in the macro map (python/maps/macromap.py). The state's
per-segment summary (:class:`~pyspark_tstream.journal.compaction_state.SegmentSummary`: compacted
up to ``_seq``, last position, chunks up to it, map bucket and version, end of the last
macro-chunk) says when no lookup is needed — zero reads for a tailing reader. :func:`plan_from_map`
reads a long compacted history from the map (one batched read) instead of the journal deltas of
every compacted commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..journal.ahead import Ahead
from ..journal.compaction_state import compaction_pos, segment_summaries
from ..journal.entries import Chunk
from ..journal.state import StreamState, segment_number
from ..maps.macromap import Macro, MacroMap
from ..store import layout
from ..store.storage import Store


@dataclass
class _View:
    """A run of consecutive planned chunks of one macro-chunk, growing while the plan is walked;
    it becomes one :class:`Chunk` view (``offset`` = its first row in the file, floor 0)."""

    macro: Macro
    seg: int
    seq: int
    rows: int
    lo: int
    hi: int
    sorted: bool

    def extends(self, c: Chunk) -> bool:
        """Whether ``c`` follows this view's records directly (so it joins it)."""
        return self.seq + self.rows == c.seq

    def extend(self, c: Chunk) -> None:
        self.sorted = self.sorted and c.sorted and self.hi < c.lo
        self.rows += c.rows
        self.lo, self.hi = min(self.lo, c.lo), max(self.hi, c.hi)

    def chunk(self) -> Chunk:
        m = self.macro
        return Chunk(seg=self.seg, path=m.path, rows=self.rows, bytes=_share(m, self.rows), seq=self.seq, floor=0,
                     lo=self.lo, hi=self.hi, offset=self.seq - m.first, sorted=self.sorted)


def named_versions(state: StreamState, first_pos: int) -> list[str]:
    """The macro-map versions the state names (those :func:`substitute` reads first) of the
    segments whose chunks at journal positions from ``first_pos`` on may be compacted: what a
    planner reads ahead in one batch with the index node of those positions, so that a cold
    seek into compacted data does not wait for the node to learn which buckets to read."""
    return [layout.macro_version(segment_number(seg), *bv) for seg, e in sorted(segment_summaries(state).items())
            if (bv := e.map_version) is not None and first_pos <= e.last_pos]


def substitute(store: Store, state: StreamState, chunks: Sequence[Chunk], maps: Any = None,
               ahead: Ahead | None = None) -> list[Chunk]:
    """``chunks`` with those compacted into macro-chunks replaced by views of them.

    Consecutive chunks of one macro-chunk become one view; order is kept otherwise (a view
    takes the place of its first chunk). Zero store calls when no chunk is below its segment's
    compacted-up-to ``_seq``; otherwise one batched read of the map versions the state names
    (the bucket each segment's last compaction wrote), plus 2 reads per other bucket touched.
    ``maps`` stands in for the stored map (anything with ``MacroMap.covering_many``): fsck plans
    against the map the journal determines (python/compaction/macro_rebuild.py) with it.
    ``ahead``: where the named versions may have been read ahead (:func:`named_versions`).
    """
    segs = segment_summaries(state)
    if not segs:
        return list(chunks)
    need: dict[int, list[Chunk]] = {}
    for c in chunks:
        e = segs.get(c.seg)
        if e is not None and c.floor != 0 and c.seq < e.lookup_end:
            need.setdefault(c.seg, []).append(c)
    if not need:
        return list(chunks)
    mm = maps if maps is not None else MacroMap(store)
    home: dict[tuple[int, int], Macro] = {}
    known = {seg: v for seg in need if (v := segs[seg].map_version) is not None}
    ranges = {seg: [(c.seq, c.seq + c.rows) for c in cs] for seg, cs in need.items()}
    found = mm.covering_many(ranges, known, ahead)
    for seg, cs in need.items():
        macros = found[seg]
        firsts = np.array([m.first for m in macros], dtype=np.int64)
        at = np.searchsorted(firsts, np.array([c.seq for c in cs], dtype=np.int64), side="right") - 1
        for c, i in zip(cs, at.tolist()):
            if i >= 0 and c.seq + c.rows <= macros[i].end:
                home[(c.seg, c.seq)] = macros[i]
    out: list[Chunk | _View] = []
    open_view: dict[str, _View] = {}  # macro path -> its newest view, being extended
    for c in chunks:
        m = home.get((c.seg, c.seq)) if c.floor != 0 else None
        if m is None or m.floor:  # not compacted, or listed as it is
            out.append(c)
            continue
        view = open_view.get(m.path)
        if view is not None and view.extends(c):
            view.extend(c)
            continue
        view = open_view[m.path] = _View(m, c.seg, c.seq, c.rows, c.lo, c.hi, c.sorted)
        out.append(view)
    return [x if isinstance(x, Chunk) else x.chunk() for x in out]


def plan_from_map(store: Store, state: StreamState, first: int, lo: int, hi: int,
                  ahead: Ahead | None = None) -> tuple[list[Chunk], int] | None:
    """The chunks of journal positions ``[first, P)`` that may hold ``lo < _tso <= hi``, read from
    the macro map instead of the journal: ``(chunks, P)``, or None when it cannot stand in.

    ``P`` is the compaction's scan position: every chunk committed below it is listed in the
    map version the state names for its segment (merged, or as it is), unless that version is
    :attr:`~pyspark_tstream.maps.macromap.Bucket.partial` (None then). One batched read,
    however many commits that covers (none of the versions read ``ahead``: :func:`named_versions`);
    used while each segment's map fits one bucket.
    """
    pos = compaction_pos(state)
    segs = segment_summaries(state)
    if pos <= first or not segs or any(not e.map_lists_all or e.map_version is None or e.bucket != 0
                                       for e in segs.values()):
        return None
    items = sorted((seg, int(e.version or 0)) for seg, e in segs.items())
    rels = [layout.macro_version(segment_number(seg), 0, v) for seg, v in items]
    blobs = ahead.take_present(rels) if ahead is not None else store.read_present(rels)
    mm = MacroMap(store)
    out = []
    for (seg, _), rel, data in zip(items, rels, blobs):
        if data is None:
            return None
        version = mm.decode(data, rel)
        if version.partial:  # some compacted records are in the journal's chunks only
            return None
        for m in version.macros:
            if m.hi > lo and m.lo <= hi:
                out.append(Chunk(seg=seg, path=m.path, rows=m.rows, bytes=m.bytes, seq=m.first, floor=m.floor,
                                 lo=m.lo, hi=m.hi, sorted=m.sorted))
    return out, pos


def _share(m: Macro, rows: int) -> int:
    """Bytes of a view: its rows' share of the macro-chunk (what reading it costs)."""
    return max(1, m.bytes * rows // max(m.rows, 1))
