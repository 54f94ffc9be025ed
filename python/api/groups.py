"""Redis-style consumer groups kept in the stream folder: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM.

A group has a cursor (the last delivered position) and a pending-entries list (PEL) of records
delivered to a consumer and not yet acknowledged. Its state is a versioned log
(:mod:`~pyspark_tstream.maps.grouplog`): every change takes the next version with an atomic
create-if-absent, so two consumers reading the same group at once — threads, processes or
machines — never get the same record: the loser of a race re-reads the winner's cursor and
reads again after it.

Invariants:

* a delivery never includes a record above the stream's tick (such a record could still be
  preceded by a later commit of another writer), and never skips one: the cursor moves in
  (``_tso``, ``_segment``) order exactly past what was delivered (:mod:`~pyspark_tstream.api.scan`);
* a record is pending for at most one consumer; ``ack`` removes it, ``claim`` moves it;
* ids are ``<ms>-<logical>@<segment>:<seq>`` (:func:`~pyspark_tstream.maps.grouplog.entry_id`); a bare
  ``<ms>-<logical>`` is accepted where it names one pending record.

Costs (store calls), besides the records' chunks: a read/ack/claim with a current handle 1 group
probe + 1 stream refresh + 1 conditional create + 1 head write; a poll with nothing new 2.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import pyarrow as pa

from ..errors import ConfigError, GroupExistsError, GroupNotFoundError
from ..journal.features import checksummed
from ..maps.grouplog import (
    ALL_SEGMENTS,
    Cursor,
    GroupLog,
    GroupState,
    IdLike,
    Pending,
    check_consumer_name,
    entry_id,
    group_names,
    group_positions,
    is_entry_id,
    materialize_ids,
    parse_entry_id,
    resolve_ids,
)
from ..read.reading import READ_ORDER
from ..store.races import LOST, Lost, until_won
from ..timestamps import iso, now_ms, pack, physical, to_ms, tso_id
from .results import ConsumerInfo, GroupInfo, PendingEntry
from .scan import count_after, empty_records, fetch, read_after
from .stream import Stream

__all__ = ["Group", "record_ids"]

#: How often a blocking read looks for new data (each look costs 2 store calls).
POLL_SECONDS = 0.05
DELETED_KEY = b"tstream.deleted_ids"

def record_ids(table: pa.Table) -> list[str]:
    """The ``<ms>-<logical>@<segment>:<seq>`` ids of the records in ``table`` (as ``ack`` takes them)."""
    return [entry_id(t, s, q) for t, s, q in zip(table["_tso"].to_pylist(), table["_segment"].to_pylist(),
                                                  table["_seq"].to_pylist())]


def _positive(value: Any, name: str, *, zero: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        raise ConfigError(f"{name}={value!r} must be a {'non-negative' if zero else 'positive'} integer",
                          option=name, value=value)


def start_cursor(stream: Stream, start: int | str | datetime) -> Cursor:
    """The cursor a group starting at ``start`` begins after.

    ``"$"``: after the current tick (only records that become complete later); ``"0"``: the
    beginning; ``"<ms>-<logical>[@<segment>[:<seq>]]"``: after that id (Redis semantics); anything
    :func:`~pyspark_tstream.timestamps.to_ms` takes (epoch ms, ISO-8601, ``"-15m"``, datetime):
    records with ``_timestamp`` at or after that time.
    """
    if start == "$":
        return Cursor(stream.refresh().tick, ALL_SEGMENTS, ALL_SEGMENTS)
    if start in ("0", "0-0"):
        return Cursor(0, -1, -1)
    if isinstance(start, str) and is_entry_id(start):
        tso, seg, seq = parse_entry_id(start)
        if seg is None:
            return Cursor(tso, ALL_SEGMENTS, ALL_SEGMENTS)
        return Cursor(tso, seg, ALL_SEGMENTS if seq is None else seq)
    return Cursor(max(pack(to_ms(start, option="start")) - 1, 0), ALL_SEGMENTS, ALL_SEGMENTS)


def _cursor_id(cursor: Cursor) -> str:
    tso, seg, seq = cursor
    if seg in (ALL_SEGMENTS, -1):
        return tso_id(max(tso, 0))
    return f"{tso_id(tso)}@{seg}" if seq == ALL_SEGMENTS else entry_id(tso, seg, seq)


class Group:
    """A consumer group of a stream. Use :meth:`create` or :meth:`open`.

    A handle may be shared by threads (its operations run one at a time); separate handles,
    in this process or others, coordinate through the store.
    """

    def __init__(self, stream: Stream, log: GroupLog, state: GroupState) -> None:
        self.stream = stream
        self._log = log
        self._state = state
        self._lock = threading.RLock()

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    def create(cls, stream: Stream, name: str, start: int | str | datetime = "$", *,
               exist_ok: bool = False) -> Group:
        """Create group ``name`` delivering records after ``start`` (see :func:`start_cursor`).

        Raises GroupExistsError if it exists, unless ``exist_ok`` (then the existing group is
        opened and ``start`` ignored). Costs 1 conditional create + 1 head write.
        """
        log = _log(stream, name)
        return cls._create(stream, log, start_cursor(stream, start), exist_ok=exist_ok)

    @classmethod
    def _create(cls, stream: Stream, log: GroupLog, cursor: Cursor, *, exist_ok: bool,
                committed: int | None = None) -> Group:
        now = now_ms()
        state = GroupState(name=log.name, pos=0, op="create", wall=now, created=now, last=cursor,
                           committed=committed)
        if log.put(state) is None:
            if not exist_ok:
                raise GroupExistsError(
                    f"consumer group {log.name!r} already exists on {stream.url}; open it with "
                    "Group.open (or pass exist_ok=True)")
            return cls(stream, log, log.head())
        return cls(stream, log, state)

    @classmethod
    def open(cls, stream: Stream, name: str) -> Group:
        """Open an existing group; GroupNotFoundError if there is none. Costs 2 store calls."""
        log = _log(stream, name)
        return cls(stream, log, log.head())

    @classmethod
    def names(cls, stream: Stream) -> list[str]:
        """Names of the stream's groups (see :func:`~pyspark_tstream.maps.grouplog.group_names`)."""
        return group_names(stream.store)

    @classmethod
    def positions(cls, stream: Stream) -> dict[str, int]:
        """Each group's low-water mark (see :func:`~pyspark_tstream.maps.grouplog.group_positions`)."""
        return group_positions(stream.store)

    @classmethod
    def commit_position(cls, stream: Stream, name: str, tso: int) -> Group:
        """Record that group ``name`` consumed everything at or below ``tso`` (Kafka-style commit).

        Used by the Spark source's ``consumerGroup`` option after each micro-batch; creates the
        group if needed. Like XGROUP SETID the position may move back (a query restarted from an
        older checkpoint will read those records again). Committing the current position again
        writes nothing.
        """
        log = _log(stream, name)
        if isinstance(tso, bool) or not isinstance(tso, int) or tso < 0:
            raise ConfigError(f"tso={tso!r} must be a non-negative hybrid timestamp", option="tso", value=tso)
        try:
            group = cls(stream, log, log.head())
        except GroupNotFoundError:
            group = cls._create(stream, log, Cursor(tso, ALL_SEGMENTS, ALL_SEGMENTS), exist_ok=True, committed=tso)

        def build(s: GroupState) -> GroupState | None:
            if s.committed == tso and s.last == (tso, ALL_SEGMENTS, ALL_SEGMENTS):
                return None
            return s.next("commit", now_ms(), committed=tso, last=(tso, ALL_SEGMENTS, ALL_SEGMENTS))

        group._change(build)
        return group

    # -- state --------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The group's name (one safe path part)."""
        return self._log.name

    @property
    def state(self) -> GroupState:
        """The newest version this handle has seen (:meth:`refresh` looks again)."""
        return self._state

    def refresh(self) -> GroupState:
        """Catch up with the group's log: 1 store call when nothing changed."""
        with self._lock:
            self._state = self._log.refresh(self._state)
            return self._state

    def _change(self, build: Callable[[GroupState], GroupState | None]) -> GroupState:
        """Apply ``build`` to the newest version and write the result, retrying lost races."""

        def attempt() -> GroupState | Lost:
            current = self.refresh()
            nxt = build(current)
            if nxt is None:
                return current
            if self._log.put(nxt) is None:
                return LOST
            self._state = nxt
            return nxt

        with self._lock:
            return until_won(attempt, what=f"consumer group {self.name!r}", expected=lambda: self._state.pos + 1)

    # -- XREADGROUP ---------------------------------------------------------------------------
    def read(self, consumer: str, count: int | None = None, block_ms: int | None = None) -> pa.Table:
        """Deliver up to ``count`` new records to ``consumer`` and add them to the PEL.

        New means after the group's cursor and at or below the stream's tick. ``block_ms``
        waits that long for new records when there are none (0: forever, like Redis BLOCK 0);
        None returns at once. Returns the records (with system columns) in (``_tso``,
        ``_segment``) order; :func:`record_ids` gives the ids to ``ack``.
        """
        check_consumer_name(consumer)
        _positive(count, "count")
        _positive(block_ms, "block_ms", zero=True)
        deadline = None if not block_ms else time.monotonic() + block_ms / 1000
        while True:
            table = self._deliver(consumer, count)
            if table.num_rows or block_ms is None:
                return table
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return table
            time.sleep(POLL_SECONDS if remaining is None else min(POLL_SECONDS, remaining))

    def _deliver(self, consumer: str, count: int | None) -> pa.Table:
        delivered = empty_records(self.stream)

        def build(s: GroupState) -> GroupState | None:
            nonlocal delivered
            page = read_after(self.stream, s.last, count=count)
            delivered = page.records
            if not delivered.num_rows:
                return None
            now = now_ms()
            pel = {p.key: p for p in s.pending}
            for tso, seg, seq in zip(delivered["_tso"].to_pylist(), delivered["_segment"].to_pylist(),
                                     delivered["_seq"].to_pylist()):
                # after a position moved back (set_position, commit_position) a record may be
                # pending already: it moves to this consumer, as XREADGROUP does
                old = pel.get((seg, seq))
                pel[(seg, seq)] = Pending(seg, seq, tso, consumer, now, 1 if old is None else old.count + 1)
            pending = tuple(sorted(pel.values(), key=lambda p: (p.tso, p.segment)))
            return s.next("read", now, last=page.end, pending=pending,
                          consumers={**s.consumers, consumer: (now, now)},
                          delivered=s.delivered + delivered.num_rows)

        self._change(build)
        return delivered

    # -- XACK ---------------------------------------------------------------------------------
    def ack(self, ids: Iterable[IdLike] | pa.Table) -> int:
        """Acknowledge records: remove them from the PEL; returns how many were pending.

        ``ids``: id strings, ``(segment, seq)`` pairs, or a table of records (its ``_segment``
        and ``_seq`` columns). Ids that are not pending are ignored (as XACK does).
        """
        removed = 0
        given = materialize_ids(ids)  # an iterator must survive a retry after a lost race

        def build(s: GroupState) -> GroupState | None:
            nonlocal removed
            keys = resolve_ids(given, s.pending)
            keep = tuple(p for p in s.pending if p.key not in keys)
            removed = len(s.pending) - len(keep)
            if not removed:
                return None
            return s.next("ack", now_ms(), pending=keep, acked=s.acked + removed)

        self._change(build)
        return removed

    # -- XPENDING -----------------------------------------------------------------------------
    def pending(self, consumer: str | None = None) -> list[PendingEntry]:
        """Pending entries (of ``consumer``, or all), oldest first (:class:`PendingEntry`)."""
        state = self.refresh()
        now = now_ms()
        return [PendingEntry(id=p.id, segment=p.segment, seq=p.seq, tso=p.tso, consumer=p.consumer,
                             idle_ms=max(now - p.delivered, 0), deliveries=p.count)
                for p in state.pending if consumer is None or p.consumer == consumer]

    # -- XCLAIM / XAUTOCLAIM ------------------------------------------------------------------
    def claim(self, consumer: str, min_idle_ms: int, ids: Iterable[IdLike] | None = None,
              count: int | None = None) -> pa.Table:
        """Re-deliver pending records idle for at least ``min_idle_ms`` to ``consumer``.

        With ``ids`` (XCLAIM) only those; without (XAUTOCLAIM) the oldest idle ones, up to
        ``count``. Claimed entries get the new consumer, a fresh delivery time and one more
        delivery. Entries whose records retention removed leave the PEL; their ids are in the
        returned table's schema metadata under ``tstream.deleted_ids`` (a JSON list).
        """
        check_consumer_name(consumer)
        _positive(min_idle_ms, "min_idle_ms", zero=True)
        _positive(count, "count")
        given = None if ids is None else materialize_ids(ids)
        cache = empty_records(self.stream)
        missing: set[tuple[int, int]] = set()
        result = cache
        deleted: list[str] = []

        def build(s: GroupState) -> GroupState | None:
            nonlocal cache, missing, result, deleted
            now = now_ms()
            keys = None if given is None else resolve_ids(given, s.pending)
            chosen = [p for p in s.pending if (keys is None or p.key in keys) and now - p.delivered >= min_idle_ms]
            chosen = chosen[:count] if count is not None else chosen
            have = set(zip(cache["_segment"].to_pylist(), cache["_seq"].to_pylist())) | missing
            todo = [(p.segment, p.seq, p.tso) for p in chosen if p.key not in have]
            if todo:  # records fetched in a lost race are kept: they cannot change
                got, lost = fetch(self.stream, todo)
                cache = pa.concat_tables([cache, got]) if cache.num_rows else got
                missing |= lost
            if not chosen:
                result, deleted = empty_records(self.stream), []
                return None
            taken = {p.key for p in chosen if p.key not in missing}
            gone = {p.key for p in chosen if p.key in missing}
            deleted = [p.id for p in chosen if p.key in gone]
            pending = tuple(
                Pending(p.segment, p.seq, p.tso, consumer, now, p.count + 1) if p.key in taken else p
                for p in s.pending if p.key not in gone)
            result = _select(cache, taken)
            return s.next("claim", now, pending=pending, consumers={**s.consumers, consumer: (now, now)})

        self._change(build)
        if deleted:
            result = result.replace_schema_metadata({**(result.schema.metadata or {}),
                                                     DELETED_KEY: json.dumps(deleted).encode()})
        return result

    # -- XGROUP SETID / XINFO GROUPS ----------------------------------------------------------
    def set_position(self, start: int | str | datetime) -> None:
        """Move the cursor (XGROUP SETID); pending entries stay pending."""
        cursor = start_cursor(self.stream, start)
        self._change(lambda s: None if s.last == cursor else s.next("setid", now_ms(), last=cursor))

    def info(self) -> GroupInfo:
        """Cursor, pending count, consumers and lag (records and time behind the tick): :class:`GroupInfo`.

        Lag counts records after the cursor at or below the tick; computing it reads journal
        metadata between the cursor and now (see :func:`~pyspark_tstream.api.scan.count_after`).
        """
        s = self.refresh()
        tick = self.stream.refresh().tick
        lag = count_after(self.stream, s.last, tick)
        now = now_ms()
        per: dict[str, int] = {}
        for p in s.pending:
            per[p.consumer] = per.get(p.consumer, 0) + 1
        return GroupInfo(
            name=s.name, last_delivered_id=_cursor_id(s.last),
            pending=len(s.pending), entries_read=s.delivered, acked=s.acked,
            lag=lag, lag_ms=max(physical(tick) - physical(max(s.last.tso, 0)), 0) if lag else 0,
            low_water_id=tso_id(s.low_water),
            committed_id=None if s.committed is None else tso_id(s.committed),
            consumers=tuple(ConsumerInfo(name=c, pending=per.get(c, 0), idle_ms=max(now - seen, 0),
                                         inactive_ms=max(now - active, 0))
                            for c, (seen, active) in sorted(s.consumers.items())),
            version=s.pos, created=iso(s.created),
        )


def _select(table: pa.Table, keys: set[tuple[int, int]]) -> pa.Table:
    """The records of ``table`` whose (segment, seq) is in ``keys``, in cursor order."""
    if not table.num_rows:
        return table
    mask = [(g, q) in keys for g, q in zip(table["_segment"].to_pylist(), table["_seq"].to_pylist())]
    return table.filter(pa.array(mask, pa.bool_())).sort_by(READ_ORDER)


def _log(stream: Stream, name: str) -> GroupLog:
    """Group ``name``'s log on ``stream``, sealing what it writes when the stream declares checksums."""
    return GroupLog(stream.store, name, sealed=checksummed(stream.state.features))
