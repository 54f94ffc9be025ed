"""When a shared file (wide writes) may go: no live slice names it any more.

A Spark task's shared file holds slices of many segments (python/write/shared.py), all committed
by one journal entry. Compaction merges a segment's slices into its macro-chunks one segment at
a time, so a shared file is not "replaced" by any one compaction: each compaction's manifest
names the shared files of the slices it merged as *candidates*, with the position that
committed them, and vacuum decides per candidate, when it collects that compaction
(:func:`~.gc.collect_replaced`, i.e. once the compaction is older than the grace period).

The rule (no listing, nothing on the commit path): a candidate goes when every one of its
slices, read from the entry that committed them, is

* truncated before the grace period began (``hi <= head_tso`` of the state at the newest
  position older than the grace), or
* compacted before it (``_seq`` end at or below that state's compacted-up-to ``_seq`` for its
  segment) into a macro-chunk that is not the file itself: the macro map (the version the
  current state names, else the newest) holds the slice's ``_seq`` range in a macro-chunk of
  another path, which is there and readable (:func:`readable`: one that is gone or damaged
  leaves the slice the only copy of its records, which repair lists in its place). A slice
  compaction passed over is listed in the map as it is, under the shared file's path: the
  file then stays.

So readers that planned before the last of those compactions (or truncations) committed keep
their file for the grace period, as replaced files do; reads of compacted slices go to the map.
The last compaction that merges a slice of the file names it too, so the file is decided again
when that compaction is collected. A candidate whose entry is already collected below the
journal's GC position, or whose grace-time state is no longer readable, stays (truncation's
garbage collection deletes a shared file with its last slice; orphan cleanup keeps it).
"""

from __future__ import annotations

import logging

from ..journal.compaction_state import compacted_upto, segment_summaries
from ..journal.entries import Chunk
from ..journal.journal import Journal
from ..journal.state import StreamState
from ..maps.macromap import MacroMap
from ..store.storage import Store

log = logging.getLogger("pyspark_tstream")


def readable(store: Store, path: str, rows: int) -> bool:
    """Whether the macro-chunk ``path`` is there and readable with at least ``rows`` rows (a
    footer read). Only then may the files it replaced go: otherwise they may be the only copy."""
    from ..read.footers import footer_rows  # a footer read, only where files may go

    # missing, no footer, a footer that does not decode (OSError), or a store failure taken as
    # unreadable too: the files then stay, until truncation's collection takes them with their last slice
    try:
        return footer_rows(store, path, store.size(path)) >= rows
    except (ValueError, OSError):
        return False


def dead_shared(store: Store, journal: Journal, state: StreamState, upto: int,
                candidates: dict[str, int]) -> list[str]:
    """The shared files among ``candidates`` (path -> committing position) no live slice names
    any more, as of the grace boundary ``upto`` (the first journal position newer than the grace).

    Store calls: the entry at ``upto - 1``, one delta read per committing position, the map
    buckets of the candidates' slices (:meth:`MacroMap.covering_many`) and a footer read per
    macro-chunk holding them; none when no candidate.
    """
    if not candidates or upto <= 0:
        return []
    then = journal.try_entry(upto - 1)
    if then is None:  # collected already: the grace-time state is unknown, keep them all
        log.debug("tstream: journal entry %d is gone; shared files %s are decided later", upto - 1, sorted(candidates))
        return []
    old = then.state
    slices: dict[str, list[Chunk]] = {path: [] for path in candidates}
    for pos in sorted(set(candidates.values())):
        if pos < state.gc_pos or pos > state.pos:
            continue  # below the GC position: truncation's garbage collection owns it
        for d in journal.deltas(state, pos, pos, truncated=True):
            for c in d.chunks:
                if c.shared and candidates.get(c.path) == pos:
                    slices[c.path].append(c)
    check: dict[str, list[Chunk]] = {}
    for path, cs in slices.items():
        if not cs:
            continue
        live = [c for c in cs if c.hi > old.head_tso]
        if all(c.seq + c.rows <= compacted_upto(old, c.seg) for c in live):
            check[path] = live
    ranges: dict[int, list[tuple[int, int]]] = {}
    for cs in check.values():
        for c in cs:
            ranges.setdefault(c.seg, []).append((c.seq, c.seq + c.rows))
    known = {seg: bv for seg, s in segment_summaries(state).items() if (bv := s.map_version) is not None}
    held = MacroMap(store).covering_many(ranges, known) if ranges else {}
    holding = {m.path: m.rows for cs in check.values() for c in cs for m in held.get(c.seg, [])
               if m.first <= c.seq and c.seq + c.rows <= m.end and m.path not in check}
    there = {rel for rel, rows in holding.items() if readable(store, rel, rows)}
    out = []
    for path, cs in check.items():
        if all(any(m.first <= c.seq and c.seq + c.rows <= m.end and m.path != path and m.path in there
                   for m in held.get(c.seg, []))
               and not any(m.path == path for m in held.get(c.seg, [])) for c in cs):
            out.append(path)
    return sorted(out)
