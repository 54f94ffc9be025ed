"""What the public :class:`~pyspark_tstream.api.stream.Stream` methods return: typed records.

One job: the shape of each result, defined once. Every record is frozen and has a
``to_dict()`` giving the plain JSON-able form the CLI prints (``tstream info --json``,
``tstream cut``, the counts of ``compact`` and ``vacuum``); attribute access is the Python API
(``stream.info().rows``, ``stream.compact().macros``). A :class:`Cut` is also a read-only
``Mapping[int, int]`` (segment id to first ``_seq`` kept), since that is what a stream cut is.
``vacuum`` returns :class:`~pyspark_tstream.journal.op_info.GcInfo`, the record its journal
entry stores; ``sealed_info`` returns the sealed map's
:class:`~pyspark_tstream.journal.scale_records.SealedRecord`. A consumer group's
:meth:`~pyspark_tstream.api.groups.Group.info` and ``pending`` return :class:`GroupInfo` and
:class:`PendingEntry` records (``tstream group info`` / ``pending --json`` print their ``to_dict()``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

__all__ = ["CompactResult", "ConsumerInfo", "Cut", "GroupInfo", "PendingEntry", "ScaleResult", "SchemaChange",
           "SegmentInfo", "SegmentRange", "StreamInfo", "WriterInfo", "to_plain"]


def to_plain(value: Any) -> Any:
    """The JSON form of a result record, derived from its fields in their order: records become
    dicts, tuples lists, mappings dicts (so no record spells its fields twice)."""
    if is_dataclass(value) and not isinstance(value, type):
        return record_dict(value)
    if isinstance(value, (tuple, list)):
        return [to_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def record_dict(record: Any) -> dict[str, Any]:
    """A result record's fields, in order, as :func:`to_plain` values."""
    return {f.name: to_plain(getattr(record, f.name)) for f in fields(record)}


@dataclass(frozen=True)
class SegmentInfo:
    """One active segment in :class:`StreamInfo`: its id, epoch and number within the epoch, key
    range ``[lo, hi)`` as fractions of the key space, totals, its ``_seq`` range
    ``[first_seq, next_seq)``, last record id and the ``_seq`` below which it is compacted."""

    id: int
    epoch: int
    number: int
    key_range: tuple[float, float]
    rows: int
    bytes: int
    chunks: int
    first_seq: int
    next_seq: int
    last_id: str | None
    compacted_seq: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``key_range`` a list)."""
        return record_dict(self)


@dataclass(frozen=True)
class WriterInfo:
    """One writer session in :class:`StreamInfo`: whether it holds the tick back (``live``), its
    last record id and commit time (ISO-8601), and its commit and record counts."""

    live: bool
    last_id: str | None
    last_commit: str | None
    commits: int
    rows: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return record_dict(self)


@dataclass(frozen=True)
class SchemaChange:
    """Columns by the commit that brought them: ``position`` and ``time`` (ISO-8601) of the
    ``mergeSchema`` commit, None for the first columns; ``columns`` as ``"name type"``."""

    position: int | None
    time: str | None
    columns: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``columns`` a list)."""
        return record_dict(self)


@dataclass(frozen=True)
class StreamInfo:
    """A snapshot of a stream for humans and tools (:meth:`~pyspark_tstream.api.stream.Stream.info`, ``tstream info``).

    ``position`` is the journal position; ``tick`` the ``_tso`` below which the stream is
    complete (``tick_id``/``tick_time`` the same as a record id and a time); ``first_*`` and
    ``last_*`` the oldest readable and newest records; ``rows``/``bytes``/``chunks`` totals;
    ``segments`` the active ones, ``sealed_segments`` how many were sealed; ``writers`` by
    writer id; ``schema`` the user columns as ``"name type"`` (None before the first write);
    ``config`` the stream's stored config; ``created`` its creation time. Times are ISO-8601.
    """

    url: str
    position: int
    epoch: int
    tick: int
    tick_id: str
    tick_time: str | None
    first_id: str | None
    last_id: str | None
    first_time: str | None
    last_time: str | None
    rows: int
    bytes: int
    chunks: int
    segments: tuple[SegmentInfo, ...]
    writers: Mapping[str, WriterInfo]
    sealed_segments: int
    schema: tuple[str, ...] | None
    schema_history: tuple[SchemaChange, ...]
    config: Mapping[str, Any] = field(default_factory=dict)
    created: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``tstream info --json`` prints."""
        return record_dict(self)


@dataclass(frozen=True)
class ScaleResult:
    """What :meth:`~pyspark_tstream.api.stream.Stream.scale` did: the new ``epoch``, the
    segments it ``sealed`` and those it ``created`` (ids, in key order)."""

    epoch: int
    sealed: tuple[int, ...]
    created: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return record_dict(self)


@dataclass(frozen=True)
class SegmentRange:
    """A segment and its key range ``[lo, hi)`` as fractions of the key space
    (:meth:`~pyspark_tstream.api.stream.Stream.segments_at`)."""

    id: int
    key_range: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``key_range`` a list)."""
        return record_dict(self)


@dataclass(frozen=True)
class CompactResult:
    """What :meth:`~pyspark_tstream.api.stream.Stream.compact` did: ``macros`` written,
    ``chunks`` and ``rows`` merged into them, ``bytes`` written, macro-chunks ``adopted`` from
    a compactor that crashed before committing, buckets ``lost`` to another compactor, and
    ``unreadable`` chunks left as they are (``tstream fsck`` names them)."""

    macros: int = 0
    chunks: int = 0
    rows: int = 0
    bytes: int = 0
    adopted: int = 0
    lost: int = 0
    unreadable: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return record_dict(self)


@dataclass(frozen=True, eq=False)
class Cut(Mapping[int, int]):
    """A stream cut: per segment id, the first ``_seq`` kept (Pravega's stream cut).

    A read-only mapping (``cut[segment]``, ``dict(cut)``; equal to any mapping of the same
    items); :meth:`~pyspark_tstream.api.stream.Stream.truncate` and the ``startingCut``/``endingCut`` read options take
    it as they take a ``dict``.
    """

    positions: Mapping[int, int]

    def __getitem__(self, segment: int) -> int:
        return self.positions[segment]

    def __iter__(self) -> Iterator[int]:
        return iter(self.positions)

    def __len__(self) -> int:
        return len(self.positions)

    def __repr__(self) -> str:
        return f"Cut({dict(self.positions)!r})"

    def to_dict(self) -> dict[str, int]:
        """The JSON form ``tstream cut`` prints (segment ids as text keys)."""
        return {str(k): v for k, v in self.positions.items()}


@dataclass(frozen=True)
class PendingEntry:
    """A delivered, not yet acknowledged record of a consumer group (``Group.pending()``): its
    entry ``id``, where the record is (``segment``, ``seq``, ``tso``), the ``consumer`` it was
    delivered to, how long ago (``idle_ms``) and how many times (``deliveries``)."""

    id: str
    segment: int
    seq: int
    tso: int
    consumer: str
    idle_ms: int
    deliveries: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``tstream group pending --json`` prints one a line)."""
        return record_dict(self)


@dataclass(frozen=True)
class ConsumerInfo:
    """One consumer of a group in :class:`GroupInfo`: its pending count, ms since it was last
    seen (``idle_ms``) and since it last got records (``inactive_ms``)."""

    name: str
    pending: int
    idle_ms: int
    inactive_ms: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return record_dict(self)


@dataclass(frozen=True)
class GroupInfo:
    """A consumer group (``Group.info()``): its cursor (``last_delivered_id``), pending count,
    records delivered (``entries_read``) and acknowledged, lag (records after the cursor at or
    below the tick, and how far behind the tick in ms), the oldest id it still needs
    (``low_water_id``), the id a Spark query committed (None: none), its consumers, the version
    of its log and when it was created (ISO-8601)."""

    name: str
    last_delivered_id: str
    pending: int
    entries_read: int
    acked: int
    lag: int
    lag_ms: int
    low_water_id: str
    committed_id: str | None
    consumers: tuple[ConsumerInfo, ...]
    version: int
    created: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``tstream group info --json`` prints (``consumers`` a list of dicts)."""
        return record_dict(self)
