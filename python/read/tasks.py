"""Packing a plan's chunks into read tasks: a pure function, like Kafka's ``KafkaOffsetRangeCalculator``.

Invariant: chunks in, :class:`~pyspark_tstream.read.reading.ReadTask` s out, no store calls and
no Spark: how many tasks follows from the bytes planned and the parallelism
(:func:`partition_count`), and chunks go largest first into the emptiest task, a segment's
chunks staying in commit order inside a task (:func:`pack_tasks`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..journal.entries import Chunk
from .reading import ReadTask

#: One task per this much data by default (like spark.sql.files.maxPartitionBytes).
TARGET_PARTITION_BYTES = 128 << 20
#: Below this per task, more tasks cost more than they save: a Python task costs ~40 ms however
#: little it reads, and reading costs ~5 ms per MB of chunk (decode in Python, rows in the JVM).
#: At 4 MB a small micro-batch ran in two waves of tasks on 2 cores instead of one: the
#: steady-state benchmark's 17 MB micro-batches took 0.27–0.31 s, at 8 MB 0.24–0.27 s
#: (tests/benchmarks/bench_stream_steady.py).
MIN_PARTITION_BYTES = 8 << 20
#: Task slots assumed when Spark's default parallelism cannot be known.
DEFAULT_PARALLELISM = 8


def partition_count(total_bytes: int, chunks: int, *, parallelism: int | None = None,
                    min_partitions: int | None = None, max_partitions: int | None = None) -> int:
    """How many tasks a read of ``total_bytes`` in ``chunks`` chunks gets.

    One per ``TARGET_PARTITION_BYTES``, and at least ``parallelism`` (Spark's default
    parallelism, else ``DEFAULT_PARALLELISM``) while each still gets ``MIN_PARTITION_BYTES``;
    then at least ``min_partitions`` and at most ``max_partitions``; never more than chunks.
    """
    slots = parallelism or DEFAULT_PARALLELISM
    n = max(-(-total_bytes // TARGET_PARTITION_BYTES), min(slots, total_bytes // MIN_PARTITION_BYTES), 1)
    if min_partitions is not None:
        n = max(n, min_partitions)
    if max_partitions is not None:
        n = min(n, max_partitions)
    return max(1, min(n, chunks))


def pack_tasks(chunks: Sequence[Chunk], lo: int, hi: int, *, max_tasks: int,
               start_cut: dict[int, int] | None = None, end_cut: dict[int, int] | None = None) -> list[ReadTask]:
    """Group chunks into at most ``max_tasks`` tasks of similar size (largest first into the
    emptiest); a segment's chunks stay in commit order inside a task."""
    if not chunks:
        return []
    n = max(1, min(max_tasks, len(chunks)))
    sizes = [0] * n
    placed: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(chunks)), key=lambda i: -chunks[i].bytes):
        b = sizes.index(min(sizes))
        placed[b].append(i)
        sizes[b] += max(chunks[i].bytes, 1)
    sc = tuple(sorted((start_cut or {}).items()))
    ec = tuple(sorted((end_cut or {}).items()))
    return [ReadTask(tuple(chunks[i] for i in sorted(p)), lo, hi, sc, ec) for p in placed if p]


def plan_tasks(chunks: Sequence[Chunk], lo: int, hi: int, *, parallelism: int | None = None,
               min_partitions: int | None = None, max_partitions: int | None = None,
               start_cut: dict[int, int] | None = None, end_cut: dict[int, int] | None = None) -> list[ReadTask]:
    """The read tasks of a plan (see :func:`partition_count` for how many)."""
    total = sum(max(c.bytes, 1) for c in chunks)
    n = partition_count(total, len(chunks), parallelism=parallelism, min_partitions=min_partitions,
                        max_partitions=max_partitions)
    return pack_tasks(chunks, lo, hi, max_tasks=n, start_cut=start_cut, end_cut=end_cut)
