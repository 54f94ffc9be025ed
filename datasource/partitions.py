"""Input partitions and the stateless ``read`` both Spark readers share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from pyspark_tstream.entries import Chunk
from pyspark_tstream.planner import ReadTask, plan_tasks
from pyspark_tstream.storage import Store


@dataclass
class TStreamPartition(InputPartition):
    """One Spark task: chunks to read and the ``_tso`` range (and cuts) to keep."""

    task: ReadTask

    def __init__(self, task: ReadTask) -> None:
        super().__init__(task)
        self.task = task


def spark_parallelism() -> int | None:
    """``spark.default.parallelism`` of the active session, when this process has one.

    The Python data source planner usually runs in a worker process without a session: then
    None, and the planner assumes ``DEFAULT_PARALLELISM`` (never this machine's cores, which
    say nothing about the executors).
    """
    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            return None
        conf = spark.conf.get("spark.default.parallelism", None)
        if conf:
            return int(conf)
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect or no JVM: fall back to the constant
        return None


def plan_partitions(chunks: Sequence[Chunk], lo: int, hi: int, *, min_partitions: int | None = None,
                    max_partitions: int | None = None, start_cut: dict[int, int] | None = None,
                    end_cut: dict[int, int] | None = None) -> list[TStreamPartition]:
    """The Spark partitions of a plan: :func:`~pyspark_tstream.planner.plan_tasks` with the
    ``minPartitions``/``maxPartitions`` options and Spark's default parallelism."""
    tasks = plan_tasks(chunks, lo, hi, parallelism=spark_parallelism(), min_partitions=min_partitions,
                       max_partitions=max_partitions, start_cut=start_cut, end_cut=end_cut)
    return [TStreamPartition(t) for t in tasks]


def read_partition(store: Store, user_schema_b64: str, target: Any, partition: TStreamPartition) -> Iterator[Any]:
    """Arrow record batches of one partition, shaped exactly as Spark expects."""
    from pyspark_tstream.reading import read_task
    from pyspark_tstream.schema import decode_schema

    from .arrow import to_spark_batch

    schema = decode_schema(user_schema_b64)
    for batch in read_task(store, schema, partition.task):
        yield to_spark_batch(batch, target)
