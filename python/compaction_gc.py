"""Deleting what compactions made obsolete: replaced files, truncated macro-chunks, orphan manifests.

Every compaction writes, next to its macro-chunk, a manifest naming the files it replaces
(``_tstream/compact/<id>.json``). Replaced files are deleted only from manifests of compactions
committed longer ago than the grace period (:func:`collect_replaced`), so readers that planned
before keep reading them; deleting twice is harmless, so a crash only repeats work. Manifests
that no committed or adopted compaction names (a compactor killed before publishing) are
removed by orphan cleanup (:func:`orphan_manifests`) once older than the grace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from .entries import META
from .journal import Journal
from .macromap import ROOT as MACRO_ROOT
from .macromap import MacroMap
from .state import StreamState
from .storage import Store
from .timeindex import COL_WALL

log = logging.getLogger("pyspark_tstream")

MANIFESTS = f"{META}/compact"


def manifest_path(macro_path: str) -> str:
    """The manifest of the compaction that wrote macro-chunk ``macro_path``."""
    return f"{MANIFESTS}/{macro_path.rsplit('/', 1)[-1].removesuffix('.parquet')}.json"


def discard_unpublished(store: Store, paths: Sequence[str]) -> None:
    """Delete files this compaction wrote and never published (best effort)."""
    try:
        store.delete(list(paths) + [manifest_path(p) for p in paths])
    except OSError as e:
        log.warning("tstream: could not delete unpublished macro-chunks %s (%s); orphan cleanup "
                    "(`tstream vacuum --orphans`) removes them", list(paths), e)




def gc_position(journal: Journal, state: StreamState, now: int, grace_ms: int) -> int:
    """First journal position newer than ``grace_ms``: compactions below it are old enough."""
    probe = StreamState.from_json({**state.to_json(), "head_pos": state.gc_pos})
    try:
        return journal.search(probe, COL_WALL, now - grace_ms)
    except Exception:  # index nodes below the head already collected: nothing older is known
        return state.gc_pos


def collect_replaced(store: Store, journal: Journal, state: StreamState, upto: int) -> tuple[int, int]:
    """Delete files replaced by compactions at positions below ``upto``: ``(files, new gc pos)``.

    Reads the deltas from the last run (one batched read per ``FANOUT`` positions) and one
    manifest per compaction part; deleting twice is harmless, so a crash only repeats work.
    The caller commits the returned position (``state.compaction["gc"]``).
    """
    first = max(int((state.compaction or {}).get("gc", 0)), state.gc_pos)
    upto = min(upto, state.pos + 1)
    if upto <= first:
        return 0, first
    manifests = [p["manifest"] for d in journal.deltas(state, first, upto - 1, truncated=True)
                 if d.op == "compact" for p in d.info.get("parts", []) if p.get("manifest")]
    files = 0
    for rel in manifests:
        try:
            replaced = json.loads(store.read(rel))["replaced"]
        except FileNotFoundError:
            continue  # deleted by an earlier run that crashed before committing its position
        store.delete(replaced)
        files += len(replaced)
    store.delete(manifests)
    return files, upto


def macros_created(deltas: Sequence[Any]) -> list[str]:
    """Macro-chunks (and their manifests) made by the compactions among ``deltas``."""
    return [x for d in deltas if d.op == "compact" for p in d.info.get("parts", []) if p.get("macro")
            for x in (p["macro"], p["manifest"])]


def live_macros(store: Store, seg_number: int) -> set[str]:
    """Every macro-chunk the map lists for a segment (lists its buckets: orphan cleanup only)."""
    mm = MacroMap(store)
    out: set[str] = set()
    for name in store.list(f"{MACRO_ROOT}/{seg_number}"):
        if name.isdigit():
            out.update(m.path for m in mm.latest(seg_number, int(name)).macros)
    return out


def orphan_manifests(store: Store, uncollected: Sequence[Any], live: set[str], now: int, grace_ms: int) -> list[str]:
    """Manifests no compaction still needs, older than ``grace_ms`` (orphan cleanup lists them).

    A manifest is needed while its compaction's commit is not yet collected (``uncollected``:
    the journal deltas from the replaced-files GC position on; the manifest names the files to
    delete) or while its macro-chunk is in the map (``live``: a published, uncommitted
    compaction is adopted with its manifest). What is left was written by a compactor that died
    before publishing: its macro-chunk is an orphan data file, and this its orphan manifest.
    """
    named = {p["manifest"] for d in uncollected if d.op == "compact"
             for p in d.info.get("parts", []) if p.get("manifest")}
    named |= {manifest_path(m) for m in live}
    out = []
    for name in store.list(MANIFESTS):
        rel = f"{MANIFESTS}/{name}"
        if name.endswith(".json") and rel not in named and now - store.modified_ms(rel) >= grace_ms:
            out.append(rel)
    return out
