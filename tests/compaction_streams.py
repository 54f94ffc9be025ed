"""Streams for the compaction tests: filled with small appends, compared record for record.

Shared by ``test_compaction.py``, ``test_compaction_races.py`` and ``test_compaction_damage.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from helpers import ORDER, T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.epochs.routing import key_hash, route
from pyspark_tstream.write.commit import Ack
from pyspark_tstream.write.writing import write_batches


def append_plain(s: Stream, table: pa.Table, *, key: str, timestamp: str | None = None, **commit: Any) -> Ack:
    """``s.append(table, key=..., timestamp=...)`` as one commit of a plain chunk file per
    segment. ``Stream.append`` writes one file for all of them, a slice per segment
    (tests/test_append_files.py pins compaction, retention and repair on those); these suites
    pin the same operations on plain chunks, the files a segment's own rows make."""
    spec = s.appending.write_spec(table.schema, key=key, timestamp=timestamp)
    idx = route(key_hash(table.column(key), name=key), spec.bounds)
    chunks = []
    for i in np.unique(idx):  # each segment's rows alone: one plain file each, in segment order
        rows = table.filter(pa.array(idx == i))
        chunks += write_batches(spec, [rows], ordered=True)
    return s.commit(chunks, schema=table.schema, fresh=True, **commit)


def fill_stream(url: str, appends: int = 60, rows: int = 5, segments: int = 3, writer: str | None = None,
                start: int = 0, **config: object) -> Stream:
    """``appends`` small appends of ``rows`` records (keys k0..k10, batch ``b``, time ``t``) to a
    new stream with compaction off, or to the existing one when ``start`` > 0; a plain chunk
    file per segment each (:func:`append_plain`)."""
    s = Stream.open(url) if start else Stream.create(url, segments=segments, compaction="off", **config)
    for b in range(start, start + appends):
        append_plain(s, pa.table({"k": [f"k{(b * 7 + i) % 11}" for i in range(rows)], "b": [b] * rows,
                                  "i": list(range(rows)), "t": [T0 + b * 100 + i for i in range(rows)]}),
                     key="k", timestamp="t", writer_id=writer, batch_id=b if writer else None)
    return s


def planned_files(s: Stream) -> set[str]:
    """The files a read of the whole stream opens."""
    st = s.refresh()
    return {c.path for c in s.plan(st.head_tso, st.tick)}


def same_records(a: pa.Table, b: pa.Table) -> None:
    """``b`` holds exactly ``a``'s records, and reads in ``_tso`` order."""
    assert a.num_rows == b.num_rows
    assert a.sort_by(ORDER).equals(b.sort_by(ORDER)), "records differ"
    assert np.all(np.diff(b["_tso"].to_numpy()) >= 0), "read not ordered by _tso"


def small_chunks_exist(s: Stream) -> list[bool]:
    """For every chunk the journal's appends named, whether its file is still there."""
    st = s.refresh()
    return [s.store.exists(c.path) for d in s.journal.deltas(st, 1, st.pos) for c in d.chunks]
