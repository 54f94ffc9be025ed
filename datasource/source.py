"""The ``tstream`` data source: Spark's entry point, translating Spark calls into core calls.

Name: ``tstream``. Registered automatically (``pyspark_tstream.DefaultSource``) or with
``spark.dataSource.register(TStreamDataSource)``.

Examples
--------
>>> (df.writeStream.format("tstream").option("checkpointLocation", ckpt)
...    .option("keyColumn", "device").start("file:///tmp/telemetry"))
>>> spark.readStream.format("tstream").option("startingAgo", "1h").load("file:///tmp/telemetry")
>>> spark.read.format("tstream").option("startingTimestamp", "2026-11-01T00:00:00Z").load(url)

Heavy imports (pyarrow, fsspec) stay inside methods: Spark imports this module in every Python
worker to discover data sources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader
    from pyspark.sql.types import StructType

    from ..api.stream import Stream
    from ..conf.options import SourceOptions
    from ..sink.writer import JournalCommitter, TaskChunkWriter, TStreamBatchWriter, TStreamStreamWriter


class TStreamDataSource(DataSource):
    """Timestamped streams as Parquet segment chunks (every option: docs/options.md)."""

    @classmethod
    def name(cls) -> str:
        return "tstream"

    def _source(self, *, kept: bool = False) -> tuple[SourceOptions, Stream]:
        """The options and the stream; ``kept``: the one this worker opened before when it is
        unchanged (:mod:`..spark.kept_streams`: a batch read's planning calls), else opened afresh
        (a streaming query's reader, which keeps and refreshes its own for the query's life)."""
        from ..api.stream import Stream
        from ..conf.options import SourceOptions

        options = SourceOptions.from_options(self.options)
        if kept:
            from ..spark.kept_streams import open_kept

            return options, open_kept(options.path, options.storage_options, retry=options.retry)
        return options, Stream.open(options.path, options.storage_options, retry=options.retry)

    def schema(self) -> StructType:
        from ..spark.arrow import spark_schema

        options, stream = self._source(kept=True)
        if options.metadata is not None:
            from .metadata import metadata_schema

            return metadata_schema(options.metadata)
        user = stream.schema
        if user is None:
            from ..errors import SchemaMismatchError

            raise SchemaMismatchError(
                f"stream {stream.url} has no schema yet (nothing was written); write to it first "
                "or pass .schema(...) to the reader")
        return spark_schema(user)

    def reader(self, schema: StructType) -> DataSourceReader:
        from ..spark.compat import called_for_filter_pushdown
        from .batch_reader import TStreamBatchReader, TStreamFilteringReader

        # PySpark asks for a reader from its pushdown worker only when filter pushdown is on;
        # elsewhere a reader with pushFilters is an error, so pick the class by the caller.
        pushdown = called_for_filter_pushdown()
        options, stream = self._source(kept=True)
        if options.metadata is not None:
            from .metadata import TStreamMetadataReader

            return TStreamMetadataReader(options, schema, stream)
        return (TStreamFilteringReader if pushdown else TStreamBatchReader)(options, schema, stream)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from ..conf.options import SourceOptions
        from .stream_reader import TStreamStreamReader

        SourceOptions.from_options(self.options).check_no_metadata()
        options, stream = self._source()
        return TStreamStreamReader(options, schema, stream)

    def _sink(self, schema: StructType, overwrite: bool, streaming: bool,
              committing: bool = False) -> tuple[TaskChunkWriter, JournalCommitter]:
        """The two parts of a writer: what tasks run, and what commits their output
        (``committing``: asked for by PySpark's micro-batch commit runner)."""
        from ..api.stream import Stream
        from ..conf.options import SinkOptions
        from ..errors import UnsupportedOperationError
        from ..sink.writer import JournalCommitter, TaskChunkWriter, writer_identity
        from ..spark.handle import StreamHandle
        from ..spark.reach_memo import answered_before, remember
        from ..store.storage import Store

        options = SinkOptions.from_options(self.options)
        if streaming:
            options.check_streaming()
        if overwrite:
            raise UnsupportedOperationError(
                f"tstream streams are append-only: {'outputMode complete' if streaming else 'mode(overwrite)'} "
                f"would replace {options.path}; use {'outputMode(append)' if streaming else 'mode(append)'} "
                "(history is kept; use retention or `tstream truncate` to drop old records)")
        from ..spark.arrow import user_arrow_schema

        arrow_in = user_arrow_schema(schema)
        cfg = options.stream_config
        store = Store(options.path, options.storage_options, retry=options.retry)
        # PySpark asks for a streaming writer afresh, in a new process, for every micro-batch and
        # for its commit, yet the query reached the store before: such a writer waits out an
        # outage as the query's other calls do (a commit is told by its caller, a writer by the
        # memo the previous one left; a store that never answered still fails in seconds)
        store.reached = streaming and (committing or answered_before(store))
        stream, spec = Stream.for_write(
            store, arrow_in, config={k: v for k, v in cfg.to_config_dict().items() if k in cfg.given},
            key=options.key_column, timestamp=options.timestamp_column, merge_schema=options.merge_schema)
        if streaming:
            remember(store)
        # a streaming query's writer holds a session (lease, ticks); a batch write is one-shot
        return (TaskChunkWriter(spec, arrow_in),
                JournalCommitter(options, arrow_in, session=streaming, handle=StreamHandle.of(stream),
                                 writer=writer_identity(options, streaming, store.protocol)))

    def streamWriter(self, schema: StructType, overwrite: bool) -> TStreamStreamWriter:
        from ..sink.writer import TStreamStreamWriter
        from ..spark.compat import called_for_stream_commit

        return TStreamStreamWriter(*self._sink(schema, overwrite, streaming=True,
                                               committing=called_for_stream_commit()))

    def writer(self, schema: StructType, overwrite: bool) -> TStreamBatchWriter:
        from ..sink.writer import TStreamBatchWriter

        return TStreamBatchWriter(*self._sink(schema, overwrite, streaming=False))
