"""A journal entry's chunk references and folds (protocol §3): where each chunk's records are, how they
are numbered and timed, and which requests a group commit folded.

One job: the records an entry names. :mod:`~pyspark_tstream.journal.entries` stores them (and
re-exports both names); every reader of a plan uses :class:`Chunk`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any, ClassVar, NamedTuple

from .shapes import is_int, need


@dataclass(frozen=True)
class Chunk:
    """A committed data chunk, or a view of part of one: where it is, how its records are
    numbered and timed.

    Trailing optional fields (format v2; v1 lists decode with the defaults): ``offset`` is the
    row inside the Parquet file where this chunk's records start (views into macro-chunks);
    ``sorted`` says final ``_tso`` strictly increases along the rows (else ``lo``/``hi`` are the
    min/max); ``marks`` is the final ``_tso`` of rows ``0, step, 2*step, …`` with
    ``step = timestamps.mark_step(rows)``, so a planner can cut inside the chunk without reading
    it (empty when unknown). Serialized only when not default; ``marks`` as differences from the
    previous mark (from ``lo`` for the first).

    Format v3: ``file_bytes`` > 0 makes the chunk a *slice* of a shared file (a Spark task's one
    file holding the rows of every segment it wrote, each segment's rows in row groups of their
    own): its rows are ``[offset, offset + rows)`` of that ``file_bytes``-byte file and ``bytes``
    is the compressed size of its row groups. ``floor`` counts the chunk's own rows
    (``tso_i = max(raw_i, floor + i)``, ``i`` from 0 at ``offset``), as for any chunk.

    Format v5: ``span_bytes`` > 0 says the slice's bytes ``[span_start, span_start +
    span_bytes)`` of its shared file are a Parquet file of their own (its row groups and its own
    footer), whose first row is row ``offset`` of the whole file: a read fetches that span alone
    (python/write/shared.py, python/read/ranged.py). A slice without a span (v3, v4) reads
    through the whole file's footer.
    """

    seg: int
    path: str
    rows: int
    bytes: int
    seq: int  # _seq of the first record
    floor: int  # tso_i = max(raw_i, floor + i)
    lo: int  # first _tso
    hi: int  # last _tso
    offset: int = 0
    sorted: bool = True
    marks: tuple[int, ...] = ()
    file_bytes: int = 0
    span_start: int = 0
    span_bytes: int = 0

    #: The stored list's positions, in order (one definition for both directions).
    FIELDS: ClassVar[tuple[str, ...]] = ("seg", "path", "rows", "bytes", "seq", "floor", "lo", "hi", "offset",
                                         "sorted", "marks", "file_bytes", "span_start", "span_bytes")
    #: The trailing fields stored only when not default, with their stored defaults.
    OPTIONAL: ClassVar[dict[str, Any]] = {"offset": 0, "sorted": True, "marks": [], "file_bytes": 0,
                                          "span_start": 0, "span_bytes": 0}

    @property
    def shared(self) -> bool:
        """Whether this chunk is a slice of a file other chunks (of other segments) share."""
        return self.file_bytes > 0

    @property
    def span(self) -> tuple[int, int] | None:
        """The byte range ``[start, end)`` of its shared file holding this slice as a Parquet
        file of its own (format v5), None when it has none."""
        return (self.span_start, self.span_start + self.span_bytes) if self.span_bytes > 0 else None

    def to_json(self) -> list[Any]:
        stored = {name: getattr(self, name) for name in self.FIELDS}
        stored["marks"] = [m - p for m, p in zip(self.marks, (self.lo,) + self.marks[:-1])]
        values = [stored[name] for name in self.FIELDS]
        while len(values) > len(self.FIELDS) - len(self.OPTIONAL) and \
                values[-1] == self.OPTIONAL[self.FIELDS[len(values) - 1]]:
            values.pop()
        return values

    @classmethod
    def from_json(cls, v: list[Any]) -> Chunk:
        """The chunk of a stored list that passed :func:`~.shapes.check_chunk`."""
        # a read of fresh data at many segments decodes a chunk a slice: the fields go into the
        # instance's dict at once, in a literal (FIELDS' order; tests/test_slice_metadata.py
        # pins the two alike), not through the frozen class's __init__ (one guarded
        # object.__setattr__ a field, most of the decode)
        if len(v) < len(cls.FIELDS):
            v = [*v, *_STORED_TAIL[len(v) - len(cls.FIELDS):]]
        seg, path, rows, size, seq, floor, lo, hi, offset, in_order, marks, file_bytes, span_start, span_bytes = v
        marks = tuple(accumulate(marks, initial=lo))[1:] if marks else ()  # stored as differences, from lo
        chunk = _new(cls)
        _set(chunk, "__dict__", {
            "seg": seg, "path": path, "rows": rows, "bytes": size, "seq": seq, "floor": floor, "lo": lo, "hi": hi,
            "offset": offset, "sorted": in_order, "marks": marks, "file_bytes": file_bytes, "span_start": span_start,
            "span_bytes": span_bytes})
        return chunk


_new = object.__new__
_set = object.__setattr__
#: The stored values of the optional fields, in order: what a shorter stored list leaves out.
_STORED_TAIL: tuple[Any, ...] = tuple(Chunk.OPTIONAL.values())


class Fold(NamedTuple):
    """One request a group-commit entry folded (format v4), stored as the list
    ``[rid, writer, batch, chunks, info]``: its id, its dedupe key, how many of the entry's
    chunks are its (consecutive, in fold order) and its own ``info``."""

    rid: str
    writer: str | None
    batch: Any
    chunks: int
    info: dict[str, Any]


def check_folds(folds: Any, chunks: int) -> list[list[Any]]:
    """The ``folds`` of an entry, shape-checked: ``[id, writer, batch, chunk count, info]`` each,
    whose chunk counts add up to the entry's ``chunks`` (TypeError otherwise)."""
    need(isinstance(folds, list) and all(
        isinstance(f, list) and len(f) == 5 and isinstance(f[0], str) and (f[1] is None or isinstance(f[1], str))
        and is_int(f[3]) and f[3] >= 0 and isinstance(f[4], dict) for f in folds), "the entry's folds")
    need(not folds or sum(f[3] for f in folds) == chunks, "the entry's folds (chunk counts)")
    checked: list[list[Any]] = folds
    return checked
