"""Group commit's requests and folds: what a writer publishes, and how one entry commits many.

One job: the fold. A :class:`Published` request is what another writer reads of a commit that
lost its race (immutable, at :func:`~pyspark_tstream.store.layout.commit_request`); a
:class:`Part` is one request in a fold; :func:`fold` builds the entry that commits the parts in
order on one state, exactly as that many sequential commits would, leaving out what cannot apply
or may not be folded at that position (docs/design.md §7.27; the protocol that races, waits
and leads is :mod:`~pyspark_tstream.write.group`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..codec import ANY, BOOL, INT, STR, DictRecord, opt, rec, record, stored, tuple_of
from ..errors import corrupt
from ..journal import seal
from ..journal.entries import Entry, Fold
from ..journal.features import WRITES, check_object
from ..journal.operations import Operation
from ..journal.shapes import is_int, need
from ..journal.state import FOLD_WINDOW, FoldedAt, StreamState
from ..schema import decode_schema, encode_schema, reconcile
from ..store import layout
from .commit import CommitInfo, CommitIntent, CommitRequest, CountRaised
from .spec import ChunkInfo, fits

#: Format of a published request object.
REQUEST = "commit request"
REQUEST_VERSION = WRITES[REQUEST]
#: At most this many requests go into one entry (bounds an entry's size).
FOLD_MAX = 256


def new_id() -> str:
    """A request id: 64 random bits, hex (unique within any fold window)."""
    return uuid.uuid4().hex[:16]


def publishable(req: CommitRequest) -> bool:
    """Whether ``req`` may be folded by another writer: a plain data append (ticks, session
    closes and schema merges commit on their own)."""
    want = req.intent
    return (want.op == "append" and bool(req.chunks) and want.heartbeat is None and not want.close
            and not want.merge_schema)


@record
@dataclass(frozen=True)
class Published(DictRecord):
    """A commit request as another writer reads it: what ``CommitRequest`` needs, and its slot
    window. Stored after its format version ``v``, in field order."""

    rid: str = stored(STR)
    base: int = stored(INT)
    now: int = stored(INT)
    writer: str | None = stored(opt(STR), default=None)
    batch: Any = stored(ANY, default=None)
    session: bool = stored(BOOL, default=False)
    monotonic: bool = stored(BOOL, default=False)
    schema: str = stored(STR, default="")  # the data's user schema, encoded ("" none)
    # last, as it was always stored (so after the defaulted fields, and required all the same)
    chunks: tuple[ChunkInfo, ...] = stored(tuple_of(rec(ChunkInfo)), default=(), required=True)

    @property
    def path(self) -> str:
        return layout.commit_request(self.base, self.rid)

    @classmethod
    def of(cls, rid: str, base: int, req: CommitRequest) -> Published:
        """``req`` as published for others to fold; its files are checked first when its writer
        stalled past the orphan fence (:meth:`CommitRequest.check_files`): a fold names them."""
        req.check_files()
        want = req.intent
        return cls(rid=rid, base=base, now=req.now, chunks=tuple(req.chunks), writer=want.writer_id,
                   batch=want.batch_id, session=want.session, monotonic=want.monotonic,
                   schema=encode_schema(want.schema) if want.schema is not None else "")

    def request(self, count_raised: CountRaised | None) -> CommitRequest:
        intent = CommitIntent(writer_id=self.writer, batch_id=self.batch, session=self.session,
                              monotonic=self.monotonic, schema=_schema(self.schema))
        return CommitRequest(chunks=list(self.chunks), intent=intent, now=self.now, count_raised=count_raised)

    def encode(self, sealed: bool = False) -> bytes:
        """The stored bytes (``sealed``: the stream declares checksums)."""
        return seal.encode({"v": REQUEST_VERSION, **self.to_json()}, sealed)

    @classmethod
    def decode(cls, data: bytes, path: str) -> Published:
        """The request in ``data``; CorruptMetadataError naming ``path`` if it is not one."""
        try:
            d = seal.unseal(data)
            need(isinstance(d, dict) and is_int(d.get("v")), "the request's version")
            check_object(REQUEST, d["v"], path)  # a newer one's fields may mean something else
            return cls.checked(d, "the request")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise corrupt("commit request", path, e, layout.stream_url(path)) from e


@dataclass
class Part:
    """One request in a fold: the builder's own (first) or a published one."""

    rid: str
    req: CommitRequest
    base: int = -1  # the base it was published with; -1 while unpublished
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def published(self) -> bool:
        return self.base >= 0

    def window_has(self, pos: int) -> bool:
        """Whether this request may be folded at ``pos`` (always, while unpublished)."""
        return not self.published or self.base < pos <= self.base + FOLD_WINDOW


def _schema(encoded: str) -> pa.Schema | None:
    """A published request's schema ("" none; :func:`decode_schema` caches by text: a
    contended writer rebuilds every pending request at each attempt)."""
    return decode_schema(encoded) if encoded else None


def applicable(req: CommitRequest, state: StreamState) -> bool:
    """Whether ``req`` applies on ``state`` without error: its segments are active and its schema fits."""
    if not all(fits(c, state.segment(c.seg)) for c in req.chunks):
        return False
    if req.intent.schema is not None and state.schema:
        try:
            reconcile(_schema(state.schema), req.intent.schema, merge=False)
        except Exception:  # noqa: BLE001 - a mismatch of any kind: its own writer reports it
            return False
    return True


def fold(parts: Sequence[Part], state: StreamState, pos: int) -> Entry | None:
    """The entry at ``pos`` that commits ``parts`` in order on ``state`` (a private copy), as
    that many sequential commits would; None if none needs committing.

    ``parts[0]`` is the builder's own request: its errors (a sealed segment, a schema that does
    not fit) propagate. Others that cannot apply, are out of their window or were folded
    already are left out. An entry of the builder's own unpublished request alone is an
    ordinary entry; any other records its parts in ``folds`` and the published ids in
    ``state.folded``.
    """
    built: list[tuple[Part, Entry]] = []
    for i, part in enumerate(parts[:FOLD_MAX]):
        if not part.window_has(pos) or state.was_folded(part.rid) is not None:
            continue
        if i > 0 and not applicable(part.req, state):
            continue
        entry = part.req(state, pos)
        if entry is not None:
            built.append((part, entry))
    if not built:
        return None
    if len(built) == 1 and not built[0][0].published and built[0][0] is parts[0]:
        return built[0][1]
    ids = [p.rid for p, _ in built if p.published]
    state.folded = [f for f in state.folded if f.pos > pos - FOLD_WINDOW] + ([FoldedAt(pos, tuple(ids))] if ids else [])
    info = CommitInfo.fold([CommitInfo.decode(e.info) for _, e in built])
    first = built[0][1]
    return Entry(pos=pos, op=Operation.APPEND, wall=max(e.wall for _, e in built), state=state, writer=first.writer,
                 batch=first.batch, chunks=[c for _, e in built for c in e.chunks], info=info.encode(),
                 folds=[Fold(p.rid, e.writer, e.batch, len(e.chunks), e.info) for p, e in built])
