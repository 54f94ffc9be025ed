"""Idempotent writes keyed by (writer, batch) on the Spark-free API: what ``df.write``'s
``writerId``/``batchId`` (Delta's ``txnAppId``/``txnVersion``) commit through.

A repeat, or with ``monotonic=True`` any batch id at or below the writer's last committed one,
commits nothing, says so in the log, and leaves no chunk file of its own behind: under
concurrent writers of the same batch and after a crash at any store call.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pyarrow as pa
import pytest
from conftest import CallLog, crash_at
from helpers import orphans
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal.state import DEDUPE_WINDOW, Writer
from pyspark_tstream.write.spec import ChunkInfo
from pyspark_tstream.write.writing import write_batches

LOGGER = "pyspark_tstream.api.append"


def _batch(batch: int, rows: int = 20) -> pa.Table:
    return pa.table({"batch": [batch] * rows, "i": list(range(rows)),
                     "key": [f"k{(batch * 7 + i) % 13}" for i in range(rows)]})


def _task_chunks(s: Stream, table: pa.Table) -> list[ChunkInfo]:
    """What a Spark task does: write chunks no commit names yet."""
    return write_batches(s.write_spec(table.schema, key="key"), [table], task="t")


def _batch_ids(s: Stream) -> list[int]:
    return sorted(s.read()["batch"].to_pylist())


def test_monotonic_batch_ids_skip_equal_and_older_and_log_it(url: str, caplog: pytest.LogCaptureFixture) -> None:
    s = Stream.create(url, segments=2)
    first = s.append(_batch(5), key="key", writer_id="etl", batch_id=5, monotonic=True)
    assert not first.duplicate
    with caplog.at_level(logging.INFO, logger=LOGGER):
        again = s.append(_batch(5), key="key", writer_id="etl", batch_id=5, monotonic=True)
        older = s.append(_batch(3), key="key", writer_id="etl", batch_id=3, monotonic=True)
    assert again.duplicate and again.pos == first.pos and again.rows == 20
    assert older.duplicate and older.pos == -1 and older.rows == 0
    assert older.note.startswith("tstream: batch 3 of writer 'etl' is not above its last committed batch 5")
    texts = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert texts == [(f"tstream: batch 5 of writer 'etl' was already committed at journal position "
                      f"{first.pos}; nothing appended"),
                     (f"tstream: batch 3 of writer 'etl' is not above its last committed batch 5 "
                      f"(journal position {first.pos}): batch ids of an idempotent writer only increase; "
                      "nothing appended")]
    assert _batch_ids(s) == [5] * 20
    assert not s.append(_batch(6), key="key", writer_id="etl", batch_id=6, monotonic=True).duplicate
    # the default stays an exact window: an older id that never committed is committed
    assert not s.append(_batch(4), key="key", writer_id="etl", batch_id=4).duplicate
    # other writers are unaffected
    assert not s.append(_batch(1), key="key", writer_id="other", batch_id=1, monotonic=True).duplicate
    assert _batch_ids(s) == [1] * 20 + [4] * 20 + [5] * 20 + [6] * 20
    assert not orphans(s)  # skipped appends wrote no file at all


def test_last_batch_survives_the_window() -> None:
    """The last integer batch id is known exactly after the window forgot it (the floor)."""
    w = Writer()
    w.remember(7, 1)
    for n in range(DEDUPE_WINDOW):
        w.remember(f"file-{n}", 2 + n)  # string ids push 7 out of the window
    assert all(b != 7 for b, _ in w.batches)
    assert w.last_batch() == 7
    assert Writer().last_batch() is None


def test_a_repeat_deletes_the_files_written_for_it(url: str, caplog: pytest.LogCaptureFixture) -> None:
    s = Stream.create(url, segments=2)
    s.append(_batch(1), key="key", writer_id="etl", batch_id=1, monotonic=True)
    replay = _task_chunks(s, _batch(1))
    assert all(s.store.exists(c.path) for c in replay)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        ack = s.commit(replay, writer_id="etl", batch_id=1, schema=_batch(1).schema, monotonic=True, fresh=True)
    assert ack.duplicate and ack.rows == 20
    assert not any(s.store.exists(c.path) for c in replay)
    # a task writes one file, shared by its segments' chunks (wide writes)
    assert f"this attempt's {len({c.path for c in replay})} chunk file(s) deleted" in caplog.text
    assert not orphans(s) and _batch_ids(s) == [1] * 20
    # chunks not known to be fresh may be the ones an unknown-outcome commit named: kept
    kept = _task_chunks(s, _batch(1))
    assert s.commit(kept, writer_id="etl", batch_id=1, schema=_batch(1).schema).duplicate
    assert orphans(s) == {c.path for c in kept}


def test_a_repeat_never_deletes_what_the_earlier_commit_named(url: str) -> None:
    """A retry handing over the very chunks of a commit that did land deletes nothing."""
    s = Stream.create(url, segments=2)
    chunks = _task_chunks(s, _batch(1))
    s.commit(chunks, writer_id="etl", batch_id=1, schema=_batch(1).schema, monotonic=True)
    ack = s.commit(chunks, writer_id="etl", batch_id=1, schema=_batch(1).schema, monotonic=True, fresh=True)
    assert ack.duplicate and all(s.store.exists(c.path) for c in chunks)
    assert _batch_ids(s) == [1] * 20


def test_concurrent_writers_of_one_batch_commit_it_once(url: str) -> None:
    """Four committers of the same (writer, batch), all with their files written: one wins,
    the others are no-ops that delete their files."""
    Stream.create(url, segments=3).append(_batch(0), key="key", writer_id="etl", batch_id=0, monotonic=True)
    ready = threading.Barrier(4)
    acks: list[Any] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            s = Stream.open(url)
            chunks = _task_chunks(s, _batch(1))
            ready.wait()
            acks.append(s.commit(chunks, writer_id="etl", batch_id=1, schema=_batch(1).schema,
                                 monotonic=True, fresh=True))
        except BaseException as e:  # noqa: BLE001 - surfaced below: a thread must not hide a failure
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert sorted(a.duplicate for a in acks) == [False, True, True, True]
    assert len({a.pos for a in acks}) == 1  # the no-ops answer with the winner's commit
    s = Stream.open(url)
    assert _batch_ids(s) == [0] * 20 + [1] * 20
    assert not orphans(s)


def test_crash_at_any_store_call_then_retry_is_exactly_once(url: str, calllog: CallLog) -> None:
    """A crash at every store call of an idempotent append; retrying (writer, batch) then
    appends it exactly once, and no retry leaves a file behind."""
    probe = Stream.create(url + "-probe", segments=2)
    probe.append(_batch(0), key="key", writer_id="etl", batch_id=0, monotonic=True)
    probe.store.observer = calllog
    probe.append(_batch(1), key="key", writer_id="etl", batch_id=1, monotonic=True)
    total = calllog.count()
    assert total >= 3  # the data file, the conditional create, the head hint
    landed = 0
    for k in range(1, total + 1):
        name = f"{url}-{k}"
        s = Stream.create(name, segments=2)
        s.append(_batch(0), key="key", writer_id="etl", batch_id=0, monotonic=True)
        log = crash_at(s, k, lambda s: s.append(_batch(1), key="key", writer_id="etl", batch_id=1, monotonic=True))
        fresh = Stream.open(name)
        landed += _batch_ids(fresh) == [0] * 20 + [1] * 20
        crashed = orphans(fresh)  # the crashed attempt's own files, for vacuum(orphans=True)
        fresh.append(_batch(1), key="key", writer_id="etl", batch_id=1, monotonic=True)
        replay = _task_chunks(fresh, _batch(1))  # a replay whose files exist before it commits
        assert fresh.commit(replay, writer_id="etl", batch_id=1, schema=_batch(1).schema,
                            monotonic=True, fresh=True).duplicate
        assert fresh.append(_batch(0), key="key", writer_id="etl", batch_id=0, monotonic=True).duplicate
        fresh.append(_batch(2), key="key", writer_id="etl", batch_id=2, monotonic=True)
        final = Stream.open(name)
        assert _batch_ids(final) == [0] * 20 + [1] * 20 + [2] * 20, f"crash at call {k}: {log.calls[-1]}"
        assert orphans(final) == crashed, f"crash at call {k}: a retry leaked files"
    assert 0 < landed < total  # some crashes came before the commit landed, some after
