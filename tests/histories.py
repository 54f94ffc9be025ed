"""Long stream histories built with the real commit and scale code (for budgets and benchmarks).

Chunks are metadata-only (no data files): the operations these histories measure — open, poll,
seek, commit, scale, truncate — never open data files, and 100,000 commits then take a minute.
"""

from __future__ import annotations

import uuid

from pyspark_tstream.stream import Stream
from pyspark_tstream.timestamps import pack
from pyspark_tstream.writing import ChunkInfo

T0 = 1_000_000


def commit_history(n: int, url: str | None = None, segments: int = 4) -> Stream:
    """A stream with ``n`` data commits, each one small chunk at increasing times."""
    s = Stream.create(url or f"memory://hist-{uuid.uuid4().hex}/s", segments=segments)
    for i in range(n):
        add_commit(s, i)
    return s


def add_commit(s: Stream, i: int, writer: str = "w") -> None:
    ms = T0 + i * 10
    seg = s.state.segments[i % len(s.state.segments)]
    s.commit([ChunkInfo(seg=seg.id, path=f"data/{seg.number}/fake-{uuid.uuid4().hex[:8]}.parquet", rows=5,
                        bytes=500, raw_lo=pack(ms), raw_hi=pack(ms + 4), key_lo=seg.lo, key_hi=seg.hi)],
             writer_id=f"{writer}{i % 3}", batch_id=i)


def epoch_history(n: int, url: str | None = None) -> Stream:
    """A stream scaled ``n`` times (split and merge in turn), with a commit after each scale."""
    s = Stream.create(url or f"memory://epochs-{uuid.uuid4().hex}/s", segments=2)
    for i in range(n):
        first = s.state.segments[0]
        if i % 2 == 0:
            s.scale(split=first.id, parts=2)
        else:
            s.scale(merge=[first.id, s.state.segments[1].id])
        add_commit(s, i)
    return s
