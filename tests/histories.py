"""Long stream histories built with the real commit and scale code (for budgets and benchmarks).

Chunks are metadata-only (no data files): the operations these histories measure — open, poll,
seek, commit, scale, truncate — never open data files, and 100,000 commits then take a minute.
"""

from __future__ import annotations

import io
import shutil
import uuid
from collections.abc import Collection

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.read import planner
from pyspark_tstream.read.ends import Limits
from pyspark_tstream.read.reading import chunk_tsos, read_table
from pyspark_tstream.read.window import Window
from pyspark_tstream.schema import RAW_TSO
from pyspark_tstream.timestamps import pack, raw_hybrid, raw_marks
from pyspark_tstream.write.spec import ChunkInfo, WriteSpec
from pyspark_tstream.write.writing import write_batches

#: The user schema of histories with real data files (``real=`` commits).
SCHEMA = pa.schema([("v", pa.int64())])

HISTORY_T0 = 1_000_000


def three_writer_history(n: int, name: str) -> Stream:
    """A ``memory://`` stream of 4 segments with ``n`` metadata-only commits by writers ``w0``-``w2``
    in turn (batch ids 0, 1, ...), one 5-record chunk each, a segment each in turn, 10 ms apart."""
    s = Stream.create(f"memory://{name}-{uuid.uuid4().hex}/s", segments=4)
    for i in range(n):
        ms = HISTORY_T0 + i * 10
        seg = s.state.segments[i % 4].id
        s.commit([ChunkInfo(seg=seg, path=f"data/{seg}/fake-{i}.parquet", rows=5, bytes=500,
                            raw_lo=pack(ms), raw_hi=pack(ms + 4))], writer_id=f"w{i % 3}", batch_id=i)
    return s


def commit_history(n: int, url: str | None = None, segments: int = 4, real: Collection[int] = ()) -> Stream:
    """A stream with ``n`` data commits, each one small chunk at increasing times.

    Commits whose index is in ``real`` write a real data file (5 records, column ``v`` = 5 * i +
    row); the others are metadata only, so a read that touches one fails: reads of such
    histories prove they open only the files they need.
    """
    # compaction off: most chunks are metadata only, so a merge would fail (and retry) on them
    s = Stream.create(url or f"memory://hist-{uuid.uuid4().hex}/s", segments=segments,
                      schema=SCHEMA if len(real) else None, compaction="off")
    for i in range(n):
        add_commit(s, i, real=i in real)
    return s


def add_commit(s: Stream, i: int, writer: str = "w", real: bool = False) -> None:
    ms = HISTORY_T0 + i * 10
    seg = s.state.segments[i % len(s.state.segments)]
    path = f"data/{seg.number}/fake-{uuid.uuid4().hex[:8]}.parquet"
    raw = raw_hybrid(ms + np.arange(5, dtype=np.int64))
    if real:
        buf = io.BytesIO()
        pq.write_table(pa.table({"v": np.arange(5 * i, 5 * i + 5, dtype=np.int64), RAW_TSO: raw}), buf)
        s.store.write(path, buf.getvalue())
    s.commit([ChunkInfo(seg=seg.id, path=path, rows=5, bytes=500, raw_lo=int(raw[0]), raw_hi=int(raw[-1]),
                        key_lo=seg.lo, key_hi=seg.hi, marks=raw_marks(raw))],
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


def overlapping_chunks(url: str, n: int = 1000, tasks: int = 3, same_ms: int = 1) -> Stream:
    """What ``spark.range(n).repartition(tasks)`` with a client timestamp column writes: one
    chunk per task (each to its own segment), each holding every ``tasks``-th id, so the chunks
    overlap in time; each millisecond holds ``same_ms`` records. One commit."""
    s = Stream.create(url, segments=tasks)
    t0 = 1_700_000_000_000
    table = pa.table({"id": list(range(n)), "t": [t0 + i // same_ms for i in range(n)]})
    spec = s.write_spec(table.schema, timestamp="t")
    infos = []
    for k, seg in enumerate(s.state.segments):
        one = WriteSpec(**{**spec.__dict__, "segment_ids": (seg.id,), "bounds": (seg.lo,)})
        infos += write_batches(one, [table.filter(pa.array(np.arange(n) % tasks == k))])
    s.commit(infos, schema=table.schema)
    return s


def micro_batches(s: Stream, limits: Limits, exact: bool = True) -> list[tuple[int, int, pa.Table]]:
    """``(lo, end, records)`` of each micro-batch up to the tick, planned as the streaming source
    plans them (one planner Window across batches, with or without exact cuts)."""
    state = s.refresh()
    window = Window(s.journal, load=(lambda c: chunk_tsos(s.store, c)) if exact else None)
    lo, out = state.head_tso, []
    while lo < state.tick:
        p = planner.plan(window, state, lo, state.tick, limits)
        out.append((lo, p.hi, read_table(s.store, s.schema, p.chunks, lo, p.hi)))
        lo = p.hi
        window.forget_before(p.first_pos)
    return out


def clone(url: str) -> str:
    """A copy of the ``memory://`` or ``file://`` stream at ``url`` under a new root (bytes
    copied, so writes to either never show in the other); building a 100,000-commit history
    costs minutes, this a fraction of a second."""
    if url.startswith("file://"):
        dst = f"{url.rstrip('/')}-clone-{uuid.uuid4().hex[:8]}"
        shutil.copytree(url.removeprefix("file://"), dst.removeprefix("file://"))
        return dst
    from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

    src = "/" + url.removeprefix("memory://").strip("/") + "/"
    dst = f"/clone-{uuid.uuid4().hex}/s/"
    fs = MemoryFileSystem()
    for key, f in list(MemoryFileSystem.store.items()):
        if key.startswith(src):
            path = dst + key[len(src):]
            MemoryFileSystem.store[path] = MemoryFile(fs, path, f.getvalue())
    return f"memory://{dst.rstrip('/')}"


def drop(url: str) -> None:
    """Remove the ``memory://`` or ``file://`` stream at ``url`` (a crash loop's checked copy):
    ``memory://`` lists scan every key in the process, so a loop that keeps its copies slows
    itself down."""
    if url.startswith("memory://"):
        from fsspec.implementations.memory import MemoryFileSystem

        prefix = "/" + url.removeprefix("memory://").strip("/") + "/"
        for key in [k for k in MemoryFileSystem.store if k.startswith(prefix)]:
            MemoryFileSystem.store.pop(key, None)
    else:
        shutil.rmtree(url.removeprefix("file://"), ignore_errors=True)
