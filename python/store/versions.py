"""Finding the newest of contiguously numbered immutable objects (``<n>.json``) from a hint.

Journal entries, sealed-map shards, macro-map buckets and consumer-group logs keep numbered
immutable versions next to a ``head.json`` hint. The hint may lag (another writer's version, a
lost hint write) or be gone: a short forward walk covers a lagging hint at the usual cost, and
past it an exponential then binary search over version existence finds the newest in O(log n)
calls, so a lost hint never costs a walk over the whole history. Where the versions live is
:mod:`~pyspark_tstream.store.layout`'s job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

def newest_present(present: Callable[[int], bool], lo: int) -> int:
    """The largest ``p >= lo`` with ``present(p)``, given ``present(lo)`` and that presence is
    contiguous from ``lo``: exponential then binary search, O(log n) calls."""
    step, hi = 1, lo + 1
    while present(hi):
        lo, step = hi, step * 2
        hi = lo + step
    while hi - lo > 1:  # lo is present, hi is not
        mid = (lo + hi) // 2
        if present(mid):
            lo = mid
        else:
            hi = mid
    return lo


def probe_past(item: T, next_of: Callable[[T], T | None]) -> T:
    """The newest of contiguously numbered versions, from a known one (``item``) and a read of
    the next one (``next_of``, None when absent): one read per version past ``item``."""
    while (nxt := next_of(item)) is not None:
        item = nxt
    return item


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
