"""The Spark sink: df.write / df.writeStream .format("tstream"), exactly-once, bad input."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark_tstream.api.stream import Stream

pytestmark = pytest.mark.spark


def _input_files(folder: Path, files: int, rows: int, start: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(start, start + files):
        ids = list(range(f * rows, (f + 1) * rows))
        pq.write_table(pa.table({"id": ids, "device": [f"d{i % 5}" for i in ids],
                                 "t": pa.array([1_700_000_000_000 + i for i in ids], pa.timestamp("ms"))}),
                       folder / f"part-{f:04d}.parquet")


def _run_file_to_tstream(spark: Any, src: Path, url: str, ckpt: Path, **options: str) -> None:
    schema = spark.read.parquet(str(src)).schema
    q = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
         .writeStream.format("tstream").options(**options).option("checkpointLocation", str(ckpt))
         .option("keyColumn", "device").option("timestampColumn", "t")
         .trigger(availableNow=True).start(url))
    q.awaitTermination()
    assert q.exception() is None


def test_stream_sink_exactly_once_after_replay(spark: Any, tmp_path: Path) -> None:
    src, ckpt, url = tmp_path / "in", tmp_path / "ckpt", f"file://{tmp_path}/stream"
    _input_files(src, files=3, rows=50)
    _run_file_to_tstream(spark, src, url, ckpt)
    commits = sorted((ckpt / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()  # Spark now replays that batch with the same batchId
    crc = last.with_name(f".{last.name}.crc")
    if crc.exists():
        crc.unlink()
    _input_files(src, files=1, rows=50, start=3)
    _run_file_to_tstream(spark, src, url, ckpt)
    t = Stream.open(url).read()
    assert t.num_rows == 200
    assert sorted(t["id"].to_pylist()) == list(range(200))
    writers = Stream.open(url).info().writers
    assert len(writers) == 1 and next(iter(writers)).startswith("query-")


def test_stream_sink_restarted_from_a_fresh_checkpoint_at_the_same_path(spark: Any, tmp_path: Path) -> None:
    """Deleting the checkpoint (the usual reset) makes a new query: its batch 0 is not a replay
    of the old query's batch 0, so its records land."""
    import shutil

    ckpt, url = tmp_path / "ckpt", f"file://{tmp_path}/stream"
    _input_files(tmp_path / "in", files=2, rows=50)
    # a short lease: the stopped query's writer holds reads back only briefly
    _run_file_to_tstream(spark, tmp_path / "in", url, ckpt, writerLeaseMs="500")
    shutil.rmtree(ckpt)
    _input_files(tmp_path / "in2", files=2, rows=50, start=2)
    _run_file_to_tstream(spark, tmp_path / "in2", url, ckpt)
    writers = Stream.open(url).info().writers
    assert len(writers) == 2 and sum(w.rows for w in writers.values()) == 200
    assert sorted(spark.read.format("tstream").load(url).select("id").toPandas()["id"]) == list(range(200))


def test_batch_write_round_trip_with_system_columns(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    df = spark.range(600).selectExpr("id", "concat('k', cast(id % 9 as string)) as key",
                                     "timestamp_millis(1700000000000 + id * 10) as t", "id * 2.5 as v")
    df.write.format("tstream").mode("append").option("keyColumn", "key").option("timestampColumn", "t") \
        .option("segments", "3").save(url)
    r = spark.read.format("tstream").load(url)
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in r.schema.fields][-4:] == [
        ("_timestamp", "timestamp", False), ("_tso", "bigint", False), ("_segment", "bigint", False),
        ("_seq", "bigint", False)]
    assert r.count() == 600
    from pyspark.sql import functions as F

    per_key = r.groupBy("key").agg(F.countDistinct("_segment").alias("n")).collect()
    assert len(per_key) == 9 and all(row["n"] == 1 for row in per_key)
    dense = r.groupBy("_segment").agg({"_seq": "max", "*": "count"}).collect()
    assert all(row["max(_seq)"] == row["count(1)"] - 1 for row in dense)
    same = r.filter("t = _timestamp").count()
    assert same == 600  # client times in the past are kept exactly
    assert Stream.open(url).config.segments == 3


def test_overwrite_and_complete_mode_fail_and_keep_history(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    spark.range(5).write.format("tstream").mode("append").save(url)
    with pytest.raises(Exception, match="append-only"):
        spark.range(3).write.format("tstream").mode("overwrite").save(url)
    agg = spark.readStream.format("rate").load().groupBy().count()
    with pytest.raises(Exception, match="append-only|does not support Complete|complete"):
        q = agg.writeStream.format("tstream").outputMode("complete") \
            .option("checkpointLocation", str(tmp_path / "ck")).start(url)
        q.processAllAvailable()
        q.stop()
    assert Stream.open(url).read().num_rows == 5


def test_wrong_schema_names_columns(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    spark.range(3).write.format("tstream").mode("append").save(url)
    with pytest.raises(Exception, match=r"id \(int64 in the stream, string in the data\)"):
        spark.range(3).selectExpr("cast(id as string) as id").write.format("tstream").mode("append").save(url)
    with pytest.raises(Exception, match="mergeSchema"):
        spark.range(3).selectExpr("id", "id as extra").write.format("tstream").mode("append").save(url)
    spark.range(3).selectExpr("id", "id as extra").write.format("tstream").mode("append") \
        .option("mergeSchema", "true").save(url)
    assert Stream.open(url).read()["extra"].null_count == 3


def test_a_failed_first_write_fixes_no_schema(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    with pytest.raises(Exception, match="timestampColumn 'ts' has type string"):
        spark.range(3).selectExpr("id", "'2026-01-01' as ts").write.format("tstream").mode("append") \
            .option("timestampColumn", "ts").save(url)
    spark.range(3).selectExpr("id", "timestamp'2026-01-01 00:00:00' as ts").write.format("tstream") \
        .mode("append").option("timestampColumn", "ts").save(url)
    assert Stream.open(url).read().num_rows == 3


def test_a_first_write_that_fails_in_its_tasks_fixes_no_config(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    # the sink creates the stream (segments=2), then a task meets a time past the clock's range
    with pytest.raises(Exception, match="timestampColumn 'ts' holds"):
        spark.range(3).selectExpr("id", "timestamp'4000-01-01 00:00:00' as ts").write.format("tstream") \
            .mode("append").option("timestampColumn", "ts").option("segments", "2").save(url)
    assert Stream.open(url).state.pos == 0 and Stream.open(url).config.segments == 2
    spark.range(3).selectExpr("id", "timestamp'2026-01-01 00:00:00' as ts").write.format("tstream") \
        .mode("append").option("timestampColumn", "ts").option("segments", "3").save(url)
    s = Stream.open(url)
    assert s.config.segments == 3 and s.read().num_rows == 3


def test_bad_sink_options(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    with pytest.raises(Exception, match="(?i)unknown option .keycolum. .did you mean keyColumn"):
        spark.range(3).write.format("tstream").mode("append").option("keyColum", "id").save(url)
    with pytest.raises(Exception, match="timestamping='never'"):
        spark.range(3).write.format("tstream").mode("append").option("timestamping", "never").save(url)
    spark.range(3).write.format("tstream").mode("append").option("segments", "2").save(url)
    with pytest.raises(Exception, match="segments=5 disagrees with the stream at .*: it has segments=2.*"
                                        "drop the option segments"):
        spark.range(3).write.format("tstream").mode("append").option("segments", "5").save(url)
    with pytest.raises(Exception, match="keyColumn 'nope' is not a column"):
        spark.range(3).write.format("tstream").mode("append").option("keyColumn", "nope").save(url)
    assert Stream.open(url).read().num_rows == 3
    assert not [f for _, _, fs in os.walk(str(tmp_path)) for f in fs if f.endswith(".tmp")]


def test_a_streaming_sink_task_is_handed_arrow_batches_not_rows(spark: Any, tmp_path: Path) -> None:
    """On every PySpark the stream sink's tasks get Spark's Arrow batches: 4.1+ has
    ``DataSourceStreamArrowWriter``; 4.0's task worker hands them to any writer that is also a
    ``DataSourceArrowWriter`` (tstream's 4.0 base is both), where a plain stream writer gets
    every value converted into Rows (the 4.0 sink ran at about half its speed)."""
    import probe_sink
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(probe_sink)
    spark.dataSource.register(probe_sink.ProbeSink)
    src, out = tmp_path / "in", tmp_path / "out"
    out.mkdir()
    _input_files(src, files=2, rows=300)
    q = (spark.readStream.schema(spark.read.parquet(str(src)).schema).parquet(str(src))
         .writeStream.format("tstream_probe").option("out", str(out))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None
    seen = [p.read_text().split() for p in sorted(out.glob("batch-*.txt"))]
    assert seen and all(kinds == "RecordBatch" for kinds, _ in seen), seen
    assert sum(int(rows) for _, rows in seen) == 600
