"""``spark.read.format("tstream").option("metadata", KIND)``: a stream's metadata table as a DataFrame.

A thin adapter over :mod:`pyspark_tstream.api.metadata`: the table is built on the driver when
Spark asks for the reader (so a bad option or an unreadable stream fails at query start), kept
in the reader Spark pickles to its one task, and yielded there as batches of exactly the Arrow
schema Spark expects (:func:`~pyspark_tstream.spark.arrow.to_spark_batch`). Batch only:
``readStream`` refuses the option (:meth:`~pyspark_tstream.conf.options.SourceOptions.check_no_metadata`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, InputPartition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ..api.stream import Stream
    from ..conf.options import SourceOptions


def metadata_schema(kind: str) -> StructType:
    """The Spark schema of metadata table ``kind``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from ..api.metadata import SCHEMAS

    return from_arrow_schema(SCHEMAS[kind])


class TStreamMetadataReader(DataSourceReader):
    """Reads one metadata table (``options.metadata``) of ``stream``, built now on the driver."""

    def __init__(self, options: SourceOptions, schema: StructType, stream: Stream) -> None:
        from ..api.metadata import metadata_table

        assert options.metadata is not None
        self.table: pa.Table = metadata_table(stream, options.metadata, starting_position=options.starting_position,
                                              ending_position=options.ending_position)
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from ..spark.arrow import arrow_target, to_spark_batch

        target = arrow_target(self.schema)
        for batch in self.table.to_batches():
            yield to_spark_batch(batch, target)
