"""The check a commit makes that the slot it takes is the journal's end, not a lost entry's.

One job: reading, before the conditional create of entry ``n``, what lies around that slot
(:class:`Around`: entries ``n - 1``, ``n`` and ``n + 1`` and the position the head hint names,
in one batched read) and saying whether the create may go ahead. A handle follows the journal entry
by entry (a poll reads the next position), so it cannot tell a lost entry (deleted by damage)
from the end: a create-if-absent into the lost entry's slot succeeds, and the journal forks
(the entries after the slot were made on the lost state, so every state rebuilt across it would
be wrong without an error, and vacuum would trust what they say). So:

* entry ``n`` there: the slot was taken (a race lost), and the winner is read in the batch;
* an entry at ``n + 1``, or a head hint naming ``n`` or later (it only ever copies a committed
  entry), while ``n`` is free: entry ``n`` was lost. The commit creates nothing and refuses,
  naming entry ``n`` and ``tstream repair`` (:func:`hole`; a hint naming ``n`` holds its copy,
  which repair restores). With ``n`` present by the time it is read again, it is a race lost
  meanwhile;
* entry ``n - 1`` missing (the newest entry, the one the commit builds on): a commit would leave
  a hole and overwrite the head hint, the only copy that restores it; it refuses the same way
  (as :meth:`EntryLog.confirm <pyspark_tstream.journal.entries.EntryLog.confirm>` does for a
  newest entry known through the hint alone).

Where the answer comes from (:class:`PastCheck`): a read started in the background beside work
that takes a round trip anyway, when the position the commit will try is known before that
work (``Stream.append``: its data upload; a group committer that lost a race or waited: its
publish and listing) — no round trip added; else the same batched read in line, just before the
create. An answer serves only the call that asked it (the caller then drops it:
:meth:`PastCheck.forget`), once, and only while :data:`FRESH_S` old, so a single lost entry
before the call (or a run of them the head hint has passed) is always seen. (A cold open's
batch could read the slot two past the head hint for free, but its answer predates the call,
so it cannot let a create go ahead.)

What remains (docs/protocol.md, "A lost entry and a stale committer"): a run of two or more
lost entries from ``n`` on while the head hint is lost or behind them too; and between the
answer and the create (a window of the caller's upload, at most :data:`FRESH_S`, or of one
round trip), entry ``n`` created by another writer and then lost, or entry ``n - 1`` lost.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from ..errors import CorruptMetadataError, error
from ..store import layout
from ..store.storage import Store
from .entry import stored_pos

#: Seconds an answer about a commit's slot stays usable: the window in which an entry lost and
#: a successor created meanwhile would go unseen. A small append's data upload fits in it; a
#: longer one (a large batch) pays the read in line instead.
FRESH_S = 1.0


@dataclass(frozen=True)
class Around:
    """What lies around the slot ``pos`` a commit takes (one batched read)."""

    pos: int
    #: entry ``pos - 1`` (the newest the commit builds on) is there
    before: bool
    #: the stored bytes of entry ``pos`` (None: the slot is free)
    taken: bytes | None
    #: entry ``pos + 1`` is there
    after: bool
    #: the position the head hint names (-1: no readable hint)
    hinted: int

    @property
    def passed(self) -> bool:
        """Whether the journal has a committed entry at ``pos`` or past it: the slot is taken,
        or its entry was lost."""
        return self.after or self.hinted >= self.pos


def look(store: Store, pos: int) -> Around:
    """Read what lies around slot ``pos``: one batched read (parallel GETs, one round trip)."""
    rels = [layout.entry(pos - 1), layout.entry(pos), layout.entry(pos + 1), layout.HEAD]
    before, taken, after, head = store.read_present(rels)
    return Around(pos, before is not None, taken, after is not None, -1 if head is None else stored_pos(head))


class PastCheck:
    """Answers what lies around the slot a commit takes, for one stream's handle."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        #: position of the commit asked for -> (when asked, the answer's future)
        self._known: dict[int, tuple[float, Future[Around]]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def expect(self, pos: int) -> None:
        """Start reading what lies around slot ``pos`` in the background (for the commit that
        will try it)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tstream-past")
        asked = time.monotonic()
        future = self._pool.submit(look, self.store, pos)
        with self._lock:
            self._known = {pos: (asked, future)}

    def forget(self) -> None:
        """Drop an answer no commit used (its caller's call ended)."""
        with self._lock:
            self._known = {}

    def around(self, pos: int) -> Around:
        """What lies around slot ``pos``: a fresh answer asked for it (used once), else one
        batched read."""
        with self._lock:
            known = self._known.pop(pos, None)
        if known is not None:
            asked, pending = known
            try:
                answer: Around | None = pending.result()
            except Exception:  # noqa: BLE001 - a failed background read: ask again in line
                answer = None
            # the store answered after ``asked``: its answer is at most this old at the create
            if answer is not None and time.monotonic() - asked <= FRESH_S:
                return answer
        return look(self.store, pos)


def hole(store: Store, pos: int, around: Around) -> CorruptMetadataError:
    """The refusal of a commit into the slot of lost entry ``pos``: an entry past it exists,
    or the head hint names it or a later one."""
    gone = store.uri(layout.entry(pos))
    if around.after:
        why = f"entry {store.uri(layout.entry(pos + 1))} after it exists"
    elif around.hinted == pos:
        why = f"the head hint {store.uri(layout.HEAD)} holds a copy of it (repair restores it from there)"
    else:
        why = f"the head hint {store.uri(layout.HEAD)} names position {around.hinted}"
    err = error("TSTREAM_CORRUPT_METADATA", kind="journal entry", path=gone,
                reason=f"it is missing while {why}: a lost commit, so nothing was committed (a commit "
                       "into its slot would fork the journal)",
                url=layout.stream_url(gone))
    assert isinstance(err, CorruptMetadataError)
    return err
