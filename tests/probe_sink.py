"""A streaming sink built on tstream's stream-writer base that records what its tasks are handed.

``tests/test_spark_sink.py`` registers it (pickled by value: Spark's workers cannot import the
tests folder) to check, on the running PySpark, that a streaming sink task gets Arrow batches,
not Rows: 4.1+ through ``DataSourceStreamArrowWriter``, 4.0 because the base is also a
``DataSourceArrowWriter`` (see ``pyspark_tstream.sink.writer.StreamWriterBase``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, WriterCommitMessage
from pyspark_tstream.sink.writer import StreamWriterBase


@dataclass
class Seen(WriterCommitMessage):
    """The type names of what one task was handed, and how many rows."""

    kinds: list[str]
    rows: int


class ProbeWriter(StreamWriterBase):  # type: ignore[misc, valid-type]
    def __init__(self, out: str) -> None:
        self.out = out

    def write(self, iterator: Iterator[Any]) -> Seen:
        kinds: set[str] = set()
        rows = 0
        for item in iterator:
            kinds.add(type(item).__name__)
            rows += getattr(item, "num_rows", 1)
        return Seen(sorted(kinds), rows)

    def commit(self, messages: list[Seen | None], batchId: int) -> None:
        seen = [m for m in messages if m is not None]
        kinds = sorted({k for m in seen for k in m.kinds})
        with open(Path(self.out) / f"batch-{batchId}.txt", "w") as f:
            f.write(f"{','.join(kinds)} {sum(m.rows for m in seen)}")


class ProbeSink(DataSource):
    """``format("tstream_probe")``: option ``out`` is a folder for one file per committed batch."""

    @classmethod
    def name(cls) -> str:
        return "tstream_probe"

    def streamWriter(self, schema: Any, overwrite: bool) -> ProbeWriter:
        return ProbeWriter(self.options["out"])
