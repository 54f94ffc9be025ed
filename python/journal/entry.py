"""One journal entry as stored: its format, and encoding and decoding it.

One job: the entry record. An entry is one immutable JSON object per journal position holding
what its commit did (a :class:`Chunk` list and info) and, since format 6, its change to the
:class:`~pyspark_tstream.journal.state.StreamState` (entry 0 and entries of format 5 and older
hold the whole state). Its version is checked by
:func:`~pyspark_tstream.journal.features.check_object`; an entry of a stream declaring
checksums is sealed (:mod:`.seal`): verified before it is parsed, and refused without its seal.
Reading entries from the store is :mod:`.entries`' job; committing them, :mod:`.journal`'s.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptMetadataError, corrupt
from ..store import layout
from . import seal
from .chunk import Chunk as Chunk
from .chunk import Fold as Fold
from .chunk import check_folds as check_folds
from .delta import apply
from .features import WRITES, check_object, check_reader, checksummed
from .packing import expand, pack
from .shapes import check_delta, check_entry, is_int, need
from .state import StreamState

#: The key of a v6 entry's change (:mod:`.delta`); an entry holding the whole state has ``state``.
CHANGE = "change"
#: This object kind's name in :data:`~pyspark_tstream.journal.features.VERSIONS`.
ENTRY = "journal entry"

#: The journal-entry format this build writes (older ones are read; what each version added,
#: as named features, is :data:`~pyspark_tstream.journal.features.VERSIONS`).
FORMAT_VERSION = WRITES[ENTRY]

#: An entry (or index node delta) with at least this many chunks stores them packed (format v3,
#: :mod:`.packing`).
PACK_MIN = 8



@dataclass
class Entry:
    """One journal entry: what the commit did, and the state after it.

    ``change`` (format v6) is what the commit changed in the state (:mod:`.delta`): set, the entry
    is stored with it instead of the whole state, and decoding it needs the state before it
    (``base``). None: stored with the whole state (format 5 and older, and entry 0).
    """

    pos: int
    op: str
    wall: int
    state: StreamState
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex)
    writer: str | None = None
    batch: Any = None
    chunks: list[Chunk] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    #: Group commit (format v4): the requests this entry folded, in order (:class:`Fold`); their
    #: chunks are consecutive runs of ``chunks``. Empty for an entry of one commit
    #: (``writer``/``batch``/``info`` are then its).
    folds: list[Fold] = field(default_factory=list)
    change: dict[str, Any] | None = None

    def delta_json(self) -> dict[str, Any]:
        return _with_folds(_delta(self.pos, self.op, self.wall, self.nonce, self.chunks, self.writer, self.batch,
                                  self.info), [f.to_json() for f in self.folds])

    def encode(self, delta: dict[str, Any] | None = None) -> bytes:
        """The stored bytes (``delta``: :meth:`delta_json` if the caller has it: packing a
        commit's chunks is most of encoding it)."""
        d = dict(self.delta_json() if delta is None else delta)
        d["v"] = FORMAT_VERSION
        if self.change is not None:
            d[CHANGE] = self.change
        else:
            d["state"] = self.state.to_json()
        return seal.encode(d, checksummed(self.state.features))

    @staticmethod
    def decode_delta(data: bytes, *, path: str, expanded: bool = False) -> dict[str, Any]:
        """:meth:`delta_json` of the entry in ``data`` (``expanded``: packed chunks unpacked), its
        state neither checked nor built (an index flush copies what entries did, and decoding
        their states was half a commit's CPU); CorruptMetadataError (naming ``path``) if not one."""
        try:
            return Entry.delta_of(seal.unseal(data), path=path, expanded=expanded)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise corrupt("journal entry", path, e, layout.stream_url(path)) from e

    @staticmethod
    def delta_of(stored: Any, *, path: str, expanded: bool = False) -> dict[str, Any]:
        """:meth:`decode_delta` of an entry already unsealed (``stored``: the JSON it holds)."""
        try:
            check_delta(stored)
            d = expand(stored)  # packed chunks are checked as they are unpacked
            check_object(ENTRY, d.get("v"), path)
            folds = check_folds(d.get("folds", []), len(d["chunks"]))
            if "packed" in stored:  # already the stored form: packing it again is most of the CPU
                return _as_stored(d if expanded else stored, folds)
            chunks = [Chunk.from_json(c) for c in d["chunks"]]
            return _with_folds(_delta(d["pos"], d["op"], d["wall"], d["nonce"], chunks, d.get("writer"),
                                      d.get("batch"), d.get("info", {})), folds)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise corrupt("journal entry", path, e, layout.stream_url(path)) from e

    @staticmethod
    def packed_delta(d: dict[str, Any]) -> dict[str, Any] | None:
        """:meth:`decode_delta` with ``expanded`` of a parsed change entry (:meth:`parse`) that
        :meth:`build` took, when it was stored packed (a v6 entry packs from :data:`PACK_MIN`
        chunks); None otherwise."""
        if CHANGE not in d or len(d["chunks"]) < PACK_MIN:
            return None
        return _as_stored(d, d.get("folds", []))

    @staticmethod
    def parse(data: bytes, *, path: str) -> dict[str, Any]:
        """The stored entry in ``data`` (chunks expanded, shape and version checked, its state or
        change not yet built); CorruptMetadataError (naming ``path``) if it is not one."""
        try:
            check_delta(raw := seal.unseal(data))
            d = expand(raw)  # packed chunks are checked as they are unpacked
            check_object(ENTRY, d.get("v"), path)
            if CHANGE in d:
                need(isinstance(d[CHANGE], dict) and isinstance(d[CHANGE].get("checkpoint"), list),
                     "the entry's change")
            else:
                check_entry(d)
            stored: dict[str, Any] = d
            return stored
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise corrupt("journal entry", path, e, layout.stream_url(path)) from e

    @staticmethod
    def checkpoint_of(d: dict[str, Any]) -> int:
        """The checkpoint position a parsed change entry's state names (where to rebuild from)."""
        pos: int = d[CHANGE]["checkpoint"][0]
        return pos

    @classmethod
    def decode(cls, data: bytes, *, path: str, base: StreamState | None = None) -> Entry:
        """The entry in ``data``; CorruptMetadataError (naming ``path``) if it is not one. An
        entry holding a change (format v6) needs ``base``, the state after the entry before it
        (:meth:`~pyspark_tstream.journal.entries.EntryLog.state_at`)."""
        return cls.build(cls.parse(data, path=path), path=path, base=base)

    @classmethod
    def build(cls, d: dict[str, Any], *, path: str, base: StreamState | None = None) -> Entry:
        """The entry of a parsed stored entry (:meth:`parse`); see :meth:`decode`."""
        try:
            chunks = [Chunk.from_json(c) for c in d["chunks"]]
            change = d.get(CHANGE)
            if change is not None:
                if base is None or base.pos != d["pos"] - 1:
                    raise CorruptMetadataError(
                        f"journal entry {path} holds a change (feature 'deltas') and is read with the "
                        "state before it; read it through the journal", path=path)
                state = apply(base, change)
                need(state.pos == d["pos"], "the change's position")
            else:
                state = StreamState.from_json(d["state"])
                need(state.pos == d["pos"], "the state's position")  # one changed digit: another entry's state
            if state.features:
                check_reader(state.features, d.get("v", 1), path)
            return cls(pos=d["pos"], op=d["op"], wall=d["wall"], nonce=d["nonce"],
                       writer=d.get("writer"), batch=d.get("batch"),
                       chunks=chunks, info=d.get("info", {}), state=state,
                       folds=[Fold.from_json(f) for f in check_folds(d.get("folds", []), len(chunks))], change=change)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise corrupt("journal entry", path, e, layout.stream_url(path)) from e


#: The keys :func:`_delta` writes, in its order.
_DELTA_KEYS = ("pos", "op", "wall", "nonce", "chunks", "packed", "writer", "batch", "info")


def _delta(pos: int, op: str, wall: int, nonce: str, chunks: Sequence[Chunk], writer: str | None, batch: Any,
           info: dict[str, Any]) -> dict[str, Any]:
    """What an entry did, as stored (in entries and in level-1 index nodes, byte for byte)."""
    d: dict[str, Any] = {"pos": pos, "op": op, "wall": wall, "nonce": nonce}
    if len(chunks) >= PACK_MIN:
        d["chunks"], d["packed"] = [], pack([c.to_json() for c in chunks])
    else:
        d["chunks"] = [c.to_json() for c in chunks]
    if writer is not None:
        d["writer"] = writer
        d["batch"] = batch
    if info:
        d["info"] = info
    return d


def _as_stored(src: dict[str, Any], folds: list[list[Any]]) -> dict[str, Any]:
    """The :func:`_delta` keys of a stored (or expanded) entry ``src``, with its ``folds``."""
    return _with_folds({k: src[k] for k in _DELTA_KEYS if k in src}, folds)


def _with_folds(d: dict[str, Any], folds: list[list[Any]]) -> dict[str, Any]:
    if folds:
        d["folds"] = folds
    return d




def change_of(data: bytes, pos: int, path: str) -> dict[str, Any]:
    """The stored entry ``pos`` in ``data`` as JSON, its version and position checked (its chunks
    neither unpacked nor checked: rebuilding a state needs only the changes)."""
    try:
        d = seal.unseal(data)
        need(isinstance(d, dict) and d.get("pos") == pos, f"the entry (position {pos})")
        check_object(ENTRY, d.get("v"), path)
        need(CHANGE not in d or isinstance(d[CHANGE], dict), "the entry's change")
        stored: dict[str, Any] = d
        return stored
    except (ValueError, TypeError) as e:
        raise corrupt("journal entry", path, e, layout.stream_url(path)) from e


def check_sealed(data: bytes, state: StreamState, path: str) -> None:
    """Refuse entry ``path`` (stored ``data``) without a checksum when its stream declares them
    (``state``: the state after it): a copy that skipped verification is never trusted."""
    try:
        seal.check_declared(data, checksummed(state.features))
    except ValueError as e:
        raise corrupt("journal entry", path, e, layout.stream_url(path)) from e


def encode_anchor(pos: int, sealed: bool) -> bytes:
    """The stored bytes of the anchor naming ``pos`` (``sealed``: the stream declares checksums;
    else the unsealed form of streams without the feature, byte for byte)."""
    return seal.seal({"pos": pos}) if sealed else json.dumps({"pos": pos}).encode()


def decode_anchor(data: bytes) -> int:
    """The position an anchor names (``ValueError``/``TypeError``/``KeyError`` if it is not one,
    or if its checksum does not match)."""
    pos = seal.unseal(data)["pos"]
    if isinstance(pos, int) and not isinstance(pos, bool) and pos >= 0:
        return pos
    raise TypeError(f"pos is {pos!r}, not a non-negative integer")


def at_position(delta: dict[str, Any], pos: int, path: str) -> dict[str, Any]:
    """``delta``, read from entry ``pos``'s object, if it names that position; else the entry
    was damaged (a changed digit), and taking it as another position's would drop its chunks
    from every plan without an error."""
    if delta.get("pos") != pos:
        e = ValueError(f"it names position {delta.get('pos')!r}, not {pos}")
        raise corrupt("journal entry", path, e, layout.stream_url(path))
    return delta


def stored_pos(data: bytes) -> int:
    """The position a stored entry names (-1 when it names none: decoding reports why)."""
    try:
        pos = json.loads(data).get("pos")
    except (ValueError, AttributeError):
        return -1
    return pos if is_int(pos) else -1
