"""A journal entry's chunk references and folds (protocol §3): where each chunk's records are, how they
are numbered and timed, and which requests a group commit folded.

One job: the records an entry names. :mod:`~pyspark_tstream.journal.entries` stores them (and
re-exports both names); every reader of a plan uses :class:`Chunk`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..codec import ANY, BOOL, DEFAULT, INT, NAT, STR, ListRecord, dict_of, diffs_from, need, opt, record, stored


@record(invariants={"span_bytes": "{span_start} + {span_bytes} <= {file_bytes}"})
@dataclass(frozen=True)
class Chunk(ListRecord):
    """A committed data chunk, or a view of part of one: where it is, how its records are
    numbered and timed.

    Trailing optional fields (format v2; v1 lists decode with the defaults): ``offset`` is the
    row inside the Parquet file where this chunk's records start (views into macro-chunks);
    ``sorted`` says final ``_tso`` strictly increases along the rows (else ``lo``/``hi`` are the
    min/max); ``marks`` is the final ``_tso`` of rows ``0, step, 2*step, …`` with
    ``step = timestamps.mark_step(rows)``, so a planner can cut inside the chunk without reading
    it (empty when unknown). Stored as the list of the fields in this order, the trailing ones
    left out while they are default; ``marks`` as differences from the previous mark (from
    ``lo`` for the first).

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

    seg: int = stored(INT)
    path: str = stored(STR)
    rows: int = stored(INT)
    bytes: int = stored(INT)
    seq: int = stored(INT)  # _seq of the first record
    floor: int = stored(INT)  # tso_i = max(raw_i, floor + i)
    lo: int = stored(INT)  # first _tso
    hi: int = stored(INT)  # last _tso
    offset: int = stored(NAT, default=0, omit=DEFAULT)
    sorted: bool = stored(BOOL, default=True, omit=DEFAULT)
    marks: tuple[int, ...] = stored(diffs_from("lo"), default=(), omit=DEFAULT)
    file_bytes: int = stored(NAT, default=0, omit=DEFAULT)
    span_start: int = stored(NAT, default=0, omit=DEFAULT)
    span_bytes: int = stored(NAT, default=0, omit=DEFAULT)

    @property
    def shared(self) -> bool:
        """Whether this chunk is a slice of a file other chunks (of other segments) share."""
        return self.file_bytes > 0

    @property
    def span(self) -> tuple[int, int] | None:
        """The byte range ``[start, end)`` of its shared file holding this slice as a Parquet
        file of its own (format v5), None when it has none."""
        return (self.span_start, self.span_start + self.span_bytes) if self.span_bytes > 0 else None


@record
@dataclass(frozen=True)
class Fold(ListRecord):
    """One request a group-commit entry folded (format v4), stored as the list
    ``[rid, writer, batch, chunks, info]``: its id, its dedupe key, how many of the entry's
    chunks are its (consecutive, in fold order) and its own ``info``."""

    rid: str = stored(STR)
    writer: str | None = stored(opt(STR))
    batch: Any = stored(ANY)
    chunks: int = stored(NAT)
    info: dict[str, Any] = stored(dict_of(ANY))


def check_folds(folds: Any, chunks: int) -> list[list[Any]]:
    """The ``folds`` of an entry, shape-checked (:class:`Fold`'s stored lists), whose chunk
    counts add up to the entry's ``chunks`` (TypeError otherwise)."""
    need(isinstance(folds, list) and all(map(Fold.json_ok, folds)), "the entry's folds")
    need(not folds or sum(f[3] for f in folds) == chunks, "the entry's folds (chunk counts)")
    checked: list[list[Any]] = folds
    return checked
