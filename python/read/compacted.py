"""Where compacted records are read: views of macro-chunks standing in for planned small chunks.

Journal entries keep naming the small chunks a compaction (python/compaction.py) replaced; a plan
made from journal positions calls :func:`substitute`, which replaces the chunks compacted since
by *views* of macro-chunks (``Chunk.offset`` = row offset in the file, ``floor`` 0), one view per
run of consecutive chunks, found in the macro map (python/macromap.py). The state's per-segment
summary (``state.compaction["segs"][seg]``: compacted up to ``_seq``, last position, chunks up to
it, map bucket and version, end of the last macro-chunk) says when no lookup is needed — zero
reads for a tailing reader. :func:`plan_from_map` reads a long compacted history from the map
(one batched read) instead of the journal deltas of every compacted commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..journal.entries import Chunk
from ..journal.state import StreamState
from ..maps.macromap import Macro, MacroMap, version_path
from ..store.storage import Store


def segment_summaries(state: StreamState) -> dict[str, list[int]]:
    """``state.compaction["segs"]``: per segment id (text), what compaction reached (§6.4)."""
    return state.compaction.get("segs", {}) if state.compaction else {}


def compacted_upto(state: StreamState, seg: int) -> int:
    """The ``_seq`` below which the segment's chunks have been compacted (or left as they are)."""
    e = segment_summaries(state).get(str(seg))
    return int(e[0]) if e else 0


def substitute(store: Store, state: StreamState, chunks: Sequence[Chunk], maps: Any = None) -> list[Chunk]:
    """``chunks`` with those compacted into macro-chunks replaced by views of them.

    Consecutive chunks of one macro-chunk become one view; order is kept otherwise (a view
    takes the place of its first chunk). Zero store calls when no chunk is below its segment's
    compacted-up-to ``_seq``; otherwise one batched read of the map versions the state names
    (the bucket each segment's last compaction wrote), plus 2 reads per other bucket touched.
    ``maps`` stands in for the stored map (anything with ``MacroMap.covering_many``): fsck plans
    against the map the journal determines (python/macro_rebuild.py) with it.
    """
    segs = segment_summaries(state)
    if not segs:
        return list(chunks)
    need: dict[int, list[Chunk]] = {}
    for c in chunks:
        e = segs.get(str(c.seg))
        if e is not None and c.floor != 0 and c.seq < (e[5] if len(e) >= 6 else e[0]):
            need.setdefault(c.seg, []).append(c)
    if not need:
        return list(chunks)
    mm = maps if maps is not None else MacroMap(store)
    home: dict[tuple[int, int], Macro] = {}
    known = {seg: (int(segs[str(seg)][3]), int(segs[str(seg)][4])) for seg in need
             if len(segs[str(seg)]) >= 5 and segs[str(seg)][4] >= 0}
    found = mm.covering_many({seg: [(c.seq, c.seq + c.rows) for c in cs] for seg, cs in need.items()}, known)
    for seg, cs in need.items():
        macros = found[seg]
        firsts = np.array([m.first for m in macros], dtype=np.int64)
        at = np.searchsorted(firsts, np.array([c.seq for c in cs], dtype=np.int64), side="right") - 1
        for c, i in zip(cs, at.tolist()):
            if i >= 0 and c.seq + c.rows <= macros[i].end:
                home[(c.seg, c.seq)] = macros[i]
    out: list[Chunk | list] = []
    open_view: dict[str, list] = {}  # macro path -> its newest view, being extended
    for c in chunks:
        m = home.get((c.seg, c.seq)) if c.floor != 0 else None
        if m is None or m.floor:  # not compacted, or listed as it is
            out.append(c)
            continue
        v = open_view.get(m.path)
        if v is not None and v[2] + v[3] == c.seq:  # [macro, seg, seq, rows, lo, hi, sorted]
            v[3] += c.rows
            v[6] = v[6] and c.sorted and v[5] < c.lo
            v[4], v[5] = min(v[4], c.lo), max(v[5], c.hi)
            continue
        v = open_view[m.path] = [m, c.seg, c.seq, c.rows, c.lo, c.hi, c.sorted]
        out.append(v)
    return [x if isinstance(x, Chunk) else
            Chunk(seg=x[1], path=x[0].path, rows=x[3], bytes=_share(x[0], x[3]), seq=x[2], floor=0, lo=x[4],
                  hi=x[5], offset=x[2] - x[0].first, sorted=x[6]) for x in out]


def plan_from_map(store: Store, state: StreamState, first: int, lo: int, hi: int) -> tuple[list[Chunk], int] | None:
    """The chunks of journal positions ``[first, P)`` that may hold ``lo < _tso <= hi``, read from
    the macro map instead of the journal: ``(chunks, P)``, or None when it cannot stand in.

    ``P`` is the compaction's scan position: every chunk committed below it is listed in the
    map version the state names for its segment (merged, or as it is). One batched read,
    however many commits that covers; used while each segment's map fits one bucket.
    """
    comp = state.compaction or {}
    pos = int(comp.get("pos", 0))
    segs = comp.get("segs", {})
    if pos <= first or not segs or any(len(e) < 6 or e[3] != 0 or e[4] < 0 for e in segs.values()):
        return None
    items = sorted((int(k), int(e[4])) for k, e in segs.items())
    rels = [version_path(seg, 0, v) for seg, v in items]
    try:
        blobs = store.read_many(rels)
    except FileNotFoundError:
        return None
    mm = MacroMap(store)
    out = []
    for (seg, _), rel, data in zip(items, rels, blobs):
        for m in mm.decode(data, rel).macros:
            if m.hi > lo and m.lo <= hi:
                out.append(Chunk(seg=seg, path=m.path, rows=m.rows, bytes=m.bytes, seq=m.first, floor=m.floor,
                                 lo=m.lo, hi=m.hi, sorted=m.sorted))
    return out, pos


def _share(m: Macro, rows: int) -> int:
    """Bytes of a view: its rows' share of the macro-chunk (what reading it costs)."""
    return max(1, m.bytes * rows // max(m.rows, 1))
