"""Journal objects read ahead of need, so that what one step needs next rides in its batch.

One job: the batch a handle's open reads after the head hint (:func:`open_batch`: the
checkpoint and entries its state is rebuilt from, the newest entry's own slot, the probe of the
slot past it), and handing those objects out once each (:class:`Ahead`). A batched read of
parallel GETs is one round trip, so on an object store each object folded in here is a round
trip saved (issue #62's cold reads, #58's check of the newest slot before a first commit).
"""

from __future__ import annotations

import errno
from collections.abc import Collection, Sequence
from typing import Any

from ..errors import CorruptMetadataError
from ..store import layout
from ..store.storage import Store


def open_batch(pos: int, checkpoint: int | None, states: Collection[int], recent: Collection[int]) -> list[str]:
    """What an open reads in one batch after a head hint naming entry ``pos``: when the hint
    holds a change on the checkpoint at ``checkpoint`` (None: it holds the whole state) and no
    state at ``pos - 1`` is kept (``states``), the objects that state is rebuilt from (a cold
    handle: the checkpoint and the entries after it; else the entries after the newest kept
    state from the checkpoint on), but the entries kept (``recent``); then the hint's own slot
    and, last (it is mostly absent), the slot past it."""
    rels = []
    if checkpoint is not None and pos - 1 not in states:
        base = max((p for p in states if checkpoint <= p < pos), default=None)
        if base is None and not states:
            rels.append(layout.checkpoint(checkpoint))
            base = checkpoint
        if base is not None:
            rels += [layout.entry(p) for p in range(base + 1, pos) if p not in recent]
    return [*rels, layout.entry(pos), layout.entry(pos + 1)]


class Ahead:
    """Objects read ahead, by path (None: absent), each handed out once unless ``once`` is
    false (immutable objects a holder may hand out again until :meth:`clear`)."""

    def __init__(self, store: Store, *, once: bool = True) -> None:
        self.store = store
        self.once = once
        self._got: dict[str, bytes | None] = {}

    def fetch(self, rels: Sequence[str], also: Also | None = None) -> list[bytes | None]:
        """Read ``rels`` in one batched call and keep them (absent ones as such); ``also``:
        other objects read in that same call, kept in another holder (those it has are not
        read again)."""
        other, more = also if also is not None else (None, ())
        more = [rel for rel in more if (other is None or rel not in other) and rel not in rels]
        got = self.store.read_present([*rels, *more])
        self._got.update(zip(rels, got))
        if other is not None:
            other._got.update(zip(more, got[len(rels):]))
        return got[:len(rels)]

    def __contains__(self, rel: object) -> bool:
        return rel in self._got

    def pop(self, rel: str) -> bytes | None:
        """The bytes read ahead at ``rel`` (None: absent, or not read ahead), handed out once."""
        return self._got.pop(rel, None) if self.once else self._got.get(rel)

    def clear(self) -> None:
        self._got.clear()

    def take(self, rel: str) -> bytes:
        """The object at ``rel``: read ahead (once), else one read; FileNotFoundError if absent."""
        if rel not in self._got:
            return self.store.read(rel)
        data = self.pop(rel)
        if data is None:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.store.uri(rel))
        return data

    def take_present(self, rels: Sequence[str]) -> list[bytes | None]:
        """:meth:`Store.read_present <pyspark_tstream.store.storage.Store.read_present>` of
        ``rels``, those read ahead taken from here."""
        unread = [rel for rel in rels if rel not in self._got]
        got: dict[str, Any] = dict(zip(unread, self.store.read_present(unread))) if unread else {}
        return [got[rel] if rel in got else self.pop(rel) for rel in rels]


#: Objects another step reads next and the :class:`Ahead` that keeps them for it: a read of
#: journal entries takes them along in its own batched call (a round trip saved).
Also = tuple[Ahead, Sequence[str]]


def unsound_newest(store: Store, path: str, what: str | None) -> CorruptMetadataError:
    """The refusal of a commit past the newest entry at ``path`` whose own slot ``what`` (is
    missing, is torn...; None: differs from the head hint that copies it), read ahead or not
    (:meth:`EntryLog.confirm <pyspark_tstream.journal.entries.EntryLog.confirm>`)."""
    url, head = store.display_url, store.uri(layout.HEAD)
    if what is None:
        return CorruptMetadataError(
            f"journal entry {path} differs from the head hint {head}, which copies it: one of them was edited, "
            f"and a commit would overwrite the hint; nothing was committed. Run `tstream fsck {url}` and "
            f"`tstream repair {url}`", path=path)
    return CorruptMetadataError(
        f"journal entry {path} {what}: the head hint {head} holds the only copy of it, so nothing was committed "
        f"(a commit would overwrite that copy); run `tstream repair {url}`, which restores the entry from it",
        path=path)
