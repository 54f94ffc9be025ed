"""Each part of ``Stream`` works alone, built on a StreamContext (no Stream): appending, upkeep,
reading, epochs, truncation and the info snapshot (python/api/stream.py composes them)."""

from __future__ import annotations

import logging
from dataclasses import replace

import pyarrow as pa
import pytest
from helpers import T0
from pyspark_tstream.api.append import Appender
from pyspark_tstream.api.context import StreamContext
from pyspark_tstream.api.epochs import Epochs, initial_segments
from pyspark_tstream.api.info import describe
from pyspark_tstream.api.read import Reader
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.api.truncate import Truncation
from pyspark_tstream.api.upkeep import RETENTION_EVERY, Upkeep
from pyspark_tstream.journal.entries import Entry
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.store.storage import Store


def _context(url: str, **config: object) -> StreamContext:
    Stream.create(url, segments=2, **config)  # only to lay down entry 0
    store = Store(url)
    return StreamContext(store, Journal(store).head())


def _rows(n: int, first: int = 0) -> pa.Table:
    return pa.table({"k": [f"k{i % 5}" for i in range(first, first + n)], "v": list(range(first, first + n)),
                     "t": [T0 + i for i in range(first, first + n)]})


def test_appender_and_reader_share_one_context(url: str) -> None:
    h = _context(url)
    seen: list[Entry] = []
    appender = Appender(h, after_commit=lambda entry, later: seen.append(entry))
    ack = appender.append(_rows(10), key="k", timestamp="t")
    assert ack.rows == 10 and h.state.pos == ack.pos  # the context moved with the commit
    assert [e.pos for e in seen] == [ack.pos]  # the hook runs after a data commit ...
    appender.tick()
    assert len(seen) == 1  # ... and not after a data-less one
    assert Reader(h).read()["v"].to_pylist() == list(range(10))
    # a second context on the same store sees it after a refresh
    other = StreamContext(h.store, Journal(h.store).head())
    assert Reader(other).read(start=T0 + 5)["v"].to_pylist() == list(range(5, 10))
    assert appender.append(_rows(10), key="k", timestamp="t", writer_id="w", batch_id=1).duplicate is False
    assert appender.append(_rows(10), key="k", timestamp="t", writer_id="w", batch_id=1).duplicate is True


def test_producer_session_holds_the_tick_until_closed(url: str) -> None:
    h = _context(url)
    appender = Appender(h)
    with appender.writer("p") as p:
        p.append(_rows(3), key="k", timestamp="t")
        assert h.state.writers["p"].live
    assert not h.refresh().writers["p"].live


def test_epochs_alone_scale_and_history(url: str) -> None:
    h = _context(url)
    assert [g.id for g in h.state.segments] == [g.id for g in initial_segments(2)]
    epochs = Epochs(h)
    out = epochs.scale(split=initial_segments(2)[0].id)
    assert out.epoch == 1 and h.state.epoch == 1
    assert sorted(epochs.successors(out.sealed[0])) == sorted(out.created)
    assert epochs.predecessors(out.created[0]) == list(out.sealed)


def test_truncation_alone_drops_the_old_records(url: str) -> None:
    h = _context(url)
    Appender(h).append(_rows(20), key="k", timestamp="t")
    reader = Reader(h)
    truncation = Truncation(h, reader)
    truncation.truncate(T0 + 10)
    assert reader.read()["v"].to_pylist() == list(range(10, 20))
    truncation.trim(maxlen=4)
    assert reader.read()["v"].to_pylist() == list(range(16, 20))


def test_upkeep_failure_is_logged_and_retried(url: str, caplog: pytest.LogCaptureFixture) -> None:
    h = _context(url, retention="count=1000")
    calls: list[int] = []

    def failing_trim() -> None:
        calls.append(1)
        raise OSError("injected")

    upkeep = Upkeep(h, trim=failing_trim)
    appender = Appender(h, after_commit=upkeep.after_data_commit)
    with caplog.at_level(logging.WARNING):
        while h.state.pos < RETENTION_EVERY:
            appender.append(_rows(1, h.state.pos), key="k", timestamp="t")  # never raises
    assert calls == [1] and upkeep.retention_due
    assert "retention after the commit" in caplog.text
    appender.append(_rows(1, 99), key="k", timestamp="t")  # the failed pass is due again
    assert calls == [1, 1]


def test_describe_is_a_pure_snapshot(url: str) -> None:
    h = _context(url)
    Appender(h).append(_rows(3), key="k", timestamp="t")
    info = describe("u", h.state, h.schema)
    assert info.url == "u" and info.rows == 3 and len(info.segments) == 2
    assert info.schema == ("k string", "v int64", "t int64")


def test_background_retention_retries_once_after_a_failure_then_settles(url: str) -> None:
    """After ``Stream.append`` retention runs in the background: a failed
    pass makes it due at the next commit (as in line), and a pass that succeeded makes it
    due only at the next multiple of RETENTION_EVERY again (not at every commit)."""
    h = _context(url, retention="count=1000")
    runs: list[bool] = []
    outcomes = iter([False, True])

    class Worker:
        def __init__(self) -> None:
            self.ctx = h

        def run(self, entry: Entry, due: set[str]) -> bool:
            ok = next(outcomes, True) if "retention" in due else True
            runs.append(ok)
            return ok

    upkeep = Upkeep(h, trim=lambda: None, fork=lambda entry: Worker(),  # type: ignore[arg-type,return-value]
                    inline=False)  # the product's default (conftest asks for in line)
    appender = Appender(h, after_commit=upkeep.after_data_commit)
    while h.state.pos < RETENTION_EVERY - 1:
        appender.append(_rows(1, h.state.pos), key="k", timestamp="t")
    entry = h.entry
    upkeep.after_data_commit(replace(entry, pos=RETENTION_EVERY), later=True)  # due: fails
    upkeep.settle(10)
    assert runs == [False] and upkeep.retention_due
    upkeep.after_data_commit(replace(entry, pos=RETENTION_EVERY + 1), later=True)  # due again: succeeds
    upkeep.settle(10)
    assert runs == [False, True] and not upkeep.retention_due
    upkeep.after_data_commit(replace(entry, pos=RETENTION_EVERY + 2), later=True)  # not due
    upkeep.settle(10)
    assert runs == [False, True]
