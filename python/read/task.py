"""A read task: the chunks one task reads and its bounds, and how it travels pickled.

One job: the :class:`ReadTask` record a plan hands a Spark partition (or a local reader), and its
compact pickled form (a production-shape write plans thousands of slices into a task).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

from ..journal.entries import Chunk


@dataclass(frozen=True)
class ReadTask:
    """A unit of reading (one Spark partition): chunks and the ``_tso`` range to keep.

    The planner (:func:`~pyspark_tstream.read.tasks.plan_tasks`) makes them on the driver; it is
    defined apart from the planner, so an executor unpickling one loads no planner.
    """

    chunks: tuple[Chunk, ...]
    lo: int  # exclusive
    hi: int  # inclusive
    start_cut: tuple[tuple[int, int], ...] = ()  # (segment, first _seq kept)
    end_cut: tuple[tuple[int, int], ...] = ()  # (segment, first _seq not kept)

    def __reduce__(self) -> tuple[Any, ...]:
        # a 200-task write into 64 segments plans 12,800 slices into a task: each travels as the
        # tuple of its fields, without the class reference and field names of a pickled object
        return (_task, (tuple(map(_CHUNK_VALUES, self.chunks)), self.lo, self.hi, self.start_cut, self.end_cut))

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.chunks)

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.chunks)


#: A chunk's fields, in order: what a pickled :class:`ReadTask` carries of each chunk.
_CHUNK_FIELDS = tuple(f.name for f in fields(Chunk))
_CHUNK_VALUES = attrgetter(*_CHUNK_FIELDS)


def _task(values: tuple[tuple[Any, ...], ...], lo: int, hi: int, start_cut: tuple[tuple[int, int], ...],
          end_cut: tuple[tuple[int, int], ...]) -> ReadTask:
    """A pickled :class:`ReadTask` again: each chunk's fields put into its instance dict, as
    unpickling any object does (and ``Chunk.from_json``), not through the frozen ``__init__``."""
    new, put, names = object.__new__, object.__setattr__, _CHUNK_FIELDS
    chunks = []
    for v in values:
        c = new(Chunk)
        put(c, "__dict__", dict(zip(names, v)))
        chunks.append(c)
    return ReadTask(tuple(chunks), lo, hi, start_cut, end_cut)
