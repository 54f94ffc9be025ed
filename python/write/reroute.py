"""Re-routing chunks written for a segment that a scale sealed (or a re-creation re-ranged)
before their commit.

A Spark task routes with the segment map it got at planning time; if a scale commits in
between, its chunk targets a sealed segment. The committer then gives the chunk to the single
active segment covering its key range, or, when successors split that range and the chunk has
a key column, splits the file by key (the raw timestamps travel with the records, so each part
is still strictly increasing).
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..chunkfile.checksums import VERIFY_CHECKSUMS, WRITE_CHECKSUMS
from ..epochs.routing import key_hash, route
from ..journal.state import Segment
from ..schema import RAW_TSO
from ..store import layout
from ..store.storage import Store
from ..timestamps import raw_marks
from .spec import ChunkInfo


def overlapping(info: ChunkInfo, segments: Sequence[Segment]) -> list[Segment]:
    """The ``segments`` whose key range meets the chunk's."""
    return [s for s in segments if s.lo < info.key_hi and info.key_lo < s.hi]


def reroute(store: Store, info: ChunkInfo, segments: Sequence[Segment]) -> list[ChunkInfo]:
    """Chunks equivalent to ``info`` that target active ``segments`` only."""
    targets = overlapping(info, segments)
    if len(targets) == 1 or (targets and info.key is None):
        return [replace(info, seg=targets[0].id, key_lo=targets[0].lo, key_hi=targets[0].hi)]
    table = pq.read_table(io.BytesIO(store.read(info.path)), **VERIFY_CHECKSUMS)
    if info.file_bytes or info.offset or table.num_rows != info.rows:
        # a slice of a shared file (write/shared.py): only its own rows, which start at offset
        table = table.slice(info.offset, info.rows)
    assert info.key is not None  # active segments cover every key: a keyless chunk has a target above
    ordered = sorted(segments, key=lambda s: s.lo)
    idx = route(key_hash(table.column(info.key), name=info.key), [s.lo for s in ordered])
    out = []
    for i in np.unique(idx):
        seg = ordered[int(i)]
        part = table.filter(pa.array(idx == i))
        rel = layout.reroute_chunk(seg.number, uuid.uuid4().hex)
        buf = io.BytesIO()
        pq.write_table(part, buf, **WRITE_CHECKSUMS)
        store.write(rel, buf.getvalue())
        raw = part.column(RAW_TSO).to_numpy()
        # a file of its own: no longer a slice of the shared file it came from
        out.append(replace(info, seg=seg.id, path=rel, rows=part.num_rows, bytes=len(buf.getvalue()),
                           raw_lo=int(raw[0]), raw_hi=int(raw[-1]), key_lo=seg.lo, key_hi=seg.hi,
                           marks=raw_marks(raw), offset=0, file_bytes=0, span_start=0,
                           span_bytes=0))
    return out
