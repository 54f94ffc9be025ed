"""What runs after a data commit: auto-scaling, retention every few commits, automatic compaction.

Best-effort by contract: the data commit is durable before any of this runs, so a failure here
must never turn it into an error (Spark would call the sink's ``abort`` on a committed batch).
A failure is logged and the policy is simply evaluated again later: scaling at every data
commit, retention at the next one through this ``Stream`` (or the next multiple of
:data:`RETENTION_EVERY`), compaction after a doubling back-off. Every decision is made from the
committed state first (zero store reads when nothing is due).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..compaction.compact import compact
from ..compaction.policy import COMPACT_EVERY, CompactionPolicy, due
from ..epochs.scaling import ScalingPolicy
from ..journal.entries import Entry
from ..journal.state import StreamState
from ..timestamps import now_ms
from .context import StreamContext

logger = logging.getLogger(__name__)

#: Retention is evaluated on every this-many-th journal position (amortized O(1) per commit).
RETENTION_EVERY = 16


class Upkeep:
    """The post-commit policies of one context; ``trim`` applies the retention policy."""

    def __init__(self, ctx: StreamContext, trim: Callable[[], Any]) -> None:
        self.ctx = ctx
        self.trim = trim
        self.retention_due = False  # a failed retention pass: retry at the next data commit
        self.compact_retry_pos = 0  # automatic compaction backs off after a failure
        self.compact_backoff = COMPACT_EVERY

    def after_data_commit(self, entry: Entry) -> None:
        """Evaluate the policies the stream's config enables, after the data commit ``entry``."""
        cfg = entry.state.config
        if cfg.get("scaling"):
            self._best_effort("auto-scaling", entry, lambda: self._auto_scale(cfg["scaling"], entry))
        if cfg.get("retention") and (entry.pos % RETENTION_EVERY == 0 or self.retention_due):
            self.retention_due = not self._best_effort("retention", entry, self.trim)
        if entry.pos % COMPACT_EVERY == 0:
            self._auto_compact(entry)

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
        policy = CompactionPolicy.parse(entry.state.config.get("compaction"))
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
