"""Spark's commit-then-abort with a real query: a failing post-commit retention pass (its
consumer group's record is unreadable) must neither fail the micro-batch nor let ``abort``
delete committed files. Before: the commit raised after its journal entry was durable, Spark
aborted, the abort deleted the batch's chunks, and the stream named chunks that were gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.api.upkeep import RETENTION_EVERY

pytestmark = pytest.mark.spark


def test_failing_retention_after_commit_keeps_the_batch(spark: Any, tmp_path: Path) -> None:
    src, ckpt, url = tmp_path / "in", tmp_path / "ckpt", f"file://{tmp_path}/stream"
    # compaction off: the test counts journal positions (an automatic compaction commit adds one)
    s = Stream.create(url, segments=2, retention="count=1000000,groups=true", compaction="off")
    while s.refresh().pos < RETENTION_EVERY - 1:  # the query's first commit takes a retention slot
        s.append(pa.table({"id": [-1 - s.state.pos], "device": ["d0"]}), key="device")
    g = Group.create(s, "audit", start="0")
    log = Path(tmp_path / "stream" / "_tstream" / "groups" / "audit")
    for f in log.rglob("*.json"):
        f.write_bytes(b"\x00 not json")  # retention's group floor cannot be read: trim() raises
    src.mkdir()
    for f in range(2):
        ids = list(range(f * 50, (f + 1) * 50))
        pq.write_table(pa.table({"id": ids, "device": [f"d{i % 5}" for i in ids]}), src / f"part-{f}.parquet")
    schema = spark.read.parquet(str(src)).schema
    q = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
         .writeStream.format("tstream").option("checkpointLocation", str(ckpt)).option("keyColumn", "device")
         .trigger(availableNow=True).start(url))
    q.awaitTermination()
    assert q.exception() is None
    out = Stream.open(url)
    ids = sorted(i for i in out.read()["id"].to_pylist() if i >= 0)
    assert ids == list(range(100))  # both batches, exactly once, every chunk still there
    assert out.state.pos == RETENTION_EVERY + 1
    del g
