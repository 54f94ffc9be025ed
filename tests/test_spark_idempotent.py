"""Idempotent ``df.write``: ``writerId`` + ``batchId``, or Delta's ``txnAppId`` +
``txnVersion``, so that a replayed ``foreachBatch`` appends once.

The option rules and the batch writer's commit run without a Spark session (the writer's
parts are plain objects); what only Spark can break (``foreachBatch`` replayed from its
checkpoint, options reaching the writer) runs on the shared session.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import orphans
from pyspark.sql.types import LongType, StringType, StructField, StructType
from pyspark_tstream import keys as K
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.conf.options import SinkOptions
from pyspark_tstream.datasource.source import TStreamDataSource
from pyspark_tstream.errors import ConfigError

SCHEMA = StructType([StructField("id", LongType()), StructField("key", StringType())])


def _sink(**options: Any) -> SinkOptions:
    return SinkOptions.from_options({"path": "memory://s", **options})


# --- options (no Spark session) -------------------------------------------------------------

def test_writer_and_batch_options_and_their_delta_names() -> None:
    plain = _sink(writerId="etl", batchId="7")
    assert (plain.writer_id, plain.batch_id, plain.batch_option) == ("etl", 7, K.BATCH_ID)
    delta = _sink(txnAppId="etl", txnVersion="7")
    assert (delta.writer_id, delta.batch_id, delta.batch_option) == ("etl", 7, K.TXN_VERSION)
    assert _sink(writerId="etl", txnAppId="etl", batchId="0", txnVersion="0").batch_id == 0
    assert _sink(writerId="etl").batch_id is None  # a named, not idempotent, write (as before)
    assert _sink(batchid="3", WRITERID="etl").batch_id == 3  # keys are case-insensitive


@pytest.mark.parametrize(("options", "message"), [
    ({"batchId": "3"}, r"batchId=3 needs writerId: batch ids count per writer; add .option\('writerId'"),
    ({"txnVersion": "3"}, r"txnVersion=3 needs txnAppId"),
    ({"txnAppId": "etl"}, r"txnAppId='etl' needs txnVersion \(as in Delta\)"),
    ({"writerId": "etl", "batchId": "-1"}, r"batchId='-1' must be at least 0"),
    ({"writerId": "etl", "batchId": "two"}, r"batchId='two' is not an integer"),
    ({"writerId": "etl", "batchId": ""}, r"batchId='' is empty"),
    ({"writerId": "a", "txnAppId": "b", "batchId": "1"},
     r"writerId='a' and txnAppId='b' disagree: txnAppId is Delta's name for writerId"),
    ({"writerId": "a", "batchId": "1", "txnVersion": "2"}, r"batchId=1 and txnVersion=2 disagree"),
    ({"writerId": "query-0123456789abcdef", "batchId": "1"},
     r"writer ids starting with 'query-' are the streaming sink's own"),
    ({"writerId": "etl", "batchID_": "1"}, r"did you mean batchId\?"),
])
def test_bad_writer_and_batch_options_fail_naming_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _sink(**options)


@pytest.mark.parametrize("options", [{"writerId": "etl", "batchId": "1"},
                                     {"txnAppId": "etl", "txnVersion": "1"}])
def test_a_streaming_sink_refuses_a_batch_id(tmp_path: Path, options: dict[str, str]) -> None:
    source = TStreamDataSource({"path": f"file://{tmp_path}/s", "checkpointLocation": str(tmp_path / "c"),
                                **options})
    key = K.BATCH_ID if K.BATCH_ID in options else K.TXN_VERSION
    with pytest.raises(ConfigError, match=f"{key} is a df.write option: a streaming tstream sink keys each "
                                          "commit by its query and micro-batch already"):
        source.streamWriter(SCHEMA, False)
    assert not (tmp_path / "s").exists()  # refused before anything was created


# --- the batch writer's commit (its parts run as Spark runs them, without a session) -------

def _write(url: str, rows: range, **options: str) -> Any:
    """``df.write`` as Spark drives it: a writer, two tasks, the driver's commit."""
    writer = TStreamDataSource({"path": url, "keyColumn": "key", **options}).writer(SCHEMA, False)
    batch = pa.record_batch({"id": pa.array(rows, pa.int64()), "key": [f"k{i % 5}" for i in rows]})
    messages = [writer.write(iter([batch.slice(0, len(rows) // 2)])),
                writer.write(iter([batch.slice(len(rows) // 2)]))]
    writer.commit(messages)
    return messages


def test_batch_writer_repeat_is_a_logged_no_op_that_deletes_its_files(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    url = f"file://{tmp_path}/s"
    _write(url, range(10), writerId="etl", batchId="4")
    first = Stream.open(url).refresh().pos
    with caplog.at_level(logging.WARNING, logger="pyspark_tstream.sink.writer"):
        again = _write(url, range(10), writerId="etl", batchId="4")
        older = _write(url, range(100, 110), txnAppId="etl", txnVersion="2")
    warnings = [r.getMessage() for r in caplog.records if r.name == "pyspark_tstream.sink.writer"]
    assert len(warnings) == 2
    assert warnings[0].startswith(f"tstream: batch 4 of writer 'etl' was already committed at journal "
                                  f"position {first}; nothing appended; this attempt's ")
    assert warnings[1].startswith("tstream: batch 2 of writer 'etl' is not above its last committed batch 4")
    assert all(w.endswith(f"(df.write to {url})") for w in warnings)
    paths = [c.path for m in [*again, *older] for c in m.chunks]
    assert paths and not any(Stream.open(url).store.exists(p) for p in paths)
    _write(url, range(10, 20), writerId="etl", batchId="5")
    s = Stream.open(url)
    assert sorted(s.read()["id"].to_pylist()) == list(range(20))
    assert not orphans(Stream.open(url))


def test_batch_writer_abort_deletes_files_only_if_the_batch_is_not_committed(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    messages = _write(url, range(10), writerId="etl", batchId="1")
    writer = TStreamDataSource({"path": url, "keyColumn": "key", "writerId": "etl", "batchId": "1"}
                               ).writer(SCHEMA, False)
    writer.abort(messages)  # a commit that raised after it landed: the files stay
    assert sorted(Stream.open(url).read()["id"].to_pylist()) == list(range(10))
    batch = pa.record_batch({"id": pa.array(range(10, 20), pa.int64()), "key": ["k"] * 10})
    later = TStreamDataSource({"path": url, "keyColumn": "key", "writerId": "etl", "batchId": "2"}
                              ).writer(SCHEMA, False)
    lost = [later.write(iter([batch]))]
    later.abort(lost)  # a commit that never landed: its files go
    assert not orphans(Stream.open(url))


def test_a_streaming_sink_replay_deletes_its_files_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The streaming sink's own (query, micro-batch) dedupe shares the path: a replayed batch's
    task files are deleted at once (not left for vacuum), quietly (INFO, not WARNING)."""
    url = f"file://{tmp_path}/s"
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "metadata").write_text('{"id":"q1"}\n')  # as Spark starts a query
    source = TStreamDataSource({"path": url, "keyColumn": "key", "checkpointLocation": str(tmp_path / "c")})
    batch = pa.record_batch({"id": pa.array(range(10), pa.int64()), "key": ["k"] * 10})
    first = source.streamWriter(SCHEMA, False)
    first.commit([first.write(iter([batch]))], 0)
    replay = source.streamWriter(SCHEMA, False)
    messages = [replay.write(iter([batch]))]
    with caplog.at_level(logging.INFO):
        replay.commit(messages, 0)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "tstream: batch 0 of writer 'query-" in caplog.text
    assert not orphans(Stream.open(url)) and Stream.open(url).read().num_rows == 10


# --- through Spark ----------------------------------------------------------------------------

def _input_files(folder: Path, first: int, files: int, rows: int = 40) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(first, first + files):
        ids = list(range(f * rows, (f + 1) * rows))
        pq.write_table(pa.table({"id": ids, "key": [f"k{i % 5}" for i in ids]}), folder / f"part-{f:04d}.parquet")


def _foreach_batch_to_tstream(spark: Any, src: Path, url: str, ckpt: Path, calls: list[int]) -> None:
    def write(df: Any, epoch_id: int) -> None:
        calls.append(epoch_id)
        for _ in range(2):  # a retried write inside the function appends once as well
            (df.write.format("tstream").mode("append").option("keyColumn", "key")
             .option("writerId", "etl").option("batchId", epoch_id).save(url))

    q = (spark.readStream.schema(spark.read.parquet(str(src)).schema).option("maxFilesPerTrigger", 1)
         .parquet(str(src)).writeStream.foreachBatch(write).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None


@pytest.mark.spark
@pytest.mark.slow
def test_foreach_batch_replayed_from_its_checkpoint_appends_once(spark: Any, tmp_path: Path) -> None:
    src, ckpt, url = tmp_path / "in", tmp_path / "ckpt", f"file://{tmp_path}/s"
    _input_files(src, 0, files=3)
    calls: list[int] = []
    _foreach_batch_to_tstream(spark, src, url, ckpt, calls)
    assert calls == [0, 1, 2]
    last = ckpt / "commits" / "2"
    last.unlink()  # as if the query died after the write, before Spark recorded the batch
    crc = last.with_name(".2.crc")
    if crc.exists():
        crc.unlink()
    _input_files(src, 3, files=1)
    _foreach_batch_to_tstream(spark, src, url, ckpt, calls)
    assert calls == [0, 1, 2, 2, 3]  # Spark ran batch 2 again
    s = Stream.open(url)
    assert sorted(s.read()["id"].to_pylist()) == list(range(160))
    writer = s.refresh().writers["etl"]
    assert writer.commits == 4 and writer.last_batch() == 3
    assert not orphans(Stream.open(url))  # the no-op writes left no file behind


@pytest.mark.spark
@pytest.mark.slow
def test_delta_option_names_and_errors_through_spark(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"

    def write(first: int, **options: Any) -> None:
        w = spark.range(first, first + 10).selectExpr("id", "'k' as key").write.format("tstream").mode("append")
        for k, v in options.items():
            w = w.option(k, v)
        w.save(url)

    write(0, txnAppId="etl", txnVersion=3)
    write(0, txnAppId="etl", txnVersion=3)  # Delta's replay: a no-op
    write(50, writerId="etl", batchId=1)  # older than 3: a no-op too
    write(10, writerId="etl", batchId=4)
    assert sorted(Stream.open(url).read()["id"].to_pylist()) == list(range(20))
    with pytest.raises(Exception, match="batchId=5 needs writerId"):
        write(20, batchId=5)
    with pytest.raises(Exception, match="txnVersion is a df.write option"):
        _input_files(tmp_path / "in", 0, files=1)
        q = (spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema).parquet(str(tmp_path / "in"))
             .writeStream.format("tstream").option("checkpointLocation", str(tmp_path / "ck"))
             .option("txnAppId", "etl").option("txnVersion", 1).trigger(availableNow=True).start(url))
        q.awaitTermination()
    assert sorted(Stream.open(url).read()["id"].to_pylist()) == list(range(20))
