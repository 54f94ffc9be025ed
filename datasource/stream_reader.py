"""``spark.readStream.format("tstream")``: tick-aligned micro-batches.

Each batch is ``(start.tso, end.tso]`` with ``end.tso`` at or below the tick published at
``end.pos``; read limits end it earlier, at the end of a millisecond, never above the tick
(:mod:`~pyspark_tstream.read.planner` chooses it). The reader object lives in Spark's driver-side
runner for the whole query; through its :class:`~.handle.StreamHandle` it keeps a bounded
:class:`~pyspark_tstream.read.window.Window` of index nodes ahead of its position (never the
history). ``read`` runs on executors from a pickled copy and uses only the partition it is
given (:mod:`.partitions`), so the planner is imported only where the driver plans: every
executor unpickles this module, and a Python worker starts no faster than its imports
(``tests/test_startup.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader

from ..conf.options import SourceOptions
from ..read.start import check_data_loss, start_bound
from ..spark.compat import has
from ..spark.handle import StreamHandle
from .offsets import TStreamOffset
from .partitions import ReadSpec, TStreamPartition, plan_partitions, read_partition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.datasource import InputPartition
    from pyspark.sql.streaming.datasource import ReadLimit
    from pyspark.sql.types import StructType

    from ..api.stream import Stream
    from ..read.ends import Limits
    from ..read.planner import Plan
    from ..read.window import Window

if has("read_limits"):
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxFiles, ReadMaxRows
else:  # PySpark 4.0/4.1: Spark passes no start (see _resume_point) and no limit (see _limits)
    ReadAllAvailable = ReadMaxRows = ReadMaxBytes = ReadMaxFiles = None  # type: ignore[assignment,misc]  # not there
if has("available_now"):
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
else:  # PySpark 4.0/4.1: Spark runs Trigger.AvailableNow as one batch
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]  # not there: a plain base


class TStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader over the ``stream`` the data source opened (see module docstring), for
    the query's ``options``, yielding batches of Spark's ``schema``."""

    def __init__(self, options: SourceOptions, schema: StructType, stream: Stream) -> None:
        self.options = options
        self.schema = schema
        self._handle = StreamHandle.of(stream)
        self._spec = ReadSpec.of(stream, schema)  # fixed for the query, like Spark's schema
        self._available_now: TStreamOffset | None = None
        self._last_end: TStreamOffset | None = None
        self._initial: dict[str, Any] | None = None
        from ..read.ends import Limits
        from ..read.schema_guard import SchemaGuard

        # the query's columns are Spark's, fixed now: batches end before a commit that adds others
        self._guard = SchemaGuard(stream.url, schema.fieldNames())

        if not has("read_limits") and not Limits(options.max_records_per_trigger, options.max_bytes_per_trigger,
                                                  options.max_files_per_trigger).unlimited:
            import logging

            logging.getLogger("pyspark_tstream").warning(
                "this PySpark has no latestOffset(start, limit) (it arrived in 4.2): "
                "maxRecordsPerTrigger/maxBytesPerTrigger/maxFilesPerTrigger do not apply, each "
                "micro-batch reads up to the tick; upgrade PySpark to bound micro-batches")

    @property
    def stream(self) -> Stream:
        """The stream (opened in this process on first use)."""
        return self._handle.stream

    @property
    def _window(self) -> Window:
        return self._handle.window

    # -- offsets ------------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        if self._initial is None:  # cached: _resume_point may have computed it already
            self._initial = self._initial_offset()
        return self._initial

    def _initial_offset(self) -> dict[str, Any]:
        o = self.options
        cut = o.starting_offsets if isinstance(o.starting_offsets, dict) else {}
        lo = start_bound(self.stream, o.starting_kind, timestamp_ms=o.starting_timestamp_ms,
                         ago_ms=o.starting_ago_ms, tail=o.starting_tail, cut=dict(cut))
        return TStreamOffset(lo, self.stream.state.pos, dict(cut)).to_dict()

    def getDefaultReadLimit(self) -> ReadLimit | None:  # type: ignore[override]  # None: PySpark < 4.2, never asked
        if ReadAllAvailable is None:
            return None  # PySpark < 4.2 has no read limits and never asks (see _limits)
        o = self.options
        if o.max_records_per_trigger is not None:
            return ReadMaxRows(o.max_records_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        if o.max_files_per_trigger is not None:
            return ReadMaxFiles(o.max_files_per_trigger)
        return ReadAllAvailable()

    def _limits(self, limit: ReadLimit | None) -> Limits:
        from ..read.ends import Limits

        if not has("read_limits"):
            # PySpark < 4.2 runs Trigger.AvailableNow/Once as one batch it cannot tell us about:
            # a limit there would leave data unread, so limits do not apply (README, compat.py)
            return Limits()
        if ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable):
            return Limits()  # Spark asks for everything (e.g. Trigger.Once): options do not apply
        o = self.options
        return Limits(o.max_records_per_trigger, o.max_bytes_per_trigger, o.max_files_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        state = self.stream.refresh()
        self._available_now = TStreamOffset(state.tick, state.pos)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None) -> dict[str, Any]:
        state = self.stream.refresh()
        begin = TStreamOffset.from_dict(start) if start is not None else self._resume_point()
        tick, pos = state.tick, state.pos
        if self._available_now is not None:
            tick, pos = min(tick, self._available_now.tso), self._available_now.pos
        tick, pos = self._guard.limit(state, begin.tso, tick, pos)  # raises when nothing is left
        if tick <= begin.tso:
            return begin.to_dict()
        limits = self._limits(limit)
        end_tso = tick
        if not limits.unlimited:
            end_tso = self._plan(begin.tso, tick, pos, limits).hi
        cut = self._remaining_cut(begin, end_tso, pos)
        end = TStreamOffset(end_tso, pos, cut)
        self._last_end = end
        return end.to_dict()

    def _resume_point(self) -> TStreamOffset:
        """Where the next batch starts when Spark does not say (PySpark < 4.2: ``latestOffset()``).

        Spark < 4.2 plans every batch, including the replay of an uncommitted one and (on a
        restart from a checkpoint) an empty one at the last logged offset, through
        ``partitions(start, end)`` before asking for the next end, so the last planned end is
        the next start; on a fresh query it asks ``latestOffset()`` before ``initialOffset()``,
        so nothing planned yet means the initial offset. Knowing the start keeps a starting
        cut exact across batches and restarts.
        """
        if self._last_end is None:
            self._last_end = TStreamOffset.from_dict(self.initialOffset())
        return self._last_end

    def reportLatestOffset(self) -> dict[str, Any]:
        state = self.stream.state
        return TStreamOffset(state.tick, state.pos).to_dict()

    # -- planning -----------------------------------------------------------------------------
    def _plan(self, lo: int, hi: int, last_pos: int, limits: Limits | None = None) -> Plan:
        from ..read.ends import Limits
        from ..read.planner import plan

        p = plan(self._window, self.stream.state, lo, hi, limits or Limits(), last_pos=last_pos)
        self._window.forget_before(p.first_pos)  # behind every future batch: tsos only move forward
        return p

    def _remaining_cut(self, begin: TStreamOffset, end_tso: int, pos: int) -> dict[int, int]:
        """Keep a starting cut only for segments whose cut the batch has not passed yet."""
        if not begin.cut:
            return {}
        passed = {c.seg for c in self._plan(begin.tso, end_tso, pos).chunks
                  if c.seg in begin.cut and c.seq >= begin.cut[c.seg] and c.lo <= end_tso}
        return {s: q for s, q in begin.cut.items() if s not in passed}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin, stop = TStreamOffset.from_dict(start), TStreamOffset.from_dict(end)
        if not has("read_limits"):
            self._last_end = stop  # the next batch starts here (see _resume_point)
        if stop.tso <= begin.tso:
            return []
        self._guard.check(self.stream.refresh(), begin.tso, stop.tso, stop.pos)
        lo = check_data_loss(self.stream.state, begin.tso, fail=self.options.fail_on_data_loss,
                             context="this streaming query", journal=self.stream.journal)
        chunks = self._plan(lo, stop.tso, stop.pos).chunks
        return plan_partitions(chunks, lo, stop.tso, spec=self._spec, min_partitions=self.options.min_partitions,
                               max_partitions=self.options.max_partitions, start_cut=begin.cut or None)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, TStreamPartition):
            return  # Spark reads one placeholder partition when a plan has none
        yield from read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        group = self.options.consumer_group
        if group:
            from ..api.groups import Group

            Group.commit_position(self.stream, group, TStreamOffset.from_dict(end).tso)

    def stop(self) -> None:
        self._handle.reset_window()
