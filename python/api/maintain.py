"""Maintenance a user asks for: compaction into macro-chunks, and checking or repairing the store.

One job: the heavy, explicit operations on a whole stream. Records never change: compaction
only merges files (one journal commit; replaced files go at a later vacuum), ``verify`` only
reads, ``repair`` rewrites only objects derived from the journal (see :mod:`~pyspark_tstream.maintain.fsck`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..compaction.compact import compact
from ..compaction.policy import CompactionPolicy
from ..maintain.fsck import Report, verify
from ..maintain.repair import repair
from .context import StreamContext
from .results import CompactResult


class Maintenance:
    """Compaction, verify and repair through a :class:`~pyspark_tstream.api.context.StreamContext`."""

    def __init__(self, ctx: StreamContext) -> None:
        self.ctx = ctx

    def compact(self, *, full: bool = True, target: int | str | None = None, min_pieces: int | None = None,
                progress: Any = None, total: Any = None) -> CompactResult:
        """Merge small chunks of each segment into macro-chunks (one journal commit).

        The public :meth:`~pyspark_tstream.api.stream.Stream.compact` documents the arguments.
        """
        base = CompactionPolicy.parse(self.ctx.refresh().config.compaction) or CompactionPolicy()
        if target is not None or min_pieces is not None:
            spec = f"target={target or base.target},min={min_pieces or base.min}"
            base = CompactionPolicy.parse(spec) or base
        return CompactResult(**compact(self.ctx, full=full, policy=base, progress=progress, total=total))

    def verify(self, progress: Callable[[int, int], None] | None = None, *, footers_only: bool = False) -> Report:
        """Check the stream (``tstream fsck``): journal entries, hints, index nodes, sealed shards,
        epoch records, and every live chunk's size, rows and times and (unless ``footers_only``)
        its pages. Returns a :class:`~pyspark_tstream.maintain.fsck.Report` (``ok``, ``problems``,
        ``summary()``)."""
        return verify(self.ctx.store, progress, pages=not footers_only)[0]

    def repair(self, progress: Callable[[int, int], None] | None = None, *, drop_torn_entry: bool = False) -> Report:
        """Rebuild what the journal can (``tstream repair``); the report lists what remains."""
        report = repair(self.ctx.store, progress, drop_torn_entry=drop_torn_entry)
        self.ctx.refresh()
        return report
