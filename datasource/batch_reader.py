"""``spark.read.format("tstream")``: a bounded read, by default up to the current tick.

With ``spark.sql.python.filterPushdown.enabled=true``, filters on ``_timestamp``, ``_tso`` and
``_segment`` narrow the chunks read (:class:`TStreamFilteringReader`); Spark still evaluates
them (they are returned as not fully handled), so pruning only ever reads a superset.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader

from .. import keys as K
from ..conf.options import SourceOptions
from ..read.start import check_data_loss, start_bound
from ..spark.handle import StreamHandle
from ..timestamps import LOGICAL_MASK, pack
from .partitions import ReadSpec, TStreamPartition, plan_partitions, read_partition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.datasource import Filter, InputPartition
    from pyspark.sql.types import StructType

    from ..api.stream import Stream


def _tso_bound(value: Any, column: str) -> int | None:
    """A filter literal on ``column`` as a hybrid timestamp (None if not understood)."""
    if column == "_tso" and isinstance(value, int):
        return value
    if column == "_timestamp" and isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return pack(int(dt.timestamp() * 1000))
    return None


def batch_range(options: SourceOptions, stream: Stream) -> tuple[int, int, dict[int, int], dict[int, int]]:
    """``(lo, hi, start_cut, end_cut)`` of a bounded read: records with ``lo < _tso <= hi``,
    from ``start_cut[seg]`` and before ``end_cut[seg]`` in the listed segments.

    The one definition of what a batch read covers, shared by ``spark.read.format("tstream")``
    and the native Parquet read (:mod:`.native`), so both return the same rows.
    """
    o = options
    cut = dict(o.starting_offsets) if isinstance(o.starting_offsets, dict) else None
    lo = start_bound(stream, o.starting_kind, timestamp_ms=o.starting_timestamp_ms,
                     ago_ms=o.starting_ago_ms, tail=o.starting_tail, cut=cut)
    state = stream.state
    hi = state.tick
    if o.ending_timestamp_ms is not None:
        hi = min(hi, pack(o.ending_timestamp_ms) - 1)
    lo = check_data_loss(state, lo, fail=o.fail_on_data_loss, context="this batch read",
                         journal=stream.journal)
    end_cut = dict(stream.check_cut(o.ending_offsets, K.ENDING_OFFSETS)) if isinstance(o.ending_offsets, dict) else {}
    return lo, hi, dict(cut or {}), end_cut


class TStreamBatchReader(DataSourceReader):
    """Batch reader (see module docstring): ``options`` fix the range when it is created, on the
    ``stream`` the data source opened; Spark's ``schema`` shapes the batches."""

    def __init__(self, options: SourceOptions, schema: StructType, stream: Stream) -> None:
        self.options = options
        self.schema = schema
        self._handle = StreamHandle.of(stream)
        self._spec = ReadSpec.of(stream, schema)
        self.lo, self.hi, self.start_cut, self.end_cut = batch_range(options, stream)
        if self.hi > self.lo:  # Spark took its schema a moment ago: a later widening is not read
            from ..read.schema_guard import SchemaGuard

            guard = SchemaGuard(stream.url, schema.fieldNames(), remedy="run the read again to read them")
            self.hi = guard.limit(stream.state, self.lo, self.hi, stream.state.pos)[0]
        self.segments: set[int] | None = None

    def partitions(self) -> list[InputPartition]:
        stream = self._handle.stream
        if self.hi <= self.lo or stream.schema is None:
            return []
        chunks = stream.plan(self.lo, self.hi)
        if self.segments is not None:
            chunks = [c for c in chunks if c.seg in self.segments]
        return plan_partitions(chunks, self.lo, self.hi, spec=self._spec, min_partitions=self.options.min_partitions,
                               max_partitions=self.options.max_partitions, start_cut=self.start_cut or None,
                               end_cut=self.end_cut or None)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, TStreamPartition):
            return  # Spark reads one placeholder partition when a plan has none
        yield from read_partition(partition)


class TStreamFilteringReader(TStreamBatchReader):
    """The batch reader plus filter pruning; used only when Spark's filter pushdown is on.

    PySpark refuses a reader that implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false, so the plain reader must not have it.
    """

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        from pyspark.sql.datasource import (
            EqualTo,
            GreaterThan,
            GreaterThanOrEqual,
            In,
            LessThan,
            LessThanOrEqual,
        )

        for f in filters:
            attr = getattr(f, "attribute", None)
            col = attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None
            if col in ("_timestamp", "_tso"):
                bound = _tso_bound(getattr(f, "value", None), col)
                if bound is None:
                    pass
                elif isinstance(f, GreaterThan):
                    self.lo = max(self.lo, bound if col == "_tso" else bound + LOGICAL_MASK)
                elif isinstance(f, GreaterThanOrEqual):
                    self.lo = max(self.lo, bound - 1)
                elif isinstance(f, LessThan):
                    self.hi = min(self.hi, bound - 1)
                elif isinstance(f, LessThanOrEqual):
                    self.hi = min(self.hi, bound if col == "_tso" else bound + LOGICAL_MASK)
                elif isinstance(f, EqualTo):
                    self.lo = max(self.lo, bound - 1)
                    self.hi = min(self.hi, bound if col == "_tso" else bound + LOGICAL_MASK)
            elif col == "_segment" and isinstance(f, (EqualTo, In)):
                values = {f.value} if isinstance(f, EqualTo) else set(f.value)
                ints = {v for v in values if isinstance(v, int)}
                self.segments = ints if self.segments is None else self.segments & ints
            yield f  # Spark re-checks every filter: pruning here is only an optimization
