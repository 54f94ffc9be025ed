"""A small stream with one of each thing the metadata tables show (tests/test_metadata*.py).

Appends from two writers, a split, a merge, a compaction, a truncation and a consumer group that
read part of the stream; :class:`Built` keeps what was done, so tests compare each table with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.results import ScaleResult
from pyspark_tstream.api.stream import Stream

#: Records each append brings (ten appends: five by each writer).
PER_APPEND = 20


@dataclass
class Built:
    """The stream and what was done to it, in order."""

    stream: Stream
    ops: list[tuple[str, str | None]] = field(default_factory=list)  # (operation, writer) per commit
    split: ScaleResult = field(default_factory=lambda: ScaleResult(0, (), ()))
    merge: ScaleResult = field(default_factory=lambda: ScaleResult(0, (), ()))
    group: str = "billing"
    delivered: int = 0
    appended: int = 0


def _batch(n: int, start: int, ms: int) -> pa.Table:
    return pa.table({"device": [f"d{(start + i) % 7}" for i in range(n)], "v": list(range(start, start + n)),
                     "ts": pa.array([ms + i for i in range(n)], pa.timestamp("ms", tz="UTC"))})


def build(url: str) -> Built:
    """The stream at ``url``: 4 segments, appends by ``alpha`` and ``beta`` around a split of the
    first segment, a merge of the last two, a compaction, a truncation of the oldest records, and
    group ``billing`` that read 50 records."""
    s = Stream.create(url, segments=4)
    b = Built(s)
    ms = 1_700_000_000_000

    def append(i: int) -> None:
        writer = "alpha" if i % 2 == 0 else "beta"
        s.append(_batch(PER_APPEND, i * PER_APPEND, ms + i * 1000), key="device", timestamp="ts",
                 writer_id=writer, batch_id=i)
        b.ops.append(("append", writer))
        b.appended += PER_APPEND

    for i in range(4):
        append(i)
    b.split = s.scale(split=s.state.segments[0].id)
    b.ops.append(("scale", None))
    for i in range(4, 6):
        append(i)
    ids = sorted(s.state.segments, key=lambda g: g.lo)
    b.merge = s.scale(merge=[ids[-2].id, ids[-1].id])
    b.ops.append(("scale", None))
    for i in range(6, 10):
        append(i)
    s.compact()
    b.ops.append(("compact", None))
    s.truncate(ms + 1500)  # the first append's records (and part of none other)
    b.ops.append(("truncate", None))
    g = Group.create(s, b.group, "0")
    b.delivered = g.read("c1", count=30).num_rows + g.read("c2", count=20).num_rows
    return b
