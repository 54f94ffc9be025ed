"""``spark.readStream.format("tstream")``: tick-aligned micro-batches.

Each batch is ``(start.tso, end.tso]`` with ``end.tso`` at or below the tick published at
``end.pos``; read limits end it earlier, at a chunk boundary, never above the tick. The reader
object lives in Spark's driver-side runner for the whole query, so it caches journal deltas;
``read`` runs on executors from a pickled copy and touches only the partition it is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from pyspark_tstream.conf.options import SourceOptions
from pyspark_tstream.compaction import substitute
from pyspark_tstream.journal import COL_MAX_TSO, Delta
from pyspark_tstream.planning import Limits, check_data_loss, choose_end, start_bound

from .arrow import arrow_target
from .offsets import TStreamOffset
from .partitions import TStreamPartition, plan_partitions, read_partition

try:  # Spark >= 4.2
    from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxFiles,
                                                  ReadMaxRows, SupportsTriggerAvailableNow)
except ImportError:  # pragma: no cover - PySpark 4.0/4.1: no admission control from Spark
    ReadLimit = ReadAllAvailable = ReadMaxRows = ReadMaxBytes = ReadMaxFiles = None  # type: ignore
    SupportsTriggerAvailableNow = object  # type: ignore


class TStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batch reader over a tstream stream (see module docstring)."""

    def __init__(self, options: SourceOptions, schema: Any, stream: Any) -> None:
        self.options = options
        self.schema = schema
        self.stream = stream
        self._target = arrow_target(schema)
        self._schema_b64 = stream.state.schema
        self._deltas: dict[int, Delta] = {}
        self._available_now: TStreamOffset | None = None
        self._last_end: TStreamOffset | None = None

    def __getstate__(self) -> dict[str, Any]:
        # executors need only what read() uses; drop the driver-side caches
        return {"options": self.options, "schema": self.schema, "_target": self._target,
                "_schema_b64": self._schema_b64, "store": self.stream.store}

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)

    # -- offsets ------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        o = self.options
        cut = o.starting_offsets if isinstance(o.starting_offsets, dict) else {}
        lo = start_bound(self.stream, o.starting_kind, timestamp_ms=o.starting_timestamp_ms,
                         ago_ms=o.starting_ago_ms, tail=o.starting_tail, cut=dict(cut))
        return TStreamOffset(lo, self.stream.state.pos, dict(cut)).to_dict()

    def getDefaultReadLimit(self) -> Any:
        o = self.options
        if o.max_records_per_trigger is not None:
            return ReadMaxRows(o.max_records_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        if o.max_files_per_trigger is not None:
            return ReadMaxFiles(o.max_files_per_trigger)
        return ReadAllAvailable()

    def _limits(self, limit: Any) -> Limits:
        if ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable):
            return Limits()  # Spark asks for everything (e.g. Trigger.Once): options do not apply
        o = self.options
        return Limits(o.max_records_per_trigger, o.max_bytes_per_trigger, o.max_files_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        state = self.stream.refresh()
        self._available_now = TStreamOffset(state.tick, state.pos)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        state = self.stream.refresh()
        begin = TStreamOffset.from_dict(start) if start is not None else self._last_end
        tick, pos = state.tick, state.pos
        if self._available_now is not None:
            tick, pos = min(tick, self._available_now.tso), self._available_now.pos
        if begin is None:  # PySpark < 4.2 calls latestOffset() without a start
            return TStreamOffset(tick, pos).to_dict()
        if tick <= begin.tso:
            return begin.to_dict()
        limits = self._limits(limit)
        end_tso = tick
        if not limits.unlimited:
            end_tso = choose_end(self._chunks(begin.tso, tick, pos), begin.tso, tick, limits)
        cut = self._remaining_cut(begin, end_tso, pos)
        end = TStreamOffset(end_tso, pos, cut)
        self._last_end = end
        return end.to_dict()

    def reportLatestOffset(self) -> dict:
        state = self.stream.state
        return TStreamOffset(state.tick, state.pos).to_dict()

    # -- planning -----------------------------------------------------------------------------
    def _chunks(self, lo: int, hi: int, last_pos: int) -> list:
        state = self.stream.state
        first = self.stream.journal.search(state, COL_MAX_TSO, lo)
        missing = [p for p in range(max(first, state.head_pos), last_pos + 1) if p not in self._deltas]
        if missing:
            for d in self.stream.journal.deltas(state, missing[0], last_pos):
                self._deltas[d.pos] = d
        for p in [p for p in self._deltas if p < first]:
            del self._deltas[p]  # behind every future batch: tsos only move forward
        return [c for p in range(first, last_pos + 1) if p in self._deltas
                for c in self._deltas[p].chunks if c.hi > lo and c.lo <= hi]

    def _remaining_cut(self, begin: TStreamOffset, end_tso: int, pos: int) -> dict[int, int]:
        """Keep a starting cut only for segments whose cut the batch has not passed yet."""
        if not begin.cut:
            return {}
        passed = {c.seg for c in self._chunks(begin.tso, end_tso, pos)
                  if c.seg in begin.cut and c.seq >= begin.cut[c.seg] and c.lo <= end_tso}
        return {s: q for s, q in begin.cut.items() if s not in passed}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, stop = TStreamOffset.from_dict(start), TStreamOffset.from_dict(end)
        if stop.tso <= begin.tso:
            return []
        self.stream.refresh()
        lo = check_data_loss(self.stream.state, begin.tso, fail=self.options.fail_on_data_loss,
                             context="this streaming query", journal=self.stream.journal)
        chunks = substitute(self.stream.store, self.stream.state, self._chunks(lo, stop.tso, stop.pos))
        return plan_partitions(chunks, lo, stop.tso, start_cut=begin.cut or None)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, TStreamPartition):
            return  # Spark reads one placeholder partition when a plan has none
        store = self.store if hasattr(self, "store") else self.stream.store
        yield from read_partition(store, self._schema_b64, self._target, partition)

    def commit(self, end: dict) -> None:
        group = self.options.consumer_group
        if group:
            from pyspark_tstream.groups import Group

            Group.commit_position(self.stream, group, TStreamOffset.from_dict(end).tso)

    def stop(self) -> None:
        self._deltas.clear()
