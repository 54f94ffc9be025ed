"""Vacuum's side of group commit: request objects left behind, and the chunks pending ones name.

One job: tell ``vacuum`` which published commit requests (:mod:`~pyspark_tstream.write.group`)
are garbage and which data files a request still pending keeps alive. The writer whose entry
folded requests deletes them; one that crashed first leaves them forever, and so does a writer
that crashed before any fold of its request, so vacuum collects them.

Invariants:

* a request with base ``b`` can be folded only at positions ``(b, b + FOLD_WINDOW]``; once the
  journal holds position ``b + FOLD_WINDOW`` no entry can fold it, folded or not, and deleting
  it changes nothing: a combiner with an older state that still lists it reads it as missing
  and skips it, and its own writer learns its fate from journal states, never from the object.
  It is garbage once the entry that closed its window is older than the grace (readers of
  vacuum's ``grace_ms``: the same rule as replaced files, :func:`~pyspark_tstream.compaction.gc.gc_position`);
* a request's chunks are named by no journal entry until some entry folds it, so orphan cleanup
  must not take them for orphans while the request exists (:func:`pending_chunks`); the
  requests are listed *after* the data files, and entries committed since the orphan scan's
  state count as named too, so a request folded and deleted in between is covered by its entry.
  A request vacuum collected unfolded leaves its chunks to orphan cleanup and its grace (its
  writer, if alive, commits them afresh, like any written but uncommitted chunk).

Costs: one listing of ``_tstream/requests`` per vacuum; with orphan cleanup one more listing
and one batched read of the requests present (few: only those of contended writers in flight).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..journal.journal import Journal
from ..journal.state import FOLD_WINDOW, StreamState
from ..store import layout
from ..store.storage import Store
from .fold import Published

logger = logging.getLogger(__name__)


def stale_requests(store: Store, state: StreamState, below: int) -> list[str]:
    """Request objects no entry after ``state`` can fold whose window was closed by an entry
    before position ``below`` (the first position newer than the grace). One listing."""
    out = []
    for name in store.list(layout.REQUESTS):
        parsed = layout.request_name(name)
        if parsed is None:
            continue
        closed_at = parsed[0] + FOLD_WINDOW
        if closed_at <= state.pos and closed_at < below:
            out.append(layout.commit_request(*parsed))
    return out


def pending_chunks(store: Store) -> set[str]:
    """The data files named by the request objects present now (one listing, one batched read).

    A damaged request is never folded (:meth:`~pyspark_tstream.write.group.GroupCommit._discover`
    skips it), so its files are not kept; a request deleted since the listing is skipped (its
    folding entry names them).
    """
    rels = [layout.commit_request(*p) for p in map(layout.request_name, store.list(layout.REQUESTS)) if p]
    out: set[str] = set()
    for rel, data in zip(rels, store.read_present(rels)):
        if data is None:
            continue
        try:
            out |= {c.path for c in Published.decode(data, store.uri(rel)).chunks}
        except Exception as e:  # noqa: BLE001 - a damaged request: never folded, see above
            logger.warning("tstream: %s", e)
    return out


def named_since(journal: Journal, before: StreamState, now: StreamState) -> set[str]:
    """The data files named by the entries committed after ``before`` up to ``now``."""
    if now.pos <= before.pos:
        return set()
    return {c.path for d in journal.deltas(now, before.pos + 1, now.pos) for c in d.chunks}


def abort_keeps(store: Store, journal: Journal, writer: str, batch: object, paths: Sequence[str]) -> str | None:
    """Why the chunk files of an aborted (writer, batch) must stay, or None if they may go.

    A commit that raised may still become durable: its entry may have landed (an outcome
    unknown), or its request, published after a lost race, may be folded by another writer's
    next commit for up to ``FOLD_WINDOW`` positions. Deleting the files then leaves the journal
    naming missing chunks: the batch is lost, and Spark's replay of it is a no-op. So the files
    go only when no published request names them *and* the newest state lacks the batch,
    checked in that order: a request present at the listing keeps them; one gone by then was
    collected after its window closed or deleted by its writer once committed, and either way
    any fold of it is already in the journal the head read sees. Kept files are collected by
    ``vacuum(orphans=True)`` once no request names them and no entry does.
    Costs: one listing and one batched read of the requests present, one head read.
    """
    pending = pending_chunks(store) & set(paths)
    if pending:
        return f"a published commit request names {len(pending)} of them and may still be folded"
    w = journal.head().state.writers.get(writer)
    if w is not None and w.find(batch) is not None:
        return "the journal has that batch"
    return None
