"""Finding the newest version of a versioned object (``<n>.json`` created if absent) from a hint.

Sealed-map shards, macro-map buckets and consumer-group logs keep numbered immutable versions
next to a ``head.json`` hint. The hint may lag (another writer's version, a lost hint write) or
be gone: a short forward walk covers a lagging hint at the usual cost, and past it an
exponential then binary search over version existence finds the newest in O(log n) calls, so a
lost hint never costs a walk over the whole history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .journal import newest_present

T = TypeVar("T")

#: Versions read one by one past the hint before searching instead.
WALK = 3


def newest_version(read: Callable[[int], T], exists: Callable[[int], bool], known: int, cur: T) -> T:
    """The newest version, given ``cur`` = version ``known`` (``known = -1``: none known).

    ``read(n)`` returns version ``n`` or raises FileNotFoundError; versions are contiguous from 0.
    """
    for _ in range(WALK):
        try:
            cur = read(known + 1)
        except FileNotFoundError:
            return cur
        known += 1
    newest = newest_present(exists, known)
    return read(newest) if newest != known else cur
