"""A live pipeline while compaction runs: streaming sink, streaming consumers, garbage collection."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import StreamNotFoundError

pytestmark = [pytest.mark.slow, pytest.mark.spark]  # a live pipeline for 20 s


def _has_rows(url: str) -> bool:
    try:
        return Stream.open(url).state.rows > 0
    except StreamNotFoundError:
        return False


def _started(query: Any) -> None:
    while not query.recentProgress:
        assert query.exception() is None, query.exception()
        time.sleep(0.2)


def test_live_pipeline_with_compaction(spark: Any, tmp_path: Path) -> None:
    """A sink with a short trigger feeds a stream whose chunks are compacted (automatically by
    the sink's commits and by a background compactor + vacuum) while a consumer reads every
    record and a windowed count with a zero-delay watermark runs: the consumer gets every
    record exactly once, the windows equal the batch answer, and the chunk count stays bounded."""
    from pyspark.sql import functions as F

    url = f"file://{tmp_path}/stream"
    source = (spark.readStream.format("rate").option("rowsPerSecond", 150).option("numPartitions", 1).load()
              .select(F.col("value").alias("v"), F.concat(F.lit("k"), (F.col("value") % 8).cast("string")).alias("k"),
                      F.col("timestamp").alias("t")))
    sink = (source.writeStream.format("tstream").option("checkpointLocation", str(tmp_path / "ck-sink"))
            .option("keyColumn", "k").option("timestampColumn", "t").option("segments", "2")
            .option("compaction", "target=1MB,min=4").trigger(processingTime="250 milliseconds").start(url))
    while not _has_rows(url):
        assert sink.exception() is None
        time.sleep(0.2)

    records: list[tuple[int, int, int]] = []
    windows: list[Any] = []
    raw = (spark.readStream.format("tstream").load(url).writeStream
           .foreachBatch(lambda df, _: records.extend((r["v"], r["_segment"], r["_seq"]) for r in
                                                      df.select("v", "_segment", "_seq").collect()))
           .option("checkpointLocation", str(tmp_path / "ck-raw")).trigger(processingTime="500 milliseconds")
           .start())
    _started(raw)  # one query at a time: Python workers start slowly on a busy machine
    win = (spark.readStream.format("tstream").load(url).withWatermark("_timestamp", "0 seconds")
           .groupBy(F.window("_timestamp", "1 second")).count()
           .writeStream.foreachBatch(lambda df, _: windows.extend(df.collect())).outputMode("append")
           .option("checkpointLocation", str(tmp_path / "ck-win")).trigger(processingTime="500 milliseconds")
           .start())

    _started(win)
    stop = threading.Event()
    errors: list[BaseException] = []
    runs = []

    def compactor() -> None:
        s = Stream.open(url)
        try:
            while not stop.wait(1.0):
                runs.append(s.compact(full=False))
                s.vacuum(grace_ms=12_000)  # replaced files go while the consumers keep reading
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    t = threading.Thread(target=compactor)
    t.start()
    try:
        time.sleep(20)
    finally:
        sink.stop()
        stop.set()
        t.join()
    assert not errors, errors
    assert sink.exception() is None
    s = Stream.open(url)
    for wid in list(s.refresh().writers):  # the stopped sink stops holding the tick
        s.writer(wid).close()
    raw.processAllAvailable()
    win.processAllAvailable()
    raw.stop()
    win.stop()

    state = s.refresh()
    batch = spark.read.format("tstream").load(url)
    total = batch.count()
    assert total == state.rows > 1_000
    # every record exactly once, by identity and by value
    ids = [(seg, seq) for _, seg, seq in records]
    assert len(ids) == len(set(ids)) == total
    assert sorted(v for v, _, _ in records) == sorted(r["v"] for r in batch.select("v").collect())
    # the zero-delay watermark dropped nothing: every closed window equals the batch count
    expected = {r["window"]["start"]: r["count"] for r in batch.groupBy(F.window("_timestamp", "1 second"))
                .count().collect()}
    streamed = {r["window"]["start"]: r["count"] for r in windows}
    assert len(streamed) == len(windows) and streamed
    for start, count in streamed.items():
        assert expected[start] == count, f"window {start}: streamed {count}, batch {expected[start]}"
    assert set(expected) - set(streamed) <= {max(expected)}
    # compaction ran during the pipeline and kept the number of files a full read opens bounded
    ops = [d.op for d in s.journal.deltas(state, 1, state.pos)]
    assert ops.count("compact") >= 3 and sum(r.macros for r in runs) + ops.count("compact") >= 3
    files = {c.path for c in s.plan(state.head_tso, state.tick)}
    assert state.chunks >= 3 * len(files), (state.chunks, len(files))
