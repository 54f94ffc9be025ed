"""The orphan-grace fence: a committer proves its files are still there before it names them,
when it took long enough that orphan cleanup may have deleted them.

Between writing its files and committing the entry (or map version) that names them, a writer's
chunks and a compaction's macro-chunks are protected from ``vacuum(orphans=True)`` only by the
orphan grace: cleanup deletes an unnamed file whose store ``modified`` time is older than it. A
process suspended in between (SIGSTOP, a paused VM, a laptop asleep, a long GC pause) and then
resumed would otherwise commit an entry naming files cleanup already deleted: an acknowledged
append whose records are gone.

A :class:`Fence` is started before the first file write of a commit, on this process's
monotonic clock (no clock skew, no store call). Just before the conditional create that names
the files, :meth:`Fence.check` does nothing while less than :data:`FENCE_MARGIN_MS` has passed
(every fast commit: no store call); past it, one batched existence check of the files, and a
:class:`~pyspark_tstream.errors.StaleWriteError` naming the missing ones (retriable: a retry
writes them again) instead of a commit.

Why half of :data:`ORPHAN_GRACE_MIN_MS`: cleanup deletes only files older than its grace, at
least that floor, so a file checked present within the margin after its write is at most half a
grace old at the check and cannot be deleted for another half grace. What is left is a stall of
more than half a grace between the check and the create, a few statements apart (the fence
narrows the window from "whole write-to-commit" to "check-to-create"; it cannot close it without
a store that fences deletes). A grace below the floor (``unsafe_orphan_grace``) is only for a
stream with no writer running; the fence assumes the floor.

A commit whose files were written in other processes (the Spark sink: tasks write on executors,
the driver commits on a fresh writer) shares no monotonic clock with their writers: each writer
stamps the wall-clock time it started writing, and :meth:`Fence.since_wall` starts the committer's
fence that long ago on its own clock (the earliest stamp; its age read once on this host's wall
clock, then on the monotonic one). Hosts' clocks then count: a writer's clock ahead of the
committer's by ``s`` makes the age read ``s`` short. Against a margin of half an hour, a skew of
minutes (NTP keeps hosts far closer) leaves the file at most ``margin + s`` old at the check, still
short of the one-hour floor; a skew near half an hour is assumed away.

Costs: none on a commit within the margin; past it, one batched existence call per attempt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from .. import timestamps
from ..errors import StaleWriteError
from .storage import Store

log = logging.getLogger("pyspark_tstream")

#: The shortest orphan grace ``vacuum`` accepts without ``unsafe_orphan_grace``: a writer's chunk
#: files are orphans until its journal commit lands (a Spark micro-batch's tasks write them before
#: the driver commits; a commit may wait out a store outage under ``storeRetryTimeout``), so a
#: shorter grace deletes acknowledged data. Delta refuses a VACUUM under 7 days the same way.
ORPHAN_GRACE_MIN_MS = 3_600_000

#: A committer whose first file write is older than this checks its files before committing:
#: half the shortest grace, so a file found present cannot age past the grace before the create.
FENCE_MARGIN_MS = ORPHAN_GRACE_MIN_MS // 2


class Fence:
    """Since when one commit's files have been unnamed, and the check before naming them.

    ``what`` names the committer in the error (``"append"``, ``"compaction"``, ``"commit"``).
    """

    #: The clock the age is read on (monotonic: a wall clock stepped back or forward must not
    #: skip the check; tests and the simulation replace it to fake elapsed time).
    clock = staticmethod(time.monotonic)
    #: The margin a fence gets unless given one (the simulation lowers it to half its run's
    #: orphan grace, the same rule for a grace of seconds).
    margin_ms: int = FENCE_MARGIN_MS

    def __init__(self, store: Store, what: str, margin_ms: int | None = None) -> None:
        self.store = store
        self.what = what
        if margin_ms is not None:
            self.margin_ms = margin_ms
        self.started: float | None = None

    @classmethod
    def since_wall(cls, store: Store, what: str, written_ms: int, margin_ms: int | None = None) -> Fence:
        """A fence started at ``written_ms``, wall-clock epoch milliseconds stamped before the first
        file write, possibly on another host (see the module docstring for the skew assumed).

        The stamp's age is read once on this host's wall clock (``timestamps.now_ms``; a stamp
        ahead of it counts as now), then kept on :attr:`clock` like any fence's."""
        fence = cls(store, what, margin_ms)
        fence.started = cls.clock() - max(0, timestamps.now_ms() - written_ms) / 1000.0
        return fence

    def start(self) -> Fence:
        """Mark the first file write (call before it); later calls keep the first mark."""
        if self.started is None:
            self.started = self.clock()
        return self

    def age_ms(self) -> float:
        """Milliseconds since :meth:`start` (0 before it)."""
        return 0.0 if self.started is None else (self.clock() - self.started) * 1000.0

    def check(self, paths: Iterable[str]) -> None:
        """Refuse to name ``paths`` if any is gone, once past the margin (else no store call);
        past twice the margin (the shortest orphan grace) refuse even if all are there: cleanup
        may delete them between this check and the create that names them.

        Raises :class:`~pyspark_tstream.errors.StaleWriteError` naming the missing files.
        """
        age = self.age_ms()
        if age < self.margin_ms:
            return
        rels = sorted(set(paths))
        if not rels:
            return
        missing = self.store.missing(rels)
        if not missing and age >= 2 * self.margin_ms:
            raise StaleWriteError(
                f"the files of this {self.what} were written {age / 60_000:.0f} min ago, past the shortest "
                f"orphan grace ({2 * self.margin_ms // 60_000} min): orphan cleanup may delete them before the "
                "commit names them, so nothing was committed. Retry the batch (a Spark sink replays it, a "
                "writer's retry writes the files again)", missing=[])
        if missing:
            shown = ", ".join(self.store.uri(r) for r in missing[:5]) + (
                f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise StaleWriteError(
                f"the files of this {self.what} were written {age / 60_000:.0f} min ago "
                f"(over the {self.margin_ms // 60_000} min fence margin, half the shortest orphan grace) and "
                f"{len(missing)} of them are gone, deleted by orphan cleanup while the process was stalled: "
                f"{shown}. Nothing was committed. Retry the batch "
                "(a Spark sink replays it, a writer's retry writes the files again)",
                missing=[self.store.uri(r) for r in missing])
        log.info("tstream: %s %s: its %d file(s) were written %.0f min ago and are all still there; committing",
                 self.store.display_url, self.what, len(rels), age / 60_000)
