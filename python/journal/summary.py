"""A time-index summary: one journal position (or one index node) in a few monotone columns.

Stored as a JSON list of integers in column order, in ``state.index`` and in index nodes'
``items``. :class:`Summary` is a ``NamedTuple``, so the stored list and the record are the same
sequence: it encodes as the list it was, a column is read by name (``s.max_tso``), and the
time index searches a column by its position (``COL_*`` in ``journal/timeindex.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

#: Columns of a summary. The first release wrote the first five (no epoch, no bytes); the two
#: came without a format version, so a shorter summary reads with 0 in them (epoch 0: that
#: release never scaled; bytes 0: size retention counts those old commits as empty and keeps them).
SUMMARY_COLUMNS = 7
FIRST_SUMMARY_COLUMNS = 5


class Summary(NamedTuple):
    """The summary of a journal position (level 0) or of an index node (``id`` is then the
    node's number and the other columns are its last child's). Every column but ``id`` and
    ``epoch`` is monotone over positions, so the index is searchable by it."""

    id: int  # journal position, or node number
    max_tso: int  # largest _tso committed up to here
    tick: int  # the tick published here
    wall: int  # wall ms of the commit (monotone: the larger of the entry's and the state's)
    rows: int  # records committed so far
    epoch: int
    bytes: int  # bytes committed so far

    def encode(self) -> list[int]:
        """The stored list."""
        return list(self)

    @classmethod
    def decode(cls, row: Sequence[int]) -> Summary:
        """The summary of a stored list: every column (a first-release row gets 0s), columns
        beyond them dropped."""
        if len(row) >= SUMMARY_COLUMNS:
            return cls(*row[:SUMMARY_COLUMNS])
        return cls(*row, *[0] * (SUMMARY_COLUMNS - len(row)))
