"""The orphan-grace fence (store/fence.py): a writer or compaction stalled past the fence margin
between its file writes and its commit must not commit files orphan cleanup deleted meanwhile.

Elapsed time is faked on the fence's monotonic clock; orphan cleanup runs with a grace of 0
(``unsafe_orphan_grace``), which is what a real grace looks like after a stall longer than it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from conftest import CallLog
from pyspark_tstream.api import append as append_mod
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.compaction import compact as compact_mod
from pyspark_tstream.errors import StaleWriteError
from pyspark_tstream.store import fence as fence_mod
from pyspark_tstream.store import layout
from pyspark_tstream.write import writing
from pyspark_tstream.write.commit import CommitIntent, CommitRequest
from pyspark_tstream.write.group import CROWD

MARGIN_S = fence_mod.FENCE_MARGIN_MS / 1000


class FakeClock:
    """The fence's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    c = FakeClock()
    monkeypatch.setattr(fence_mod.Fence, "clock", staticmethod(c))
    yield c


def _rows(n: int, base: int = 0) -> pa.Table:
    return pa.table({"device": [f"d{i % 3}" for i in range(n)], "v": list(range(base, base + n)),
                     "ts": [1_000_000 + base + i for i in range(n)]})


def _cleanup(s: Stream) -> None:
    """Orphan cleanup as it runs once a stalled writer's files are older than the grace (another
    process: its own handle)."""
    Stream(s.store, s.journal.head()).vacuum(orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)


def _stall_after_writing(monkeypatch: pytest.MonkeyPatch, clock: FakeClock, s: Stream, stall_s: float,
                         *, cleanup: bool = True) -> list[list[str]]:
    """Make ``append``'s next file writes end with a stall of ``stall_s`` and, if ``cleanup``,
    an orphan cleanup that runs meanwhile; returns the paths each stalled write made."""
    real = writing.write_batches
    made: list[list[str]] = []

    def stalled(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        made.append([c.path for c in out])
        clock.now += stall_s
        if cleanup:
            _cleanup(s)
        return out

    monkeypatch.setattr(append_mod, "write_batches", stalled)
    return made


def test_an_append_stalled_past_the_grace_refuses_to_commit_files_cleanup_deleted(
        url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Stream.create(url, segments=2)
    s.append(_rows(5), writer_id="w", batch_id=0)
    before = s.refresh().pos
    made = _stall_after_writing(monkeypatch, clock, s, 3 * 3600)
    with pytest.raises(StaleWriteError) as err:
        s.append(_rows(7, 100), writer_id="w", batch_id=1)
    assert err.value.retriable
    assert made and all(not s.store.exists(p) for p in made[0])  # cleanup did delete them
    assert set(err.value.missing) == {s.store.uri(p) for p in made[0]}
    assert "Retry" in str(err.value)
    fresh = Stream.open(url)
    assert fresh.state.pos == before  # nothing acknowledged, nothing committed
    assert fresh.read().num_rows == 5
    # the retry writes the files again and commits them
    monkeypatch.setattr(append_mod, "write_batches", writing.write_batches)
    ack = s.append(_rows(7, 100), writer_id="w", batch_id=1)
    assert ack.rows == 7 and not ack.duplicate
    assert Stream.open(url).read().num_rows == 12


def test_a_stalled_append_whose_files_survived_commits_with_one_existence_check(
        url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Stream.create(url, segments=2)
    s.append(_rows(5), writer_id="w", batch_id=0)
    _stall_after_writing(monkeypatch, clock, s, MARGIN_S + 1, cleanup=False)
    log = CallLog()
    s.store.observer = log
    ack = s.append(_rows(7, 100), writer_id="w", batch_id=1)
    assert ack.rows == 7
    assert log.count("exists") == 1  # one batched check of all its files
    assert Stream.open(url).read().num_rows == 12


def test_an_append_stalled_past_the_shortest_grace_is_refused_even_with_its_files_there(
        url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the shortest orphan grace cleanup may delete the files between the check and the
    create (the simulation's ``sink-stalls`` seed 20,006 met it): the commit refuses."""
    s = Stream.create(url, segments=2)
    s.append(_rows(5), writer_id="w", batch_id=0)
    _stall_after_writing(monkeypatch, clock, s, 2 * MARGIN_S + 1, cleanup=False)
    with pytest.raises(StaleWriteError, match="past the shortest orphan grace"):
        s.append(_rows(7, 100), writer_id="w", batch_id=1)
    assert Stream.open(url).read().num_rows == 5


def test_a_fast_append_makes_no_extra_store_call(url: str, clock: FakeClock,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    s = Stream.create(url, segments=2)
    s.append(_rows(5), writer_id="w", batch_id=0)
    _stall_after_writing(monkeypatch, clock, s, MARGIN_S - 1, cleanup=False)  # within the margin
    log = CallLog()
    s.store.observer = log
    s.append(_rows(7, 100), writer_id="w", batch_id=1)
    assert log.count("exists") == 0
    assert {op for op, _ in log.calls} <= {"open_output", "write", "put_if_absent", "read", "read_many", "list"}


def test_a_stalled_writer_does_not_publish_a_request_naming_deleted_files(
        url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Group commit: a contended writer publishes its request first; another writer's fold
    would name its files, so the request is refused before it is published."""
    s = Stream.create(url, segments=2)
    s.append(_rows(5), writer_id="w", batch_id=0)
    group = s.appending.group
    group.contended, group.crowd = 2, CROWD  # a crowd: publish first
    _stall_after_writing(monkeypatch, clock, s, 3 * 3600)
    with pytest.raises(StaleWriteError):
        s.append(_rows(7, 100), writer_id="w", batch_id=1)
    assert s.store.list(layout.REQUESTS) == []  # nothing published for others to fold
    assert Stream.open(url).read().num_rows == 5


def test_a_commit_request_checks_its_files_before_each_entry_it_builds(url: str, clock: FakeClock) -> None:
    """The check runs where the entry is built, right before the conditional create."""
    s = Stream.create(url, segments=1)
    spec = s.appending.write_spec(_rows(3).schema)
    fence = fence_mod.Fence(s.store, "append").start()
    chunks = writing.write_batches(spec, [_rows(3)], ordered=True)
    req = CommitRequest(chunks=chunks, intent=CommitIntent(writer_id="w", batch_id=0), fence=fence)
    clock.now += 3 * 3600
    s.store.delete([c.path for c in chunks])
    with pytest.raises(StaleWriteError):
        s.context.journal.commit(req, s.refresh())
    assert Stream.open(url).state.pos == s.state.pos


def _stall_compaction(monkeypatch: pytest.MonkeyPatch, clock: FakeClock, s: Stream,
                      after: Callable[[], None]) -> None:
    real = compact_mod._merge_around

    def stalled(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        clock.now += 3 * 3600
        after()
        return out

    monkeypatch.setattr(compact_mod, "_merge_around", stalled)


def test_a_compaction_stalled_before_publishing_refuses_macro_chunks_cleanup_deleted(
        url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Stream.create(url, segments=1)
    for b in range(6):
        s.append(_rows(4, 10 * b), writer_id="w", batch_id=b)
    before = s.refresh().pos
    _stall_compaction(monkeypatch, clock, s, lambda: _cleanup(s))
    with pytest.raises(StaleWriteError):
        s.compact()
    fresh = Stream.open(url)
    assert fresh.state.pos == before
    assert fresh.read().num_rows == 24


def test_a_compaction_stalled_after_publishing_refuses_to_commit_deleted_macro_chunks(
        url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the map publish and the journal commit (a rival's newer version may no longer
    list the macro-chunks, so cleanup may take them after its grace): checked again."""
    s = Stream.create(url, segments=1)
    for b in range(6):
        s.append(_rows(4, 10 * b), writer_id="w", batch_id=b)
    before = s.refresh().pos
    real = compact_mod.CompactRequest.__call__

    def stalled(self: compact_mod.CompactRequest, state: Any, pos: int) -> Any:
        clock.now += 3 * 3600
        s.store.delete([p.macro for p in self.parts])  # what cleanup did meanwhile
        return real(self, state, pos)

    monkeypatch.setattr(compact_mod.CompactRequest, "__call__", stalled)
    with pytest.raises(StaleWriteError):
        s.compact()
    assert Stream.open(url).state.pos == before
    assert Stream.open(url).read().num_rows == 24
