"""Historical bugs, put back for one run: the harness proves its power by finding each.

Each switch replaces the fixed code with what it was before its fix, for the duration of a
:func:`switched` block (``Profile.switch`` names one; :func:`~.world.simulate` applies it). The
tests in ``tests/test_simulation_switches.py`` pin that the simulation finds every one within
the number of seeds ``docs/operations.md`` states.

* ``old-abort``: the sink abort read the newest state only and deleted the files of a
  published group-commit request another writer then folded (``write/requests.abort_keeps``).
* ``old-adopt``: a compaction adopted, as parts, chunks a crashed compaction had listed as they
  are in its map version; their manifests never existed, and vacuum deleted "what the
  compaction replaced": the chunks themselves (``compaction.compact.adopt``, ``gc._unlisted``).
* ``old-orphans``: orphan cleanup kept no file of a published group-commit request still
  waiting for its fold (``api.truncate``'s ``pending_chunks`` and ``named_since``).
* ``old-aged``: orphan cleanup asked the age of each listed file without allowing for another
  vacuum deleting it in between: "no such object" failed the vacuum (``gc.aged``).
* ``old-listing``: ``memory://`` listed through fsspec's ``ls``, which snapshots the keys and
  then looks each up again, raising for one another thread deleted in between (the store's
  ``memory_list``). The simulation switches threads only at store calls, so this listing
  carries a scheduling point of its own between the snapshot and the lookups, where the real
  one let any other thread run.
* ``old-settled``: a published request that another commit of its (writer, batch) settled lost
  its chunk files with the no-op (``GroupCommit._settled`` kept none), though it stayed
  foldable for its window; a fold after the writer expired named the deleted files. Both ways
  a commit meets it are put back: its attempt built nothing, or an entry of others' requests.
* ``planted-floor`` (a bug planted, never shipped: it proves the reader's tick check): a
  commit floors records above the writer's lane alone, not above the tick
  (``write.commit.floor_after``), so records committed late land at or below a tick readers
  were already given.
* ``planted-expired`` (planted, never shipped: it proves the declared-writer check of
  :mod:`.history`): expiry drops a declared writer silent past the retention like any other
  (``journal.expiry.expired`` and ``_due`` without their ``declared`` exception).
* ``planted-conflict`` (planted: it proves the ``backends`` profile's translation check): the
  Azure and GCS backends know a lost conditional create only as ``FileExistsError`` (their
  ``is_precondition_failed`` without the 409 ``BlobAlreadyExists``/412 codes), so a create
  that lost fails as a permanent store error instead of reading "exists".
* ``old-unfenced``: no orphan fence (``store/fence.py``): a sink driver that stalled past the
  orphan grace committed its tasks' files though orphan cleanup had deleted them meanwhile.
* ``old-unowned``: the second way alone, which outlived the first's fix: an entry of others'
  requests without the committer's settled own kept none of its files
  (``GroupCommit._created_without_own``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyspark_tstream.api.truncate as truncate_mod
import pyspark_tstream.compaction.compact as compact_mod
import pyspark_tstream.compaction.gc as gc_mod
import pyspark_tstream.journal.expiry as expiry_mod
import pyspark_tstream.maintain.retention as retention_mod
import pyspark_tstream.write.commit as commit_mod
import pyspark_tstream.write.requests as requests_mod
from pyspark_tstream.journal.compaction_state import CompactPart
from pyspark_tstream.journal.entries import Entry
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.journal.state import StreamState
from pyspark_tstream.maps.macromap import Macro
from pyspark_tstream.store.backends.azure import AzureBackend
from pyspark_tstream.store.backends.gcs import GCSBackend
from pyspark_tstream.store.fence import Fence
from pyspark_tstream.store.storage import Store
from pyspark_tstream.write.group import Committed, GroupCommit, Part

from .scheduler import Scheduler

Patch = tuple[object, str, object]


def _old_abort_keeps(store: object, journal: Journal, writer: str, batch: object, paths: object) -> str | None:
    """The sink abort's check before the fix: the newest state only, no look at published requests."""
    w = journal.head().state.writers.get(writer)
    return "the journal has that batch" if w is not None and w.find(batch) is not None else None


def _old_adopt(job: Any, seg: int, live: Sequence[Macro], upto: int) -> list[Macro]:
    """``adopt`` before the fix: every map entry beyond the compacted ``_seq``, chunks too."""
    adopted = [m for m in live if m.end > upto]
    for m in adopted:
        job.parts.append(compact_mod._part(seg, m, adopted=True))
        job.counts["adopted"] += 1
    return adopted


def _old_unlisted(store: Store, journal: Journal, state: StreamState,
                  parts: list[CompactPart]) -> dict[str, list[str]]:
    """``gc._unlisted`` before the fix: a part's own file may be among what it "replaced"."""
    if not parts:
        return {}
    named = gc_mod.replaced_by(journal.deltas(state, state.head_pos, state.pos), {p.macro for p in parts})
    return {p.macro: named[p.macro] for p in parts
            if named.get(p.macro) and gc_mod.holds_its_records(store, p)}


def _old_aged(store: Store, rel: str, now: int, grace_ms: int) -> bool:
    """``gc.aged`` before the fix: a file gone since the listing fails the vacuum."""
    return now - store.modified_ms(rel) >= grace_ms


def _old_created_without_own(self: GroupCommit, own: Part, entry: Entry) -> Committed:
    """``GroupCommit._created_without_own`` before the fix: a settled request keeps no file."""
    return Committed(self._folded_before(own, entry.state), True)


def _expired_declared_too(state: StreamState, now: int) -> list[str]:
    """``expiry.expired`` with no exception for declared writers (planted)."""
    retention, lease = state.config.writer_retention_ms, state.config.writer_lease_ms
    return [wid for wid, w in state.writers.items()
            if now - w.wall > retention and not (w.live and now - w.wall <= lease)]


def _due_declared_too(wid: str, w: Any, config: tuple[int, int, frozenset[str]]) -> tuple[float, float]:
    """``expiry._due`` with no exception for declared writers (planted)."""
    return _saved_due(wid, w, (config[0], config[1], frozenset()))


_saved_due = expiry_mod._due


def _old_listing(sched: Scheduler) -> Callable[[Any, str], list[str]]:
    def memory_list(fs: Any, path: str) -> list[str]:
        """fsspec's ``MemoryFileSystem.ls`` as it was used: a snapshot of the keys, a point where
        another thread may run, then a lookup of each (``KeyError`` for one deleted meanwhile)."""
        own = fs._strip_protocol(path).rstrip("/")
        starter = own + "/"
        keys = [k for k in tuple(fs.store) if k.startswith(starter)]
        sched.yield_point("ls", own)
        names = {starter + k[len(starter):].split("/", 1)[0] for k in keys if fs.store[k] is not None}
        names |= {starter + d[len(starter):].split("/", 1)[0] for d in tuple(fs.pseudo_dirs)
                  if d.startswith(starter) and len(d) > len(starter)}
        return sorted(names)
    return memory_list


def _store_modules_with(name: str) -> list[object]:
    """Every loaded store module binding ``name`` (the store's layout of modules may change)."""
    return [m for key, m in sorted(sys.modules.items())
            if key.startswith("pyspark_tstream.store") and m is not None and hasattr(m, name)]


def _patches(switch: str, sched: Scheduler) -> list[Patch]:
    if switch == "old-abort":
        return [(requests_mod, "abort_keeps", _old_abort_keeps)]
    if switch == "old-adopt":
        return [(compact_mod, "adopt", _old_adopt), (gc_mod, "_unlisted", _old_unlisted)]
    if switch == "old-orphans":
        return [(truncate_mod, "pending_chunks", lambda store: set()),
                (truncate_mod, "named_since", lambda journal, before, after: set())]
    if switch == "old-aged":
        return [(gc_mod, "aged", _old_aged), (retention_mod, "aged", _old_aged)]
    if switch == "old-settled":
        return [(GroupCommit, "_settled", staticmethod(lambda own: frozenset()))]
    if switch == "planted-floor":
        return [(commit_mod, "floor_after", lambda lane, tick: lane + 1)]
    if switch == "old-unowned":
        return [(GroupCommit, "_created_without_own", _old_created_without_own)]
    if switch == "planted-expired":
        return [(expiry_mod, "expired", _expired_declared_too), (expiry_mod, "_due", _due_declared_too)]
    if switch == "planted-conflict":
        only_exists = lambda self, exc: isinstance(exc, FileExistsError)  # noqa: E731
        return [(AzureBackend, "is_precondition_failed", only_exists),
                (GCSBackend, "is_precondition_failed", only_exists)]
    if switch == "old-unfenced":
        return [(Fence, "check", lambda self, paths: None)]
    if switch == "old-listing":
        listing = _old_listing(sched)
        mods = _store_modules_with("memory_list")
        assert mods, "no store module binds memory_list: the old-listing switch needs updating"
        return [(m, "memory_list", listing) for m in mods]
    raise ValueError(f"unknown switch {switch!r}; known: {', '.join(SWITCHES)}")


#: The switches :func:`switched` knows.
SWITCHES = ("old-abort", "old-adopt", "old-orphans", "old-aged", "old-listing", "old-settled", "old-unowned",
            "old-unfenced", "planted-floor", "planted-expired", "planted-conflict")


@contextmanager
def switched(switch: str, sched: Scheduler) -> Iterator[None]:
    """The old code of ``switch`` in place for the block (nothing for an empty name)."""
    patches = _patches(switch, sched) if switch else []
    # a class's own attribute as stored (a staticmethod stays one when it is put back)
    saved = [(owner, name, vars(owner)[name] if isinstance(owner, type) and name in vars(owner)
              else getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
