"""Writer state that expires (format v6): a writer silent longer than the retention leaves the state.

One job: which writers a commit drops. Each writer's dedupe window and lanes ride in the stream
state (:class:`~pyspark_tstream.journal.state.Writer`), so without expiry the state grows with
every producer that ever wrote, for ever (Kafka expires producer state after
``producer.id.expiration.ms``, KIP-854; Delta expires ``SetTransaction`` ids after
``delta.setTransactionRetentionDuration``). A commit drops the writers whose last commit is
older than ``writer_retention_ms`` before the commit's own wall time: the drop is part of the
commit's change, so every replica of the state agrees. Kept regardless:

* a live session whose lease still holds (``live`` and silent for at most ``writer_lease_ms``):
  it holds the tick, and a lease longer than the retention must not lose its window;
* a declared writer (the stream's ``writers`` option): the tick waits for its first commit, so
  forgetting it would hold the tick back again.

The consequence, documented as Kafka and Delta document theirs: a replay of (writer, batch)
after its writer expired is not recognised and appends again.
"""

from __future__ import annotations

from .state import StreamState


def expired(state: StreamState, now: int) -> list[str]:
    """The writers of ``state`` a commit at wall time ``now`` drops (see the module docstring)."""
    retention = state.config.writer_retention_ms
    lease = state.config.writer_lease_ms
    declared = set(state.config.writers)
    return [wid for wid, w in state.writers.items()
            if now - w.wall > retention and wid not in declared and not (w.live and now - w.wall <= lease)]


def expire(state: StreamState, now: int) -> list[str]:
    """Drop the writers :func:`expired` names from ``state`` (a commit's private copy)."""
    gone = expired(state, now)
    for wid in gone:
        del state.writers[wid]
    return gone
