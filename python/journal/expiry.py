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

A commit also ends the lease of a live writer silent longer than ``writer_lease_ms``
(:func:`end_leases`: it stops holding the tick). Neither looks at every writer on every commit:
:class:`Quiet` keeps until when nothing can be due, so a commit's CPU follows what it changed,
not how many writers the state holds.

The consequence, documented as Kafka and Delta document theirs: a replay of (writer, batch)
after its writer expired is not recognised and appends again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .state import StreamState, Writer

#: No writer is due.
NEVER = float("inf")


@dataclass(frozen=True)
class Quiet:
    """Until when a commit need not look at a state's writers (never stored).

    Lower bounds, so that a commit scans the writers only when something may be due, not on
    every commit (a scan per commit made a committer's CPU grow with the writers it never
    touched): no live writer's lease ends before wall time ``lease``, and no writer leaves the
    state before ``retention``. ``live`` names the live writers (those that hold the tick).
    ``config`` is the (retention, lease, declared writers) it was computed with. An edit of a
    writer only lowers the bounds, so they stay bounds; a scan makes them exact again.
    """

    config: tuple[int, int, frozenset[str]]
    lease: float
    retention: float
    live: frozenset[str]


def _config(state: StreamState) -> tuple[int, int, frozenset[str]]:
    cfg = state.config
    return cfg.writer_retention_ms, cfg.writer_lease_ms, frozenset(cfg.writers)


def _due(wid: str, w: Writer, config: tuple[int, int, frozenset[str]]) -> tuple[float, float]:
    """When writer ``w``'s lease ends and when it leaves the state (see :func:`expired`)."""
    retention, lease, declared = config
    lease_end = w.wall + lease + 1 if w.live else NEVER
    if wid in declared:
        return lease_end, NEVER
    return lease_end, w.wall + (max(retention, lease) if w.live else retention) + 1


def scan(state: StreamState) -> Quiet:
    """The exact :class:`Quiet` of ``state``: one look at every writer."""
    config = _config(state)
    lease = retention = NEVER
    for wid, w in state.writers.items():
        a, b = _due(wid, w, config)
        lease, retention = min(lease, a), min(retention, b)
    return Quiet(config, lease, retention, frozenset(wid for wid, w in state.writers.items() if w.live))


def merged(q: Quiet, state: StreamState, wids: Iterable[str]) -> Quiet:
    """``q`` after the writers ``wids`` of ``state`` changed or left (their current values)."""
    lease, retention, live = q.lease, q.retention, set(q.live)
    for wid in wids:
        w = state.writers.get(wid)
        if w is None or not w.live:
            live.discard(wid)
        else:
            live.add(wid)
        if w is not None:
            a, b = _due(wid, w, q.config)
            lease, retention = min(lease, a), min(retention, b)
    return Quiet(q.config, lease, retention, frozenset(live))


def quiet(state: StreamState) -> Quiet:
    """The :class:`Quiet` of ``state`` with the writers it changed so far (:attr:`StreamState.edited`):
    kept on the state, scanned only when unknown or the config changed."""
    q = state.quiet
    if q is None or q.config != _config(state):
        q = scan(state)
    elif state.edited:
        q = merged(q, state, state.edited)
    state.quiet = q
    return q


def expired(state: StreamState, now: int) -> list[str]:
    """The writers of ``state`` a commit at wall time ``now`` drops (see the module docstring)."""
    retention = state.config.writer_retention_ms
    lease = state.config.writer_lease_ms
    declared = set(state.config.writers)
    return [wid for wid, w in state.writers.items()
            if now - w.wall > retention and wid not in declared and not (w.live and now - w.wall <= lease)]


def expire(state: StreamState, now: int) -> list[str]:
    """Drop the writers :func:`expired` names from ``state`` (a commit's private copy); the
    writers are looked at only when :func:`quiet` says one may be due."""
    if now < quiet(state).retention:
        return []
    gone = expired(state, now)
    for wid in gone:
        state.drop_writer(wid)
    state.quiet = scan(state)
    return gone


def end_leases(state: StreamState, now: int, committer: str | None) -> list[str]:
    """End the lease of every live writer but ``committer`` silent longer than the writer lease
    (it stops holding the tick); their ids, in the state's order. The writers are looked at only
    when :func:`quiet` says a lease may have ended."""
    q = quiet(state)
    if now < q.lease:
        return []
    lease = state.config.writer_lease_ms
    ended = [wid for wid, w in state.writers.items() if w.live and wid != committer and now - w.wall > lease]
    for wid in ended:
        state.writer_to_change(wid).live = False
    state.quiet = scan(state)
    return ended
