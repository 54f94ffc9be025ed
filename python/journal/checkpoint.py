"""Checkpoints of the whole stream state (format v6): when one is due, writing and reading it.

One job: checkpoint I/O and policy. A v6 journal entry holds only its commit's change
(:mod:`~pyspark_tstream.journal.delta`), so the state after entry ``n`` is a checkpoint's state
plus the changes of the entries after it. A committer writes the checkpoint of the state it
builds on (a committed state: deterministic bytes, so racing committers write the same object
and a lost race has written only a committed fact) before its conditional create, when

* the entries since the last checkpoint hold :data:`GROWTH` times that checkpoint's bytes (and
  at least :data:`MIN_BYTES`): writing checkpoints then costs at most half the entries' own
  bytes again, and a rebuild reads at most about three checkpoints' bytes; or
* :data:`MAX_ENTRIES` entries followed it (a bound on the objects a rebuild reads); or
* :data:`SMALL_EVERY` entries followed a checkpoint of at most :data:`SMALL_BYTES` (as Delta's
  every 10 commits): a cold open then reads one small checkpoint and a few entries, a few store
  requests, and the checkpoints cost at most ``SMALL_BYTES / SMALL_EVERY`` per commit; a stream
  whose state is larger (many writers) keeps the byte rule above; or
* the state has no checkpoint (a stream written by format 5 or older: its first v6 commit).

Its entry's state then names it (:class:`~pyspark_tstream.journal.checkpoint_mark.CheckpointMark`),
and so does every later one until the next: the newest entry (or the head hint that copies it)
says where to start, O(1) store calls. A checkpoint that is lost or damaged is rebuilt from the
one before it (``prev``), whose entries garbage collection keeps (:func:`entries_gc_target`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..errors import corrupt
from ..store import layout
from ..store.storage import Store
from . import seal
from .checkpoint_mark import CheckpointMark
from .features import WRITES, check_object, check_reader, checksummed
from .shapes import check_entry, is_int, need
from .state import StreamState

#: At most this many entries follow a checkpoint (a rebuild reads at most this many).
MAX_ENTRIES = 200
#: A checkpoint is not due before the entries since the last one hold this many bytes.
MIN_BYTES = 64 * 1024
#: ... nor before they hold this many times the last checkpoint's bytes.
GROWTH = 2
#: A checkpoint of at most this many bytes is written again after :data:`SMALL_EVERY` entries.
SMALL_BYTES = 16 * 1024
#: See :data:`SMALL_BYTES`.
SMALL_EVERY = 10
#: This object kind's name in :data:`~pyspark_tstream.journal.features.VERSIONS`.
KIND = "checkpoint"
#: The format a checkpoint object is written in (a newer one is refused, as every object's is).
CHECKPOINT_VERSION = WRITES[KIND]


def due(state: StreamState) -> bool:
    """Whether the commit after ``state`` writes the checkpoint of ``state`` (see the module
    docstring)."""
    m = state.checkpoint
    if m is None:
        return True
    if m.pos == state.pos:
        return False
    since = state.pos - m.pos
    return (since >= MAX_ENTRIES or m.since >= max(MIN_BYTES, GROWTH * m.bytes)
            or (since >= SMALL_EVERY and m.bytes <= SMALL_BYTES))


def encode(state: StreamState) -> bytes:
    """The stored bytes of the checkpoint of ``state``."""
    return seal.encode({"v": CHECKPOINT_VERSION, "pos": state.pos, "state": state.to_json()},
                       checksummed(state.features))


def decode(data: bytes, pos: int, path: str) -> StreamState:
    """The state a checkpoint holds; CorruptMetadataError (naming ``path``) if it is not the
    checkpoint of position ``pos``."""
    try:
        d = seal.unseal(data)
        need(isinstance(d, dict) and is_int(d.get("v")) and d.get("pos") == pos, "the checkpoint")
        check_object(KIND, d["v"], path)
        check_entry({"pos": pos, "wall": 0, "op": "", "nonce": "", "chunks": [], "state": d["state"]})
        state = StreamState.from_json(d["state"])
        need(state.pos == pos, "the checkpoint's state position")
        seal.check_declared(data, checksummed(state.features))
        if state.features:
            check_reader(state.features, d["v"], path)
        return state
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise corrupt("checkpoint", path, e, layout.stream_url(path)) from e


def write(store: Store, state: StreamState) -> CheckpointMark:
    """Write the checkpoint of committed ``state``; the mark a later state carries for it."""
    data = encode(state)
    store.write(layout.checkpoint(state.pos), data)
    prev = state.checkpoint.pos if state.checkpoint is not None else state.pos
    return CheckpointMark(pos=state.pos, bytes=len(data), since=0, prev=prev)


def read(store: Store, pos: int) -> StreamState:
    """The state the checkpoint of ``pos`` holds (FileNotFoundError if there is none,
    CorruptMetadataError if it is unreadable)."""
    rel = layout.checkpoint(pos)
    return decode(store.read(rel), pos, store.uri(rel))


def advanced(mark: CheckpointMark, entry_bytes: int) -> CheckpointMark:
    """The mark after one more entry of ``entry_bytes`` stored bytes."""
    return replace(mark, since=mark.since + entry_bytes)


def entries_gc_target(state: StreamState, mark_of: Callable[[int], CheckpointMark | None]) -> int:
    """Garbage collection deletes the journal entries below this position, and the checkpoints
    below the one just before it. Entries below ``gc_pos`` may go, but every entry left must be
    rebuildable: its state is the checkpoint it names plus the entries after that. So the bound
    is ``c + 1`` for a checkpoint ``c`` below ``gc_pos``: entry ``c + 1`` (which wrote ``c``)
    names ``c``, and every later entry a later checkpoint. ``c`` is the checkpoint before the
    newest (``prev``: the newest's fallback keeps its entries) or, while that is not below
    ``gc_pos``, the one entry ``gc_pos`` names (``mark_of(pos)``: the mark entry ``pos`` holds,
    None if it holds none): at most one read, whatever the history. Format 5 and
    older (every entry holds the whole state): ``gc_pos``."""
    m = state.checkpoint
    if m is None:
        return state.gc_pos
    if state.gc_pos <= state.meta_gc_pos:
        return state.meta_gc_pos  # nothing new below gc_pos: no read
    if m.prev + 1 <= state.gc_pos:
        return max(state.meta_gc_pos, m.prev + 1)
    # the newest checkpoint below gc_pos is the one entry gc_pos rebuilds from: one read, never
    # a walk back through the history retention keeps
    wrote = mark_of(state.gc_pos)
    if wrote is None or wrote.pos >= state.gc_pos:
        return state.meta_gc_pos
    return max(state.meta_gc_pos, wrote.pos + 1)


def entries_cheaper(kept: StreamState, start: int) -> bool:
    """Whether the entries after ``kept`` up to checkpoint ``start`` are likely fewer bytes
    than that checkpoint (estimated from ``kept``'s own checkpoint mark: its size, and the
    bytes of the entries after it)."""
    m = kept.checkpoint
    if m is None or kept.pos <= m.pos or start - kept.pos > MAX_ENTRIES:
        return False
    return (start - kept.pos) * m.since < m.bytes * (kept.pos - m.pos)
