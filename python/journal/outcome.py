"""What one try at a journal slot gave (:meth:`~pyspark_tstream.journal.journal.Journal.attempt`).

A closed union, matched exhaustively: :class:`Committed` (this try's entry is at the slot, or
there was nothing to commit) or :class:`Taken` (another commit won the slot; its entry is
here, for a retry to rebuild on and a group committer to look in for the requests it folded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .entries import Entry
    from .state import StreamState


@dataclass(frozen=True)
class Committed:
    """The try committed ``entry`` (None: the build had nothing to commit); ``state`` is the
    newest committed state (the entry's, or the one the try was built on)."""

    entry: Entry | None
    state: StreamState


@dataclass(frozen=True)
class Taken:
    """Another commit took the slot first: ``winner`` is its entry."""

    winner: Entry


#: One try's outcome.
Attempt = Committed | Taken
