"""Where the newest checkpoint of the stream state is, and how much was committed since (format v6).

One job: the ``checkpoint`` field of :class:`~pyspark_tstream.journal.state.StreamState`, stored
``[pos, bytes, since, prev]``. A v6 journal entry holds only what its commit changed
(:mod:`~pyspark_tstream.journal.delta`); the whole state is written every so often as a
checkpoint (:mod:`~pyspark_tstream.journal.checkpoint`). The mark rides in every state, so the
newest entry (and the head hint that copies it) names the checkpoint to rebuild from: O(1) store
calls to find it. ``prev`` is the checkpoint before it, kept (with the entries after it) so a
lost newest checkpoint can be rebuilt from the older one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..codec import NAT, ListRecord, record, stored


@record
@dataclass(frozen=True)
class CheckpointMark(ListRecord):
    """The newest checkpoint at or before a state: position ``pos`` (the state after entry
    ``pos`` is stored whole there), its size ``bytes``, the stored bytes of the entries after
    it up to this state (``since``), and the checkpoint before it (``prev``); stored as the
    list of the four, each a non-negative integer."""

    pos: int = stored(NAT)
    bytes: int = stored(NAT, default=0, required=True)
    since: int = stored(NAT, default=0, required=True)
    prev: int = stored(NAT, default=0, required=True)
