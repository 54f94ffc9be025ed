"""Packing a plan's chunks into read tasks: a pure function, like Kafka's ``KafkaOffsetRangeCalculator``.

Invariant: chunks in, :class:`~pyspark_tstream.read.task.ReadTask` s out, no store calls and
no Spark: how many tasks follows from the bytes planned and the parallelism
(:func:`partition_count`), and chunks go largest first into the emptiest task, a segment's
chunks staying in commit order inside a task (:func:`pack_tasks`).

The unit a task takes is a file, as Delta's and Iceberg's planners take one (:func:`file_units`):
the slices a read needs of one shared file (one per segment its writer wrote) go to one task,
which fetches and decodes the file once; spread over tasks, every task would fetch the file's
footer or its spans and decode its slices one by one. A task still holds one file at a time.
Views of a macro-chunk stay separate units: a macro-chunk is big, and its views spread the
decode of one big file over tasks.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..journal.entries import Chunk
from .task import ReadTask

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
    then at least ``min_partitions`` and at most ``max_partitions``; never more than ``chunks``
    (the units of a plan, :func:`file_units`: a task takes whole shared files).
    """
    slots = parallelism or DEFAULT_PARALLELISM
    n = max(-(-total_bytes // TARGET_PARTITION_BYTES), min(slots, total_bytes // MIN_PARTITION_BYTES), 1)
    if min_partitions is not None:
        n = max(n, min_partitions)
    if max_partitions is not None:
        n = min(n, max_partitions)
    return max(1, min(n, chunks))


def file_units(chunks: Sequence[Chunk]) -> list[list[int]]:
    """Indexes of ``chunks`` that go to one task together: the slices of one shared file, in
    plan order; any other chunk (a plain chunk, a view of a macro-chunk) alone."""
    units: list[list[int]] = []
    by_file: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        if not c.shared:
            units.append([i])
        elif c.path in by_file:
            by_file[c.path].append(i)
        else:
            by_file[c.path] = [i]
            units.append(by_file[c.path])
    return units


def pack_tasks(chunks: Sequence[Chunk], lo: int, hi: int, *, max_tasks: int,
               start_cut: dict[int, int] | None = None, end_cut: dict[int, int] | None = None) -> list[ReadTask]:
    """Group chunks into at most ``max_tasks`` tasks of similar size (largest unit first into
    the emptiest; a unit is a file, :func:`file_units`); a segment's chunks stay in commit
    order inside a task."""
    if not chunks:
        return []
    units = file_units(chunks)
    n = max(1, min(max_tasks, len(units)))
    sizes = [0] * n
    placed: list[list[int]] = [[] for _ in range(n)]
    weight = [sum(max(chunks[i].bytes, 1) for i in u) for u in units]
    for u in sorted(range(len(units)), key=lambda u: -weight[u]):
        b = sizes.index(min(sizes))
        placed[b].extend(units[u])
        sizes[b] += weight[u]
    sc = tuple(sorted((start_cut or {}).items()))
    ec = tuple(sorted((end_cut or {}).items()))
    return [ReadTask(tuple(chunks[i] for i in sorted(p)), lo, hi, sc, ec) for p in placed if p]


def plan_tasks(chunks: Sequence[Chunk], lo: int, hi: int, *, parallelism: int | None = None,
               min_partitions: int | None = None, max_partitions: int | None = None,
               start_cut: dict[int, int] | None = None, end_cut: dict[int, int] | None = None) -> list[ReadTask]:
    """The read tasks of a plan (see :func:`partition_count` for how many: at most one a file)."""
    total = sum(max(c.bytes, 1) for c in chunks)
    n = partition_count(total, len(file_units(chunks)), parallelism=parallelism, min_partitions=min_partitions,
                        max_partitions=max_partitions)
    return pack_tasks(chunks, lo, hi, max_tasks=n, start_cut=start_cut, end_cut=end_cut)
