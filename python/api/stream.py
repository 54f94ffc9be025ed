"""The Python API: ``Stream``, a small facade over parts that each do one job.

``Stream.create/open`` give a ``Stream`` (2 store calls); its methods delegate to the parts it
composes, each built on one shared :class:`~pyspark_tstream.api.context.StreamContext` (store,
journal, newest entry) and testable alone:

* :class:`~pyspark_tstream.api.append.Appender` — ``write_spec``, ``commit``, ``append``,
  ``heartbeat``, ``tick``, ``writer`` (producer sessions);
* :class:`~pyspark_tstream.api.upkeep.Upkeep` — what runs after a data commit
  (auto-scaling, retention, automatic compaction), best-effort;
* :class:`~pyspark_tstream.api.read.Reader` — ``read``, ``to_reader``, ``plan``, ``plan_read``,
  ``seek``, ``seek_tail``;
* :class:`~pyspark_tstream.api.epochs.Epochs` — ``scale`` and the segment history;
* :class:`~pyspark_tstream.api.truncate.Truncation` — cuts, ``truncate``, ``trim``, ``vacuum``;
* :class:`~pyspark_tstream.api.maintain.Maintenance` — ``compact``, ``verify``, ``repair``;
* :func:`~pyspark_tstream.api.info.describe` — ``info``.

Spark-free. The Spark sink and source are thin adapters over the same calls: ``write_spec`` +
:mod:`~pyspark_tstream.write.writing` on the tasks, ``commit`` on the driver, ``plan`` +
:mod:`~pyspark_tstream.read.reading` for sources.

Each part is built, and its module imported, on first use: a process that only plans reads
(the streaming source's driver) never loads the writer, compaction or fsck, whose imports
would add to each query's start (``tests/test_startup.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .. import keys as K
from ..errors import StreamNotFoundError
from ..journal.entries import Chunk, Entry
from ..journal.journal import Journal
from ..journal.state import StreamState
from ..maps.sealed import SealedMap
from ..store.failures import RetryPolicy
from ..store.storage import Store
from ..timestamps import TimeLike
from .config import GC_GRACE_MS, ORPHAN_GRACE_MS, StreamConfig
from .context import StreamContext

if TYPE_CHECKING:
    from ..journal.op_info import GcInfo
    from ..journal.scale_records import SealedRecord
    from ..maintain.fsck import Report
    from ..read.planner import Plan
    from ..write.commit import Ack
    from ..write.spec import ChunkInfo, WriteSpec
    from .append import Appender, Producer
    from .epochs import Epochs
    from .maintain import Maintenance
    from .read import Bound, Reader
    from .results import CompactResult, Cut, ScaleResult, SchemaChange, SegmentRange, StreamInfo
    from .truncate import Truncation
    from .upkeep import Upkeep

__all__ = ["Stream"]


class Stream:
    """A stream at a URL. Use :meth:`create` or :meth:`open`; both are cheap (2 store calls).

    The parts are public for tools and tests: ``appending``, ``upkeep``, ``reading``,
    ``epochs``, ``truncation``, ``maintenance``, all on one shared ``context`` (see the
    module docstring).
    """

    def __init__(self, store: Store, entry: Entry, journal: Journal | None = None) -> None:
        # ``journal``: the one that read or wrote ``entry`` (it keeps recent entries' bytes)
        self.context = StreamContext(store, entry, journal)

    # -- the parts, built on first use (module docstring) -------------------------------------
    @cached_property
    def reading(self) -> Reader:
        """Reads, plans and seeks."""
        from .read import Reader

        return Reader(self.context)

    @cached_property
    def epochs(self) -> Epochs:
        """Scaling and the segment history."""
        from .epochs import Epochs

        return Epochs(self.context)

    @cached_property
    def truncation(self) -> Truncation:
        """Cuts, truncation, trim and vacuum."""
        from .truncate import Truncation

        return Truncation(self.context, self.reading)

    @cached_property
    def maintenance(self) -> Maintenance:
        """Compaction, verify and repair."""
        from .maintain import Maintenance

        return Maintenance(self.context)

    @cached_property
    def upkeep(self) -> Upkeep:
        """What runs after a data commit (auto-scaling, retention, automatic compaction)."""
        from .upkeep import Upkeep

        # retention needs the truncation part only when it runs; background runs (after
        # Stream.append) work on a context of their own, like another process
        def fork(entry: Entry) -> Upkeep:
            other = Stream(self.store, entry)
            return Upkeep(other.context, trim=lambda: other.truncation.trim(), inline=True)

        return Upkeep(self.context, trim=lambda: self.truncation.trim(), fork=fork)

    @cached_property
    def appending(self) -> Appender:
        """Write specs, commits, appends and producer sessions."""
        from .append import Appender

        return Appender(self.context, after_commit=self.upkeep.after_data_commit)

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    def create(cls, url: str, *, schema: pa.Schema | None = None, segments: int = K.SEGMENTS_DEFAULT,
               timestamping: str = K.TIMESTAMPING_DEFAULT, storage_options: Mapping[str, Any] | None = None,
               **config: Any) -> Stream:
        """Create a stream; fails with StreamExistsError if one exists at ``url``.

        ``config`` takes the other :class:`~pyspark_tstream.api.config.StreamConfig` fields
        (``timestamping_uncapped``, ``writers``, ``writer_lease_ms``, ``retention``, ``scaling``,
        ``compression``, ``compaction``). ``schema`` may be omitted: the first write then fixes it.
        """
        cfg = StreamConfig.from_kwargs({"segments": segments, "timestamping": timestamping, **config})
        store = Store(url, storage_options)
        return cls._create(store, cfg, schema)

    @classmethod
    def _create(cls, store: Store, cfg: StreamConfig, schema: pa.Schema | None) -> Stream:
        from .creation import create

        return cls(store, create(store, cfg, schema))

    @classmethod
    def open(cls, url: str, storage_options: Mapping[str, Any] | None = None, *,
             retry: RetryPolicy | None = None) -> Stream:
        """Open an existing stream; StreamNotFoundError if there is none.

        ``retry`` says how store failures are retried (default :class:`RetryPolicy`; Spark
        queries pass one with ``patience`` from ``storeRetryTimeout``).
        """
        return cls.at(Store(url, storage_options, retry=retry))

    @classmethod
    def at(cls, store: Store) -> Stream:
        """Open the existing stream at ``store`` (its retry policy, and whether it was reached)."""
        journal = Journal(store)
        return cls(store, journal.head(), journal)

    @classmethod
    def open_or_create(cls, url: str, *, storage_options: Mapping[str, Any] | None = None,
                       config: Mapping[str, Any] | None = None, schema: pa.Schema | None = None,
                       retry: RetryPolicy | None = None) -> Stream:
        """Open, or create with ``config`` if missing; explicit ``config`` must agree if it exists."""
        return cls.at_or_create(Store(url, storage_options, retry=retry), config=config, schema=schema)

    @classmethod
    def at_or_create(cls, store: Store, *, config: Mapping[str, Any] | None = None,
                     schema: pa.Schema | None = None) -> Stream:
        """:meth:`open_or_create` on an existing ``store`` (its retry policy, whether it was reached)."""
        given = dict(config or {})
        try:
            journal = Journal(store)
            stream = cls(store, journal.head(), journal)
        except StreamNotFoundError:
            cfg = StreamConfig.from_kwargs(given)
            try:
                return cls._create(store, cfg, schema)
            except FileExistsError:  # lost a creation race: fine, use the winner's stream
                journal = Journal(store)
            stream = cls(store, journal.head(), journal)
        stream.config.check_agrees(given, list(given), url=store.display_url)
        return stream

    @classmethod
    def for_write(cls, store: Store, schema: pa.Schema, *, config: Mapping[str, Any] | None = None,
                  key: str | None = None, timestamp: str | None = None,
                  merge_schema: bool = False) -> tuple[Stream, WriteSpec]:
        """The stream a write of data with ``schema`` goes to, opened or created with ``config``,
        and its :meth:`write_spec` (what the sink does before its tasks run).

        A write that fails fixes nothing (:mod:`~pyspark_tstream.api.creation`): the key and
        timestamp columns are checked before a missing stream is created; a created stream's
        schema stays unset until a commit lands (its first commit fixes it); and a stream this
        method created keeps its config only once a commit lands: until then, a write with other
        ``config`` re-creates it with that. A stream made by :meth:`create` keeps its config, and
        ``config`` that disagrees with it is a ConfigError naming the option and the stream's value.
        """
        from ..write.spec import check_columns
        from .creation import open_for_write

        check_columns(schema, key=key, timestamp=timestamp)
        stream = cls(store, *open_for_write(store, config))
        return stream, stream.write_spec(schema, key=key, timestamp=timestamp, merge_schema=merge_schema)

    # -- state --------------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        """The store the stream lives on."""
        return self.context.store

    @property
    def journal(self) -> Journal:
        """The stream's journal (commits, entries, the time index)."""
        return self.context.journal

    @property
    def sealed_map(self) -> SealedMap:
        """Final facts of the segments scaling sealed."""
        return self.context.sealed_map

    @property
    def state(self) -> StreamState:
        """The newest state this handle has seen (call :meth:`refresh` to look again)."""
        return self.context.state

    def refresh(self) -> StreamState:
        """Catch up with the journal: 1 store call if nothing changed."""
        return self.context.refresh()

    @property
    def url(self) -> str:
        """The stream's URL, without credentials."""
        return self.context.url

    @property
    def config(self) -> StreamConfig:
        """The stream config fixed at creation."""
        return self.context.config

    @property
    def schema(self) -> pa.Schema | None:
        """User columns (without system columns), or None before the first write."""
        return self.context.schema

    def info(self) -> StreamInfo:
        """Tick, epochs, segments, writers, first/last ids, size: a snapshot for humans and tools."""
        from .info import describe

        state = self.refresh()
        return describe(self.url, state, self.schema)

    def metadata(self, kind: str, *, starting_position: int | None = None,
                 ending_position: int | None = None) -> pa.Table:
        """The metadata table ``kind`` as an Arrow table: ``history``, ``segments``, ``epochs``,
        ``groups`` or ``files`` (columns: :data:`~pyspark_tstream.api.metadata.SCHEMAS`).

        ``starting_position``/``ending_position`` bound ``history`` (journal positions,
        inclusive; default the newest 1,000). What each table reads: :mod:`~pyspark_tstream.api.metadata`.
        """
        from .metadata import metadata_table

        return metadata_table(self, kind, starting_position=starting_position, ending_position=ending_position)

    def schema_history(self) -> list[SchemaChange]:
        """The columns by the commit that brought them (``position``, ``time``, ``columns``), the
        first columns first (``position`` None), then each mergeSchema change (from the state:
        no store call beyond the refresh)."""
        from .info import schema_history

        state = self.refresh()
        return schema_history(state, self.schema)

    # -- appending (stream_append) ------------------------------------------------------------
    def write_spec(self, schema: pa.Schema, *, key: str | None = None, timestamp: str | None = None,
                   merge_schema: bool = False, writer_tag: str = "w") -> WriteSpec:
        """What writer tasks need to write chunks of data with ``schema`` (validated here)."""
        return self.appending.write_spec(schema, key=key, timestamp=timestamp, merge_schema=merge_schema,
                                         writer_tag=writer_tag)

    def commit(self, chunks: Sequence[ChunkInfo], *, writer_id: str | None = None, batch_id: Any = None,
               session: bool = False, schema: pa.Schema | None = None, merge_schema: bool = False,
               op: str = "append", heartbeat: int | None = None, close: bool = False,
               monotonic: bool = False, fresh: bool = False, written_ms: int | None = None) -> Ack:
        """Make ``chunks`` visible in one journal commit; a repeated (writer, batch) is a no-op.

        ``monotonic``: as in :meth:`append`. ``fresh``: the chunks were written for this call
        only, so a no-op deletes them (see :meth:`Appender.commit <pyspark_tstream.api.append.Appender.commit>`).
        ``written_ms``: wall-clock epoch milliseconds taken before the first of ``chunks`` was
        written (on whichever host wrote it). Until the commit names them the files are kept
        from ``vacuum(orphans=True)`` only by its grace: with ``written_ms``, a commit more than
        half the shortest grace later checks they still exist and raises a retriable
        :class:`~pyspark_tstream.errors.StaleWriteError` if cleanup deleted any (the Spark sink
        passes its tasks' earliest stamp); without it, committing within the grace is the
        caller's responsibility.
        """
        from ..write.commit import CommitIntent

        intent = CommitIntent(writer_id=writer_id, batch_id=batch_id, session=session, monotonic=monotonic,
                              op=op, heartbeat=heartbeat, close=close, schema=schema, merge_schema=merge_schema)
        return self.appending.commit(chunks, intent, fresh=fresh, written_ms=written_ms)

    def append(self, data: Any, key: str | None = None, timestamp: str | None = None,
               writer_id: str | None = None, batch_id: Any = None, *, merge_schema: bool = False,
               session: bool = False, monotonic: bool = False) -> Ack:
        """Append records in one atomic commit and return the S2-style
        :class:`~pyspark_tstream.write.commit.Ack`.

        ``data``: a pyarrow Table/RecordBatch, a list of dicts or a pandas DataFrame. ``key``
        names the routing-key column, ``timestamp`` the client timestamp column (TIMESTAMP or
        epoch-ms integers). The same (``writer_id``, ``batch_id``) twice commits once (the
        writer remembers its last 64 batch ids exactly, and every integer id below those).
        ``monotonic=True`` (what ``df.write``'s ``batchId`` does, Delta's ``txnVersion`` rule):
        this writer's integer batch ids only increase, so one at or below its last committed
        batch id commits nothing either. A no-op returns an ack with ``duplicate=True``.
        """
        return self.appending.append(data, key, timestamp, writer_id, batch_id, merge_schema=merge_schema,
                                     session=session, monotonic=monotonic)

    def heartbeat(self, writer_id: str, tso: int | None = None) -> Ack:
        """A data-less tick record: ``writer_id`` is live and will not commit below ``tso``."""
        return self.appending.heartbeat(writer_id, tso)

    def tick(self) -> StreamState:
        """A data-less commit that lets the journal drop writers whose lease expired."""
        self.appending.tick()
        return self.state

    def writer(self, writer_id: str) -> Producer:
        """A producer session: holds the tick (until closed or its lease expires)."""
        return self.appending.writer(writer_id)

    # -- reading (stream_read) ----------------------------------------------------------------
    def read(self, start: Bound = None, end: Bound = None, limit: int | None = None,
             columns: Sequence[str] | None = None, *, tail: int | None = None) -> pa.Table:
        """Records with ``start <= _timestamp < end``, ordered by ``_tso``, with system columns.

        ``start``/``end``: epoch ms, datetime, ISO-8601 text or an ago duration like ``"-15m"``;
        or a stream cut ``{segment: seq}`` (:meth:`cut_at`): from / before those ``_seq`` in the
        segments it lists. ``end`` defaults to the current tick (only complete time is
        returned). ``tail=N`` (instead of ``start``): the last N records. ``limit`` keeps the
        first records by ``_tso``; ``columns`` selects columns of the result.
        """
        return self.reading.read(start, end, limit, columns, tail=tail)

    def to_reader(self, start: Bound = None, end: Bound = None, limit: int | None = None,
                  columns: Sequence[str] | None = None, *, tail: int | None = None,
                  system_columns: bool | Sequence[str] = False, batch_rows: int = 65_536) -> pa.RecordBatchReader:
        """:meth:`read`'s records as a ``pyarrow.RecordBatchReader``: for DuckDB, Polars, pandas.

        Same range arguments as :meth:`read` (``start``, ``end``, ``tail``, ``limit``); same
        records in the same order. ``columns``: the user columns to return (default all), the
        only ones decoded; ``system_columns``: False (default: none), True (``_timestamp``,
        ``_tso``, ``_segment``, ``_seq``) or a list of them. The range is planned now; the
        records are read as the reader is consumed, in batches of at most ``batch_rows``, a
        window of time at a time: memory stays about one window, whatever the range.
        """
        return self.reading.to_reader(start, end, limit, columns, tail=tail, system_columns=system_columns,
                                      batch_rows=batch_rows)

    def plan(self, lo: int, hi: int, *, first_pos: int | None = None, last_pos: int | None = None) -> list[Chunk]:
        """Chunks that may hold records with ``lo < _tso <= hi`` (see :mod:`~pyspark_tstream.read.planner`)."""
        return self.reading.plan(lo, hi, first_pos=first_pos, last_pos=last_pos)

    def plan_read(self, lo: int, hi: int, **kw: Any) -> Plan:
        """The lazy :func:`~pyspark_tstream.read.planner.plan` of ``(lo, hi]`` on the newest state."""
        return self.reading.plan_read(lo, hi, **kw)

    def seek(self, when: TimeLike) -> int:
        """The position (exclusive ``_tso`` bound) before the first record at or after ``when``."""
        return self.reading.seek(when)

    def seek_tail(self, n: int) -> int:
        """Exclusive ``_tso`` bound such that the last ``n`` records at or below the tick follow it."""
        return self.reading.seek_tail(n)

    # -- epochs and scaling (stream_epochs) ---------------------------------------------------
    def scale(self, *, split: int | None = None, parts: int = 2, merge: Sequence[int] | None = None,
              seal: Sequence[int] | None = None, ranges: Sequence[tuple[float, float]] | None = None) -> ScaleResult:
        """Split a segment into ``parts``, merge adjacent segments, or seal/create explicitly.

        One journal commit: the sealed segments stop taking records; their successors own the
        same key range in a new epoch. Returns a :class:`~.results.ScaleResult` (``epoch``,
        ``sealed``, ``created``). A scale that
        would leave more than ``keys.SEGMENTS_MAX`` (4096) active segments is refused, as is a
        stream created with more.
        """
        return self.epochs.scale(split=split, parts=parts, merge=merge, seal=seal, ranges=ranges)

    def successors(self, segment: int) -> list[int]:
        """Segments that took over ``segment``'s key range when it was sealed ([] if active)."""
        return self.epochs.successors(segment)

    def predecessors(self, segment: int) -> list[int]:
        """Segments ``segment`` replaced (from its creation epoch's record)."""
        return self.epochs.predecessors(segment)

    def sealed_info(self, segment: int) -> SealedRecord | None:
        """Final size, rows, last ``_seq``/``_tso`` and sealing epoch of a sealed segment (None
        unless ``segment`` is sealed)."""
        return self.epochs.sealed_info(segment)

    def epoch_at(self, when: TimeLike) -> int:
        """The epoch in force at ``when`` (a time like :meth:`read` takes)."""
        return self.epochs.epoch_at(when)

    def segments_at(self, when: TimeLike) -> list[SegmentRange]:
        """Active segments (id and key range) at ``when``."""
        return self.epochs.segments_at(when)

    def segments_between(self, start: TimeLike, end: TimeLike) -> list[int]:
        """Every segment that was active at some time in ``[start, end]`` (no data read)."""
        return self.epochs.segments_between(start, end)

    # -- cuts, truncation, retention (stream_truncate) -----------------------------------------
    def cut_at(self, when: TimeLike) -> Cut:
        """Stream cut at ``when``: per active segment, the first ``_seq`` at or after that time
        (a :class:`~.results.Cut`, a ``Mapping[int, int]``)."""
        return self.truncation.cut_at(when)

    def truncate(self, before: TimeLike | Mapping[int, int], *, reason: str = "manual") -> StreamState:
        """Drop records before ``before`` (a time, or a stream cut {segment: seq}).

        Records become unreadable at once; their files go at the next :meth:`vacuum` (or the
        retention check) after a grace period. The head never moves past the tick. A cut removes
        the records before it in the segments it names, and in other segments only records
        older than the newest one it removes; a cut that names a segment this stream never had,
        a position outside what a segment holds, or no segment at all is refused
        (:class:`~pyspark_tstream.errors.InvalidCutError`) and nothing changes.
        """
        return self.truncation.truncate(before, reason=reason)

    def check_cut(self, cut: Mapping[int, int], option: str = "cut") -> Cut:
        """``cut`` as a :class:`~.results.Cut` if it is a stream cut of this stream; otherwise
        :class:`~pyspark_tstream.errors.InvalidCutError` naming ``option`` and the bad entry."""
        return self.truncation.check_cut(cut, option)

    def cut_bound(self, cut: Mapping[int, int], option: str = "cut") -> int:
        """The largest ``_tso`` bound that removes nothing at or after ``cut`` in any segment
        (a cut of another stream is refused as by :meth:`check_cut`)."""
        return self.truncation.cut_bound(cut, option)

    def trim(self, *, maxlen: int | None = None, max_age: str | None = None, max_bytes: int | None = None,
             gc_grace_ms: int = GC_GRACE_MS) -> StreamState:
        """Apply the stream's ``retention`` policy (or the limits given), then collect garbage.

        ``maxlen`` keeps the newest N records (Redis ``XTRIM MAXLEN``), ``max_age`` a duration,
        ``max_bytes`` a size. Consumer groups hold the head back when the policy says
        ``groups=true``.
        """
        return self.truncation.trim(maxlen=maxlen, max_age=max_age, max_bytes=max_bytes, gc_grace_ms=gc_grace_ms)

    def vacuum(self, grace_ms: int = GC_GRACE_MS, *, orphans: bool = False,
               orphan_grace_ms: int = ORPHAN_GRACE_MS, unsafe_orphan_grace: bool = False) -> GcInfo:
        """Delete files and metadata of records truncated at least ``grace_ms`` ago.

        With ``orphans``, also delete data files no commit names (failed or duplicate task
        attempts) older than ``orphan_grace_ms``; that part lists the data folders, and keeps
        the files of group-commit requests still waiting to be folded. A file that young may
        belong to a commit in flight, so an ``orphan_grace_ms`` under one hour
        (``config.ORPHAN_GRACE_MIN_MS``) is refused unless ``unsafe_orphan_grace=True`` says no
        writer is running (as Delta's VACUUM retention check). Request objects left by
        crashed writers go once no slot can fold them and ``grace_ms`` passed (counted as
        ``requests``; see :mod:`~pyspark_tstream.write.requests`). Returns the counts deleted
        (a :class:`~pyspark_tstream.journal.op_info.GcInfo`).
        """
        return self.truncation.vacuum(grace_ms, orphans=orphans, orphan_grace_ms=orphan_grace_ms,
                                      unsafe_orphan_grace=unsafe_orphan_grace)

    # -- maintenance (stream_maintain) --------------------------------------------------------
    def compact(self, *, full: bool = True, target: int | str | None = None, min_pieces: int | None = None,
                progress: Any = None, total: Any = None) -> CompactResult:
        """Merge small chunks of each segment into macro-chunks (one journal commit).

        ``full`` (default) packs every run of small pieces into macro-chunks of at most
        ``target`` bytes (the stream's ``compaction`` config, else 128MB); ``full=False`` does
        what automatic compaction does (size-tiered merges of ``min`` pieces). Records never
        change; replaced files go at a later ``vacuum`` after its grace period. Returns the
        counts (a :class:`~.results.CompactResult`): macros written, chunks and rows merged,
        bytes written, macros adopted/lost.
        See :mod:`~pyspark_tstream.compaction.compact`.
        """
        return self.maintenance.compact(full=full, target=target, min_pieces=min_pieces, progress=progress,
                                        total=total)

    def verify(self, progress: Callable[[int, int], None] | None = None, *, footers_only: bool = False) -> Report:
        """Check the stream (``tstream fsck``); returns a :class:`~pyspark_tstream.maintain.fsck.Report`.

        ``footers_only`` (``tstream fsck --footers-only``): check chunk files from their Parquet
        footers alone (size, rows, time statistics: one ranged read each) instead of also reading
        and decoding every page; a damaged page inside a sound file then goes unseen (a read still
        refuses it).
        """
        return self.maintenance.verify(progress, footers_only=footers_only)

    def repair(self, progress: Callable[[int, int], None] | None = None, *, drop_torn_entry: bool = False) -> Report:
        """Rebuild what the journal can (``tstream repair``); the report lists what remains.

        ``drop_torn_entry``: the newest journal entry is torn and no hint holds a copy: set it
        aside and lose the one commit it held (see :meth:`repair_url`, which needs no open).
        """
        return self.maintenance.repair(progress, drop_torn_entry=drop_torn_entry)

    @staticmethod
    def repair_url(url: str, storage_options: Mapping[str, Any] | None = None, *,
                   progress: Callable[[int, int], None] | None = None, drop_torn_entry: bool = False) -> Report:
        """:meth:`repair` of the stream at ``url`` without opening it first: the way out when it
        cannot be opened, a torn newest journal entry that no head hint holds a copy of
        (``drop_torn_entry=True`` sets it aside; the error names the switch otherwise)."""
        from ..maintain.repair import repair

        return repair(Store(url, storage_options), progress, drop_torn_entry=drop_torn_entry)
