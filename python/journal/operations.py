"""The operations a journal entry records (its ``op``), as one enum.

Each journal entry names the operation that committed it. :class:`Operation` is a ``str``
enum, so an entry's stored ``op`` text, JSON output and comparisons with plain strings are
unchanged (``Operation.APPEND == "append"``).
"""

from __future__ import annotations

from enum import Enum


class Operation(str, Enum):
    """What a journal entry did."""

    #: the stream's first entry (or a write's re-creation of a stream with no commit)
    CREATE = "create"
    #: records committed (one writer's, or several folded by group commit)
    APPEND = "append"
    #: no records: a writer's heartbeat or close moved the tick
    TICK = "tick"
    #: segments sealed and successors created in a new epoch
    SCALE = "scale"
    #: the head moved: records before it are gone
    TRUNCATE = "truncate"
    #: garbage collection deleted what truncation and compaction left behind
    GC = "gc"
    #: small chunks merged into macro-chunks
    COMPACT = "compact"
    #: ``repair`` committed an entry (no records) before fixing metadata
    REPAIR = "repair"

    def __str__(self) -> str:
        return self.value
