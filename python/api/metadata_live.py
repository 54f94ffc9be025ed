"""The metadata tables of what is live now: ``groups`` (consumer lag) and ``files``.

One job: the two tables of :mod:`.metadata` that read more than metadata records. ``groups``
reads each group's log head (1 listing + 2 reads per group) and counts its lag the way
``Group.info`` does (:func:`~pyspark_tstream.api.scan.count_after`: journal metadata between
its cursor and the tick, plus the at most two chunks per segment that straddle either end).
``files`` plans the live range (one read per 32 journal positions, compacted macro-chunks in
place of the chunks they replaced): the files a read of the whole stream would open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import GroupNotFoundError
from ..journal.state import StreamState
from ..maps.grouplog import ALL_SEGMENTS, GroupLog, entry_id, group_names
from ..store import layout
from ..timestamps import now_ms, tso_id
from .scan import count_after

if TYPE_CHECKING:
    from .stream import Stream


def group_rows(stream: Stream, state: StreamState) -> list[dict[str, Any]]:
    """Per group, its own row (``consumer`` null: pending, records not yet delivered), then a
    row per consumer (its pending records; its lag is the group's, so null there)."""
    rows: list[dict[str, Any]] = []
    now = now_ms()
    for name in sorted(group_names(stream.store)):
        try:
            g = GroupLog(stream.store, name).head()
        except GroupNotFoundError:
            continue  # a folder left by a create that crashed before writing version 0
        per: dict[str, int] = {}
        for p in g.pending:
            per[p.consumer] = per.get(p.consumer, 0) + 1
        tso, seg, seq = g.last
        # as Group.info prints it: a cursor at a time alone (every segment) is a bare id
        if seg in (ALL_SEGMENTS, -1):
            last = tso_id(max(tso, 0))
        else:
            last = f"{tso_id(tso)}@{seg}" if seq == ALL_SEGMENTS else entry_id(tso, seg, seq)
        rows.append({"group": name, "consumer": None, "pending": len(g.pending),
                     "lag_records": count_after(stream, g.last, state.tick), "delivered": g.delivered,
                     "acked": g.acked, "last_delivered_id": last, "idle_ms": None})
        rows.extend({"group": name, "consumer": c, "pending": per.get(c, 0), "lag_records": None,
                     "delivered": None, "acked": None, "last_delivered_id": None,
                     "idle_ms": max(now - seen, 0)}
                    for c, (seen, _active) in sorted(g.consumers.items()))
    return rows


def file_rows(stream: Stream, state: StreamState) -> list[dict[str, Any]]:
    """One row per live data file of one segment (a chunk or a compacted macro-chunk); a shared
    file (one Spark task's file for several segments) has a row per segment's slice of it and
    its own row (``segment`` null, kind ``shared``, its whole size)."""
    if state.rows == 0:
        return []
    hi = max(state.max_tso, state.tick)
    rows: list[dict[str, Any]] = []
    shared: dict[str, tuple[int, int]] = {}
    for c in stream.plan(state.head_tso, hi):
        kind = "macro" if layout.is_macro_chunk(c.path) else "chunk"
        rows.append({"path": c.path, "segment": c.seg, "records": c.rows, "bytes": c.bytes, "kind": kind,
                     "first_seq": c.seq})
        if c.shared:
            records, _ = shared.get(c.path, (0, 0))
            shared[c.path] = (records + c.rows, c.file_bytes)
    rows.extend({"path": path, "segment": None, "records": records, "bytes": size, "kind": "shared",
                 "first_seq": None} for path, (records, size) in shared.items())
    return sorted(rows, key=lambda r: (r["path"], r["segment"] is not None, r["segment"] or 0))
