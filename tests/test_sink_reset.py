"""A streaming sink's writer comes from its checkpoint: a fresh checkpoint at the same path is a
new writer (its batch 0 lands), the same checkpoint keeps its writer (a replay is a no-op), and a
checkpoint from before writers were pinned keeps the path-hash writer it committed under."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.datasource.source import TStreamDataSource
from pyspark_tstream.errors import CorruptMetadataError
from pyspark_tstream.sink.identity import MARKER, checkpoint_writer, path_writer

SCHEMA = StructType([StructField("id", LongType()), StructField("key", StringType())])


def _spark_checkpoint(folder: Path, query_id: str, committed: int = 0) -> None:
    """A checkpoint folder as Spark leaves it: ``metadata`` and ``committed`` batches."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    if committed:
        (folder / "commits").mkdir()
        for b in range(committed):
            (folder / "commits" / str(b)).write_text("v1\n{}\n")


def _commit_batch(url: str, ckpt: Path, batch_id: int, ids: range) -> None:
    """One micro-batch as PySpark drives it: a writer for the tasks, a fresh one for the commit."""
    source = TStreamDataSource({"path": url, "keyColumn": "key", "checkpointLocation": str(ckpt)})
    batch = pa.record_batch({"id": pa.array(ids, pa.int64()), "key": ["k"] * len(ids)})
    messages = [source.streamWriter(SCHEMA, False).write(iter([batch]))]
    source.streamWriter(SCHEMA, False).commit(messages, batch_id)


def test_a_fresh_checkpoint_at_the_same_path_is_a_new_writer(tmp_path: Path) -> None:
    url, ckpt = f"file://{tmp_path}/s", tmp_path / "ck"
    _spark_checkpoint(ckpt, "1111")
    _commit_batch(url, ckpt, 0, range(0, 10))
    _commit_batch(url, ckpt, 0, range(0, 10))  # a replay of batch 0: a no-op
    assert Stream.open(url).read().num_rows == 10
    shutil.rmtree(ckpt)  # the usual reset: a new checkpoint at the same path
    _spark_checkpoint(ckpt, "2222")
    _commit_batch(url, ckpt, 0, range(10, 20))
    # the old query's writer stays live (its lease) and holds reads back: count what was committed
    writers = Stream.open(url).info().writers
    assert {w: v.rows for w, v in writers.items()} == {"query-1111": 10, "query-2222": 10}


def test_a_checkpoint_from_before_pinning_keeps_its_path_writer(tmp_path: Path) -> None:
    """An old query (path-hash writer, batches Spark committed, no marker) replays its last
    batch after the upgrade: still a no-op, and its next batch lands."""
    url, ckpt = f"file://{tmp_path}/s", tmp_path / "ck"
    stream = Stream.create(url, schema=pa.schema([("id", pa.int64()), ("key", pa.string())]))
    old = path_writer(str(ckpt))
    for b in (0, 1):  # committed by the sink before the upgrade
        stream.append(pa.table({"id": pa.array(range(b * 10, b * 10 + 10), pa.int64()), "key": ["k"] * 10}),
                      key="key", writer_id=old, batch_id=b)
    _spark_checkpoint(ckpt, "3333", committed=1)  # Spark died before recording batch 1
    _commit_batch(url, ckpt, 1, range(10, 20))  # its replay
    _commit_batch(url, ckpt, 2, range(20, 30))
    assert sorted(Stream.open(url).read()["id"].to_pylist()) == list(range(30))
    assert set(Stream.open(url).refresh().writers) == {old}
    assert json.loads((ckpt / MARKER).read_text())["writer"] == old


def test_the_writer_is_pinned_before_spark_commits_batch_0(tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    _spark_checkpoint(ckpt, "4444")
    assert checkpoint_writer(str(ckpt)) == "query-4444"
    _spark_checkpoint(ckpt, "4444", committed=1)  # Spark recorded batch 0
    assert checkpoint_writer(str(ckpt)) == "query-4444"


def test_an_unreachable_checkpoint_falls_back_to_the_path_and_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert checkpoint_writer(str(tmp_path / "nowhere")) == path_writer(str(tmp_path / "nowhere"))
    assert "give each fresh checkpoint its own .option('writerId'" in caplog.text


def test_a_damaged_pin_fails_rather_than_switching_writers(tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    _spark_checkpoint(ckpt, "5555")
    assert checkpoint_writer(str(ckpt)) == "query-5555"
    (ckpt / MARKER).write_text("{not json")
    with pytest.raises(CorruptMetadataError, match="holds no writer id, so the sink cannot tell which of its "
                                                   "batches are replays"):
        checkpoint_writer(str(ckpt))
