"""What the journal's history says about writer expiry (``writerRetentionMs``), checked at a run's end.

A commit drops a writer silent longer than the retention (``journal/expiry.py``), and a replay
of one of its batches after that is not recognised and appends again: the documented
consequence. :func:`commits_and_drops` reads, entry by entry, where each (writer, batch) was
committed and where each writer was dropped; :func:`check_drops` holds every drop to the rule
(silent longer than the retention, never a live session whose lease holds, never a declared
writer); :func:`allowed_repeats` gives the (writer, batch) committed more than once, each
repeat after a drop of its writer, and fails on a repeat with no drop between: the exactly-once
invariant with nothing but the documented exception. A group-commit fold of a request whose
writer's last sign of life (the request) is older than the retention commits its batch and drops
the writer in the same entry.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark_tstream.journal.entries import Entry


@dataclass
class History:
    """Journal positions of each (writer, batch)'s commits and of each writer's drops."""

    commits: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    drops: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))


def commits_and_drops(entries: Sequence[Entry]) -> History:
    """The history of ``entries`` (consecutive, oldest first)."""
    out = History()
    prev: Entry | None = None
    for entry in entries:
        # a folded request's writer may leave the state in the very entry that folds it (its
        # last sign of life is the request, older than the retention): its fold says it committed
        here = {(f.writer, f.batch) for f in entry.folds if f.writer is not None}
        here |= {(wid, batch) for wid, w in entry.state.writers.items() for batch, pos in w.batches if pos == entry.pos}
        for wid, batch in sorted(here, key=str):
            if isinstance(batch, int):
                out.commits[(wid, batch)].append(entry.pos)
        gone = {w for w, _ in here if w not in entry.state.writers}  # folded and dropped at once
        if prev is not None and prev.pos + 1 == entry.pos:
            gone |= prev.state.writers.keys() - entry.state.writers.keys()
        for wid in sorted(gone):
            out.drops[wid].append(entry.pos)
        prev = entry
    return out


def check_drops(entries: Sequence[Entry]) -> int:
    """Every drop of a writer follows the rule (module docstring); how many drops there were."""
    n = 0
    for prev, entry in zip(entries, entries[1:]):
        if prev.pos + 1 != entry.pos:
            continue
        cfg = entry.state.config
        for wid in sorted(prev.state.writers.keys() - entry.state.writers.keys()):
            w = prev.state.writers[wid]
            silent = entry.wall - w.wall
            assert silent > cfg.writer_retention_ms, (
                f"entry {entry.pos} dropped writer {wid} silent {silent} ms, not longer than the "
                f"retention ({cfg.writer_retention_ms} ms)")
            assert not (w.live and silent <= cfg.writer_lease_ms), (
                f"entry {entry.pos} dropped writer {wid}, a live session whose lease holds "
                f"(silent {silent} ms of its {cfg.writer_lease_ms} ms lease)")
            assert wid not in cfg.writers, f"entry {entry.pos} dropped declared writer {wid}"
            n += 1
    return n


def kept_declared(entries: Sequence[Entry]) -> int:
    """How many times a commit kept a declared writer silent longer than the retention (what
    :func:`check_drops` holds it to: a run where this stays 0 never tested the rule)."""
    n = 0
    for prev, entry in zip(entries, entries[1:]):
        cfg = entry.state.config
        if prev.pos + 1 != entry.pos or not cfg.writer_retention_ms:
            continue
        n += sum(1 for wid in cfg.writers if wid in prev.state.writers and wid in entry.state.writers
                 and entry.wall - prev.state.writers[wid].wall > cfg.writer_retention_ms)
    return n


def allowed_repeats(history: History) -> dict[tuple[str, int], int]:
    """(writer, batch) -> how many times it was committed, for those committed more than once;
    AssertionError for a repeat no drop of its writer preceded (after the commit before it)."""
    out = {}
    for (wid, batch), positions in sorted(history.commits.items()):
        if len(positions) < 2:
            continue
        for before, again in zip(positions, positions[1:]):
            dropped = [p for p in history.drops.get(wid, []) if before <= p < again]
            assert dropped, (f"batch {batch} of writer {wid} was committed at {before} and again at {again} "
                             "with no expiry of the writer between: a replay appended twice")
        out[(wid, batch)] = len(positions)
    return out
