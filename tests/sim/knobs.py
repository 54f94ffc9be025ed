"""Settings a profile lowers for its run, where the product's own are too large for a small run.

* :func:`checkpointing`: a checkpoint of the state is due after ``entries`` entries or 1 KiB of
  them (the product's 200 entries or 64 KiB are never reached by a seed's few hundred store
  calls), so committers write checkpoints often, rebuilds start from them and garbage
  collection deletes old ones while the other actors run.
* :func:`crowding`: a contended writer publishes first and waits to be folded once one other
  request is pending (the product waits for 3: a run has a handful of writers), and the
  group committers' polls, the folds of a waiter by another writer and the entries a writer
  built of others' requests without its own settled one are counted.
* :func:`expiring`: records the writers a commit attempt drops as expired (the ledger's
  in-run allowance for a replay that appends again; the journal's history decides at the end,
  :mod:`.history`), and counts the sessions whose lease a commit attempt ended.
* :func:`fencing`: for a profile whose sink drivers stall past the orphan grace
  (``sink_stall``), the orphan fence's margin is half the run's orphan grace (the fence's rule
  for any grace; the product's half hour assumes the one-hour floor, which a run's graces of
  seconds are far under), so a stalled commit meets it.
* :func:`buggified`: FoundationDB's "buggify" for a profile that asks for it: each knob below
  is on for a seed with even odds (drawn from the seed, named in ``world.notes``), making a rare
  path common: a waiter races its leader after one poll (``group.PATIENCE``; folds racing
  each other, orphan cleanup and expiry), automatic compaction is considered at every other
  journal position (``upkeep.COMPACT_EVERY``; commits compact while vacuums collect), and a
  checkpoint is due every 2 entries (expiry and collection meet a checkpoint at almost every
  commit).
* :func:`upkeeping`: the product's background upkeep for a profile that asks for it: retention
  and compaction due after a ``Stream.append`` run on a thread of the appender's process, which
  the scheduler runs as an actor of its own (:meth:`~.scheduler.Scheduler.spawn`: it dies with
  the process, its crash is the process's, it may stall), considered every ``upkeep_every``
  positions.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pyspark_tstream.api.upkeep as upkeep_mod
import pyspark_tstream.journal.checkpoint as checkpoint_mod
import pyspark_tstream.journal.journal as journal_mod
import pyspark_tstream.write.commit as commit_mod
import pyspark_tstream.write.group as group_mod
from pyspark_tstream.journal.entries import Entry
from pyspark_tstream.journal.state import StreamState
from pyspark_tstream.store.fence import Fence

from .scheduler import Crash

if TYPE_CHECKING:
    from .world import World

#: The byte threshold of a checkpoint in a run that lowers them.
CHECKPOINT_BYTES = 1024


@contextmanager
def checkpointing(entries: int) -> Iterator[None]:
    """Checkpoints due after ``entries`` entries or :data:`CHECKPOINT_BYTES` (0: unchanged)."""
    if not entries:
        yield
        return
    saved = checkpoint_mod.MAX_ENTRIES, checkpoint_mod.MIN_BYTES
    checkpoint_mod.MAX_ENTRIES, checkpoint_mod.MIN_BYTES = entries, CHECKPOINT_BYTES
    try:
        yield
    finally:
        checkpoint_mod.MAX_ENTRIES, checkpoint_mod.MIN_BYTES = saved


@contextmanager
def expiring(world: World) -> Iterator[None]:
    """The writers any commit attempt drops go to ``world.expired`` (when the profile sets a
    writer retention); with a writer lease set, the leases commit attempts end are counted."""
    retention, lease = world.profile.writer_retention_ms, world.profile.writer_lease_ms
    expire, end_leases = journal_mod.expire, commit_mod.end_leases

    def recording(state: StreamState, now: int) -> list[str]:
        gone = expire(state, now)
        world.expired.update(gone)
        return gone

    def ending(state: StreamState, now: int, committer: str | None) -> list[str]:
        ended = end_leases(state, now, committer)
        world.note("leases ended by a commit attempt", len(ended))
        return ended

    if retention:
        journal_mod.expire = recording
    if lease:
        commit_mod.end_leases = ending
    try:
        yield
    finally:
        journal_mod.expire, commit_mod.end_leases = expire, end_leases


@contextmanager
def crowding(world: World) -> Iterator[None]:
    """Group commit's crowd threshold lowered to ``world.profile.crowd`` (0: unchanged), and its
    waiting counted in ``world.notes``."""
    if not world.profile.crowd:
        yield
        return
    cls = group_mod.GroupCommit
    saved = group_mod.CROWD, cls._poll, cls._folded, cls._created_without_own

    def poll(self: group_mod.GroupCommit, state: StreamState) -> object:
        world.note("waiter polls")
        return saved[1](self, state)

    def folded(self: group_mod.GroupCommit, own: group_mod.Part) -> None:
        world.note("folded by another")
        saved[2](self, own)

    def without_own(self: group_mod.GroupCommit, own: group_mod.Part, entry: Entry) -> group_mod.Committed:
        out = saved[3](self, own, entry)
        if out.entry is None:  # settled by another commit of its (writer, batch), not folded
            world.note("entries without their settled request")
        return out

    group_mod.CROWD = world.profile.crowd
    cls._poll, cls._folded, cls._created_without_own = poll, folded, without_own  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        group_mod.CROWD, cls._poll, cls._folded, cls._created_without_own = saved  # type: ignore[method-assign]


@contextmanager
def fencing(world: World) -> Iterator[None]:
    """``Fence.margin_ms`` at half ``world.grace_ms`` while the profile stalls sink drivers
    (unchanged otherwise: no other profile's schedule moves)."""
    if not world.profile.sink_stall:
        yield
        return
    saved = Fence.margin_ms
    Fence.margin_ms = world.grace_ms // 2
    try:
        yield
    finally:
        Fence.margin_ms = saved


#: The buggify knobs: (name, module, attribute, the value that makes the rare path common).
BUGGIFY = (
    ("waiters race after one poll", group_mod, "PATIENCE", 1),
    ("compaction considered every 2 positions", upkeep_mod, "COMPACT_EVERY", 2),
    ("checkpoints every 2 entries", checkpoint_mod, "MAX_ENTRIES", 2),
)


@contextmanager
def buggified(world: World) -> Iterator[None]:
    """The :data:`BUGGIFY` knobs a seed draws, each on with even odds (none unless
    ``world.profile.buggify``)."""
    if not world.profile.buggify:
        yield
        return
    rng = random.Random(world.seed ^ 0xB06)
    on = [(name, mod, attr, value) for name, mod, attr, value in BUGGIFY if rng.random() < 0.5]
    saved = [(mod, attr, getattr(mod, attr)) for _name, mod, attr, _value in on]
    for name, mod, attr, value in on:
        assert hasattr(mod, attr), f"buggify knob {name!r}: {mod.__name__}.{attr} is gone; update sim/knobs.py"
        setattr(mod, attr, value)
        world.note(f"buggify: {name}")
    try:
        yield
    finally:
        for mod, attr, value in saved:
            setattr(mod, attr, value)


@contextmanager
def upkeeping(world: World) -> Iterator[None]:
    """Background upkeep (``world.profile.background_upkeep``): ``Upkeep`` leaves in-line mode
    (which :func:`~.scheduler.patched` forces) and its drain thread is spawned as a scheduled
    thread of the appender's process; retention and automatic compaction are considered every
    ``world.profile.upkeep_every`` positions (0: the product's)."""
    profile, sched = world.profile, world.sched
    if not profile.background_upkeep:
        yield
        return
    saved = upkeep_mod.inline_from_env, upkeep_mod.Upkeep._start, upkeep_mod.COMPACT_EVERY, upkeep_mod.RETENTION_EVERY

    def start(self: upkeep_mod.Upkeep) -> None:
        def drain() -> None:
            world.note("background upkeep runs")
            try:
                self._drain()
            except Crash:  # the process died under it: no exit handler waits for it
                world.note("background upkeep runs dead with their process")
                with self._lock:
                    self._running, self._queued = False, None
                    self._idle.notify_all()
                raise
            world.note("background upkeep runs finished")

        sched.spawn("up", drain, stall_ms=profile.upkeep_stall_ms)

    upkeep_mod.inline_from_env = lambda: False
    upkeep_mod.Upkeep._start = start  # type: ignore[method-assign]
    if profile.upkeep_every:
        upkeep_mod.COMPACT_EVERY = upkeep_mod.RETENTION_EVERY = profile.upkeep_every
    try:
        yield
    finally:
        (upkeep_mod.inline_from_env, upkeep_mod.Upkeep._start, upkeep_mod.COMPACT_EVERY,  # type: ignore[method-assign]
         upkeep_mod.RETENTION_EVERY) = saved
