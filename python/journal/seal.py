"""Metadata checksums: the stored bytes of a metadata object, sealed with a digest of its content.

One job: the bytes boundary of every metadata object kind (journal entries and the head, checkpoints,
index nodes, epoch records and history chunks, sealed-map shards, consumer-group versions,
macro-map buckets, compaction manifests, group-commit requests, first-write markers). A stream
that declares the writer feature ``checksums`` (:data:`FEATURE`, :mod:`.features`) writes each
object as its compact JSON with one more key, last: ``"crc":"<8 hex digits>"``, the CRC-32 (zlib)
of the bytes the object would have without that key (the same bytes with ``,"crc":"…"`` cut out).
Verifying needs no re-encoding: the digest of the bytes before the key and the closing brace.

:func:`unseal` verifies an object that carries the key and raises ``ValueError`` on a mismatch (or
on a ``"crc"`` key that is not a seal), which every decoder already turns into the one
:class:`~pyspark_tstream.errors.CorruptMetadataError` naming the object and ``tstream repair``.
An object without the key is read as before (streams without the feature); a decoder whose
stream declares the feature refuses it (``required``). docs/protocol.md §16 has the rules.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

#: The feature a stream declares (under ``writer``) when every object it writes is sealed.
FEATURE = "checksums"
#: The key of the digest, always the last of the object's keys.
KEY = "crc"

_HEAD = b',"' + KEY.encode() + b'":"'
_TAIL_LEN = len(_HEAD) + 8 + 2  # the head, 8 hex digits, the quote and the closing brace
_HEX = frozenset(b"0123456789abcdef")


def seal(doc: Mapping[str, Any]) -> bytes:
    """The stored bytes of metadata object ``doc`` (a non-empty JSON object without the key
    :data:`KEY`): its compact JSON with the digest added as the last key."""
    body = json.dumps(doc, separators=(",", ":")).encode()
    return b"%s%s%08x\"}" % (body[:-1], _HEAD, zlib.crc32(body))


def encode(doc: Mapping[str, Any], sealed: bool) -> bytes:
    """``doc``'s stored bytes: :func:`seal` ed when ``sealed``, else its compact JSON (the format
    of streams without the feature, byte for byte)."""
    return seal(doc) if sealed else json.dumps(doc, separators=(",", ":")).encode()


def is_sealed(data: bytes) -> bool:
    """Whether ``data`` ends with a seal (its digest not checked: :func:`unseal` does)."""
    n = len(data)
    return (n > _TAIL_LEN and data[n - _TAIL_LEN:n - 10] == _HEAD and data[-2:] == b'"}'
            and all(c in _HEX for c in data[n - 10:n - 2]))


def verify(data: bytes) -> None:
    """Check the seal of ``data`` (which :func:`is_sealed`): ``ValueError`` naming both digests
    if the content does not match it."""
    view = memoryview(data)
    got = zlib.crc32(b"}", zlib.crc32(view[:len(data) - _TAIL_LEN]))
    stored = int(bytes(view[len(data) - 10:len(data) - 2]), 16)
    if got != stored:
        raise ValueError(f"its checksum does not match its content (crc {stored:08x} stored, {got:08x} "
                         "computed): it was damaged or edited after it was written")


def check_declared(data: bytes, required: bool) -> None:
    """``ValueError`` if ``required`` (its stream declares :data:`FEATURE`) and ``data`` has no
    seal: an object whose stream declares checksums is trusted only with one (a decoder that
    learns the stream's features from the object itself checks this after decoding it)."""
    if required and not is_sealed(data):
        raise ValueError(f"it has no checksum (key {KEY!r}) though its stream declares the feature "
                         f"{FEATURE!r}: it was edited, or written by a build without the feature")


def unseal(data: bytes, *, required: bool = False) -> Any:
    """The JSON value ``data`` holds, its seal verified and removed. ``ValueError`` if the seal
    does not match, if the object has a :data:`KEY` that is no seal, or (``required``: its stream
    declares :data:`FEATURE`) if it has none; invalid JSON raises ``ValueError`` too."""
    if is_sealed(data):
        verify(data)
        doc = json.loads(data)
        del doc[KEY]
        return doc
    check_declared(data, required)
    doc = json.loads(data)
    if isinstance(doc, dict) and KEY in doc:
        raise ValueError(f"its checksum (key {KEY!r}) is malformed: it was damaged or edited")
    return doc
