"""Rebuilding metadata the journal determines, byte for byte as the committer wrote it.

Sealed-map records and epoch records are derived from a scale's journal entry and the entry
before it; time-index node counts from the state. ``tstream fsck`` uses these to say whether a
lost object can be rebuilt, and ``tstream repair`` writes what they return.
"""

from __future__ import annotations

from ..epochs.scaling import epoch_record_bytes
from ..journal.entries import Entry
from ..journal.features import checksummed
from ..journal.op_info import ScaleInfo
from ..journal.scale_records import EpochRecord, SealedRecord
from ..journal.state import StreamState
from ..journal.timeindex import FANOUT


def rebuild_sealed(ids: list[int], entries: dict[int, Entry]) -> list[SealedRecord] | None:
    """Sealed records exactly as the scale made them, from its entry and the one before."""
    out = []
    scales = [(e, ScaleInfo.decode(e.info)) for e in entries.values() if e.op == "scale"]
    for sid in ids:
        scale, info = next(((e, i) for e, i in scales if sid in i.sealed), (None, None))
        if scale is None or info is None or scale.pos - 1 not in entries:
            return None
        s = entries[scale.pos - 1].state.segment(sid)
        if s is None:
            return None
        created = [c for c in scale.state.segments if c.id in info.created]
        out.append(SealedRecord.of(s, scale.state.epoch, scale.pos, created))
    return out


def node_counts(state: StreamState) -> list[int]:
    """How many nodes of each level (1..) were written: c(L) = FANOUT*c(L+1) + len(index[L])."""
    counts: list[int] = []
    above = 0
    for level in range(len(state.index) - 1, 0, -1):
        above = FANOUT * above + len(state.index[level])
        counts.append(above)
    counts.reverse()
    return counts


def rebuild_epoch(ep: int, entries: dict[int, Entry]) -> bytes | None:
    """The epoch record exactly as the scale wrote it, from the scale entry and the one before."""
    scale = next((e for e in entries.values() if e.op == "scale" and e.state.epoch == ep), None)
    if scale is None or scale.pos - 1 not in entries:
        return None
    before = entries[scale.pos - 1].state
    info = ScaleInfo.decode(scale.info)
    sealed_ids, created = list(info.sealed), list(info.created)
    sealed = [s for s in before.segments if s.id in sealed_ids]
    new = {s.id: s for s in scale.state.segments}
    if len(sealed) != len(sealed_ids) or any(c not in new for c in created):
        return None
    sealed.sort(key=lambda s: sealed_ids.index(s.id))
    return epoch_record_bytes(EpochRecord.of(scale.state, scale.pos, sealed, [new[c] for c in created]),
                              checksummed(scale.state.features))
