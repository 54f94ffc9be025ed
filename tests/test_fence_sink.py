"""The orphan fence on the Spark sink's commit (store/fence.py, ``Fence.since_wall``): tasks stamp
the wall-clock time they started writing, and a driver's commit that finds its batch's earliest
stamp older than the fence margin checks the files exist before committing.

No Spark session: the writers are plain Python objects, driven as Spark drives them (tasks'
``write``, then the driver's ``commit`` and, if it raised, ``abort``), as in tests/test_failures.py.
A stall is the driver's wall clock moved forward; orphan cleanup's work is done by deleting the
files it would have taken.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from conftest import CallLog
from pyspark_tstream import timestamps
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.conf.options import SinkOptions
from pyspark_tstream.errors import StaleWriteError
from pyspark_tstream.sink import writer as writer_mod
from pyspark_tstream.sink.writer import (
    JournalCommitter,
    TaskChunkWriter,
    TaskCommitMessage,
    TStreamStreamWriter,
    written_ms,
)
from pyspark_tstream.spark.handle import StreamHandle
from pyspark_tstream.store.fence import FENCE_MARGIN_MS
from pyspark_tstream.write.writing import write_batches

SCHEMA = pa.schema([("id", pa.int64()), ("key", pa.string())])
HOUR_MS = 3_600_000


@pytest.fixture(autouse=True)
def _no_allocator_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task tunes its worker's allocator; this test process is no worker."""
    monkeypatch.setattr(writer_mod, "keep_freed_memory", lambda: False)


def _table(batch: int, rows: int = 20) -> pa.Table:
    ids = [batch * 1000 + i for i in range(rows)]
    return pa.table({"id": ids, "key": [f"k{i % 5}" for i in ids]}, schema=SCHEMA)


def _writer(stream: Stream) -> TStreamStreamWriter:
    opts = SinkOptions.from_options({"path": stream.url, "writerId": "q1", "keyColumn": "key"})
    return TStreamStreamWriter(TaskChunkWriter(stream.write_spec(SCHEMA, key="key"), SCHEMA),
                               JournalCommitter(opts, SCHEMA, session=True, handle=StreamHandle.of(stream)))


def _tasks(w: TStreamStreamWriter, batch: int) -> list[TaskCommitMessage]:
    """Two tasks of one micro-batch, through the sink's task writer (which stamps them)."""
    t = _table(batch)
    return [w.tasks.write(iter(part.to_batches())) for part in (t.slice(0, 10), t.slice(10))]


def _stalled(monkeypatch: pytest.MonkeyPatch, ms: int) -> None:
    """The driver's wall clock ``ms`` ahead of the tasks' (the process stalled that long)."""
    real = timestamps.now_ms
    monkeypatch.setattr(timestamps, "now_ms", lambda: real() + ms)


def _spark_commit(w: TStreamStreamWriter, messages: list[Any], batch: int) -> BaseException | None:
    """Spark's commit of a micro-batch, and its abort if the commit raised (what it raised)."""
    try:
        w.commit(messages, batch)
        return None
    except Exception as e:  # noqa: BLE001 - Spark aborts whatever commit raised
        w.abort(messages, batch)
        return e


def test_tasks_stamp_when_they_started_writing() -> None:
    s = Stream.create("memory://fence-sink-stamp/stream", segments=2)
    before = timestamps.now_ms()
    msgs = _tasks(_writer(s), 0)
    assert all(m.started_ms is not None and before <= m.started_ms <= timestamps.now_ms() for m in msgs)
    # the batch's fence starts at its earliest stamp, among tasks that wrote chunks
    empty = TaskCommitMessage(2, 0, (), 5)
    stamped = [TaskCommitMessage(0, 0, m.chunks, ms) for m, ms in zip(msgs, (900, 700))]
    assert written_ms([*stamped, empty, None]) == 700
    assert written_ms([TaskCommitMessage(0, 0, msgs[0].chunks)]) is None  # unstamped: no fence


def test_a_micro_batch_stalled_past_the_margin_refuses_files_cleanup_deleted(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Stream.create(url, segments=2)
    w = _writer(s)
    assert _spark_commit(w, _tasks(w, 0), 0) is None
    before = Stream.open(url).state.pos
    msgs = _tasks(w, 1)
    gone = [c.path for c in msgs[0].chunks]
    left = [c.path for c in msgs[1].chunks]
    s.store.delete(gone)  # orphan cleanup, while the driver was stalled past the grace
    _stalled(monkeypatch, 2 * HOUR_MS)
    err = _spark_commit(w, msgs, 1)
    assert isinstance(err, StaleWriteError) and err.retriable
    assert set(err.missing) == {s.store.uri(p) for p in gone}
    fresh = Stream.open(url)
    assert fresh.state.pos == before  # nothing committed
    assert sorted(fresh.read()["id"].to_pylist()) == list(range(20))  # batch 0, its files intact
    assert not any(s.store.exists(p) for p in left)  # abort: the uncommitted batch's own files
    # a restarted query replays the batch: its tasks write again and the commit lands
    monkeypatch.undo()
    monkeypatch.setattr(writer_mod, "keep_freed_memory", lambda: False)
    assert _spark_commit(w, _tasks(w, 1), 1) is None
    assert sorted(Stream.open(url).read()["id"].to_pylist()) == [*range(20), *range(1000, 1020)]


def test_a_stalled_micro_batch_whose_files_survived_commits_with_one_existence_check(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Stream.create(url, segments=2)
    w = _writer(s)
    msgs = _tasks(w, 0)
    _stalled(monkeypatch, FENCE_MARGIN_MS + 60_000)
    log = CallLog()
    s.store.observer = log
    assert _spark_commit(w, msgs, 0) is None
    assert log.count("exists") == 1  # one batched check of both tasks' files
    assert Stream.open(url).read().num_rows == 20


@pytest.mark.parametrize("driver_ahead_ms", [0, FENCE_MARGIN_MS - 60_000, -HOUR_MS])
def test_a_micro_batch_within_the_margin_makes_no_extra_store_call(
        url: str, monkeypatch: pytest.MonkeyPatch, driver_ahead_ms: int) -> None:
    """Within the margin, and with a task's clock ahead of the driver's: no existence call, the
    same calls as a commit of unstamped messages."""
    s = Stream.create(url, segments=2)
    w = _writer(s)
    assert _spark_commit(w, _tasks(w, 0), 0) is None
    _stalled(monkeypatch, driver_ahead_ms)
    counts = []
    for batch, stamp in ((1, True), (2, False)):
        msgs = _tasks(w, batch)
        if not stamp:
            msgs = [TaskCommitMessage(m.partition, m.attempt, m.chunks) for m in msgs]
        log = CallLog()
        s.store.observer = log
        assert _spark_commit(w, msgs, batch) is None
        s.store.observer = None
        assert log.count("exists") == 0
        counts.append(log.by_op())
    assert counts[0] == counts[1]


def test_stream_commit_fences_caller_written_chunks_given_their_stamp(url: str) -> None:
    """``Stream.commit(written_ms=...)``: the same fence for a caller that wrote the chunks."""
    s = Stream.create(url, segments=1)
    spec = s.write_spec(SCHEMA, key="key")
    stamp = timestamps.now_ms() - 2 * HOUR_MS  # written two hours ago, on some host
    chunks = write_batches(spec, [_table(0)], ordered=True)
    s.store.delete([chunks[0].path])
    with pytest.raises(StaleWriteError):
        s.commit(chunks, writer_id="c", batch_id=0, schema=SCHEMA, fresh=True, written_ms=stamp)
    assert Stream.open(url).read().num_rows == 0
