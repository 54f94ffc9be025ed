"""Creating a stream, and the first-write rule: a write fixes nothing until one of its commits lands.

A stream made on purpose (:meth:`Stream.create <pyspark_tstream.api.stream.Stream.create>`,
``tstream create``) has the config the user asked for; a write that gives other stream-config
options is refused, naming the option, the stream's value and the remedy.

A stream made by a write (the sink, :meth:`Stream.for_write
<pyspark_tstream.api.stream.Stream.for_write>`) must exist before the write's tasks run, since
they route records by its segments; a write that then fails leaves a stream with its config and
no commit. Such a creation is told apart by a marker, ``layout.write_created(nonce)``, written
before its create entry and naming that entry's nonce (a separate object: the journal entry
format is untouched, and a stream from before markers reads as made on purpose). While that
entry is still the journal's newest (no commit of any kind landed since), a write whose config
differs *re-creates* the stream: one journal commit at the next position whose state is a fresh
initial state with the new config. It takes the slot through the journal's conditional create,
so a re-creation and a racing first commit cannot both land: one of them wins, and the loser
looks again (a commit then fixed the config, and the re-creation is refused). A writer that
routed its records before a re-creation and commits after it sees its segments' key ranges
change under it; the commit re-routes its keyed chunks (:func:`~pyspark_tstream.write.spec.fits`).

The marker of the newest creation stays after its first commit (one small object a stream);
a re-creation deletes the marker it replaced.

A stream is created only in a folder holding nothing but tstream's objects (one listing of the
root, :func:`~pyspark_tstream.store.ownership.check_creatable`): a stream owns only what it wrote.

Costs (store calls): a write that finds its stream and agrees with its config adds none; creating
adds 2 (the root's listing and the marker); a disagreeing write on a stream whose newest entry is its creation adds 1
(the marker's read), and re-creating 3 more (marker, entry, the old marker's delete; the head
hint on top).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..codec import ANY, STR, DictRecord, record, stored
from ..errors import CommitConflictError, StreamNotFoundError
from ..journal import seal
from ..journal.entries import Entry
from ..journal.features import NEW_STREAM, WRITES, check_object, checksummed
from ..journal.journal import Journal
from ..journal.outcome import Taken
from ..journal.state import StreamState
from ..schema import check_names, check_reserved, encode_schema, normalize, user_schema
from ..store import layout
from ..store.ownership import check_creatable
from ..store.storage import Store
from ..timestamps import now_ms
from .config import StreamConfig
from .epochs import initial_segments

#: Format of the first-write marker: ``{"v": 1, "nonce": <create entry's nonce>, "config": {...}}``.
MARKER = "first-write marker"
MARKER_VERSION = WRITES[MARKER]
#: The journal op of an entry that creates (or re-creates) a stream.
CREATE_OP = "create"
#: Looks at the stream a write may take before giving up (each lost race means another writer
#: created, re-created or committed meanwhile; the next look sees what it did).
ATTEMPTS = 4

logger = logging.getLogger(__name__)


@record
@dataclass(frozen=True)
class Marker(DictRecord):
    """A first-write marker: the ``nonce`` of the create entry a write made, and the config it
    made the stream with (for a reader of the store; the journal's config is the one in force).
    Stored after its format version ``v``."""

    nonce: str = stored(STR)
    config: Mapping[str, Any] = stored(ANY)


def initial_state(cfg: StreamConfig, schema: pa.Schema | None, now: int) -> StreamState:
    """The state of a stream just created with ``cfg`` (and ``schema``, if given)."""
    if schema is not None:
        check_reserved(schema)
        schema = normalize(user_schema(schema))
        check_names(schema)
    return StreamState(
        pos=0, epoch=0, tick=0, max_tso=0, wall=now, created=now,
        schema=encode_schema(schema) if schema is not None else "", config=cfg,
        segments=initial_segments(cfg.segments), writers={}, index=[], next_number=cfg.segments,
        features={part: dict(named) for part, named in NEW_STREAM.items()})


def create(store: Store, cfg: StreamConfig, schema: pa.Schema | None, *, nonce: str | None = None) -> Entry:
    """Write the create entry of a new stream; StreamExistsError if one exists, InvalidPathError
    if the folder holds files that are not tstream's (:func:`~pyspark_tstream.store.ownership.check_creatable`;
    a write's creation checked before its marker)."""
    if nonce is None:
        check_creatable(store)
    now = now_ms()
    entry = Entry(pos=0, op=CREATE_OP, wall=now, state=initial_state(cfg, schema, now))
    if nonce is not None:
        entry.nonce = nonce
    return Journal(store).create(entry)


def create_for_write(store: Store, cfg: StreamConfig) -> Entry | None:
    """Create the stream a write goes to, marked as made by a write: its create entry, or None
    if another process created one first (its marker, if any, is not ours: ours is deleted)."""
    check_creatable(store)
    nonce = uuid.uuid4().hex
    marker = layout.write_created(nonce)
    store.write(marker, _marker(nonce, cfg))
    try:
        return create(store, cfg, None, nonce=nonce)
    except FileExistsError:
        _forget(store, marker)
        return None


def open_for_write(store: Store, config: Mapping[str, Any] | None) -> tuple[Entry, Journal]:
    """The newest entry (and the journal read) of the stream at ``store`` for a write giving
    stream-config ``config``: opened, created (marked as made by a write) or re-created while no
    commit has landed since a write made it.

    ConfigError if ``config`` disagrees with a stream whose config is fixed.
    """
    given = dict(config or {})
    for _ in range(ATTEMPTS):
        journal = Journal(store)
        try:
            head = journal.head()
        except StreamNotFoundError:
            made = create_for_write(store, StreamConfig.from_kwargs(given))
            if made is not None:
                return made, journal
            continue  # lost the creation race: take the winner's stream
        current = StreamConfig.from_record(head.state.config)
        if not current.disagreements(given):
            return head, journal
        if not (head.op == CREATE_OP and written_by_a_write(store, head.nonce)):
            # made on purpose, or a commit landed since: the config is fixed (this raises)
            current.check_agrees(given, list(given), url=store.display_url)
        remade = recreate(store, journal, head, StreamConfig.from_kwargs(given))
        if remade is not None:
            return remade, journal
    raise CommitConflictError(
        f"the stream at {store.display_url} kept being created, re-created or committed to by other "
        f"writes while this one looked at it ({ATTEMPTS} times); retry the write", expected=0)


def written_by_a_write(store: Store, nonce: str) -> bool:
    """Whether the create entry with ``nonce`` was made by a write (its marker exists).

    A marker this version cannot parse counts as absent: the stream then keeps its config,
    the safe side (the write is refused with the remedy). A newer format is refused.
    """
    rel = layout.write_created(nonce)
    (data,) = store.read_present([rel])
    if data is None:
        return False
    try:
        stored = seal.unseal(data)
        version = stored["v"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise TypeError(f"format version {version!r} is not an integer")
        check_object(MARKER, version, store.uri(rel))  # a newer one's fields may mean something else
        marker = Marker.checked(stored, "the marker")
    except (ValueError, TypeError, KeyError) as e:
        logger.warning("tstream: first-write marker %s is unreadable (%s): the stream keeps its config",
                       store.uri(rel), e)
        return False
    return marker.nonce == nonce


def recreate(store: Store, journal: Journal, old: Entry, cfg: StreamConfig) -> Entry | None:
    """Replace the config of the stream whose newest entry is ``old``, the creation by a write
    that nothing committed to since, by ``cfg``: a fresh initial state at the next journal
    position; its entry, or None if another commit took that position (the caller looks again)."""
    nonce = uuid.uuid4().hex
    marker = layout.write_created(nonce)
    store.write(marker, _marker(nonce, cfg))
    now = max(now_ms(), old.state.wall)

    def build(state: StreamState, pos: int) -> Entry:
        fresh = initial_state(cfg, None, now)
        fresh.index = state.index  # the time index covers every position, this one's too
        return Entry(pos=pos, op=CREATE_OP, wall=now, state=fresh, nonce=nonce)

    out = journal.attempt(build, old.state)
    if isinstance(out, Taken):  # another write created, re-created or committed first
        _forget(store, marker)
        return None
    entry = out.entry
    assert entry is not None  # build always returns an entry
    _forget(store, layout.write_created(old.nonce))
    before = StreamConfig.from_record(old.state.config)
    logger.info("tstream: %s: the stream a write created (%s) had no commit; re-created with this write's "
                "config (%s)", store.display_url, _text(before), _text(cfg))
    return entry


def _marker(nonce: str, cfg: StreamConfig) -> bytes:
    # only a stream this build creates has a marker, and it declares checksums (NEW_STREAM)
    return seal.encode({"v": MARKER_VERSION, **Marker(nonce, cfg.to_dict()).to_json()}, checksummed(NEW_STREAM))


def _forget(store: Store, rel: str) -> None:
    """Delete a marker that names no live creation; best-effort (a leftover one names an entry
    that is not the newest, so it is never consulted)."""
    try:
        store.delete([rel])
    except Exception as e:  # noqa: BLE001 - a stray marker is harmless (see above)
        logger.info("tstream: stale first-write marker %s not deleted (%s)", store.uri(rel), e)


def _text(cfg: StreamConfig) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in cfg.to_dict().items())
