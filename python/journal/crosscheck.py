"""Cross-checks of a checkpoint against the journal entries replayed after it: no store call.

One job: find a checkpoint (format v6, :mod:`~pyspark_tstream.journal.checkpoint`) whose content
contradicts facts stored elsewhere, before a reader or a committer builds on it. A checkpoint
carries no checksum (that is a format change), so an edit that keeps it valid JSON is caught
only where it contradicts what the entries after it say on their own:

* its size against the mark the entries name it by (``state.checkpoint.bytes``; not checkpoint
  0, whose mark is sized before the mark is set in it);
* each active segment's next ``_seq`` against the chunks the entries after it commit there
  (each chunk stores the absolute ``_seq`` of its first record: they must continue exactly
  where the checkpoint's segment ends, and end where the rebuilt state's does);
* invariants every committed state keeps: a truncation head is the newest recorded truncation's
  (``truncations``), a segment's first ``_seq`` is not past its next one.

An edit none of these sees (a writer's dedupe window, a time, a total) stays undetected; see
docs/operations.md ("Damaged metadata").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .state import StreamState


@dataclass
class Replayed:
    """What a rebuild saw of the entries it replayed: each chunk's ``(segment, first _seq,
    rows)``, and whether an entry holding the whole state restarted the rebuild (then the
    checkpoint was not used past it, and there is nothing to check)."""

    chunks: list[tuple[int, int, int]] = field(default_factory=list)
    restarted: bool = False

    def add(self, stored: Iterable[list[object]]) -> None:
        """Note the chunks of one entry (stored lists: segment at 0, rows at 2, ``_seq`` at 4)."""
        for c in stored:
            seg, rows, seq = c[0], c[2], c[4]
            if isinstance(seg, int) and isinstance(rows, int) and isinstance(seq, int):
                self.chunks.append((seg, seq, rows))


def state_problem(state: StreamState) -> str | None:
    """What in ``state`` no commit produces (None: nothing found)."""
    if state.head_tso > 0 or state.head_pos > 0:
        last = state.truncations[-1].head_pos if state.truncations else None
        if last != state.head_pos:
            return (f"its truncation head (position {state.head_pos}, _tso {state.head_tso}) is not the newest "
                    f"truncation it records ({'none' if last is None else f'position {last}'})")
    if state.head_pos > state.pos:
        return f"its truncation head (position {state.head_pos}) is past its own position {state.pos}"
    for s in state.segments:
        if not 0 <= s.first_seq <= s.next_seq:
            return f"segment {s.id}'s first _seq {s.first_seq} is past its next _seq {s.next_seq}"
    return None


def checkpoint_problem(ckpt: StreamState, size: int, after: StreamState, seen: Replayed) -> str | None:
    """What in checkpoint ``ckpt`` (``size`` stored bytes) contradicts ``after``, the state the
    entries after it rebuild from it, and the chunks they commit (``seen``); None: nothing."""
    mark = after.checkpoint
    # checkpoint 0's mark is sized before the mark is set in it (entry 0 holds the same state)
    if mark is not None and mark.pos == ckpt.pos > 0 and mark.bytes != size:
        return f"it holds {size} bytes where the journal entries after it name {mark.bytes}"
    problem = state_problem(ckpt) or (None if seen.restarted else state_problem(after))
    if problem is not None or seen.restarted:
        return problem
    runs: dict[int, list[tuple[int, int]]] = {}
    for seg, seq, rows in seen.chunks:
        runs.setdefault(seg, []).append((seq, rows))
    end = {s.id: s.next_seq for s in after.segments}
    for s in ckpt.segments:
        if s.id not in end:
            continue  # sealed since: its chunks are checked against its sealed record by fsck
        want = s.next_seq
        for seq, rows in sorted(runs.get(s.id, [])):
            if seq != want:
                return (f"segment {s.id}'s next _seq is {s.next_seq} there, but the journal entries after it "
                        f"commit its _seq from {seq}" if want == s.next_seq else
                        f"segment {s.id}'s chunks after it do not continue at _seq {want} ({seq})")
            want = seq + rows
        if want != end[s.id]:
            return (f"segment {s.id}'s next _seq is {s.next_seq} there, and the entries after it commit "
                    f"{want - s.next_seq} record(s) there, but the state they rebuild says {end[s.id]}")
    return None
