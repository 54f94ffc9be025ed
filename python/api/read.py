"""Reading a stream through the Python API: time ranges, planned reads, seeks and the tail.

One job: turn the API's times into exclusive ``_tso`` bounds within ``(head, tick]`` and read
what the :mod:`~pyspark_tstream.read.planner` plans there. Only complete time is returned (never
past the tick); a record is read once, in ``(_tso, _segment, _seq)`` order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import TimestampError
from ..journal.entries import Chunk
from ..read.compacted import substitute
from ..read.planner import Plan, Window, plan, plan_chunks, tail_bound
from ..read.reading import read_table, read_tsos
from ..schema import full_schema
from ..store.storage import Store
from ..timestamps import TimeLike, pack, to_ms
from .context import StreamContext


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

    def read(self, start: TimeLike = None, end: TimeLike = None, limit: int | None = None,
             columns: Sequence[str] | None = None) -> pa.Table:
        """Records with ``start <= _timestamp < end``, ordered by ``_tso``, with system columns.

        The public :meth:`~pyspark_tstream.api.stream.Stream.read` documents the arguments.
        """
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise TimestampError(f"limit={limit!r} must be a non-negative integer")
        h = self.ctx
        state = h.refresh()
        schema = h.schema
        lo, hi = self.range(start, end)
        if schema is None or hi <= lo or limit == 0:
            return full_schema(schema or pa.schema([])).empty_table()
        # lazily: with a limit, the walk stops once the chunks surely hold ``limit`` records
        p = plan(Window(h.journal), state, lo, hi, at_least=limit)
        table = read_table(h.store, schema, p.chunks, lo, p.hi)
        if columns is not None:
            table = table.select(list(columns))
        return table.slice(0, limit) if limit is not None else table

    def plan(self, lo: int, hi: int, *, first_pos: int | None = None, last_pos: int | None = None) -> list[Chunk]:
        """Chunks that may hold records with ``lo < _tso <= hi`` (see :mod:`planner`)."""
        return plan_chunks(self.ctx.journal, self.ctx.state, lo, hi, first_pos, last_pos)

    def plan_read(self, lo: int, hi: int, **kw: Any) -> Plan:
        """The lazy :func:`~pyspark_tstream.read.planner.plan` of ``(lo, hi]`` on the newest state."""
        return plan(Window(self.ctx.journal), self.ctx.state, lo, hi, **kw)

    def seek(self, when: TimeLike) -> int:
        """The position (exclusive ``_tso`` bound) before the first record at or after ``when``."""
        return max(self.ctx.state.head_tso, pack(to_ms(when, option="timestamp")) - 1)

    def seek_tail(self, n: int) -> int:
        """Exclusive ``_tso`` bound such that the last ``n`` records at or below the tick follow it."""
        h = self.ctx
        state = h.refresh()
        # the span's chunks may have been compacted (and their files collected): read views
        return tail_bound(h.journal, state, n,
                          lambda chunks, tick: tsos_upto(h.store, substitute(h.store, state, list(chunks)), tick))


def tsos_upto(store: Store, chunks: Sequence[Chunk], tick: int) -> np.ndarray:
    """Final ``_tso`` values (at or below ``tick``) of ``chunks``, reading only the raw column."""
    parts = [tso[tso <= tick] for _, tso in read_tsos(store, chunks)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
