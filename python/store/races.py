"""The one loop for optimistic writes: rebuild on the newest version until the create wins.

Every versioned object tstream keeps (journal entries, sealed-map shards, consumer-group logs,
macro-map buckets) is changed the same way: read the newest version, build the next one from it,
and take its slot with an atomic create-if-absent. Losing means another writer took the slot
first: re-read and rebuild, so every change is applied to exactly one predecessor and none is
lost. The number of attempts is bounded so a livelock ends in a
:class:`~pyspark_tstream.errors.CommitConflictError` (``retriable``) instead of spinning forever.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..errors import CommitConflictError

T = TypeVar("T")

#: Lost races before giving up; a race is lost only when another writer won, so reaching this
#: means a thousand other changes landed while we were trying.
MAX_ATTEMPTS = 1000


class Lost:
    """Returned by an attempt that lost its slot to another writer: try again."""


LOST = Lost()


def until_won(attempt: Callable[[], T | Lost], *, what: str, expected: Callable[[], int]) -> T:
    """Call ``attempt`` until it returns anything but :data:`LOST`, and return that.

    ``attempt`` must read the newest version itself each time. ``what`` names the object in the
    error (``"consumer group 'billing'"``); ``expected`` gives the slot we last tried, for the
    error's structured ``expected`` field.
    """
    for _ in range(MAX_ATTEMPTS):
        result = attempt()
        if not isinstance(result, Lost):
            return result
    raise CommitConflictError(f"gave up after {MAX_ATTEMPTS} lost races on {what}", expected=expected())
