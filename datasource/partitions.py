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

#: Like spark.sql.files.maxPartitionBytes: above this, a partition is split.
TARGET_PARTITION_BYTES = 128 << 20
#: Like the native source's openCostInBytes floor: smaller partitions cost more than they save.
MIN_PARTITION_BYTES = 4 << 20


@dataclass
class TStreamPartition(InputPartition):
    """One Spark task: chunks to read and the ``_tso`` range (and cuts) to keep."""

    task: ReadTask

    def __init__(self, task: ReadTask) -> None:
        super().__init__(task)
        self.task = task


def plan_partitions(chunks: Sequence[Chunk], lo: int, hi: int, *, min_partitions: int | None = None,
                    start_cut: dict[int, int] | None = None,
                    end_cut: dict[int, int] | None = None) -> list[TStreamPartition]:
    """Pack chunks into few partitions, sized like Spark's file source.

    Each extra task costs ~40 ms, so small batches get one partition; large ones are split into
    about ``min_partitions`` (default: this machine's cores) of at most 128 MB each.
    """
    cores = min_partitions or os.cpu_count() or 2
    total = sum(c.bytes for c in chunks)
    per = max(MIN_PARTITION_BYTES, min(TARGET_PARTITION_BYTES, total // max(cores, 1)))
    max_tasks = max(cores, -(-total // TARGET_PARTITION_BYTES))
    tasks = pack_tasks(chunks, lo, hi, max_tasks=max_tasks, min_task_bytes=per,
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
