"""``df.writeStream.format("tstream")`` and ``df.write.format("tstream")``: Arrow writers.

Tasks write Parquet chunks (invisible until committed) and send their descriptions to the
driver; the driver's ``commit`` makes the whole micro-batch one journal commit keyed by
(writer, batchId), so a replayed batch is a no-op and a failed or duplicate task attempt leaves
only unreferenced files. Spark calls ``commit`` on a fresh writer in another process, so
everything it needs travels in the options and the messages; nothing lives in memory.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark_tstream.conf.options import SinkOptions
from pyspark_tstream.writing import ChunkInfo, WriteSpec, write_batches

from pyspark_tstream.datasource.compat import has

logger = logging.getLogger(__name__)

if has("stream_arrow_writer"):
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamBase
else:  # PySpark 4.0: the streaming sink gets Rows (converted by _to_batches)
    from pyspark.sql.datasource import DataSourceStreamWriter as _StreamBase


@dataclass
class SegmentCommitMessage(WriterCommitMessage):
    """What one task wrote: its chunks (not yet visible) and the task's identity."""

    partition: int
    attempt: int
    chunks: list[dict[str, Any]]


def writer_identity(options: SinkOptions) -> str | None:
    """``writerId``, else one derived from ``checkpointLocation`` (stable across restarts)."""
    if options.writer_id:
        return options.writer_id
    if options.checkpoint_location:
        digest = hashlib.sha256(options.checkpoint_location.rstrip("/").encode()).hexdigest()[:16]
        return f"query-{digest}"
    return None


def _task() -> tuple[int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.attemptNumber()) if ctx is not None else (0, 0)


def _to_batches(iterator: Iterator[Any], schema: Any) -> Iterator[Any]:
    """Rows (PySpark 4.0 stream writer) to Arrow batches of ``schema``; Arrow batches pass through."""
    import pyarrow as pa

    from pyspark_tstream.datasource.arrow import rows_to_batch

    rows: list[Any] = []
    for item in iterator:
        if isinstance(item, pa.RecordBatch):
            yield item
            continue
        rows.append(item)
        if len(rows) >= 10_000:
            yield rows_to_batch(rows, schema)
            rows = []
    if rows:
        yield rows_to_batch(rows, schema)


class _Common:
    """Shared by the streaming and batch writers."""

    def __init__(self, options: SinkOptions, spec: WriteSpec, input_schema: Any, stream: Any,
                 session: bool) -> None:
        self.options = options
        self.spec = spec
        self.input_schema = input_schema  # Arrow schema of the incoming data
        self.session = session
        self._stream = stream

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["_stream"] = None  # executors rebuild nothing: they only write chunks
        return d

    def _write(self, iterator: Iterator[Any]) -> SegmentCommitMessage:
        partition, attempt = _task()
        chunks = write_batches(self.spec, _to_batches(iterator, self.input_schema),
                               task=f"p{partition}a{attempt}")
        return SegmentCommitMessage(partition, attempt, [c.to_json() for c in chunks])

    def _open(self) -> Any:
        if self._stream is None:
            from pyspark_tstream.stream import Stream

            self._stream = Stream.open(self.options.path, self.options.storage_options)
        return self._stream

    def _commit(self, messages: Sequence[Any], batch_id: Any) -> Any:
        chunks = [ChunkInfo.from_json(c) for m in sorted((m for m in messages if m is not None),
                                                         key=lambda m: m.partition)
                  for c in m.chunks]
        return self._open().commit(chunks, writer_id=writer_identity(self.options), batch_id=batch_id,
                                   session=self.session, schema=self.input_schema,
                                   merge_schema=self.options.merge_schema)

    def _abort(self, messages: Sequence[Any], batch_id: Any) -> None:
        """Delete the tasks' files only once the journal proves the batch is not in it.

        Spark calls ``abort`` whenever ``commit`` raised, and ``commit`` can raise with its journal
        entry durable (a store failure whose outcome stayed unknown). So: read the newest state
        and look up (writer, batch); delete only if it is absent. A batch write has no batch id
        to look up, and a failed lookup proves nothing: their files stay, for
        ``vacuum(orphans=True)`` (which deletes only files no commit names).
        """
        paths = [c["path"] for m in messages if m is not None for c in m.chunks]
        if not paths:
            return
        writer = writer_identity(self.options)
        if batch_id is None or writer is None:
            logger.info("abort of a write to %s: %d chunk file(s) left for vacuum(orphans=True)",
                        self.options.path, len(paths))
            return
        try:
            from pyspark_tstream.journal import Journal

            state = Journal(self._open().store).head().state
            w = state.writers.get(writer)
            committed = w is not None and w.find(batch_id) is not None
        except Exception as e:  # noqa: BLE001 - no proof: keep the files
            logger.warning("abort of batch %r of writer %s on %s: cannot read the journal (%s: %s); "
                           "its %d chunk file(s) are kept for vacuum(orphans=True)",
                           batch_id, writer, self.options.path, type(e).__name__, e, len(paths))
            return
        if committed:
            logger.warning("abort of batch %r of writer %s on %s: the journal has that batch, so its "
                           "%d chunk file(s) are kept (a replay of it is a no-op)",
                           batch_id, writer, self.options.path, len(paths))
            return
        self.spec.store.delete(paths)


class TStreamStreamWriter(_Common, _StreamBase):  # type: ignore[misc, valid-type]
    """Streaming sink: one journal commit per micro-batch, idempotent on (writer, batchId)."""

    def write(self, iterator: Iterator[Any]) -> SegmentCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:
        self._abort(messages, batchId)


class TStreamBatchWriter(_Common, DataSourceArrowWriter):
    """``df.write.mode("append")``: one commit; a one-shot writer unless ``writerId`` is declared."""

    def write(self, iterator: Iterator[Any]) -> SegmentCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[Any]) -> None:
        # a batch write is one-shot: writerId (if any) names it, no batch id dedupes it
        self._commit(messages, None)

    def abort(self, messages: list[Any]) -> None:
        self._abort(messages, None)
