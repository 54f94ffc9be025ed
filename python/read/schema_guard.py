"""Schema changes under a running streaming query: where its micro-batches must end.

A streaming query fixes its columns when it starts (Spark asks for the schema once). A later
``mergeSchema`` write adds columns; delivering its records without them would drop their values
for every sink downstream. So a query's batches end before the first commit that added a column
the query lacks, and the next batch fails with :class:`~pyspark_tstream.errors.SchemaChangedError`
(as Delta fails with ``DELTA_SCHEMA_CHANGED``); restarted from the same checkpoint, the query
takes the new schema and reads on, every record once.

Why the tick bounds it: each change record (``state.schema_changes``, written by
:mod:`~pyspark_tstream.write.commit`) keeps the tick published just before the widening commit.
Every record of that commit and of later ones lies above that tick (floors exceed the tick), so
a batch ending at it, at the position before the change, holds only records written under the
old schema. Pure functions of the newest state: no store calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import SchemaChangedError
from ..schema import SYSTEM_COLUMNS, decode_schema
from ..timestamps import iso

if TYPE_CHECKING:  # the reader carries a guard to its tasks: they need no journal to unpickle it
    from ..journal.state import SchemaChange, StreamState


class SchemaGuard:
    """The columns a streaming query delivers, and where its batches must end for the stream's.

    Built once per query on the driver from Spark's schema; remembers the last stream schema it
    decoded, so a trigger whose stream schema did not change decodes nothing.
    """

    #: what the error tells a streaming query to do
    RESTART = ("restart the query from the same checkpointLocation to read on with the new columns "
               "(no record is read twice)")

    def __init__(self, url: str, known: Iterable[str], remedy: str = RESTART) -> None:
        self.url = url
        self.remedy = remedy
        self.columns = tuple(known)
        self.known = frozenset(self.columns)
        self._seen: str | None = None
        self._new: tuple[str, ...] = ()

    def new_columns(self, state: StreamState) -> tuple[str, ...]:
        """Stream columns the query lacks, in stream order."""
        if state.schema != self._seen:
            names = decode_schema(state.schema).names if state.schema else []
            self._new = tuple(n for n in names if n not in self.known)
            self._seen = state.schema
        return self._new

    def limit(self, state: StreamState, begin_tso: int, tick: int, pos: int) -> tuple[int, int]:
        """The ``(tick, pos)`` a batch after ``begin_tso`` may end at, given it could end at
        ``(tick, pos)``: before the first change at or below ``pos`` adding a column the query
        lacks. Raises SchemaChangedError when that leaves the batch empty."""
        new = self.new_columns(state)
        if not new:
            return tick, pos
        first, unplaced = self._first_change(state, new)
        if unplaced:  # added without a change record (an older tstream wrote it): stop here
            raise self._error(new, None)
        if first is None or first.pos > pos:
            return tick, pos  # the change lies beyond this batch (Trigger.AvailableNow's end)
        if min(tick, first.tick) <= begin_tso:
            raise self._error(new, first)
        return min(tick, first.tick), min(pos, first.pos - 1)

    def check(self, state: StreamState, begin_tso: int, end_tso: int, end_pos: int) -> None:
        """Raise SchemaChangedError if batch ``(begin_tso, end_tso]`` at ``end_pos`` would hold
        records written with columns the query lacks (a batch planned before this check)."""
        if end_tso <= begin_tso:
            return
        new = self.new_columns(state)
        if not new:
            return
        first, unplaced = self._first_change(state, new)
        if unplaced:
            raise self._error(new, None)
        if first is not None and first.pos <= end_pos and end_tso > first.tick:
            raise self._error(new, first)

    @staticmethod
    def _first_change(state: StreamState, new: tuple[str, ...]) -> tuple[SchemaChange | None, bool]:
        """The earliest change adding one of ``new``, and whether some of ``new`` has no record."""
        wanted = set(new)
        placed: set[str] = set()
        first = None
        for change in state.schema_changes:
            hit = wanted.intersection(change.columns)
            if hit:
                placed |= hit
                if first is None:
                    first = change
        return first, placed != wanted

    def _error(self, new: tuple[str, ...], first: SchemaChange | None) -> SchemaChangedError:
        where = (f"by the mergeSchema write at journal position {first.pos} ({iso(first.wall)})"
                 if first is not None else "by a write that left no change record (an older pyspark-tstream)")
        return SchemaChangedError(
            f"stream {self.url} gained columns {list(new)} {where} after this query took its schema "
            f"({', '.join(n for n in self.columns if n not in SYSTEM_COLUMNS)}); it stops before the first "
            f"record written with them, so none is delivered without them: {self.remedy}",
            columns=list(new), pos=first.pos if first is not None else None)
