"""On a Spark standalone cluster (master + two 1-core workers from the installed pyspark), a
streaming query copies an ``s3://`` tstream stream on SeaweedFS to another: a worker SIGKILLed
mid-stream (with its executor), then the driver SIGKILLed mid-stream and restarted from its
checkpoint; every record arrives exactly once."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest
from helpers import wait_for
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import StreamNotFoundError
from s3servers import (
    ACCESS_KEY,
    BUCKET,
    REGION,
    SECRET_KEY,
    running_seaweedfs,
    s3_storage_options,
)
from sparkcluster import kill_group, standalone_cluster

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.spark, pytest.mark.s3, pytest.mark.seaweedfs]

DRIVER = """
import json, sys
from pyspark.sql import SparkSession
import pyspark_tstream

master, src, dst, ckpt, endpoint, per = sys.argv[1:7]
opts = {"storage.endpoint_url": endpoint, "storage.key": KEY, "storage.secret": SECRET,
        "storage.client_kwargs": json.dumps({"region_name": REGION})}
spark = (SparkSession.builder.master(master).appName("tstream-cluster")
         .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.executor.cores", "1")
         .config("spark.cores.max", "2").config("spark.executor.memory", "512m")
         .config("spark.driver.memory", "512m").config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.dataSource.register(pyspark_tstream.DefaultSource)
q = (spark.readStream.format("tstream").options(**opts).option("maxRecordsPerTrigger", per).load(src)
     .drop("_timestamp", "_tso", "_segment", "_seq")
     .writeStream.format("tstream").options(**opts).option("checkpointLocation", ckpt)
     .option("keyColumn", "key").option("timestampColumn", "t").trigger(availableNow=True).start(dst))
q.awaitTermination()
print("DRIVER DONE", flush=True)
spark.stop()
""".replace("KEY", repr(ACCESS_KEY)).replace("SECRET", repr(SECRET_KEY)).replace("REGION", repr(REGION))

START_MS = 1_767_225_600_000
#: Records per micro-batch (maxRecordsPerTrigger): each run of 2,400 records takes 4 batches, so
#: every kill lands mid-stream (after the first committed batch) while the test stays ~1.5 min.
PER_TRIGGER = "600"


def _fill(url: str, opts: dict, first: int, batches: int, rows: int) -> int:
    s = Stream.open(url, opts)
    for b in range(batches):
        ids = list(range(first + b * rows, first + (b + 1) * rows))
        s.append(pa.table({"id": ids, "key": [f"k{i % 17}" for i in ids], "t": [START_MS + i for i in ids]}),
                 key="key", timestamp="t")
    return first + batches * rows


def _position(url: str, opts: dict) -> int:
    try:
        return Stream.open(url, opts).state.pos
    except StreamNotFoundError:
        return -1


def test_worker_and_driver_killed_mid_stream_every_record_once(tmp_path: object) -> None:
    with running_seaweedfs() as endpoint, standalone_cluster(workers=2) as cluster:
        opts = s3_storage_options(endpoint)
        tag = uuid.uuid4().hex[:10]
        src, dst = f"s3://{BUCKET}/cl-{tag}/src", f"s3://{BUCKET}/cl-{tag}/dst"
        ckpt = str(cluster.work / "ckpt")
        Stream.create(src, segments=2, storage_options=opts)
        n = _fill(src, opts, 0, batches=6, rows=400)

        def log() -> str:
            return (cluster.work / "driver.log").read_text(errors="replace")[-4000:]

        # 1) a worker (and its executor) SIGKILLed once the copy is under way
        driver = cluster.driver(DRIVER, src, dst, ckpt, endpoint, PER_TRIGGER)
        wait_for(lambda: _position(dst, opts) >= 1, 300, "a first committed batch", proc=driver, every=0.3)
        kill_group(cluster.workers[0])
        assert driver.wait(timeout=600) == 0, log()
        got = Stream.open(dst, opts).read()["id"].to_pylist()
        assert sorted(got) == list(range(n)), "worker loss lost or duplicated records"

        # 2) the driver SIGKILLed mid-stream, then restarted from its checkpoint
        n2 = _fill(src, opts, n, batches=6, rows=400)
        before = _position(dst, opts)
        driver = cluster.driver(DRIVER, src, dst, ckpt, endpoint, PER_TRIGGER)
        wait_for(lambda: _position(dst, opts) > before, 300, "a batch of the second run", proc=driver, every=0.3)
        kill_group(driver)
        driver.wait(timeout=60)
        restarted = cluster.driver(DRIVER, src, dst, ckpt, endpoint, PER_TRIGGER)
        assert restarted.wait(timeout=600) == 0, log()
        got = Stream.open(dst, opts).read()["id"].to_pylist()
        assert len(got) == n2 and sorted(got) == list(range(n2)), "driver restart lost or duplicated records"
        assert json.dumps(Stream.open(dst, opts).verify().ok) == "true"
