"""Do-nothing Python data sources: the floor any Python source or sink pays inside Spark.

``benchfloor`` moves Arrow batches between the JVM and a Python worker and does nothing else: the
sink drops every batch, the source re-yields one pre-built batch with tstream's output columns.
With the option ``store`` (a folder) the sink also writes each task's batches to one Parquet file
there, at pyarrow's cheapest settings (no codec, no dictionary, no statistics): the floor of any
Python sink that stores its rows, with none of tstream's work (routing, ordering, stamping,
commits).
Whatever a tstream query costs above these is tstream's own work (decode, routing, Parquet
encode, commits); what these cost above native Parquet is PySpark's (worker hand-off, Arrow IPC,
the driver-side streaming runner). The bench pickles this module by value, so workers need not
import it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import datasource as _api
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

# PySpark 4.0 has neither: a stream writer that is also a DataSourceArrowWriter gets Arrow
# batches there (as tstream's sink does: pyspark_tstream.sink.writer.StreamWriterBase, which the
# floor does not import: its workers would then import tstream's writer modules, a cost that is
# tstream's, not PySpark's), and its stream readers no Trigger.AvailableNow (one batch anyway)
if hasattr(_api, "DataSourceStreamArrowWriter"):
    _StreamWriter = _api.DataSourceStreamArrowWriter
else:
    class _StreamWriter(_api.DataSourceStreamWriter, DataSourceArrowWriter):  # type: ignore[no-redef, misc]
        pass
try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

#: tstream's output: the user columns, then the four system columns.
SCHEMA = ("ts bigint, key string, val bigint, body string, _timestamp timestamp, _tso bigint, "
          "_segment bigint, _seq bigint")
BATCH_ROWS = 65_536


@dataclass
class RowsPartition(InputPartition):
    rows: int
    batch_rows: int = BATCH_ROWS

    def __init__(self, rows: int, batch_rows: int = BATCH_ROWS) -> None:
        super().__init__(rows)
        self.rows, self.batch_rows = rows, batch_rows


def _batch(rows: int) -> Any:
    """One batch shaped like tstream's output (built once per task: no decode cost).

    Built from numpy buffers: ``pa.array`` would import pandas (~0.2 s per worker process, see
    ``pyspark_tstream/arrow_arrays.py``), and a Python list of keys would cost the floor ~20 ms
    per task, neither of which is PySpark's cost.
    """
    import numpy as np
    import pyarrow as pa

    target = pa.schema([("ts", pa.int64()), ("key", pa.string()), ("val", pa.int64()), ("body", pa.string()),
                        ("_timestamp", pa.timestamp("us", tz="UTC")), ("_tso", pa.int64()),
                        ("_segment", pa.int64()), ("_seq", pa.int64())])  # as Spark expects SCHEMA

    def ints(values: Any) -> Any:
        return pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(np.ascontiguousarray(values))])

    def texts(width: int, data: Any) -> Any:
        offsets = np.arange(0, (rows + 1) * width, width, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])

    ids = np.arange(rows, dtype=np.int64)
    digits = np.frombuffer(b"0123456789", dtype=np.uint8)
    keys = np.empty((rows, 8), dtype=np.uint8)  # "key-0000" .. "key-0999"
    keys[:, :4] = np.frombuffer(b"key-", dtype=np.uint8)
    k = ids % 1000
    for i, place in enumerate((1000, 100, 10, 1)):
        keys[:, 4 + i] = digits[(k // place) % 10]
    body = np.tile(np.frombuffer(b"0123456789abcdef" * 4, dtype=np.uint8), rows)
    cols = [ints(ids), texts(8, keys.reshape(-1)), ints(ids), texts(64, body),
            ints(ids * 1000).view(pa.timestamp("us", tz="UTC")), ints(ids), ints(ids % 4), ints(ids)]
    return pa.RecordBatch.from_arrays(cols, schema=target)


def _partitions(rows: int, parts: int, batch_rows: int) -> list[InputPartition]:
    per = -(-rows // parts)
    return [RowsPartition(min(per, rows - i * per), batch_rows) for i in range(parts) if rows - i * per > 0]


def _read(partition: Any) -> Iterator[Any]:
    size = partition.batch_rows
    batch = _batch(size)
    left = partition.rows
    while left > 0:
        yield batch if left >= size else batch.slice(0, left)
        left -= size


class FloorReader(DataSourceReader):
    def __init__(self, rows: int, parts: int, batch_rows: int) -> None:
        self.rows, self.parts, self.batch_rows = rows, parts, batch_rows

    def partitions(self) -> list[InputPartition]:
        return _partitions(self.rows, self.parts, self.batch_rows)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        yield from _read(partition)


class FloorStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One micro-batch of ``rows`` rows, then nothing."""

    def __init__(self, rows: int, parts: int, batch_rows: int) -> None:
        self.rows, self.parts, self.batch_rows = rows, parts, batch_rows

    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        return {"n": 1}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return _partitions(self.rows, self.parts, self.batch_rows) if end["n"] > start["n"] else []

    def read(self, partition: InputPartition) -> Iterator[Any]:
        yield from _read(partition)

    def commit(self, end: dict) -> None:
        pass


@dataclass
class Done(WriterCommitMessage):
    rows: int


def _sink(iterator: Iterator[Any], store: str | None) -> Done:
    """Count the batches' rows; with ``store``, also write them to one new Parquet file there."""
    if store is None:
        return Done(sum(getattr(b, "num_rows", 1) for b in iterator))  # 1: a Row
    import uuid

    import pyarrow.parquet as pq

    rows, writer = 0, None
    try:
        for b in iterator:
            if writer is None:
                writer = pq.ParquetWriter(f"{store}/{uuid.uuid4().hex}.parquet", b.schema, compression="none",
                                          use_dictionary=False, write_statistics=False)
            writer.write_batch(b)
            rows += b.num_rows
    finally:
        if writer is not None:
            writer.close()
    return Done(rows)


class FloorWriter(DataSourceArrowWriter):
    def __init__(self, store: str | None) -> None:
        self.store = store

    def write(self, iterator: Iterator[Any]) -> Done:
        return _sink(iterator, self.store)

    def commit(self, messages: list[Any]) -> None:
        pass


class FloorStreamWriter(_StreamWriter):  # type: ignore[misc,valid-type]
    def __init__(self, store: str | None) -> None:
        self.store = store

    def write(self, iterator: Iterator[Any]) -> Done:
        return _sink(iterator, self.store)

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass


class FloorDataSource(DataSource):
    """``format("benchfloor")``; options ``rows``, ``partitions`` and ``batchRows`` for reads,
    ``store`` (an existing folder) for a sink that writes what it is given."""

    @classmethod
    def name(cls) -> str:
        return "benchfloor"

    def schema(self) -> str:
        return SCHEMA

    def _size(self) -> tuple[int, int, int]:
        return (int(self.options.get("rows", 0)), int(self.options.get("partitions", 2)),
                int(self.options.get("batchRows", BATCH_ROWS)))

    def reader(self, schema: Any) -> FloorReader:
        return FloorReader(*self._size())

    def streamReader(self, schema: Any) -> FloorStreamReader:
        return FloorStreamReader(*self._size())

    def writer(self, schema: Any, overwrite: bool) -> FloorWriter:
        return FloorWriter(self.options.get("store"))

    def streamWriter(self, schema: Any, overwrite: bool) -> FloorStreamWriter:
        return FloorStreamWriter(self.options.get("store"))
