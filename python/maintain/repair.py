"""``Stream.repair()`` / ``tstream repair``: rewrite what the journal determines, then verify again.

Writes only derived objects (head and anchor hints, index nodes, epoch records and history
chunks, sealed-map shards, macro-map buckets, compaction manifests, consumer-group copies) that
:func:`~pyspark_tstream.maintain.fsck.verify`
found missing or unreadable and could rebuild (its :class:`~pyspark_tstream.maintain.fixes.Fixes`);
never a journal entry's facts or a data chunk. One entry it may commit, with no facts: before a
macro-map bucket marked partial is written, an entry of op ``repair`` at this tstream's format, so a
tstream that predates the mark (format 5 or older, which would take the bucket as the whole
compacted history and skip the records left to the journal) refuses the stream instead of
misreading it (docs/protocol.md §12).
"""

from __future__ import annotations

from ..compaction.macro_rebuild import rewrite
from ..errors import CorruptMetadataError
from ..journal.entries import Entry, encode_anchor
from ..journal.features import checksummed
from ..journal.journal import Journal
from ..journal.op_info import RepairInfo
from ..journal.state import StreamState
from ..maps.sealed import SealedMap
from ..store import layout
from ..store.storage import Store
from ..timestamps import now_ms
from .fsck import Progress, Report, verify

#: The op of the one entry repair commits (no facts; see the module docstring).
REPAIR_OP = "repair"


def torn_newest(store: Store) -> int | None:
    """The position of the newest journal entry if it is unreadable and no head hint holds a
    copy of it (nothing else can rebuild it: every entry carries the whole state), else None."""
    journal = Journal(store)
    try:
        journal.head()
        return None
    except CorruptMetadataError:
        pass
    pos = journal.log.newest_stored()
    if pos is None:
        return None
    return None if sound(store, pos) else pos  # sound: the damage is elsewhere, and verify names it


def sound(store: Store, pos: int) -> bool:
    """Whether the entry object at ``pos`` parses as the entry of that position, on its own, and
    its checksum matches where it has one (its state is not built: an older damaged entry must
    not make a sound newer one look torn)."""
    rel = layout.entry(pos)
    try:
        return bool(Entry.parse(store.read(rel), path=store.uri(rel))["pos"] == pos)
    except (CorruptMetadataError, FileNotFoundError):
        return False


def _refuse_older_readers(store: Store, partial: list[tuple[int, int]]) -> str:
    """Commit an entry with no facts (op ``repair``) at this tstream's format before buckets
    ``partial`` are marked partial: the journal version is what an older tstream checks, and one
    that predates the mark would read the buckets as whole and skip records."""
    def build(state: StreamState, pos: int) -> Entry:
        return Entry(pos=pos, op=REPAIR_OP, wall=max(now_ms(), state.wall), state=state,
                     info=RepairInfo(tuple(partial)).encode())
    entry, _ = Journal(store).commit(build)
    pos = entry.pos if entry is not None else "?"
    return (f"journal entry {pos} committed (op {REPAIR_OP!r}, no records) before marking macro-map bucket(s) "
            f"{', '.join(f'{s}/{b}' for s, b in partial)} partial: a tstream older than the mark refuses the "
            "stream instead of skipping the records left to the journal")


def drop_torn_newest(store: Store, pos: int) -> str:
    """Set the torn entry at ``pos`` aside (``layout.damaged_entry``) and free its position: the
    entry before it becomes the newest. The commit it held is lost; its data files stay as
    orphans for ``vacuum(orphans=True)``."""
    rel = layout.entry(pos)
    if sound(store, pos):
        raise CorruptMetadataError(
            f"journal entry {store.uri(rel)} parses (and verifies, where it carries a checksum) as the entry of "
            f"position {pos}: it is not torn, and dropping "
            f"it would lose a sound commit; nothing was set aside (`tstream fsck {store.display_url}` names "
            "what is damaged)", path=store.uri(rel))
    store.write(layout.damaged_entry(pos), store.read(rel))
    store.delete([rel])
    return (f"journal entry {pos} was torn and no hint held a copy: set aside as {layout.damaged_entry(pos)}; "
            f"the commit it held is lost (its data files stay for vacuum(orphans=True); a writer that replays "
            f"that batch appends it again)")


def repair(store: Store, progress: Progress | None = None, *, drop_torn_entry: bool = False) -> Report:
    """Rewrite what the journal can rebuild; the report lists what is still wrong.

    A torn newest entry with no hint holding a copy stops every reader and writer, and nothing
    can rebuild it; ``drop_torn_entry`` sets it aside (losing the one commit it held), otherwise
    the error names that switch.
    """
    done: list[str] = []
    torn = torn_newest(store)
    if torn is not None:
        if not drop_torn_entry:
            raise CorruptMetadataError(
                f"journal entry {torn} of {store.display_url} is torn and no head hint holds a copy, so "
                "nothing can rebuild it and the stream cannot be read or written past it; `tstream repair "
                f"{store.display_url} --drop-torn-entry` (Stream.repair(drop_torn_entry=True)) sets it aside "
                "and loses the one commit it held", path=store.uri(layout.entry(torn)))
        done.append(drop_torn_newest(store, torn))
    report, fixes = verify(store, progress)
    newest = fixes.newest
    if newest is None:  # an entry the newest state is built from is lost: nothing derives from it
        report.repaired = done
        return report
    state = newest.state
    kinds = {p.kind for p in report.problems if p.repairable}
    if "entry" in kinds and fixes.head is not None:
        store.write(layout.entry(state.pos), fixes.head)
        done.append(f"journal entry {state.pos} restored from the head hint")
    if "head" in kinds or "entry" in kinds:  # the entry's own bytes when it is sound: the hint copies it
        store.write(layout.HEAD, store.read(layout.entry(state.pos)) if sound(store, state.pos) else newest.encode())
        done.append(f"head hint rewritten (position {state.pos})")
    if "anchor" in kinds:
        lowest = Journal(store).lowest_listed() if state.meta_gc_pos > 1 else 0
        live = state.meta_gc_pos > 1 and store.exists(layout.entry(state.meta_gc_pos))
        pos = state.meta_gc_pos if live else (lowest or 0)
        store.write(layout.ANCHOR, encode_anchor(pos, checksummed(state.features)))
        done.append(f"anchor rewritten (position {pos})")
    for pos, data in sorted(fixes.checkpoints.items()):
        store.write(layout.checkpoint(pos), data)
        done.append(f"checkpoint of journal position {pos} rebuilt")
    for (level, n), data in sorted(fixes.nodes.items()):
        store.write(layout.index_node(level, n), data)
        done.append(f"index node level {level} #{n} rebuilt")
    for ep, data in sorted(fixes.epochs.items()):
        store.write(layout.epoch_record(ep), data)
        done.append(f"epoch record {ep} rebuilt")
    for k, data in sorted(fixes.epoch_chunks.items()):
        store.write(layout.epoch_chunk(k), data)
        done.append(f"epoch history chunk {k} rebuilt")
    smap = SealedMap(store)
    for shard, plan in sorted(fixes.shards.items()):
        for v, content in sorted(plan.versions.items()):
            store.write(layout.sealed_version(shard, v), content.encode(checksummed(state.features)))
            done.append(f"sealed shard {shard} version {v} rewritten")
        store.delete([layout.sealed_head(shard)])  # a hint: latest() probes the versions without it
        if plan.records:
            smap.merge(plan.records, sealed=checksummed(state.features))
            done.append(f"sealed shard {shard}: {len(plan.records)} sealed segment record(s) restored")
        latest = smap.latest(shard)
        if latest.v >= 0:
            store.write(layout.sealed_head(shard), latest.encode(checksummed(state.features)))
        done.append(f"sealed shard {shard} head hint rewritten")
    partial = sorted(k for k, want in fixes.macros.items() if k in want.partial)
    if partial:
        done.append(_refuse_older_readers(store, partial))
    for (seg, bucket), want in sorted(fixes.macros.items(), key=lambda kv: kv[0]):
        done += rewrite(store, state, seg, bucket, want)
    for rel, manifest in sorted(fixes.manifests.items()):
        store.write(rel, manifest.encode(checksummed(state.features)))
        done.append(f"compaction manifest {rel} rebuilt from the journal ({len(manifest.replaced)} "
                    "replaced file(s) named)")
    for rel, data in sorted(fixes.groups.items()):
        store.write(rel, data)
        done.append(f"consumer-group object {rel} rewritten")
    after, _ = verify(store)
    after.repaired = done
    return after
