"""Failures never lose data: the sink's commit-then-abort under a failure at every store call.

Spark calls the sink's ``commit`` on the driver and, if it raises, ``abort`` with the same
messages. These tests drive both directly (the writers are plain Python objects) with a failure
injected at each store call of a commit, its post-commit work (auto-scaling, retention) and an
ambiguous journal create, then check that the batch is readable exactly once, or cleanly absent
and committed exactly once by Spark's replay, and that no chunk the journal names was deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyspark_tstream.api.append as append_mod
import pyspark_tstream.api.upkeep as upkeep_mod
import pytest
from conftest import CallLog
from helpers import T0
from histories import clone, drop
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.api.upkeep import RETENTION_EVERY
from pyspark_tstream.conf.options import SinkOptions
from pyspark_tstream.errors import StorageError
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.sink.writer import (
    JournalCommitter,
    TaskChunkWriter,
    TaskCommitMessage,
    TStreamBatchWriter,
    TStreamStreamWriter,
)
from pyspark_tstream.spark.handle import StreamHandle
from pyspark_tstream.store.failures import RetryPolicy
from pyspark_tstream.timestamps import now_ms
from pyspark_tstream.write.commit import CommitIntent, CommitRequest
from pyspark_tstream.write.group import Published, new_id
from pyspark_tstream.write.writing import write_batches

SCHEMA = pa.schema([("id", pa.int64()), ("key", pa.string())])
NO_WAIT = RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0)


def _table(batch: int, rows: int) -> pa.Table:
    ids = [batch * 1000 + i for i in range(rows)]
    return pa.table({"id": ids, "key": [f"k{i % 7}" for i in ids]}, schema=SCHEMA)


def _writer(stream: Stream, cls: type = TStreamStreamWriter) -> Any:
    opts = SinkOptions.from_options({"path": stream.url, "writerId": "q1", "keyColumn": "key"})
    spec = stream.write_spec(SCHEMA, key="key")
    return cls(TaskChunkWriter(spec, SCHEMA),
               JournalCommitter(opts, SCHEMA, session=cls is TStreamStreamWriter, handle=StreamHandle.of(stream)))


def _messages(writer: Any, batch: int, rows: int = 40) -> list[TaskCommitMessage]:
    """What two Spark tasks of one micro-batch send to the driver."""
    half = rows // 2
    out = []
    for p, part in enumerate((_table(batch, rows).slice(0, half), _table(batch, rows).slice(half))):
        chunks = write_batches(writer.tasks.spec, [part], task=f"p{p}b{batch}")
        out.append(TaskCommitMessage(p, 0, tuple(chunks)))
    return out


def _spark_commit(writer: Any, messages: list[Any], batch: int) -> bool:
    """What Spark does with a micro-batch: commit, and abort if commit raised. True if committed."""
    try:
        writer.commit(messages, batch)
        return True
    except Exception:  # noqa: BLE001 - Spark aborts whatever commit raised
        writer.abort(messages, batch)
        return False


def _check_exactly_once(url: str, batches: int, rows: int) -> None:
    """Every batch exactly once; every chunk the journal names exists (read reads them all)."""
    s = Stream.open(url)
    ids = sorted(s.read()["id"].to_pylist())
    assert ids == sorted(b * 1000 + i for b in range(batches) for i in range(rows))


def _replay_until_done(url: str, batch: int, rows: int) -> None:
    """Spark's replay of a batch after a failed or aborted commit (fresh files, same batchId)."""
    stream = Stream.open(url)
    w = _writer(stream)
    assert _spark_commit(w, _messages(w, batch, rows), batch)


Build = Callable[[str], tuple[Stream, int]]


def _built(build: Build, url: str) -> Build:
    """``build`` run once, then copied: each call gives a fresh copy of the built stream (the
    name it is given is unused). A crash loop needs one pristine history a failure point;
    building it anew each time cost most of the ``file://`` loop (82 s against 18 s)."""
    template, last = build(url + "-template")
    return lambda _name: (Stream.open(clone(template.url)), last)


def _run(build: Build, url: str, rows: int) -> tuple[int, Stream]:
    """Probe how many store calls the last batch's commit makes (including post-commit work)."""
    stream, last = build(url + "-probe")
    w = _writer(stream)
    msgs = _messages(w, last, rows)
    log = CallLog()
    stream.store.observer = log
    assert _spark_commit(w, msgs, last)
    stream.store.observer = None
    return log.count(), Stream.open(stream.url)


def _crash_every_call(build: Build, url: str, total: int, rows: int, error: type[BaseException]) -> None:
    assert total >= 3
    for k in range(1, total + 1):
        stream, last = build(f"{url}-{k}")
        name = stream.url
        w = _writer(stream)
        msgs = _messages(w, last, rows)
        log = CallLog()
        log.fail_at, log.error = k, error
        stream.store.observer = log
        _spark_commit(w, msgs, last)
        stream.store.observer = None
        # the batch is there exactly once, or absent; Spark's replay makes it exactly once
        ids = sorted(Stream.open(name).read()["id"].to_pylist())
        before = sorted(b * 1000 + i for b in range(1, last) for i in range(8))
        mine = [last * 1000 + i for i in range(rows)]
        assert ids in (before, sorted(before + mine)), f"failure at call {k} ({log.calls[-1]}) tore the batch"
        _replay_until_done(name, last, rows)
        after = sorted(Stream.open(name).read()["id"].to_pylist())
        assert after == sorted(before + mine), \
            f"failure at call {k} ({log.calls[-1]}): batch {last} not exactly once after replay"
        drop(name)


#: A writer retention (ms, 100 years) no test clock reaches.
LONG_RETENTION_MS = 100 * 365 * 86_400_000


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def _with_retention(clock: _Clock) -> Build:
    def build(name: str) -> tuple[Stream, int]:
        clock.now = T0
        # the writer's commits run on the test's clock (2023) and the retention pass's truncation
        # on the real one: a writer retention shorter than that gap would drop the writer
        s = Stream.create(name, segments=2, retention="count=100000", writer_retention_ms=LONG_RETENTION_MS)
        w = _writer(s)
        b = 1
        while s.refresh().pos < RETENTION_EVERY - 1:  # the next commit takes a retention position
            _spark_commit(w, _messages(w, b, 8), b)
            b += 1
        return s, b
    return build


def _with_scaling(clock: _Clock) -> Build:
    def build(name: str) -> tuple[Stream, int]:
        clock.now = T0
        s = Stream.create(name, segments=1, scaling="records=10/s,factor=2,min=1,max=4,window=1")
        w = _writer(s)
        for b in range(1, 9):
            _spark_commit(w, _messages(w, b, 8), b)
        clock.now = T0 + 2_000  # the next commit finds segment 0 hot: post-commit split
        return s, 9
    return build


@pytest.mark.slow_on_file
@pytest.mark.parametrize("work", [pytest.param("retention", marks=pytest.mark.slow), "scaling"])
@pytest.mark.parametrize("error", [RuntimeError, pytest.param(OSError, marks=pytest.mark.slow)])
def test_failure_at_every_call_of_commit_and_post_commit_work(
        url: str, monkeypatch: pytest.MonkeyPatch, work: str, error: type[BaseException]) -> None:
    """Before: a failed retention pass or auto-scale after the data commit made ``commit``
    raise, Spark's ``abort`` deleted the committed chunks, and the replay was a no-op."""
    clock = _Clock()
    monkeypatch.setattr(append_mod, "now_ms", clock)
    monkeypatch.setattr(upkeep_mod, "now_ms", clock)
    build = _built(_with_retention(clock) if work == "retention" else _with_scaling(clock), url)
    total, probe = _run(build, url, 8)
    if work == "scaling":  # the probed commit did scale: its work is among the failure points
        assert probe.state.epoch == 1
    _crash_every_call(build, url, total, 8, error)


def test_post_commit_failure_is_logged_not_raised(url: str, caplog: pytest.LogCaptureFixture) -> None:
    s = Stream.create(url, segments=1, retention="count=100000")
    while s.refresh().pos < RETENTION_EVERY - 1:
        s.append(_table(s.state.pos + 1, 4), key="key")
    real_trim = s.trim
    calls = []

    def broken_trim(**kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise StorageError("injected 503", path="x", retriable=True)
        return real_trim(**kw)

    s.upkeep.trim = broken_trim  # the post-commit retention pass
    with caplog.at_level(logging.WARNING, logger="pyspark_tstream.api.stream"):
        ack = s.append(_table(100, 4), key="key")
    assert ack.pos == RETENTION_EVERY and ack.rows == 4
    assert f"stream {s.url}: retention after the commit at journal position {RETENTION_EVERY} failed" \
        in caplog.text
    s.append(_table(101, 4), key="key")  # not a retention position, but the failed pass is due
    assert len(calls) == 2


def _ambiguous_store(stream: Stream, lost_answers: int, failing_after: int) -> CallLog:
    """The journal create is applied but its answer lost; then ``failing_after`` more calls fail."""
    stream.store.retry = NO_WAIT
    real = stream.store.put_if_absent
    state = {"lost": 0}

    def put_if_absent(rel: str, data: bytes) -> bool:
        ok = real(rel, data)
        if rel.startswith("_tstream/journal/") and state["lost"] < lost_answers:
            state["lost"] += 1
            raise StorageError(f"put_if_absent {rel} failed after 2 attempts: ReadTimeoutError",
                               path=rel, retriable=True)
        return ok

    stream.store.put_if_absent = put_if_absent  # type: ignore[method-assign]
    log = CallLog()
    armed = {"left": failing_after}

    def observer(op: str, rel: str) -> None:
        log(op, rel)
        if state["lost"] and armed["left"] > 0:
            armed["left"] -= 1
            raise StorageError(f"injected: {op} {rel} failed", path=rel, retriable=True)

    stream.store.observer = observer
    return log


@pytest.mark.parametrize("lost_answers", [1, 2, 10])
@pytest.mark.parametrize("failing_after", [0, 1, 2, 3, 4, 5, 8])
def test_ambiguous_journal_create_never_loses_the_batch(url: str, lost_answers: int,
                                                        failing_after: int) -> None:
    """The create was applied but the store's answer was lost (and later calls fail too):
    the commit resolves it or fails leaving the files, and abort deletes nothing committed."""
    s = Stream.create(url, segments=2)
    w = _writer(s)
    for b in range(3):
        assert _spark_commit(w, _messages(w, b, 10), b)
    msgs = _messages(w, 3, 10)
    _ambiguous_store(s, lost_answers, failing_after)
    committed = _spark_commit(w, msgs, 3)
    s.store.observer = None
    if lost_answers == 1 and failing_after == 0:
        assert committed  # resolved by repeating the conditional create
    _check_exactly_once(url, 4, 10)  # the create was applied: the batch is there, and its files too
    _replay_until_done(url, 3, 10)  # Spark's replay is a no-op
    _check_exactly_once(url, 4, 10)
    assert Stream.open(url).state.pos == 4


def test_abort_deletes_files_of_a_batch_proved_absent(url: str) -> None:
    s = Stream.create(url, segments=2)
    w = _writer(s)
    msgs = _messages(w, 0, 10)
    w.abort(msgs, 0)
    paths = [c.path for m in msgs for c in m.chunks]
    assert paths and not any(s.store.exists(p) for p in paths)
    assert _spark_commit(w, _messages(w, 0, 10), 0)
    committed = _messages(w, 1, 10)
    assert _spark_commit(w, committed, 1)
    w.abort(committed, 1)  # a spurious abort of a committed batch deletes nothing
    _check_exactly_once(url, 2, 10)


def test_batch_write_abort_leaves_files_for_vacuum(url: str) -> None:
    s = Stream.create(url, segments=2)
    w = _writer(s, TStreamBatchWriter)
    msgs = _messages(w, 0, 10)
    w.commit(msgs)
    w.abort(msgs)  # no batch id to look up: nothing is deleted
    _check_exactly_once(url, 1, 10)
    assert Journal(s.store).head().pos == 1


def test_an_abort_keeps_the_files_of_a_published_request_another_writer_may_fold(url: str) -> None:
    """The sink's commit lost a journal race, published its group-commit request, then failed
    (a store error past the retries); Spark aborts. Another writer's next commit may still fold
    the request, so the abort must not delete the files it names: the batch would be in the
    journal with its chunks missing, and Spark's replay of it a no-op."""
    s = Stream.create(url, segments=2)
    w = _writer(s)
    msgs = _messages(w, 0, 10)
    chunks = [c for m in msgs for c in m.chunks]
    req = CommitRequest(chunks=chunks, intent=CommitIntent(writer_id="q1", batch_id=0, session=True, schema=SCHEMA),
                        now=now_ms())
    item = Published.of(new_id(), s.state.pos, req)
    s.store.write(item.path, item.encode())  # what the failed commit left published
    w.abort(msgs, 0)
    assert all(s.store.exists(c.path) for c in chunks), "the abort deleted files a request still names"
    other = Stream.open(url)
    other.appending.group.contended = 1  # a writer that lost lately lists requests before committing
    other.append(_table(1, 10), writer_id="other", batch_id=0)
    assert any(f.rid == item.rid for f in other.journal.read_entry(other.state.pos).folds)
    _check_exactly_once(url, 2, 10)  # the folded batch reads: its files are there
    assert _spark_commit(w, _messages(w, 0, 10), 0)  # Spark's replay of the batch: a no-op
    _check_exactly_once(url, 2, 10)
    assert Stream.open(url).verify().ok
