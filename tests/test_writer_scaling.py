"""A commit's work on writer records follows what it changed, not how many writers the state holds.

Counted, not timed: how many writer records a commit copies, compares, encodes and decodes, and
how many times it looks at every writer (:func:`~pyspark_tstream.journal.expiry.scan`), with 1,
64 and 1,000 writers in the state. A commit copies and encodes its own writer; a committer that
lost a race decodes the winner's; none of it grows with the writers the commit never touched
(copying, comparing and scanning them all made a committer's CPU grow with the writers).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal import delta, expiry
from pyspark_tstream.journal.entries import Entry
from pyspark_tstream.journal.state import StreamState, Writer
from pyspark_tstream.timestamps import now_ms

WRITERS = (1, 64, 1000)


def _with_writers(url: str, n: int) -> Stream:
    """A stream whose state holds ``n`` writers (added by one commit), each with a lane in
    every segment and a batch in its window, then one commit of writer ``w0``."""
    s = Stream.create(url, segments=4, compaction="off")
    now = now_ms()

    def build(state: StreamState, pos: int) -> Entry:
        for i in range(n):
            w = state.writer_to_change(f"w{i}")
            w.remember(0, pos)
            w.wall = now
            w.lanes = {seg.id: now << 22 for seg in state.segments}
        return Entry(pos=pos, op="append", wall=now, state=state)

    s.journal.commit(build, s.state)
    s.refresh()
    _commit(s, "w0", 1)
    return s


def _commit(s: Stream, writer: str, batch: int) -> None:
    s.commit([], writer_id=writer, batch_id=batch)


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts calls of the writer-record operations and of the full writer scan."""
    seen: Counter[str] = Counter()

    def counting(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **k: Any) -> Any:
            seen[name] += 1
            return fn(*a, **k)
        return wrapped

    for name in ("copy", "to_json", "__eq__"):
        monkeypatch.setattr(Writer, name, counting(name, getattr(Writer, name)))
    monkeypatch.setattr(Writer, "from_json", classmethod(counting("from_json", Writer.from_json.__func__)))
    monkeypatch.setattr(expiry, "scan", counting("scan", expiry.scan))
    yield seen


def _work(counts: Counter[str], action: Callable[[], object]) -> dict[str, int]:
    counts.clear()
    action()
    return dict(counts)


@pytest.mark.parametrize("n", WRITERS, ids=[f"{n}-writers" for n in WRITERS])
def test_a_commit_touches_only_its_own_writer(url: str, n: int, counts: Counter[str]) -> None:
    """A known writer's commit copies, compares and encodes its own record once each and looks
    at no other writer, whether the state holds 1 writer or 1,000."""
    s = _with_writers(url, n)
    known = _work(counts, lambda: _commit(s, "w0", 2))
    assert known == {"copy": 1, "__eq__": 1, "to_json": 1}, known
    new = _work(counts, lambda: _commit(s, "newcomer", 0))
    assert new.pop("__eq__", 0) <= 1 and new == {"to_json": 1}, new  # a new writer: created, not copied
    assert len(s.state.writers) == n + 1


@pytest.mark.parametrize("n", WRITERS, ids=[f"{n}-writers" for n in WRITERS])
def test_a_lost_race_decodes_the_winners_writer_alone(url: str, n: int, counts: Counter[str]) -> None:
    """A committer one commit behind loses the race, applies the winner's change (its writer
    decoded, no other) and commits on it: the same work at every writer count."""
    s = _with_writers(url, n)
    behind = Stream.open(url)
    _commit(behind, "w1", 1)  # its state known and its writer scan done
    _commit(s, "w0", 2)  # ``behind`` is now one commit behind
    work = _work(counts, lambda: _commit(behind, "w1", 2))
    assert work.get("scan", 0) == 0 and work.get("from_json", 0) <= 2, work
    assert work.get("copy", 0) <= 2 and work.get("to_json", 0) <= 2 and work.get("__eq__", 0) <= 2, work
    assert behind.state.writers["w0"].find(2) is not None and behind.state.writers["w1"].find(2) is not None


def test_writer_expiry_still_drops_a_silent_writer_when_due(url: str, counts: Counter[str]) -> None:
    """Expiry looks at the writers only when one may be due, and then drops exactly the silent
    ones: past the retention of the 64 writers added together, all but the one that committed
    since leave the state, and the change names them."""
    s = _with_writers(url, 64)
    retention = s.state.config.writer_retention_ms
    added = s.state.writers["w1"].wall
    state = delta.state_copy(s.state)
    state.writer_to_change("w0").wall = added + retention  # w0 committed lately
    counts.clear()
    assert expiry.expire(state, added + retention) == []  # nobody past the retention yet
    assert counts["scan"] == 0  # ... known without looking at the writers
    gone = expiry.expire(state, added + retention + 1)
    assert sorted(gone) == sorted(f"w{i}" for i in range(1, 64))
    assert set(state.writers) == {"w0"}
    assert sorted(delta.change(s.state, state)["gone"]) == sorted(gone)


def test_the_copy_of_a_states_fields_is_plain_json_of_its_own(url: str) -> None:
    """A commit's private copy takes the state's fields from their stored form without a JSON
    round trip, so that form must be plain JSON types in containers of its own, after scales,
    schema changes, truncation, vacuum and compaction too (a tuple would fail a catch-up's shape
    check; a shared list would let a commit change the committed state)."""
    s = Stream.create(url, segments=2)
    base = now_ms() - 10_000
    for b in range(8):
        s.append(pa.table({"key": [f"k{i}" for i in range(4)], "t": [base + b * 10 + i for i in range(4)]}),
                 key="key", timestamp="t", writer_id=f"w{b % 3}", batch_id=b)
        if b == 2:
            s.scale(split=s.state.segments[0].id, parts=2)
        if b == 4:
            s.truncate(base + 25)
            s.vacuum(grace_ms=0)
        if b == 6:
            s.compact(full=True)
    bare = delta._bare(s.state)
    assert json.loads(json.dumps(bare)) == bare  # no tuples, no non-string keys
    copy = delta.state_copy(s.state)
    copy.segments[0].rows += 1
    copy.index[0].clear()
    assert delta._bare(s.state) == bare  # the committed state is untouched
