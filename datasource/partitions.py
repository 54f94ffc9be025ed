"""Input partitions and the stateless ``read`` both Spark readers share."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from pyspark_tstream.journal import Chunk
from pyspark_tstream.reading import ReadTask, pack_tasks
from pyspark_tstream.storage import Store

#: Like spark.sql.files.maxPartitionBytes, but 4x: a Python task costs ~40 ms more than a JVM
#: one and streams its chunks one at a time, so larger partitions cost no memory (on 2 cores, 2
#: partitions of a 414 MB batch read ~15 % faster than 4).
TARGET_PARTITION_BYTES = 512 << 20
#: Like the native source's openCostInBytes floor: smaller partitions cost more than they save.
MIN_PARTITION_BYTES = 4 << 20


@dataclass
class TStreamPartition(InputPartition):
    """One Spark task: chunks to read and the ``_tso`` range (and cuts) to keep."""

    task: ReadTask

    def __init__(self, task: ReadTask) -> None:
        super().__init__(task)
        self.task = task


def partition_count(total_bytes: int, chunks: int, cores: int) -> int:
    """How many partitions a read of ``total_bytes`` in ``chunks`` chunks gets on ``cores`` slots.

    Whole waves of ``cores`` partitions of at most :data:`TARGET_PARTITION_BYTES`: a last wave
    with fewer tasks than slots leaves cores idle (3 partitions on 2 cores take as long as 4),
    and each extra task costs ~40 ms, so there are never more than needed. A batch too small to
    give every slot :data:`MIN_PARTITION_BYTES` gets fewer partitions (one when tiny).
    """
    cores = max(cores, 1)
    waves = -(-total_bytes // (cores * TARGET_PARTITION_BYTES))
    n = min(max(waves, 1) * cores, total_bytes // MIN_PARTITION_BYTES)
    return max(1, min(n, chunks))


def plan_partitions(chunks: Sequence[Chunk], lo: int, hi: int, *, min_partitions: int | None = None,
                    start_cut: dict[int, int] | None = None,
                    end_cut: dict[int, int] | None = None) -> list[TStreamPartition]:
    """Pack chunks into few partitions of similar size, in whole waves of the cores.

    ``min_partitions`` (default: this machine's cores) is the number of task slots; see
    :func:`partition_count` for how many partitions a batch gets.
    """
    cores = min_partitions or os.cpu_count() or 2
    total = sum(max(c.bytes, 1) for c in chunks)
    n = partition_count(total, len(chunks), cores)
    tasks = pack_tasks(chunks, lo, hi, max_tasks=n, min_task_bytes=max(1, total // n),
                       start_cut=start_cut, end_cut=end_cut)
    return [TStreamPartition(t) for t in tasks]


def read_partition(store: Store, user_schema_b64: str, target: Any, partition: TStreamPartition) -> Iterator[Any]:
    """Arrow record batches of one partition, shaped exactly as Spark expects."""
    from pyspark_tstream.reading import read_task
    from pyspark_tstream.schema import decode_schema

    from .arrow import to_spark_batch

    schema = decode_schema(user_schema_b64)
    for batch in read_task(store, schema, partition.task):
        yield to_spark_batch(batch, target)
