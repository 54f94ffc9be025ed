"""The ``info`` snapshot of a stream: tick, epochs, segments, writers, sizes, for humans and tools.

One job: describe a state as a :class:`~pyspark_tstream.api.results.StreamInfo` (a pure function
of the state; no store calls).
"""

from __future__ import annotations

import pyarrow as pa

from ..epochs.routing import fraction
from ..journal.compaction_state import compacted_upto
from ..journal.state import StreamState
from ..timestamps import iso, physical, tso_id
from .results import SchemaChange, SegmentInfo, StreamInfo, WriterInfo


def describe(url: str, s: StreamState, schema: pa.Schema | None) -> StreamInfo:
    """Tick, epochs, segments, writers, first/last ids and sizes of the stream at ``url`` in ``s``."""
    return StreamInfo(
        url=url, position=s.pos, epoch=s.epoch,
        tick=s.tick, tick_id=tso_id(s.tick), tick_time=iso(physical(s.tick)) if s.tick else None,
        first_id=tso_id(s.first_tso) if s.first_tso else None,
        last_id=tso_id(s.max_tso) if s.max_tso else None,
        first_time=iso(physical(s.first_tso)) if s.first_tso else None,
        last_time=iso(physical(s.max_tso)) if s.max_tso else None,
        rows=s.rows, bytes=s.bytes, chunks=s.chunks,
        segments=tuple(
            SegmentInfo(id=g.id, epoch=g.epoch, number=g.number, key_range=(fraction(g.lo), fraction(g.hi)),
                        rows=g.rows, bytes=g.bytes, chunks=g.chunks, first_seq=g.first_seq,
                        next_seq=g.next_seq, last_id=tso_id(g.last_tso) if g.last_tso else None,
                        compacted_seq=compacted_upto(s, g.id))
            for g in s.segments),
        writers={
            wid: WriterInfo(live=w.live, last_id=tso_id(w.tso) if w.tso else None,
                            last_commit=iso(w.wall) if w.wall else None, commits=w.commits, rows=w.rows)
            for wid, w in s.writers.items()},
        sealed_segments=s.sealed,
        schema=tuple(f"{f.name} {f.type}" for f in schema) if schema is not None else None,
        schema_history=tuple(schema_history(s, schema)),
        config=s.config.to_json(),
        created=iso(s.created),
    )


def schema_history(s: StreamState, schema: pa.Schema | None) -> list[SchemaChange]:
    """The stream's columns by the commit that brought them: the first columns (``position``
    None: fixed at creation or by the first write), then each ``mergeSchema`` change with its
    journal position, time and added columns, as ``s.schema_changes`` records them (a change an
    older pyspark-tstream wrote has no record: its columns count as first)."""
    if schema is None:
        return []
    changes = s.schema_changes
    later = {n for c in changes for n in c.columns}
    out = [SchemaChange(None, None, tuple(f"{f.name} {f.type}" for f in schema if f.name not in later))]
    for c in changes:
        out.append(SchemaChange(c.pos, iso(c.wall),
                                tuple(f"{n} {schema.field(n).type}" for n in c.columns if n in schema.names)))
    return out
