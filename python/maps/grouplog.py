"""Consumer-group state and its versioned log in the stream folder (no server).

Invariants:

* Version ``n`` of a group is one immutable object ``_tstream/groups/<name>/log/…/<n>.json``,
  taken with an atomic create-if-absent; a version is never overwritten. Concurrent writers
  race for the next slot and a loser re-reads the winner and rebuilds from it, so every change
  (delivery, ack, claim) is applied to exactly one predecessor and none is lost.
* Every version holds the whole :class:`GroupState`; ``head.json`` copies the newest one. The
  head is only a hint (as for the journal): a stale head costs one probe per version it lags.
* A record is identified by (``_segment``, ``_seq``), which is unique; its ``_tso`` is not
  (two writers' lanes, or two tasks of one Spark batch, may stamp the same time in a segment),
  so the text id is ``<ms>-<logical>@<segment>:<seq>`` (see :func:`entry_id`): time first, as
  in Redis, then the identity. Cursors are ``(tso, segment, seq)`` in read order.

Costs (store calls): open 2 (head + probe), refresh with nothing new 1, a change 1 conditional
create + 1 head write (+ 1 read per lost race). No call lists a folder. A version's size is
O(pending entries + consumers), not O(history): ack what you read (Redis keeps its PEL in
memory for the same reason). Old versions are kept; deleting them safely needs a marker of the
oldest live version first (a handle refreshing from a deleted slot would re-create it).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import pyarrow as pa

from ..codec import INT, STR, DictRecord, ListRecord, custom, dict_of, opt, rec, record, stored, tuple_of
from ..errors import (
    ConfigError,
    CorruptMetadataError,
    EntryIdError,
    GroupNotFoundError,
    InvalidPathError,
    TStreamError,
)
from ..journal import seal
from ..journal.features import WRITES, check_object
from ..store import layout
from ..store.storage import Store
from ..store.versions import newest_present, probe_past
from ..timestamps import parse_id, tso_id

logger = logging.getLogger(__name__)

#: Segment (or seq) part of a cursor meaning "every record with this ``_tso`` (in this
#: segment) was delivered".
ALL_SEGMENTS = (1 << 63) - 1
#: Group log format: 1 had ``(tso, segment)`` cursors; 2 adds the ``_seq`` part (writer lanes).
GROUP_KIND = "consumer-group record"
GROUP_FORMAT_VERSION = WRITES[GROUP_KIND]
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_ID = re.compile(r"^(\d+)(?:-(\d+))?(?:@(\d+)(?::(\d+))?)?$")

#: What ``ack`` and ``claim`` take: an id string or a ``(segment, seq)`` pair.
IdLike = str | tuple[int, int]


def check_group_name(name: Any) -> str:
    """Validate a group name: it becomes a folder name inside the stream, so no ``/`` or ``..``."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise InvalidPathError(
            f"group name {name!r} is not valid; use 1-128 letters, digits, '_', '-' or '.', "
            "starting with a letter, digit or '_' (no '/', no '..')")
    return name


def check_consumer_name(name: Any) -> str:
    """Consumer names are stored, not used in paths, but must be non-empty printable text."""
    if not isinstance(name, str) or not name.strip() or len(name) > 256 or not name.isprintable():
        raise ConfigError(f"consumer name {name!r} must be 1-256 printable characters",
                          option="consumer", value=name)
    return name


def entry_id(tso: int, segment: int, seq: int) -> str:
    """The unique text id of a record: ``<ms>-<logical>@<segment>:<seq>``.

    ``<ms>-<logical>`` alone (the Redis form) can name several records: one in each of several
    segments, and several in one segment when writers' lanes stamp the same time.
    """
    return f"{tso_id(tso)}@{segment}:{seq}"


def is_entry_id(text: str) -> bool:
    """Whether ``text`` is an id (``<ms>-<logical>[@<segment>[:<seq>]]``) rather than a time."""
    match = _ID.match(str(text).strip())
    return bool(match and (match.group(2) is not None or match.group(3) is not None))


def parse_entry_id(text: str) -> tuple[int, int | None, int | None]:
    """``(tso, segment, seq)`` of ``<ms>-<logical>[@<segment>[:<seq>]]``; None where not given."""
    match = _ID.match(str(text).strip())
    if not match:
        raise EntryIdError(f"entry id {text!r} is not of the form <ms>-<logical>@<segment>:<seq> "
                           "(e.g. 1767225600000-0@1:42)")
    tso = parse_id(f"{match.group(1)}-{match.group(2) or 0}")
    seg = int(match.group(3)) if match.group(3) is not None else None
    return tso, seg, (int(match.group(4)) if match.group(4) is not None else None)



class Cursor(NamedTuple):
    """A position in read order: every record up to (``tso``, ``segment``, ``seq``) inclusive.

    Stored as the list ``[tso, segment, seq]``; ``seq`` is ``ALL_SEGMENTS`` for a version-1
    cursor ``[tso, segment]`` (every record of that segment at that ``tso``).
    """

    tso: int
    segment: int
    seq: int

@record
@dataclass(frozen=True)
class Pending(ListRecord):
    """A delivered, not yet acknowledged record (a PEL entry), stored as the list of its fields."""

    segment: int = stored(INT)
    seq: int = stored(INT)
    tso: int = stored(INT)
    consumer: str = stored(STR)
    delivered: int = stored(INT)  # wall ms of the last delivery
    count: int = stored(INT)  # deliveries so far

    @property
    def key(self) -> tuple[int, int]:
        return self.segment, self.seq

    @property
    def id(self) -> str:
        return entry_id(self.tso, self.segment, self.seq)


def _cursor(stored: list[int]) -> Cursor:
    # version 1 cursors (tso, segment) named every record of that segment at that tso
    return Cursor(stored[0], stored[1], stored[2] if len(stored) > 2 else ALL_SEGMENTS)


def _ints(n: tuple[int, ...]) -> Any:
    """The test of a stored list of integers whose length is one of ``n``."""
    return lambda v: type(v) is list and len(v) in n and all(type(x) is int for x in v)


#: ``last``: ``[tso, segment, seq]`` (version 1: ``[tso, segment]``).
_CURSOR = custom(list, _cursor, _ints((2, 3)))
#: A consumer's ``[last seen ms, last delivery ms]``.
_SEEN = custom(list, tuple, _ints((2,)))


@record
@dataclass(frozen=True)
class GroupState(DictRecord):
    """A group after version ``pos``.

    ``last`` is the cursor ``(tso, segment, seq)``: records in read order (``_tso``,
    ``_segment``, ``_seq``) at or before it were delivered. ``pending`` is in read order too.
    ``consumers`` maps a name to ``[last seen ms, last delivery ms]``. Stored after its format
    version ``v``, in field order.
    """

    name: str = stored(STR)
    pos: int = stored(INT)
    op: str = stored(STR)
    wall: int = stored(INT)
    created: int = stored(INT)
    nonce: str = stored(STR, factory=lambda: uuid.uuid4().hex, required=True, kw_only=True)
    last: Cursor = stored(_CURSOR)
    committed: int | None = stored(opt(INT), default=None)
    delivered: int = stored(INT, default=0)
    acked: int = stored(INT, default=0)
    consumers: Mapping[str, tuple[int, int]] = stored(dict_of(_SEEN), factory=dict)
    pending: tuple[Pending, ...] = stored(tuple_of(rec(Pending)), default=())

    def __post_init__(self) -> None:
        # callers pass cursors as plain (tso, segment, seq) tuples; readers use the names
        object.__setattr__(self, "last", Cursor(*self.last))

    def next(self, op: str, wall: int, **changes: Any) -> GroupState:
        """The successor version (a fresh nonce, so a lost race is told from our own write)."""
        return replace(self, pos=self.pos + 1, op=op, wall=wall, nonce=uuid.uuid4().hex, **changes)

    @property
    def low_water(self) -> int:
        """The largest ``_tso`` at or below which every record was delivered and acked."""
        mark = self.last.tso if self.last.segment == ALL_SEGMENTS else self.last.tso - 1
        if self.pending:
            mark = min(mark, min(p.tso for p in self.pending) - 1)
        return max(mark, 0)

    def encode(self, sealed: bool = False) -> bytes:
        """The stored bytes (``sealed``: the stream declares checksums)."""
        return seal.encode({"v": GROUP_FORMAT_VERSION, **self.to_json()}, sealed)

    @classmethod
    def decode(cls, data: bytes, *, path: str) -> GroupState:
        try:
            d = seal.unseal(data)
            if not isinstance(d, dict):
                raise TypeError("not a consumer-group record")
            check_object(GROUP_KIND, d.get("v"), path)  # a newer one's fields may mean something else
            return cls.checked(d, "the consumer-group record")
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
            url = layout.stream_url(path)
            raise CorruptMetadataError(
                f"consumer-group record {path} is unreadable ({type(e).__name__}: {e}); `tstream repair "
                f"{url}` restores it if the group's head holds a copy, otherwise start a new group where "
                f"this one was (`tstream group {url} create NAME --start ID`)", path=path) from e


class GroupLog:
    """The versions of one group: read the newest, append the next."""

    def __init__(self, store: Store, name: str, *, sealed: bool = False) -> None:
        self.store = store
        #: the stream declares checksums: versions this handle writes are sealed
        #: (:mod:`~pyspark_tstream.journal.seal`)
        self.sealed = sealed
        self.name = check_group_name(name)
        self.head_path = layout.group_head(self.name)

    def version_path(self, pos: int) -> str:
        """Where version ``pos`` of this group lives."""
        return layout.group_version(self.name, pos)

    def try_version(self, pos: int) -> GroupState | None:
        """Version ``pos`` or None: one store call."""
        rel = self.version_path(pos)
        try:
            data = self.store.read(rel)
        except FileNotFoundError:
            return None
        return GroupState.decode(data, path=self.store.uri(rel))

    def head(self, known: GroupState | None = None) -> GroupState:
        """The newest version: the head hint (or ``known`` if newer), then probe forward."""
        try:
            state = GroupState.decode(self.store.read(self.head_path), path=self.store.uri(self.head_path))
            if known is not None and known.pos > state.pos:
                state = known
        except (FileNotFoundError, CorruptMetadataError) as e:
            # a crash between creating version 0 and writing the hint leaves no head; an
            # unreadable hint is only a hint: versions are never deleted, so search them
            if isinstance(e, CorruptMetadataError):
                logger.warning("%s; searching the group's versions instead", e)
            first = known or self.try_version(0)
            if first is None:
                raise GroupNotFoundError(
                    f"no consumer group {self.name!r} on {self.store.display_url}; create it with "
                    f"Group.create or `tstream group URL create {self.name}`") from None
            if known is None:
                newest = newest_present(lambda p: self.store.exists(self.version_path(p)), 0)
                state = self.try_version(newest) or first
            else:
                state = first
        return probe_past(state, lambda s: self.try_version(s.pos + 1))

    def refresh(self, known: GroupState) -> GroupState:
        """Catch up from ``known``: one store call when nothing changed."""
        nxt = self.try_version(known.pos + 1)
        return known if nxt is None else self.head(known=nxt)

    def put(self, state: GroupState) -> GroupState | None:
        """Write ``state`` as version ``state.pos``; return it, or None if another writer won.

        A taken slot whose content carries our nonce was our own earlier attempt (an ambiguous
        create on an object store, retried after a lost answer), which counts as success.
        """
        data = state.encode(self.sealed)
        if not self.store.put_if_absent(self.version_path(state.pos), data):
            winner = self.try_version(state.pos)
            if winner is None or winner.nonce != state.nonce:
                return None
        self._write_head(data)
        return state

    def _write_head(self, data: bytes) -> None:
        # The version is already durable; a failed hint write only costs a later probe.
        try:
            self.store.write(self.head_path, data)
        except Exception as e:  # noqa: BLE001 - whatever failed, the change itself stands
            logger.info("group head hint %s not written (%s); readers probe past it",
                        self.store.uri(self.head_path), e)


def group_names(store: Store) -> list[str]:
    """Names of the stream's groups.

    Lists ``_tstream/groups/``: a stream has few groups and this folder does not grow with
    history (each group's versions live in its own subfolder, which is never listed).
    """
    return [n for n in store.list(layout.GROUPS) if _valid_name(n)]


def group_positions(store: Store) -> dict[str, int]:
    """Each group's low-water mark: the largest ``_tso`` at or below which it consumed all.

    That is the minimum of its last delivered position and (just below) its oldest pending
    record; consumption-based retention may remove records at or below the minimum over all
    groups. Costs 1 listing + 2 reads per group. Lives here, not in :mod:`~pyspark_tstream.api.groups`, because
    retention needs it and :mod:`~pyspark_tstream.api.groups` is built on :class:`~pyspark_tstream.api.stream.Stream`.
    """
    out = {}
    for name in group_names(store):
        try:
            out[name] = GroupLog(store, name).head().low_water
        except GroupNotFoundError:
            continue  # a folder left by a create that crashed before writing version 0
    return out


def _valid_name(name: str) -> bool:
    try:
        check_group_name(name)
    except TStreamError:
        return False
    return True


def materialize_ids(ids: Iterable[IdLike] | pa.Table | pa.RecordBatch) -> list[IdLike]:
    """``ids`` as a list: id strings and ``(segment, seq)`` pairs (a table gives its pairs)."""
    if isinstance(ids, (pa.Table, pa.RecordBatch)):
        return list(zip(ids["_segment"].to_pylist(), ids["_seq"].to_pylist()))
    if isinstance(ids, (str, bytes)):
        raise EntryIdError("ids must be a list of ids, not one string; wrap it in a list")
    return list(ids)


def resolve_ids(ids: list[IdLike], pending: tuple[Pending, ...]) -> set[tuple[int, int]]:
    """The PEL keys ``(segment, seq)`` that ``ids`` name (ids not pending name nothing)."""
    by_tso: dict[int, list[Pending]] = {}
    for p in pending:
        by_tso.setdefault(p.tso, []).append(p)
    keys: set[tuple[int, int]] = set()
    for item in ids:
        if isinstance(item, tuple) and len(item) == 2:
            keys.add((int(item[0]), int(item[1])))
            continue
        tso, seg, seq = parse_entry_id(str(item))
        matches = [p for p in by_tso.get(tso, []) if (seg is None or p.segment == seg)
                   and (seq is None or p.seq == seq)]
        if (seg is None or seq is None) and len(matches) > 1:
            raise EntryIdError(f"id {item!r} names pending records in several segments: "
                               f"{', '.join(p.id for p in matches)}; use one of these")
        keys.update(p.key for p in matches)
    return keys
