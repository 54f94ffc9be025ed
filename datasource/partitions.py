"""Spark input partitions that carry everything an executor needs, and the read that uses only them.

Invariant: a :class:`TStreamPartition` is self-sufficient, like Spark's
``KafkaBatchInputPartition``: it holds its :class:`~pyspark_tstream.read.task.ReadTask` and a
:class:`ReadSpec` (the store, which pickles as its URL and storage options; the stream's Arrow
schema; the exact Arrow schema Spark expects). :func:`read_partition` reads nothing else, so a
reader's ``read`` works on any pickled copy of the reader, on any executor. A partition pickles
to its chunks plus a few hundred bytes of schemas and store location.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.datasource import InputPartition

from ..journal.entries import Chunk
from ..read.reading import read_task
from ..read.task import ReadTask
from ..spark.task_memory import keep_freed_memory
from ..store.storage import Store

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ..api.stream import Stream


@dataclass(frozen=True)
class ReadSpec:
    """What every task of one read shares; built once on the driver, carried by each partition.

    Parameters
    ----------
    store : Store
        Where the chunks are (pickles as its URL and storage options, never a connection).
    schema : pyarrow.Schema or None
        The stream's user columns, as the chunks were written (None while nothing was written:
        then no plan has chunks).
    target : pyarrow.Schema
        The exact Arrow schema Spark checks every batch against (:func:`.arrow.arrow_target`).
    """

    store: Store
    schema: pa.Schema | None
    target: pa.Schema

    @classmethod
    def of(cls, stream: Stream, spark_schema: StructType) -> ReadSpec:
        """The spec of reads of ``stream`` with Spark schema ``spark_schema`` (the stream's schema now)."""
        from ..schema import decode_schema
        from ..spark.arrow import arrow_target

        encoded = stream.state.schema
        return cls(stream.store, decode_schema(encoded) if encoded else None, arrow_target(spark_schema))


@dataclass
class TStreamPartition(InputPartition):
    """One Spark task: the chunks and ``_tso`` range (and cuts) to read, and where and how."""

    task: ReadTask
    spec: ReadSpec

    def __init__(self, task: ReadTask, spec: ReadSpec) -> None:
        super().__init__(task)
        self.task = task
        self.spec = spec


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


def plan_partitions(chunks: Sequence[Chunk], lo: int, hi: int, *, spec: ReadSpec,
                    min_partitions: int | None = None, max_partitions: int | None = None,
                    start_cut: dict[int, int] | None = None,
                    end_cut: dict[int, int] | None = None) -> list[InputPartition]:
    """The Spark partitions of a plan: :func:`~pyspark_tstream.read.tasks.plan_tasks` with the
    ``minPartitions``/``maxPartitions`` options and Spark's default parallelism, each carrying
    ``spec``."""
    from ..read.tasks import plan_tasks  # the driver's: executors only read partitions

    tasks = plan_tasks(chunks, lo, hi, parallelism=spark_parallelism(), min_partitions=min_partitions,
                       max_partitions=max_partitions, start_cut=start_cut, end_cut=end_cut)
    return [TStreamPartition(t, spec) for t in tasks]


def read_partition(partition: TStreamPartition) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of one partition, shaped exactly as Spark expects."""
    from ..spark.arrow import to_spark_batch

    spec = partition.spec
    keep_freed_memory()  # a worker process's row groups reuse each other's memory
    for batch in read_task(spec.store, spec.schema, partition.task):
        yield to_spark_batch(batch, spec.target)
