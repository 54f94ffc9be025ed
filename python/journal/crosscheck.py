"""Cross-checks of a checkpoint against the journal entries replayed after it: no store call.

One job: find a checkpoint (format v6, :mod:`~pyspark_tstream.journal.checkpoint`) whose content
contradicts facts stored elsewhere, before a reader or a committer builds on it. A checkpoint
carries no checksum (that is a format change), so an edit that keeps it valid JSON is caught
only where it contradicts what the entries after it say on their own:

* its size against the mark the entries name it by (``state.checkpoint.bytes``; not checkpoint
  0, whose mark is sized before the mark is set in it);
* each active segment's next ``_seq`` against the chunks the entries after it commit there
  (each chunk stores the absolute ``_seq`` of its first record: they must continue exactly
  where the checkpoint's segment ends), and each entry's change against its own chunks (it
  moves a segment's next ``_seq`` by exactly the records it commits there): a contradiction
  names the checkpoint or the entry, whichever it is;
* invariants every committed state keeps: a truncation head is the newest recorded truncation's
  (``truncations``), a segment's first ``_seq`` is not past its next one.

An edit none of these sees (a writer's dedupe window, a time, a total) stays undetected; see
docs/operations.md ("Damaged metadata").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .delta import apply
from .packing import expand
from .state import StreamState

#: A chunk as the checks see it: ``(segment id, first _seq, rows)``.
Piece = tuple[int, int, int]


@dataclass
class Replayed:
    """What a rebuild saw of the entries it replayed (a :class:`Step` each, in order), and
    whether an entry holding the whole state restarted the rebuild (then the checkpoint was not
    used past it, and there is nothing to check). It accumulates, so it is not frozen."""

    steps: list[Step] = field(default_factory=list)
    restarted: bool = False

    def add(self, pos: int, change: Any, stored: Iterable[Any], *, checked: bool = False) -> None:
        """Note one entry, before its change is applied (applying it may share its lists): its
        position, what its change does to each segment's next ``_seq``, and its chunks (stored
        lists: segment at 0, rows at 2, ``_seq`` at 4; ``checked``: lists that passed the chunk
        check, as unpacked ones have)."""
        whole, moves = None, []
        try:
            if isinstance(change.get("segments"), list):  # stored whole: the segments changed
                whole = [(int(g[0]), int(g[3])) for g in change["segments"]]
            for row in change.get("segs", []):
                fields = row[1::2]
                if fields.count(3) == 1:  # the usual row: next_seq moved once (found in C, not a loop)
                    moves.append((int(row[0]), int(row[2 * fields.index(3) + 2])))
                elif 3 in fields:
                    moves += [(int(row[0]), int(diff)) for j, diff in zip(fields, row[2::2]) if j == 3]
        except (TypeError, IndexError, KeyError, ValueError, AttributeError):
            whole, moves = None, []  # not a change applying it accepts: that reports it
        self.steps.append(Step(pos, whole, moves, [(c[0], c[4], c[2]) for c in stored] if checked else
                               pieces(stored)))

    def add_entry(self, pos: int, change: Any, d: dict[str, Any]) -> None:
        """:meth:`add` of a stored entry ``d`` (its chunks packed or not). Packed chunks that do
        not unpack count as none: the replay then finds the entry's change moving a segment by
        records it does not commit, and names the entry."""
        try:
            stored, checked = expand(d).get("chunks", []), "packed" in d  # checked as unpacked
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            stored, checked = [], True
        self.add(pos, change, stored, checked=checked)


@dataclass(frozen=True)
class Step:
    """One replayed entry as the checks see it."""

    pos: int
    whole: list[tuple[int, int]] | None  # each segment's (id, next _seq) when stored whole
    moves: list[tuple[int, int]]  # (index in the segment list, difference of its next _seq)
    chunks: list[Piece]


def pieces(stored: Iterable[Any]) -> list[Piece]:
    """``(segment, first _seq, rows)`` of stored chunk lists (malformed ones left out: the
    entry's own shape check reports them)."""
    out = []
    for c in stored:
        if isinstance(c, list) and len(c) > 4 and all(isinstance(c[i], int) for i in (0, 2, 4)):
            out.append((c[0], c[4], c[2]))
    return out


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


def step_problem(before: Mapping[int, int], after: Mapping[int, int],
                 chunks: Iterable[Piece]) -> tuple[str, str] | None:
    """What contradicts one entry's chunks, given each segment's next ``_seq`` before and after
    it (by segment id): ``("entry", what)`` when its change moves a segment's next ``_seq`` by
    other than the records it commits there (the entry is damaged), ``("before", what)`` when
    its chunks do not start at the next ``_seq`` before it (the state before it is). None: sound."""
    committed: dict[int, int] = {}  # by segment: the records the chunks commit there
    first: dict[int, int] = {}  # and the least _seq they start at
    for seg, seq, rows in chunks:
        committed[seg] = committed.get(seg, 0) + rows
        if seq < first.get(seg, seq + 1):
            first[seg] = seq
    for seg, end in after.items():
        if seg not in before:
            continue  # created by this entry (a scale): nothing to compare with
        if end - before[seg] != committed.get(seg, 0):
            return "entry", (f"its change moves segment {seg}'s next _seq by {end - before[seg]}, but it commits "
                             f"{committed.get(seg, 0)} record(s) there")
        if seg in first and first[seg] != before[seg]:
            return "before", (f"segment {seg}'s next _seq is {before[seg]} before it, but the entry after it "
                              f"commits its _seq from {first[seg]}")
    return None


def next_seqs(state: StreamState) -> dict[int, int]:
    """Each active segment's next ``_seq``, by id."""
    return {g.id: g.next_seq for g in state.segments}


def replay_problem(ckpt: StreamState, steps: Sequence[Step]) -> tuple[int, str] | None:
    """The first contradiction in replaying ``steps`` from checkpoint ``ckpt``: ``(position of
    the damaged object, what)``, the checkpoint's own position when it is the checkpoint. Only
    each segment's next ``_seq`` is followed (the field changes move by differences). None:
    nothing found."""
    order = [g.id for g in ckpt.segments]
    nxt = next_seqs(ckpt)
    at = ckpt.pos
    for step in steps:
        before = dict(nxt)
        if step.whole is not None:
            order = [g for g, _ in step.whole]
            nxt = dict(step.whole)
        for i, diff in step.moves:
            if not 0 <= i < len(order):
                return None  # applying the change fails, and reports it
            nxt[order[i]] += diff
        found = step_problem(before, nxt, step.chunks)
        if found is not None:
            return (step.pos if found[0] == "entry" else at), found[1]
        at = step.pos
    return None


def checkpoint_problem(ckpt: StreamState, size: int, after: StreamState, seen: Replayed) -> tuple[int, str] | None:
    """What in checkpoint ``ckpt`` (``size`` stored bytes), or in an entry after it, contradicts
    ``after``, the state the entries after it rebuild from it, and what they hold (``seen``):
    ``(position of the damaged object, what)``, ``ckpt.pos`` for the checkpoint; None: nothing."""
    mark = after.checkpoint
    # checkpoint 0's mark is sized before the mark is set in it (entry 0 holds the same state)
    if mark is not None and mark.pos == ckpt.pos > 0 and mark.bytes != size:
        return ckpt.pos, f"it holds {size} bytes where the journal entries after it name {mark.bytes}"
    problem = state_problem(ckpt)
    if problem is not None:
        return ckpt.pos, problem
    if seen.restarted:
        return None
    return replay_problem(ckpt, seen.steps)


def culprit(state: StreamState, changes: list[dict[str, Any]], pos: int) -> int:
    """The position of the first of ``changes`` (those of the entries up to ``pos``, from
    ``state``) that does not apply: an error names the damaged entry, not the one rebuilt."""
    for i, ch in enumerate(changes):
        try:
            state = apply(state, ch)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            return pos - len(changes) + 1 + i
    return pos
