"""Reading a stream through the Python API: time ranges, planned reads, seeks and the tail.

One job: turn the API's times into exclusive ``_tso`` bounds within ``(head, tick]`` and read
what the :mod:`~pyspark_tstream.read.planner` plans there. Only complete time is returned (never
past the tick); a record is read once, in ``(_tso, _segment, _seq)`` order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from ..journal.entries import Chunk
from ..journal.timeindex import COL_MAX_TSO, open_positions
from ..read.compacted import substitute
from ..read.cuts import check_cut
from ..read.planner import Plan, plan, plan_chunks, tail_bound
from ..read.reading import BATCH_ROWS, read_table, read_tsos
from ..read.start import cut_bound
from ..read.sweep import sweep
from ..read.window import Window
from ..schema import SYSTEM_COLUMNS, SYSTEM_FIELDS, full_schema
from ..store.storage import Store
from ..timestamps import TimeLike, iso, now_ms, pack, to_ms
from .context import StreamContext

#: Where a read starts or ends: a time (epoch ms, datetime, ISO-8601, ago duration like
#: ``"-15m"``) or a stream cut ``{segment: seq}`` (records from / before those ``_seq``).
Bound = TimeLike | Mapping[int, int]


@dataclass(frozen=True)
class ReadRange:
    """What a read covers: records with ``lo < _tso <= hi`` and, in the segments the cuts list,
    ``_seq`` from ``start_cut[seg]`` and before ``end_cut[seg]`` (as Spark's batch read does
    with ``startingOffsets``/``endingOffsets``)."""

    lo: int
    hi: int
    start_cut: Mapping[int, int] = field(default_factory=dict)
    end_cut: Mapping[int, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.hi <= self.lo

    @property
    def cut(self) -> bool:
        """Whether a cut filters records inside ``(lo, hi]`` (a count then says nothing of the end)."""
        return bool(self.start_cut or self.end_cut)


def _cut(value: Mapping[Any, Any], option: str) -> dict[int, int]:
    try:
        return {int(k): int(v) for k, v in value.items()}
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{option}={dict(value)!r} is not a stream cut; give {{segment: seq}} with integer "
                          "segment ids and sequence numbers (Stream.cut_at makes one)", option=option,
                          value=value) from e


def _check_order(start: Bound, end: Bound) -> None:
    """Refuse a time range that ends before it starts (it would read nothing, silently)."""
    if start is None or end is None or isinstance(start, Mapping) or isinstance(end, Mapping):
        return
    now = now_ms()  # one clock for both, so "-5m" .. "-1m" compares as written
    lo, hi = to_ms(start, option="start", now=now), to_ms(end, option="end", now=now)
    if lo > hi:
        raise ConfigError(f"start={start!r} is after end={end!r} ({iso(lo)} > {iso(hi)}): a read takes "
                          "start <= _timestamp < end; swap them, or leave end out to read up to the tick",
                          option="end", value=end)


def projection(schema: pa.Schema, columns: Sequence[str] | None,
               system_columns: bool | Sequence[str]) -> tuple[pa.Schema, pa.Schema]:
    """``(user, out)``: the user columns a read decodes, and the schema it returns (those, then
    the system columns asked for); unknown or repeated names fail naming the ones there are."""
    names = [columns] if isinstance(columns, str) else list(schema.names) if columns is None else list(columns)
    have = ", ".join(schema.names) or "none yet (the first write fixes them)"
    for n in names:
        if n in SYSTEM_COLUMNS:
            raise ConfigError(f"columns={names!r}: {n!r} is a system column; ask for it with "
                              f"system_columns=[{n!r}] (or system_columns=True)", option="columns", value=n)
        if n not in schema.names:
            raise ConfigError(f"columns={names!r}: the stream has no column {n!r}; its columns are {have}",
                              option="columns", value=n)
    if len(set(names)) != len(names):
        raise ConfigError(f"columns={names!r} names a column twice", option="columns", value=names)
    if system_columns is True or system_columns is False:
        system = list(SYSTEM_COLUMNS) if system_columns else []
    else:
        system = [system_columns] if isinstance(system_columns, str) else list(system_columns)
    bad = [n for n in system if n not in SYSTEM_COLUMNS] or (system if len(set(system)) != len(system) else [])
    if bad:
        raise ConfigError(f"system_columns={system_columns!r}: {bad[0]!r} is not a system column (or is named "
                          f"twice); they are {', '.join(SYSTEM_COLUMNS)}", option="system_columns", value=bad[0])
    user = pa.schema([schema.field(n) for n in names])
    by_name = {f.name: f for f in SYSTEM_FIELDS}
    return user, pa.schema(list(user) + [by_name[n] for n in system])


class Reader:
    """Reads and plans through a :class:`~pyspark_tstream.api.context.StreamContext`."""

    def __init__(self, ctx: StreamContext) -> None:
        self.ctx = ctx

    def range(self, start: TimeLike, end: TimeLike) -> tuple[int, int]:
        """``(lo, hi]`` in ``_tso`` for ``start <= _timestamp < end``, clipped to (head, tick]."""
        state = self.ctx.state
        lo = state.head_tso
        if start is not None:
            lo = max(lo, pack(to_ms(start, option="start")) - 1)
        hi = state.tick
        if end is not None:
            hi = min(hi, pack(to_ms(end, option="end")) - 1)
        return lo, hi

    def bounds(self, start: Bound = None, end: Bound = None, tail: int | None = None,
               window: Window | None = None) -> ReadRange:
        """The :class:`ReadRange` of ``start``/``end`` (times or stream cuts) or the last ``tail``
        records, clipped to (head, tick] of the newest state (this refreshes it). ``window``: the
        plan's, into which the refresh reads ahead the index node a start time's search reads
        first (a cold seek's round trip saved)."""
        if tail is not None and start is not None:
            raise ConfigError(f"tail={tail!r} and start={start!r}: give one of them, not both", option="tail",
                              value=tail)
        if tail is not None and (isinstance(tail, bool) or not isinstance(tail, int) or tail < 0):
            raise ConfigError(f"tail={tail!r} must be a non-negative integer (a count of records)", option="tail",
                              value=tail)
        _check_order(start, end)
        start_cut = _cut(start, "start") if isinstance(start, Mapping) else {}
        end_cut = _cut(end, "end") if isinstance(end, Mapping) else {}
        # one refresh: seek_tail's, else our own (the tail's bound and the tick of one state)
        after_tail = self.seek_tail(tail, window) if tail is not None else None
        if tail is None:
            seek = [] if window is None or start is None or start_cut else \
                window.search_ahead(self.ctx.state, COL_MAX_TSO, self.range(start, None)[0])  # type: ignore[arg-type]  # not a cut here
            state = self.ctx.refresh(open_positions(self.ctx.state), (window.ahead, seek) if window and seek else None)
        else:
            state = self.ctx.state
        for given, cut, option in ((start, start_cut, "start"), (end, end_cut, "end")):
            if isinstance(given, Mapping):  # a cut of another stream would skip records silently
                check_cut(self.ctx.store, state, cut, option=option, url=self.ctx.url)
        lo, hi = self.range(None if start_cut else start, None if end_cut else end)  # type: ignore[arg-type]  # an empty cut: to_ms rejects it
        if after_tail is not None:
            lo = max(lo, after_tail)
        if start_cut:
            lo = max(lo, cut_bound(self.ctx.store, self.plan(state.head_tso, state.tick), start_cut, state.tick))
        return ReadRange(lo, hi, start_cut, end_cut)

    def read(self, start: Bound = None, end: Bound = None, limit: int | None = None,
             columns: Sequence[str] | None = None, *, tail: int | None = None) -> pa.Table:
        """Records with ``start <= _timestamp < end``, ordered by ``_tso``, with system columns.

        The public :meth:`~pyspark_tstream.api.stream.Stream.read` documents the arguments.
        """
        _check_limit(limit)
        h = self.ctx
        window = Window(h.journal)
        rng = self.bounds(start, end, tail, window)
        schema = h.schema
        if schema is None or rng.empty or limit == 0:
            return full_schema(schema or pa.schema([])).empty_table()
        # lazily: with a limit, the walk stops once the chunks surely hold ``limit`` records
        p = plan(window, h.state, rng.lo, rng.hi, at_least=None if rng.cut else limit)
        table = read_table(h.store, schema, p.chunks, rng.lo, p.hi, dict(rng.start_cut), dict(rng.end_cut))
        if columns is not None:
            table = table.select(list(columns))
        return table.slice(0, limit) if limit is not None else table

    def to_reader(self, start: Bound = None, end: Bound = None, limit: int | None = None,
                  columns: Sequence[str] | None = None, *, tail: int | None = None,
                  system_columns: bool | Sequence[str] = False, batch_rows: int = BATCH_ROWS) -> pa.RecordBatchReader:
        """:meth:`read`'s records as a stream of batches, decoding only ``columns``.

        The public :meth:`~pyspark_tstream.api.stream.Stream.to_reader` documents the arguments.
        """
        _check_limit(limit)
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
            raise ConfigError(f"batch_rows={batch_rows!r} must be a positive integer", option="batch_rows",
                              value=batch_rows)
        window = Window(self.ctx.journal)
        rng = self.bounds(start, end, tail, window)  # first: it refreshes the state the schema comes from
        user, out = projection(self.ctx.schema or pa.schema([]), columns, system_columns)
        return self.batches(rng, user, out, limit=limit, batch_rows=batch_rows, window=window)

    def batches(self, rng: ReadRange, user: pa.Schema, out: pa.Schema, *, limit: int | None = None,
                batch_rows: int = BATCH_ROWS, window: Window | None = None) -> pa.RecordBatchReader:
        """The records of ``rng`` as a reader of ``out`` (a :func:`projection`'s), planned now on
        the newest state the handle has seen (through ``window``, :meth:`bounds`'s) and read
        lazily, window by window (:func:`~pyspark_tstream.read.sweep.sweep`)."""
        h = self.ctx
        if h.schema is None or rng.empty or limit == 0:
            return pa.RecordBatchReader.from_batches(out, iter(()))
        p = plan(window or Window(h.journal), h.state, rng.lo, rng.hi, at_least=None if rng.cut else limit)
        tables = sweep(h.store, user, p.chunks, rng.lo, p.hi, columns=user.names, starts=rng.start_cut,
                       ends=rng.end_cut, window_rows=batch_rows)
        return pa.RecordBatchReader.from_batches(out, _limited(tables, out, limit, batch_rows))

    def plan(self, lo: int, hi: int, *, first_pos: int | None = None, last_pos: int | None = None) -> list[Chunk]:
        """Chunks that may hold records with ``lo < _tso <= hi`` (see :mod:`~pyspark_tstream.read.planner`)."""
        return plan_chunks(self.ctx.journal, self.ctx.state, lo, hi, first_pos, last_pos)

    def plan_read(self, lo: int, hi: int, **kw: Any) -> Plan:
        """The lazy :func:`~pyspark_tstream.read.planner.plan` of ``(lo, hi]`` on the newest state."""
        return plan(Window(self.ctx.journal), self.ctx.state, lo, hi, **kw)

    def seek(self, when: TimeLike) -> int:
        """The position (exclusive ``_tso`` bound) before the first record at or after ``when``."""
        return max(self.ctx.state.head_tso, pack(to_ms(when, option="timestamp")) - 1)

    def seek_tail(self, n: int, window: Window | None = None) -> int:
        """Exclusive ``_tso`` bound such that the last ``n`` records at or below the tick follow it
        (``window``: the read's, so that its plan finds the index nodes the walk read)."""
        h = self.ctx
        window = window or Window(h.journal)
        # the newest records' chunks are in those entries, and a longer span's in the index nodes
        # the state names: all in the refresh's batch
        ahead = window.tail_ahead(h.state, n)
        state = h.refresh(open_positions(h.state), (window.ahead, ahead) if ahead else None)
        # the span's chunks may have been compacted (and their files collected): read views (of
        # the map versions the window read ahead with the index nodes)
        return tail_bound(h.journal, state, n, lambda chunks, tick: tsos_upto(
            h.store, substitute(h.store, state, list(chunks), ahead=window.ahead), tick), window)


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit={limit!r} must be a non-negative integer (a count of records; None "
                          "for no limit)", option="limit", value=limit)


def _limited(tables: Iterator[pa.Table], out: pa.Schema, limit: int | None,
             batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Batches of ``out``'s columns of ``tables``, at most ``batch_rows`` each, ``limit`` in all."""
    left = limit
    for table in tables:
        if left is not None:
            table = table.slice(0, left)
            left -= table.num_rows
        # one batch per ``batch_rows`` records, not one per window the table was joined from
        yield from table.select(out.names).combine_chunks().to_batches(max_chunksize=batch_rows)
        if left == 0:
            return


def tsos_upto(store: Store, chunks: Sequence[Chunk], tick: int) -> np.ndarray:
    """Final ``_tso`` values (at or below ``tick``) of ``chunks``, reading only the raw column."""
    parts = [tso[tso <= tick] for _, tso in read_tsos(store, chunks)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
