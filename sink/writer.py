"""The ``tstream`` sink: Spark's writers for ``df.writeStream`` and ``df.write``, thin over two parts.

Tasks write Parquet chunks (invisible until committed) and send their descriptions to the
driver (:class:`TaskChunkWriter`); the driver's ``commit`` makes the whole micro-batch one
journal commit keyed by (writer, batchId) (:class:`JournalCommitter`), so a replayed batch is a
no-op and a failed or duplicate task attempt leaves only unreferenced files. Spark may call
``commit`` on a fresh writer in another process, so everything it needs travels in the options
and the messages; nothing but the opened stream (re-opened there) lives in memory.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..conf.options import SinkOptions
from ..spark.compat import has
from ..spark.handle import StreamHandle
from ..spark.task_memory import keep_freed_memory
from ..timestamps import now_ms
from ..write.spec import ChunkInfo, WriteSpec
from ..write.writing import write_batches
from .identity import checkpoint_writer, path_writer

if TYPE_CHECKING:
    import pyarrow as pa

    from ..api.stream import Stream
    from ..write.commit import Ack

logger = logging.getLogger(__name__)

#: Rows (PySpark 4.0's stream writer) gathered into one Arrow batch.
ROWS_PER_BATCH = 10_000

if has("stream_arrow_writer"):
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as StreamWriterBase
else:
    from pyspark.sql.datasource import DataSourceStreamWriter

    class StreamWriterBase(DataSourceStreamWriter, DataSourceArrowWriter):  # type: ignore[no-redef, misc]  # 4.0's stand-in
        """PySpark 4.0's stream writer base, that is also a ``DataSourceArrowWriter``.

        4.0 has no ``DataSourceStreamArrowWriter``, but its task worker
        (``pyspark.sql.worker.write_into_data_source``) asks only ``isinstance(writer,
        DataSourceArrowWriter)``, for a streaming writer as for a batch one, before it turns
        Spark's Arrow batches into Rows: such a writer gets the Arrow batches themselves, as on
        4.1+, and neither PySpark nor tstream converts every value twice. A worker that hands
        Rows anyway still works: the sink's tasks turn Rows into batches (:func:`_to_batches`).
        The subclass defines the streaming ``commit(messages, batchId)``/``abort``, which
        PySpark's commit runner calls.
        """


@dataclass(frozen=True)
class TaskCommitMessage(WriterCommitMessage):
    """What one task wrote: its chunks (not yet visible) and the task's identity.

    Pickled from the executor to the driver (the chunks as the records they are)."""

    partition: int
    attempt: int
    chunks: tuple[ChunkInfo, ...]
    #: wall-clock epoch ms on the executor before the task's first file write (``None``: not
    #: stamped): the driver's orphan fence starts at its batch's earliest (:func:`written_ms`)
    started_ms: int | None = None


def written_ms(messages: Sequence[TaskCommitMessage | None]) -> int | None:
    """The earliest start stamp of the tasks that wrote chunks (``None``: none stamped)."""
    return min((m.started_ms for m in messages if m is not None and m.chunks and m.started_ms is not None),
               default=None)


def writer_identity(options: SinkOptions, streaming: bool, stream_protocol: str = "file") -> str | None:
    """``writerId``, else (a streaming query) the writer its checkpoint pins
    (:func:`~pyspark_tstream.sink.identity.checkpoint_writer`); ``None``: a one-shot batch write.

    Called on the driver when Spark asks for a writer; the answer travels in the pickled writer."""
    if options.writer_id:
        return options.writer_id
    if options.checkpoint_location:
        if streaming:
            return checkpoint_writer(options.checkpoint_location, stream_protocol, options.storage_options)
        return path_writer(options.checkpoint_location)
    return None


def _task() -> tuple[int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.attemptNumber()) if ctx is not None else (0, 0)


def _to_batches(iterator: Iterator[Any], schema: Any) -> Iterator[Any]:
    """Rows (PySpark 4.0 stream writer) to Arrow batches of ``schema``; Arrow batches pass through."""
    import pyarrow as pa

    from ..spark.arrow import rows_to_batch

    it = iter(iterator)
    first = next(it, None)
    if first is None:
        return
    if isinstance(first, pa.RecordBatch):
        yield first
        yield from it
        return
    ahead = [first]
    while True:
        # Python's cyclic GC paused while a batch's Rows live: every few hundred new Rows it
        # would scan them (and promote them to be scanned again), which cost the task more
        # than converting them does. Rows are tuples of plain values (no cycles): reference
        # counting frees them as soon as their batch is built.
        with _gc_paused():
            rows = ahead + list(islice(it, ROWS_PER_BATCH - len(ahead)))
            ahead = []
            batch = rows_to_batch(rows, schema) if rows else None
            del rows
        if batch is None:
            return
        yield batch


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside (if it was on), back on after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass(frozen=True)
class TaskChunkWriter:
    """Executor side of the sink: one task's rows become Parquet chunks, described to the driver.

    Pickles to every task (its :class:`~pyspark_tstream.write.spec.WriteSpec` carries the store as
    URL and storage options); writes only files no journal names yet.
    """

    spec: WriteSpec
    input_schema: pa.Schema  # Arrow schema of the incoming data

    def write(self, iterator: Iterator[Any]) -> TaskCommitMessage:
        """Write this task's rows (Arrow batches, or Rows on PySpark 4.0) as chunks."""
        partition, attempt = _task()
        keep_freed_memory()  # a worker process's batches reuse each other's memory
        started = now_ms()  # before the first file write: the driver's orphan fence counts from it
        chunks = write_batches(self.spec, _to_batches(iterator, self.input_schema),
                               task=f"p{partition}a{attempt}")
        return TaskCommitMessage(partition, attempt, tuple(chunks), started)


@dataclass(frozen=True)
class JournalCommitter:
    """Driver side of the sink: a batch's task messages become one journal commit, or an abort.

    Spark runs ``commit``/``abort`` on the writer it created for the batch (streaming) or on a
    pickled copy in another worker (batch): :attr:`handle` opens the stream once per process.
    """

    options: SinkOptions
    input_schema: pa.Schema
    session: bool  # a streaming query's writer session (lease, ticks) or a one-shot batch write
    handle: StreamHandle
    #: The writer the commits are keyed by (:func:`writer_identity`, decided on the driver);
    #: ``None``: the ``writerId`` option's, if any.
    writer: str | None = None

    @property
    def stream(self) -> Stream:
        return self.handle.stream

    @property
    def writer_id(self) -> str | None:
        """The writer this committer's commits are keyed by."""
        return self.writer if self.writer is not None else self.options.writer_id

    def commit(self, messages: Sequence[TaskCommitMessage | None], batch_id: int | None) -> Ack:
        """One journal commit of every task's chunks, keyed by (writer, ``batch_id``).

        A (writer, batch) the journal already has commits nothing and deletes the tasks' files
        (written for this attempt only). A ``df.write`` batch id (``batchId``/``txnVersion``)
        follows Delta's rule: one at or below the writer's last committed batch is a no-op too.

        A batch whose earliest task started writing more than the orphan fence's margin ago (on
        this host's wall clock) checks its files exist first and raises a retriable
        :class:`~pyspark_tstream.errors.StaleWriteError`, committing nothing, if orphan cleanup
        deleted any (:mod:`~pyspark_tstream.store.fence`): Spark aborts the batch and a
        restarted query replays it. A faster batch makes no extra store call.
        """
        chunks = [c for m in sorted((m for m in messages if m is not None), key=lambda m: m.partition)
                  for c in m.chunks]
        ack = self.stream.commit(chunks, writer_id=self.writer_id, batch_id=batch_id, session=self.session,
                                 schema=self.input_schema, merge_schema=self.options.merge_schema,
                                 monotonic=not self.session, fresh=True, written_ms=written_ms(messages))
        if ack.duplicate and not self.session:
            # the user asked for an idempotent df.write and it did nothing: say so (the core
            # logs every no-op at INFO; a Python worker shows WARNING by default)
            logger.warning("%s (df.write to %s)", ack.note, self.options.path)
        return ack

    def abort(self, messages: Sequence[TaskCommitMessage | None], batch_id: int | None) -> None:
        """Delete the tasks' files only once the store proves the batch can never be committed.

        Spark calls ``abort`` whenever ``commit`` raised, and ``commit`` can raise with its journal
        entry durable (a store failure whose outcome stayed unknown) or with its group-commit
        request published, which another writer may still fold. So the files go only when no
        published request names them and the newest state lacks (writer, batch)
        (:func:`~pyspark_tstream.write.requests.abort_keeps`). A batch write has no batch id to
        look up, and a failed lookup proves nothing: their files stay, for
        ``vacuum(orphans=True)`` (which deletes only files no commit or pending request names).
        """
        paths = [c.path for m in messages if m is not None for c in m.chunks]
        if not paths:
            return
        writer = self.writer_id
        if batch_id is None or writer is None:
            logger.info("abort of a write to %s: %d chunk file(s) left for vacuum(orphans=True)",
                        self.options.path, len(paths))
            return
        try:
            from ..write.requests import abort_keeps

            stream = self.stream
            kept = abort_keeps(stream.store, stream.journal, writer, batch_id, paths)
        except Exception as e:  # noqa: BLE001 - no proof: keep the files
            logger.warning("abort of batch %r of writer %s on %s: cannot read the journal (%s: %s); "
                           "its %d chunk file(s) are kept for vacuum(orphans=True)",
                           batch_id, writer, self.options.path, type(e).__name__, e, len(paths))
            return
        if kept is not None:
            logger.warning("abort of batch %r of writer %s on %s: %s, so its %d chunk file(s) are kept "
                           "(a replay of it is a no-op once it is in the journal)",
                           batch_id, writer, self.options.path, kept, len(paths))
            return
        self.stream.store.delete(paths)


class TStreamStreamWriter(StreamWriterBase):
    """Streaming sink: one journal commit per micro-batch, idempotent on (writer, batchId)."""

    def __init__(self, tasks: TaskChunkWriter, committer: JournalCommitter) -> None:
        self.tasks = tasks
        self.committer = committer

    def write(self, iterator: Iterator[Any]) -> TaskCommitMessage:
        return self.tasks.write(iterator)

    def commit(self, messages: list[TaskCommitMessage | None], batchId: int) -> None:  # type: ignore[override]  # Spark hands back this writer's own messages
        self.committer.commit(messages, batchId)

    def abort(self, messages: list[TaskCommitMessage | None], batchId: int) -> None:  # type: ignore[override]  # Spark hands back this writer's own messages
        self.committer.abort(messages, batchId)


class TStreamBatchWriter(DataSourceArrowWriter):
    """``df.write.mode("append")``: one commit; a one-shot writer unless ``writerId`` is declared,
    idempotent with ``writerId`` + ``batchId`` (or Delta's ``txnAppId`` + ``txnVersion``)."""

    def __init__(self, tasks: TaskChunkWriter, committer: JournalCommitter) -> None:
        self.tasks = tasks
        self.committer = committer

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommitMessage:
        return self.tasks.write(iterator)

    def commit(self, messages: list[TaskCommitMessage | None]) -> None:  # type: ignore[override]  # Spark hands back this writer's own messages
        # one-shot unless batchId/txnVersion (with writerId/txnAppId) makes it idempotent
        self.committer.commit(messages, self.committer.options.batch_id)

    def abort(self, messages: list[TaskCommitMessage | None]) -> None:  # type: ignore[override]  # Spark hands back this writer's own messages
        self.committer.abort(messages, self.committer.options.batch_id)
