"""``Stream.repair()`` / ``tstream repair``: rewrite what the journal determines, then verify again.

Writes only derived objects (head and anchor hints, index nodes, epoch records and history
chunks, sealed-map shards, macro-map buckets, compaction manifests, consumer-group copies) that :func:`~pyspark_tstream.maintain.fsck.verify`
found missing or unreadable and could rebuild; never a journal entry's facts or a data chunk.
"""

from __future__ import annotations

import json

from ..compaction.macro_rebuild import rewrite
from ..epochs.scaling import epoch_chunk_path, epoch_path
from ..journal.entries import ANCHOR, HEAD, Entry, entry_path
from ..journal.journal import Journal
from ..journal.timeindex import node_path
from ..maps.sealed import SealedMap, head_path, version_path
from ..store.storage import Store
from .fsck import Progress, Report, verify


def repair(store: Store, progress: Progress | None = None) -> Report:
    """Rewrite what the journal can rebuild; the report lists what is still wrong."""
    report, fixes = verify(store, progress)
    newest: Entry = fixes["newest"]
    state = newest.state
    done: list[str] = []
    kinds = {p.kind for p in report.problems if p.repairable}
    if "entry" in kinds and fixes["head"] is not None:
        store.write(entry_path(state.pos), fixes["head"])
        done.append(f"journal entry {state.pos} restored from the head hint")
    if "head" in kinds or "entry" in kinds:
        store.write(HEAD, newest.encode())
        done.append(f"head hint rewritten (position {state.pos})")
    if "anchor" in kinds:
        lowest = Journal(store)._lowest_listed() if state.meta_gc_pos > 1 else 0
        pos = state.meta_gc_pos if state.meta_gc_pos > 1 and store.exists(entry_path(state.meta_gc_pos)) else (lowest or 0)
        store.write(ANCHOR, json.dumps({"pos": pos}).encode())
        done.append(f"anchor rewritten (position {pos})")
    for (level, n), data in sorted(fixes["nodes"].items()):
        store.write(node_path(level, n), data)
        done.append(f"index node level {level} #{n} rebuilt")
    for ep, data in sorted(fixes["epochs"].items()):
        store.write(epoch_path(ep), data)
        done.append(f"epoch record {ep} rebuilt")
    for k, data in sorted(fixes["epoch_chunks"].items()):
        store.write(epoch_chunk_path(k), data)
        done.append(f"epoch history chunk {k} rebuilt")
    smap = SealedMap(store)
    for shard, plan in sorted(fixes["shards"].items()):
        for v, content in sorted(plan["versions"].items()):
            store.write(version_path(shard, v), json.dumps(content, separators=(",", ":")).encode())
            done.append(f"sealed shard {shard} version {v} rewritten")
        store.delete([head_path(shard)])  # a hint: latest() probes the versions without it
        if plan["records"]:
            smap.merge(plan["records"])
            done.append(f"sealed shard {shard}: {len(plan['records'])} sealed segment record(s) restored")
        latest = smap.latest(shard)
        if latest["v"] >= 0:
            store.write(head_path(shard), json.dumps(latest, separators=(",", ":")).encode())
        done.append(f"sealed shard {shard} head hint rewritten")
    for (seg, bucket), want in sorted(fixes["macros"].items(), key=lambda kv: kv[0]):
        done += rewrite(store, state, seg, bucket, want)
    for rel, data in sorted(fixes["manifests"].items()):
        store.write(rel, data)
        done.append(f"compaction manifest {rel} rebuilt from the journal ({len(json.loads(data)['replaced'])} "
                    "replaced file(s) named)")
    for rel, data in sorted(fixes["groups"].items()):
        store.write(rel, data)
        done.append(f"consumer-group object {rel} rewritten")
    after, _ = verify(store)
    after.repaired = done
    return after
