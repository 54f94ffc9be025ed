"""The checkpoint cross-check's arithmetic (journal/crosscheck.py), and applying segment rows.

A checkpoint of a stream without checksums is caught only where it contradicts the entries
after it; these pin what the replay compares (each segment's next ``_seq`` moved by exactly
the records an entry commits there, its chunks starting where the segment ended) on shapes a
damage test rarely produces: several chunks of one segment in one entry, a segment the entry
created, a change row whose ``next_seq`` is not its first field or appears twice.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from typing import Any

import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal.crosscheck import Replayed, replay_problem, step_problem
from pyspark_tstream.journal.delta import apply_all
from pyspark_tstream.journal.state import StreamState


def test_a_sound_step_and_each_contradiction_are_told_apart() -> None:
    before, after = {1: 10, 2: 20}, {1: 16, 2: 20, 3: 4}
    # segment 1 commits 2 + 4 records in two chunks (out of order), 2 none, 3 is new
    assert step_problem(before, after, [(1, 12, 4), (1, 10, 2), (3, 0, 4)]) is None
    assert step_problem(before, after, [(1, 10, 2), (1, 12, 3)]) == (
        "entry", "its change moves segment 1's next _seq by 6, but it commits 5 record(s) there")
    assert step_problem(before, after, [(1, 11, 2), (1, 13, 4)]) == (
        "before", "segment 1's next _seq is 10 before it, but the entry after it commits its _seq from 11")
    assert step_problem(before, {1: 10, 2: 21}, [(2, 20, 1)]) is None
    assert step_problem(before, {1: 10, 2: 21}, []) == (
        "entry", "its change moves segment 2's next _seq by 1, but it commits 0 record(s) there")


def _state(next_seqs: list[int]) -> StreamState:
    """A created stream's state, its segments numbered 0.. with these next ``_seq``."""
    st = Stream.create(f"memory://crosscheck-{uuid.uuid4().hex}/s", segments=len(next_seqs)).state
    return replace(st, segments=[replace(g, id=i, next_seq=n) for i, (g, n) in enumerate(zip(st.segments, next_seqs))])


def test_moves_are_read_from_any_field_position_and_replayed() -> None:
    ckpt = _state([10, 20, 30])
    seen = Replayed()
    # next_seq (field 3) first, after another field, absent; chunk lists: seg 0, rows 2, _seq 4
    seen.add(6, {"segs": [[0, 3, 2, 5, 2], [1, 4, 99, 3, 1], [2, 5, 7]]},
             [[0, "f", 2, 0, 10], [1, "f", 1, 0, 20]], checked=True)
    seen.add(7, {"segs": [[2, 3, 3]]}, [[2, "g", 3, 0, 30]], checked=True)
    assert [s.moves for s in seen.steps] == [[(0, 2), (1, 1)], [(2, 3)]]
    assert replay_problem(ckpt, seen.steps) is None
    lowered = _state([10, 19, 30])
    assert replay_problem(lowered, seen.steps) == (
        lowered.pos, "segment 1's next _seq is 19 before it, but the entry after it commits its _seq from 20")
    bad = Replayed()
    bad.add(6, {"segs": [[0, 3, 1, 3, 1]]}, [[0, "f", 1, 0, 10]], checked=True)  # moved twice: 2 in all
    assert bad.steps[0].moves == [(0, 1), (0, 1)]
    assert replay_problem(ckpt, bad.steps) == (
        6, "its change moves segment 0's next _seq by 2, but it commits 1 record(s) there")


def test_segment_rows_apply_in_any_field_order_and_refuse_what_is_not_one() -> None:
    before = _state([10, 20, 30])
    after = apply_all(before, [{"pos": 1, "segs": [[0, 3, 2, 5, 2], [2, 4, 7, 3, 1]]},
                               {"pos": 2, "segs": [[0, 3, 1]]}])
    assert [(g.next_seq, g.rows, g.last_tso) for g in after.segments] == [(13, 2, 0), (20, 0, 0), (31, 0, 7)]
    assert [g.next_seq for g in before.segments] == [10, 20, 30]  # left as it was
    for rows in ([[0, 3]], [[0, 3, 1.0]], [[0, 3, True]], [(0, 3, 1)], [[5, 3, 1]], [[0, 12, 1]]):
        with pytest.raises((ValueError, TypeError, IndexError)):
            apply_all(before, [{"pos": 1, "segs": rows}])


def _by_hand(segments: list[list[int]], changes: list[dict[str, Any]]) -> list[list[int]]:
    out = [list(g) for g in segments]
    for ch in changes:
        for row in ch["segs"]:
            for j, diff in zip(row[1::2], row[2::2]):
                out[row[0]][j] += diff
    return out


def test_many_segment_rows_sum_as_applied_one_by_one_and_refuse_the_same() -> None:
    """A catch-up at 64 segments adds many changes' rows up at once (as arrays): the state is
    the one applying them row by row gives, and what the rows may not hold is refused alike."""
    before = _state(list(range(64)))
    rng = random.Random(5)
    changes = [{"pos": p, "segs": [[i, 3, rng.randrange(1, 9), 4, rng.randrange(-2**40, 2**40), 11, 1]
                                   for i in rng.sample(range(64), 48)]} for p in range(1, 10)]
    want = _by_hand([g.to_json() for g in before.segments], changes)
    assert [g.to_json() for g in apply_all(before, changes).segments] == want
    # a field moved to and fro (a sum of 0), then differences beyond 64 bits: as by hand
    for more in ([[7, 5, 3, 6, 1, 9, 2]] * 16 + [[7, 5, -3, 6, -1, 9, -2]] * 16,
                 [[8, 4, 2**70, 5, 0, 6, 0], [8, 4, -2**70 + 1, 5, 0, 6, 0]]):
        changes[0]["segs"] += more
        want = _by_hand([g.to_json() for g in before.segments], changes)
        assert [g.to_json() for g in apply_all(before, changes).segments] == want
    good = changes[1]["segs"]
    for bad in ([0, 3, True], [0, 3, 1.0], [0, 3, "1"], [64, 3, 1], [0, 12, 1], [0, 3], (0, 3, 1), [0, 3, None]):
        with pytest.raises((ValueError, TypeError, IndexError)):
            apply_all(before, [{"pos": 1, "segs": [*good, bad]}])
