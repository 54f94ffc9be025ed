"""Stream configuration: fixed when a stream is created, stored in its journal state.

Names in messages are the public option names (``timestamping``, ``writerLeaseMs``, ...), so an
error points at what the user typed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import keys as K
from ..errors import ConfigError
from ..journal.config import ConfigRecord

# defined beside the fence that assumes it (store/fence.py); read here by vacuum's check
from ..store.fence import ORPHAN_GRACE_MIN_MS as ORPHAN_GRACE_MIN_MS

TIMESTAMPING_MODES = ("client-prefer", "client-require", "arrival")
COMPRESSIONS = ("snappy", "zstd", "lz4", "gzip", "none")
#: Chunks of a truncation stay this long for readers that planned before it.
GC_GRACE_MS = 10 * 60_000
#: Unreferenced data files younger than this may belong to a commit still in flight.
ORPHAN_GRACE_MS = 6 * 3_600_000


def check_graces(grace_ms: int, orphan_grace_ms: int, *, orphans: bool, unsafe_orphan_grace: bool) -> None:
    """Refuse a negative grace, and an orphan grace under :data:`ORPHAN_GRACE_MIN_MS` unless
    ``unsafe_orphan_grace`` says every writer of the stream is stopped."""
    for name, value in (("grace_ms", grace_ms), ("orphan_grace_ms", orphan_grace_ms)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{name}={value!r} must be a non-negative integer of milliseconds",
                              option=name, value=value)
    if orphans and orphan_grace_ms < ORPHAN_GRACE_MIN_MS and not unsafe_orphan_grace:
        raise ConfigError(
            f"orphan_grace_ms={orphan_grace_ms} is under the safe minimum of {ORPHAN_GRACE_MIN_MS} ms (1 hour): "
            "an unreferenced file that young may belong to a commit still in flight, and deleting it loses "
            "that commit's data. Use a longer grace, or, only when no writer of the stream is running, "
            "pass unsafe_orphan_grace=True (CLI: --unsafe-orphan-grace)",
            option="orphan_grace_ms", value=orphan_grace_ms)

#: Python-API name → public (Spark option) name, for messages. The option names and their
#: defaults are defined once, in :mod:`pyspark_tstream.keys`.
PUBLIC_NAMES = {name: key for key, name in K.STREAM_CONFIG_FIELDS.items()}


@dataclass(frozen=True)
class StreamConfig(ConfigRecord):
    """Settings fixed at stream creation, checked as a user gives them (the journal state stores
    them as its :class:`~pyspark_tstream.journal.config.ConfigRecord`).

    Parameters
    ----------
    segments : int
        Initial number of segments (key ranges split evenly).
    timestamping : str
        ``client-prefer`` (client column if given and non-null, else arrival time),
        ``client-require`` (a null or missing client time is an error) or ``arrival``.
    timestamping_uncapped : bool
        Keep client times later than arrival (by default they are capped at arrival time).
    writers : tuple of str
        Declared writers: the timetick waits for each one's first commit or heartbeat.
    writer_lease_ms : int
        A live writer silent for longer than this is dropped from the timetick (by a journal
        record written by the next committer).
    writer_retention_ms : int
        A writer silent for longer than this leaves the stream state, its dedupe window and
        lanes with it (default 7 days; a live session whose lease holds is kept): a replay of
        one of its batches after that appends again.
    retention, scaling : str or None
        Retention and auto-scaling policies (see docs/options.md).
    compression : str
        Parquet codec of data chunks.
    compaction : str
        Compaction of small chunks into macro-chunks: ``target=128MB,min=16`` (the default)
        or ``off`` (see python/compaction/compact.py and docs/compaction.md).
    """

    def __post_init__(self) -> None:
        if (not isinstance(self.segments, int) or isinstance(self.segments, bool)
                or not 1 <= self.segments <= K.SEGMENTS_MAX):
            raise ConfigError(f"segments={self.segments!r} must be an integer from 1 to {K.SEGMENTS_MAX}",
                              option="segments", value=self.segments)
        if self.timestamping not in TIMESTAMPING_MODES:
            raise ConfigError(
                f"timestamping={self.timestamping!r} is not a mode; use one of {', '.join(TIMESTAMPING_MODES)}",
                option="timestamping", value=self.timestamping)
        if not isinstance(self.timestamping_uncapped, bool):
            raise ConfigError(f"timestampingUncapped={self.timestamping_uncapped!r} must be true or false",
                              option="timestampingUncapped", value=self.timestamping_uncapped)
        if not isinstance(self.writer_lease_ms, int) or self.writer_lease_ms < 1:
            raise ConfigError(f"writerLeaseMs={self.writer_lease_ms!r} must be a positive integer (ms)",
                              option="writerLeaseMs", value=self.writer_lease_ms)
        if type(self.writer_retention_ms) is not int or self.writer_retention_ms < 1:
            raise ConfigError(f"writerRetentionMs={self.writer_retention_ms!r} must be a positive integer (ms), "
                              f"e.g. {K.WRITER_RETENTION_MS_DEFAULT} (7 days)",
                              option="writerRetentionMs", value=self.writer_retention_ms)
        if self.compression not in COMPRESSIONS:
            raise ConfigError(f"compression={self.compression!r} is not one of {', '.join(COMPRESSIONS)}",
                              option="compression", value=self.compression)
        # parse the policies now so a bad one fails at creation, naming the option
        from ..epochs.scaling import ScalingPolicy
        from ..maintain.retention import RetentionPolicy

        ScalingPolicy.parse(self.scaling)
        RetentionPolicy.parse(self.retention)
        from ..compaction.policy import CompactionPolicy

        if not isinstance(self.compaction, str):
            raise ConfigError(f"compaction={self.compaction!r} must be text like target=128MB,min=16 or off",
                              option="compaction", value=self.compaction)
        CompactionPolicy.parse(self.compaction)
        writers = tuple(self.writers)
        bad = [w for w in writers if not isinstance(w, str) or not w.strip()]
        if bad:
            raise ConfigError(f"writers={list(writers)!r} must be non-empty writer ids", option="writers",
                              value=list(writers))
        object.__setattr__(self, "writers", tuple(w.strip() for w in writers))

    @classmethod
    def from_kwargs(cls, values: Mapping[str, Any]) -> StreamConfig:
        """Build from Python-API keyword names; unknown names are an error listing valid ones."""
        known = set(cls.FIELDS)
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"unknown stream config {unknown}; valid: {', '.join(sorted(known))}",
                option=unknown[0], value=values[unknown[0]])
        vals = dict(values)
        if isinstance(vals.get("writers"), str):
            vals["writers"] = tuple(w for w in vals["writers"].split(",") if w.strip())
        if vals.get("writers") is not None:
            vals["writers"] = tuple(vals["writers"])
        return cls(**{k: v for k, v in vals.items() if v is not None or k in ("retention", "scaling")})

    @classmethod
    def from_record(cls, record: ConfigRecord) -> StreamConfig:
        """The checked config of a stored one (a stored setting it lacks takes its default)."""
        if isinstance(record, cls):
            return record
        return cls(**{name: getattr(record, name) for name in cls.FIELDS})

    def disagreements(self, given: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
        """``(field, this stream's value, the given value)`` of each explicitly ``given`` field
        (Python-API names) that differs; ConfigError if ``given`` is not a valid config."""
        wanted = StreamConfig.from_kwargs(given)
        return [(k, getattr(self, k), getattr(wanted, k)) for k in given if getattr(self, k) != getattr(wanted, k)]

    def check_agrees(self, given: Mapping[str, Any], keys: Iterable[str], *, url: str = "") -> None:
        """Fail if a write's explicitly given config disagrees with this (existing) stream's,
        naming each option, the value given, the stream's value and the remedy."""
        diffs = self.disagreements({k: given[k] for k in keys if k in given})
        if not diffs:
            return
        names = [PUBLIC_NAMES.get(k, k) for k, _, _ in diffs]
        ours = " and ".join(f"{n}={theirs!r}" for n, (_, _, theirs) in zip(names, diffs))
        kept = " and ".join(f"{n}={mine!r}" for n, (_, mine, _) in zip(names, diffs))
        where = f"the stream at {url}" if url else "the existing stream"
        raise ConfigError(
            f"{ours} {'disagrees' if len(diffs) == 1 else 'disagree'} with {where}: it has {kept}, fixed when "
            "it was created (by Stream.create or `tstream create`) or by its first commit that landed; "
            f"drop the option{'s' if len(diffs) > 1 else ''} {', '.join(names)} to write with the stream's "
            "config, or write to a new stream path",
            option=names[0], value=diffs[0][2])
