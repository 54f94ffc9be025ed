"""Writer lanes through Spark: shuffled writes and writers with skewed clocks keep event times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import DAY, T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.epochs.routing import KEY_SPACE, key_hash, route

pytestmark = pytest.mark.spark


def test_repartitioned_batch_write_keeps_every_event_time(spark: Any, tmp_path: Path) -> None:
    """The issue's repro: a shuffled df.write reads back with 0 moved records (was 99,928)."""
    url = f"file://{tmp_path}/s"
    (spark.range(100_000).selectExpr("id", f"timestamp_millis({T0} + id) as et").repartition(4)
     .write.format("tstream").mode("append").option("timestampColumn", "et").save(url))
    df = spark.read.format("tstream").load(url)
    assert df.count() == 100_000
    assert df.filter("_timestamp != et").count() == 0
    # ids stay unique and _seq dense per segment
    assert df.select("_segment", "_seq").distinct().count() == 100_000


def _keys_two_sharing_a_segment(segments: int) -> tuple[str, str, str]:
    """Two keys routed to one segment, a third to another."""
    keys = [f"site-{i}" for i in range(300)]
    bounds = [i * KEY_SPACE // segments for i in range(segments)]
    segs = route(key_hash(pa.array(keys), name="airport"), bounds).tolist()
    a = keys[0]
    b = next(k for k, s in zip(keys[1:], segs[1:]) if s == segs[0])
    c = next(k for k, s in zip(keys, segs) if s != segs[0])
    return a, b, c


@pytest.mark.slow  # by default: test_spark_source's tick-aligned batches with skewed writers
def test_skewed_writers_sharing_a_segment_keep_times_and_windows(spark: Any, tmp_path: Path) -> None:
    """Three declared writers, one a month ahead, two sharing a segment: 0 moved records, and a
    zero-delay-watermark windowed count equals the batch count and the count by client time."""
    from pyspark.sql import functions as F

    url = f"file://{tmp_path}/s"
    a, b, c = _keys_two_sharing_a_segment(8)
    ahead = {a: 30, b: 0, c: 0}
    Stream.create(url, segments=8, timestamping_uncapped=True, writers=[a, b, c])
    for month in range(3):
        for key, days_ahead in ahead.items():
            start = T0 + (days_ahead + month * 30) * DAY
            (spark.range(3_000).selectExpr(f"'{key}' as airport", "id",
                                           f"timestamp_millis({start} + id * {30 * DAY // 3_000}) as t")
             .repartition(3)
             .write.format("tstream").mode("append").option("writerId", key)
             .option("keyColumn", "airport").option("timestampColumn", "t").save(url))
    df = spark.read.format("tstream").load(url)
    assert df.filter("_timestamp != t").count() == 0
    shared = df.filter(F.col("airport").isin(a, b)).select("_segment").distinct().count()
    assert shared == 1, "two writers share a segment"
    # the fast writer's last month is above the tick (its slower peers have not reached it)
    assert df.count() < 9 * 3_000

    emitted: list[Any] = []
    q = (spark.readStream.format("tstream").load(url).withWatermark("_timestamp", "0 seconds")
         .groupBy(F.window("_timestamp", "1 day")).count()
         .writeStream.foreachBatch(lambda d, _: emitted.extend(d.collect())).outputMode("append")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination()
    by_tso = {r["window"]["start"]: r["count"] for r in df.groupBy(F.window("_timestamp", "1 day")).count().collect()}
    by_client = {r["window"]["start"]: r["count"] for r in df.groupBy(F.window("t", "1 day")).count().collect()}
    streamed = {r["window"]["start"]: r["count"] for r in emitted}
    assert by_tso == by_client
    assert streamed and len(streamed) == len(emitted)
    for start, count in streamed.items():
        assert by_tso[start] == count, start
    assert set(by_tso) - set(streamed) <= {max(by_tso)}, "a closed window was dropped"
