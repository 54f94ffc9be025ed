"""Shape checks of metadata objects before they are trusted: a wrong shape raises ``TypeError``.

The decoder that calls them turns that into a ``CorruptMetadataError`` (``errors.corrupt``).

A wrong-shaped object (truncated, foreign, hand-edited) must fail where it is decoded, naming the
object and a remedy that exists, never as a ``KeyError``/``TypeError`` or a wrong answer later.
"""

from __future__ import annotations

from typing import Any

from ..codec import is_int as is_int
from ..codec import need as need
from .chunk import Chunk
from .state import StreamState


def check_chunk(c: Any) -> None:
    """A chunk reference (its fields: :class:`~pyspark_tstream.journal.chunk.Chunk`)."""
    Chunk.check_json(c, "a chunk")


def check_delta(d: Any) -> None:
    """Shape of what a journal entry did (position, op, chunks, info), without its state. A
    packed entry's chunks (``packed``) are checked as they are unpacked
    (:func:`~pyspark_tstream.journal.packing.unpack`): check the stored entry, then expand it."""
    need(isinstance(d, dict), "the entry")
    for k in ("pos", "wall"):
        need(is_int(d.get(k)), k)
    need(isinstance(d.get("op"), str) and isinstance(d.get("nonce"), str), "op/nonce")
    need(isinstance(d.get("chunks"), list), "chunks")
    if not all(map(Chunk.json_ok, d["chunks"])):  # one C-level pass; then name the culprit
        for c in d["chunks"]:
            check_chunk(c)
    need(isinstance(d.get("info", {}), dict), "info")


def check_entry(d: Any) -> None:
    """Shape of a journal entry (and its state) before it is trusted: a wrong-shaped object
    must fail here, not as a wrong answer later."""
    check_delta(d)
    StreamState.check_json(d.get("state"), "state")
