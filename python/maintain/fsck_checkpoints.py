"""``fsck`` of the state's checkpoints (format v6): each one a rebuild may start from is readable
and holds the state the journal rebuilds at its position.

One job: check checkpoints and say what ``repair`` rewrites. The newest checkpoint
(``state.checkpoint``) and the one before it (``prev``, what a rebuild falls back to) are checked
against the state :meth:`~pyspark_tstream.maintain.fsck._Checker.entries` built entry by entry; a
missing, unreadable or different one is rewritten from that state; one whose entries were
collected is only checked for being readable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..errors import CorruptMetadataError
from ..journal import checkpoint
from ..journal.entries import Entry
from ..journal.state import StreamState
from ..store import layout
from ..store.storage import Store

Problem = Callable[..., None]


def first_base(store: Store, state: StreamState) -> dict[int, StreamState]:
    """Where ``fsck`` starts building states entry by entry (position -> state): entry 0 holds
    the whole state, so without garbage collection nothing is needed; after it, the lowest
    readable checkpoint at or above the oldest live entry's predecessor. Entries before it are
    checked for their own shape only (the state before them is gone with the collected ones)."""
    if state.checkpoint is None or state.meta_gc_pos <= 1:
        return {}
    m = state.checkpoint
    for pos in sorted({state.meta_gc_pos - 1, m.prev, m.pos}):
        if pos < state.meta_gc_pos - 1:
            continue
        try:
            return {pos: checkpoint.read(store, pos)}
        except (FileNotFoundError, CorruptMetadataError):
            continue  # reported by check_checkpoints
    return {}


def check_checkpoints(store: Store, state: StreamState, entries: dict[int, Entry], problem: Problem,
                      count: Callable[[str], None]) -> dict[int, bytes]:
    """Check the checkpoints a rebuild of ``state`` may read; return position -> the bytes
    ``repair`` writes for the ones it can rebuild."""
    mark = state.checkpoint
    if mark is None:
        return {}
    fixes: dict[int, bytes] = {}
    wanted = sorted({mark.pos, mark.prev})
    for pos in wanted:
        rel = layout.checkpoint(pos)
        count("checkpoints")
        known = entries.get(pos)
        expected: Any = None if known is None else json.loads(checkpoint.encode(known.state))["state"]
        try:
            got = checkpoint.read(store, pos)
            what = "" if expected is None or json.loads(json.dumps(got.to_json())) == expected else \
                "different from the state the journal rebuilds"
        except FileNotFoundError:
            what = "missing"
        except CorruptMetadataError as e:
            what = f"unreadable ({str(e).split(';')[0]})"
        if not what:
            continue
        if pos == 0 and known is not None:
            continue  # entry 0 holds the whole state: its checkpoint is a copy nothing needs
        if known is not None:
            fixes[pos] = checkpoint.encode(known.state)
            problem("checkpoint", rel, f"checkpoint {store.uri(rel)} is {what}; the journal holds its state: "
                    "`tstream repair` rewrites it (until then, readers rebuild the state from the one "
                    "before it when it is missing or unreadable, or when it contradicts the entries after it: "
                    "its size, a segment's next _seq, its truncation head; any other edit they use as it "
                    "is)", True, pos=pos)
        else:
            problem("checkpoint", rel, f"checkpoint {store.uri(rel)} is {what} and the journal entries that "
                    "rebuild it were collected; the entries after it cannot be checked: truncate the stream "
                    "past them (`tstream truncate`) once newer checkpoints exist", False, pos=pos)
    return fixes
