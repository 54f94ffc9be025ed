"""What runs after a data commit: auto-scaling, retention every few commits, automatic compaction.

Off the critical path on every store: a ``Stream.append`` hands retention and compaction to a
background thread (one per :class:`Upkeep`) that runs them on a stream context of its own, as
another process would; the append returns after its data PUT and its create. In line, a due
compaction shaped the append's tail latency: on an object store, and on a local path at
object-store latency (a FUSE mount such as a Databricks Volume), alike. Several commits due
while a run is under way coalesce into one more run. The Spark sink's commit and
``Stream.commit`` keep them in line: a sink's commit runs in a process that may end as soon as
it returns. Auto-scaling stays in line everywhere (it decides from the state, and commits
rarely). A process that exits waits for the run under way (:data:`EXIT_WAIT_S`, the exit
handler below, which :func:`~pyspark_tstream.exits.exit_now` runs too); work cut short by the
process ending is crash-safe like any interrupted compaction or trim, and due again at a later
commit.

In line on request: ``TSTREAM_UPKEEP=inline`` (:data:`UPKEEP_ENV`) for the process, or
``Stream.upkeep.inline = True`` for one handle, runs every due policy in the committing call.
Tests ask for it where they count store calls or inject crashes at the n-th call
(``tests/conftest.py``), and so may a user who wants an append to return only once upkeep has run.

Best-effort by contract: the data commit is durable before any of this runs, so a failure here
must never turn it into an error (Spark would call the sink's ``abort`` on a committed batch).
A failure is logged and the policy is simply evaluated again later: scaling at every data
commit, retention at the next one through this ``Stream`` (or the next multiple of
:data:`RETENTION_EVERY`), compaction after a doubling back-off. Every decision is made from the
committed state first (zero store reads when nothing is due).
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..compaction.compact import compact
from ..compaction.policy import COMPACT_EVERY, CompactionPolicy, due
from ..epochs.scaling import ScalingPolicy
from ..journal.entries import Entry
from ..journal.state import StreamState
from ..timestamps import now_ms
from ..upkeep_mode import MODES as MODES
from ..upkeep_mode import UPKEEP_ENV as UPKEEP_ENV
from ..upkeep_mode import inline_from_env
from .context import StreamContext

logger = logging.getLogger(__name__)

#: Retention is evaluated on every this-many-th journal position (amortized O(1) per commit).
RETENTION_EVERY = 16
#: Seconds an exiting process waits for a background upkeep run: long enough for a due
#: compaction to finish (a run cut short every time would leave a short-lived process's small
#: chunks uncompacted for good), bounded so that a stuck store never holds the exit.
EXIT_WAIT_S = 30.0

_LIVE: weakref.WeakSet[Upkeep] = weakref.WeakSet()


class Upkeep:
    """The post-commit policies of one context; ``trim`` applies the retention policy."""

    def __init__(self, ctx: StreamContext, trim: Callable[[], Any],
                 fork: Callable[[Entry], Upkeep] | None = None, *, inline: bool | None = None) -> None:
        self.ctx = ctx
        self.trim = trim
        #: Builds the in-line Upkeep of a context of its own at an entry (background runs); None:
        #: always in line.
        self.fork = fork
        #: Run every due policy in the committing call even where the caller allows the
        #: background (default: :func:`inline_from_env`).
        self.inline = inline_from_env() if inline is None else inline
        self.retention_due = False  # a failed retention pass: retry at the next data commit
        self.compact_retry_pos = 0  # automatic compaction backs off after a failure
        self.compact_backoff = COMPACT_EVERY
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._queued: tuple[Entry, set[str]] | None = None  # the next background run
        self._running = False
        self._worker: Upkeep | None = None

    def after_data_commit(self, entry: Entry, later: bool = False) -> None:
        """Evaluate the policies the stream's config enables, after the data commit ``entry``;
        ``later``: the caller allows retention and compaction to run in the background, which
        they do unless ``inline`` (module docstring)."""
        cfg = entry.state.config
        if scaling := cfg.scaling:
            self._best_effort("auto-scaling", entry, lambda: self._auto_scale(scaling, entry))
        due = set()
        if cfg.retention and (entry.pos % RETENTION_EVERY == 0 or self.retention_due):
            due.add("retention")
        if entry.pos % COMPACT_EVERY == 0:
            due.add("compaction")
        if not due:
            return
        if later and not self.inline and self.fork is not None:
            if "retention" in due:
                self.retention_due = False  # the background run sets it again if it fails
            self._later(entry, due)
        else:
            self.retention_due = not self.run(entry, due)

    def run(self, entry: Entry, due: set[str]) -> bool:
        """Run the ``due`` policies in line after ``entry``; False if retention failed."""
        ok = True
        if "retention" in due:
            ok = self._best_effort("retention", entry, self.trim)
        if "compaction" in due:
            self._auto_compact(entry)
        return ok

    def settle(self, timeout: float | None = None) -> None:
        """Wait until no background run is queued or under way (tests, benchmarks, exit)."""
        with self._lock:
            self._idle.wait_for(lambda: not self._running, timeout)

    def _later(self, entry: Entry, due: set[str]) -> None:
        with self._lock:
            if self._queued is not None:  # coalesce: the newest entry, every policy asked for
                entry, due = max(entry, self._queued[0], key=lambda e: e.pos), due | self._queued[1]
            self._queued = (entry, due)
            if not self._running:
                self._running = True
                _LIVE.add(self)
                self._start()

    def _start(self) -> None:
        """Start the thread that drains the queued runs (the simulation schedules it instead)."""
        threading.Thread(target=self._drain, name="tstream-upkeep", daemon=True).start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                job, self._queued = self._queued, None
                if job is None:
                    self._running = False
                    self._idle.notify_all()
                    return
            entry, due = job
            try:
                if self._worker is None:
                    assert self.fork is not None  # set: see _later's caller
                    self._worker = self.fork(entry)
                elif entry.pos > self._worker.ctx.entry.pos:
                    self._worker.ctx.entry = entry
                if not self._worker.run(entry, due):
                    self.retention_due = True
            except Exception as e:  # noqa: BLE001 - best-effort: the commit stands, runs again later
                logger.warning("tstream: background upkeep of %s failed (%s: %s); it runs again at a "
                               "later commit", self.ctx.url, type(e).__name__, e)

    def _auto_scale(self, text: str, entry: Entry) -> None:
        policy = ScalingPolicy.parse(text)
        if policy is not None and policy.decide(entry.state, now_ms()) is not None:
            def scale(st: StreamState, pos: int) -> Entry | None:
                # decided again on the newest state: another committer may have scaled already
                request = policy.decide(st, now_ms())
                return request(st, pos) if request is not None else None
            self.ctx.commit_op(scale)

    def _best_effort(self, what: str, entry: Entry, work: Callable[[], Any]) -> bool:
        """Run post-commit ``work``; log (never raise) a failure. True if it completed."""
        try:
            work()
            return True
        except Exception as e:
            logger.warning("stream %s: %s after the commit at journal position %d failed (%s: %s); "
                           "the commit stands and %s runs again at a later commit",
                           self.ctx.url, what, entry.pos, type(e).__name__, e, what, exc_info=True)
            return False

    def _auto_compact(self, entry: Entry) -> None:
        """Compaction when the state says it is due; a failure backs off (doubling), never raises."""
        policy = CompactionPolicy.parse(entry.state.config.compaction)
        if policy is None or entry.pos < self.compact_retry_pos or not due(entry.state, policy):
            return
        try:
            compact(self.ctx, policy=policy)
            self.compact_backoff = COMPACT_EVERY
        except Exception as e:  # noqa: BLE001 - the data commit landed; compaction retries later
            self.compact_retry_pos = entry.pos + self.compact_backoff
            self.compact_backoff = min(self.compact_backoff * 2, 64 * COMPACT_EVERY)
            logger.warning("tstream: automatic compaction of %s failed (%s: %s); it runs again after "
                           "position %d", self.ctx.url, type(e).__name__, e, self.compact_retry_pos)


@atexit.register
def _settle_all() -> None:
    for upkeep in list(_LIVE):
        upkeep.settle(EXIT_WAIT_S)
        if upkeep._running:
            logger.warning("tstream: background upkeep of %s still running after %.0f s at exit; it is cut "
                           "short (crash-safe) and due again at a later commit", upkeep.ctx.url, EXIT_WAIT_S)
