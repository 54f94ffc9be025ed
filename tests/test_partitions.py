"""Executors get everything in the partition: Spark's contract for ``read`` and ``write``, without Spark.

PySpark pickles a reader (and a writer) and runs ``read(partition)`` (``write(rows)``) on an
executor that has only that copy and the partition (the task's rows). These tests do what
Spark does — pickle, unpickle, call — in this process with the stream's ``open`` made to fail,
so anything that re-opened the stream (read its journal) on an executor would fail here. They
also pin what travels: a partition is its chunks plus a few hundred bytes, and a pickled reader
or writer carries no opened stream.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import T0
from process_roles import stream as _roles_stream
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.datasource.partitions import TStreamPartition, read_partition
from pyspark_tstream.datasource.source import TStreamDataSource
from pyspark_tstream.store.storage import Store


def _two_segment_stream(tmp_path: Path, appends: int = 6, rows: int = 50) -> str:
    """Two segments: ``appends`` appends of ``rows`` records (``id``, key ``k``, time ``t``)."""
    return _roles_stream(tmp_path, appends, rows)


@pytest.fixture
def no_open(monkeypatch: pytest.MonkeyPatch) -> Any:
    """After this fixture's ``arm()``, opening a stream fails (what an executor must never need)."""

    class Armed:
        def arm(self) -> None:
            def refuse(*args: Any, **kwargs: Any) -> Any:
                raise AssertionError("an executor opened the stream: its partition should carry what it needs")

            monkeypatch.setattr(Stream, "at", classmethod(refuse))  # Stream.open goes through it

    return Armed()


def _ids(batches: Any) -> list[int]:
    return sorted(i for b in batches for i in b.column("id").to_pylist())


def test_batch_partitions_read_alone_on_a_pickled_reader(tmp_path: Path, no_open: Any) -> None:
    source = TStreamDataSource({"path": _two_segment_stream(tmp_path), "minPartitions": "3"})
    reader = source.reader(source.schema())
    parts = reader.partitions()
    assert len(parts) >= 3
    shipped_reader, shipped = pickle.dumps(reader), [pickle.dumps(p) for p in parts]
    no_open.arm()
    executor = pickle.loads(shipped_reader)
    assert _ids(b for p in shipped for b in executor.read(pickle.loads(p))) == list(range(300))
    # the partition alone is enough, whatever reader reads it
    assert _ids(b for p in shipped for b in read_partition(pickle.loads(p))) == list(range(300))


def test_micro_batch_partitions_read_alone_on_a_pickled_reader(tmp_path: Path, no_open: Any) -> None:
    source = TStreamDataSource({"path": _two_segment_stream(tmp_path), "minPartitions": "2"})
    reader = source.streamReader(source.schema())
    start = reader.initialOffset()
    parts = reader.partitions(start, reader.latestOffset(start, reader.getDefaultReadLimit()))
    # Spark pickles the reader it created for planning; a reader that already planned batches
    # (and holds its index window) pickles just as small: the window stays in this process
    fresh, used = pickle.dumps(source.streamReader(source.schema())), pickle.dumps(reader)
    assert len(used) < len(fresh) + 500, (len(fresh), len(used))
    shipped = [pickle.dumps(p) for p in parts]
    no_open.arm()
    executor = pickle.loads(used)
    assert _ids(b for p in shipped for b in executor.read(pickle.loads(p))) == list(range(300))


def test_partition_pickles_to_its_chunks_plus_a_small_constant(tmp_path: Path) -> None:
    source = TStreamDataSource({"path": _two_segment_stream(tmp_path, appends=40, rows=5), "maxPartitions": "1"})
    reader = source.reader(source.schema())
    (part,) = reader.partitions()
    assert isinstance(part, TStreamPartition) and len(part.task.chunks) >= 40
    whole, task = len(pickle.dumps(part)), len(pickle.dumps(part.task))
    assert whole - task < 1500, (whole, task)  # store location and two schemas, once per partition


def test_a_micro_batch_commit_runner_gets_a_patient_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark commits a micro-batch on a fresh ``streamWriter`` in its commit runner: that writer
    belongs to a running query, so its store waits out outages (``storeRetryTimeout``) from its
    first call; the writer a query starts with does not (a wrong endpoint fails in seconds)."""
    import types

    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark_tstream.spark.compat import STREAM_COMMIT_WORKER

    url = _two_segment_stream(tmp_path, appends=1)
    source = TStreamDataSource({"path": url, "keyColumn": "k", "storeRetryTimeout": "90s"})
    schema = from_arrow_schema(Stream.open(url).schema)
    runner = types.ModuleType(STREAM_COMMIT_WORKER)
    runner.__dict__["source"], runner.__dict__["schema"] = source, schema
    exec("def _main():\n    return source.streamWriter(schema=schema, overwrite=False)\n", runner.__dict__)  # noqa: S102 - a caller in a named module
    first_calls: list[bool] = []  # whether each store was patient already at its first call
    real_call = Store._call

    def recording(self: Store, op: str, rel: str, fn: Any) -> Any:
        if not getattr(self, "_seen", False):
            self._seen = True  # type: ignore[attr-defined]
            first_calls.append(self.reached)
        return real_call(self, op, rel, fn)

    monkeypatch.setattr(Store, "_call", recording)
    for make, reached in ((lambda: source.streamWriter(schema, False), False), (runner._main, True)):
        first_calls.clear()
        writer = make()
        assert first_calls and first_calls[0] is reached  # the store it opened the stream with
        assert writer.committer.handle.store.retry.patience == 90
        # and the tasks' copy of the store: patient once the driver reached it
        assert pickle.loads(pickle.dumps(writer.tasks)).spec.store.reached is True


def test_writer_tasks_write_without_the_stream_and_commit_reopens_it_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _two_segment_stream(tmp_path, appends=1)
    schema = Stream.open(url).schema
    from pyspark.sql.pandas.types import from_arrow_schema

    source = TStreamDataSource({"path": url, "keyColumn": "k", "timestampColumn": "t", "writerId": "w1"})
    shipped = pickle.dumps(source.writer(from_arrow_schema(schema), overwrite=False))
    opened: list[str] = []
    real_at = Stream.at.__func__  # type: ignore[attr-defined]

    def counting(cls: type, store: Any) -> Any:  # every open goes through Stream.at
        opened.append(store.url)
        return real_at(cls, store)

    monkeypatch.setattr(Stream, "at", classmethod(counting))
    ids = list(range(1000, 1100))
    batch = pa.RecordBatch.from_pydict({"id": ids, "k": [f"k{i % 3}" for i in ids],
                                        "t": pa.array([T0 + i for i in ids], pa.timestamp("ms", tz="UTC"))},
                                       schema=schema)
    messages = [pickle.loads(shipped).write(iter([batch]))]  # an executor's task
    assert opened == []
    committer = pickle.loads(shipped)  # Spark's commit worker gets its own copy
    committer.commit(messages)
    assert len(opened) == 1
    assert sorted(Stream.open(url).read()["id"].to_pylist()) == list(range(50)) + ids


def test_a_task_pickles_its_chunks_as_their_fields(tmp_path: Path) -> None:
    """A 200-task write into 64 segments plans 12,800 slices into one task: they travel as
    their field values (no class reference and field names a chunk), and come back equal."""
    url = f"file://{tmp_path}/wide"
    s = Stream.create(url, segments=64)
    for a in range(4):
        ids = list(range(a * 640, (a + 1) * 640))
        s.append(pa.table({"id": ids, "k": [f"k{i % 200}" for i in ids],
                           "t": pa.array([T0 + i for i in ids], pa.timestamp("ms", tz="UTC"))}),
                 key="k", timestamp="t")
    source = TStreamDataSource({"path": url, "maxPartitions": "1"})
    (part,) = source.reader(source.schema()).partitions()
    assert isinstance(part, TStreamPartition)
    task = part.task
    assert len(task.chunks) > 200
    back = pickle.loads(pickle.dumps(task))
    assert back == task and [c.__dict__ for c in back.chunks] == [c.__dict__ for c in task.chunks]
    per_chunk = len(pickle.dumps(task)) / len(task.chunks)
    assert per_chunk < 60, per_chunk  # a chunk's 14 fields as a tuple of small ints, its path shared
