"""What ``repair`` can rewrite, as ``verify`` found it: a typed record instead of a dict of keys.

Invariant: every field holds an object derived from the journal (or a copy of one), keyed by
what it replaces, so :func:`~pyspark_tstream.maintain.repair.repair` writes them without
deciding anything; :func:`~pyspark_tstream.maintain.fsck.verify` builds one per run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..compaction.macro_rebuild import Expected
from ..compaction.manifest import Manifest
from ..journal.entries import Entry
from ..journal.scale_records import SealedRecord
from ..maps.sealed import ShardVersion


@dataclass
class ShardFix:
    """What repair rewrites in one sealed-map shard."""

    #: unreadable version -> the content written in its place (a copy of its predecessor's
    #: segments: later versions hold all it held, and the chain stays unbroken)
    versions: dict[int, ShardVersion] = field(default_factory=dict)
    #: sealed-segment records the shard lacks, rebuilt from the journal (merged back)
    records: list[SealedRecord] = field(default_factory=list)
    head: bool = False  # the head hint is unreadable

    def __bool__(self) -> bool:
        return bool(self.versions or self.records or self.head)


@dataclass(frozen=True)
class Fixes:
    """What :func:`~pyspark_tstream.maintain.repair.repair` can rewrite, as
    :func:`~pyspark_tstream.maintain.fsck.verify` found it: every field is derived from the
    journal (or a copy of it), keyed by what it replaces."""

    newest: Entry | None  # the newest readable journal entry: its state is what repair rebuilds for (None:
    # no state can be built, an entry it needs is lost: nothing to rewrite)
    head: bytes | None  # the head hint's bytes when they copy the newest entry (restore a lost one)
    nodes: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (level, node) -> content
    epochs: dict[int, bytes] = field(default_factory=dict)  # epoch -> its record
    epoch_chunks: dict[int, bytes] = field(default_factory=dict)  # history chunk number -> content
    shards: dict[int, ShardFix] = field(default_factory=dict)
    macros: dict[tuple[int, int], Expected] = field(default_factory=dict)  # (segment, bucket) -> the map
    manifests: dict[str, Manifest] = field(default_factory=dict)  # path -> the manifest written there
    groups: dict[str, bytes] = field(default_factory=dict)  # consumer-group object path -> content
    checkpoints: dict[int, bytes] = field(default_factory=dict)  # journal position -> its checkpoint
