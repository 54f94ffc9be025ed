"""A streaming query rides out an object-store outage longer than the store's bounded retries.

A query on S3 runs for weeks; the store will be unreachable for a while now and then (a
regional incident, a network partition, throttling storms). The store's 8 attempts wait out
2.6-5.2 s; a streaming query's driver-side calls (``latestOffset``, planning, the sink's
commit) have no retry loop above them but Spark's, which stops the query. With
``storeRetryTimeout`` (default 2 minutes) every store call of the query, on the driver and in
its tasks, keeps retrying transient failures for that long once the store has answered.

Here a query copies one stream to another, both through a proxy in front of moto, while a
producer keeps appending to the source directly; the proxy then fails every request for 12 s.
With the default the query goes on and copies every record exactly once; with
``storeRetryTimeout=0`` (the bounded attempts only, the behaviour before) it stops with the
store's error.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from s3servers import BUCKET, FaultProxy, s3_storage_options
from test_s3_spark import SYSTEM, spark_storage_options

from pyspark_tstream.errors import StreamNotFoundError
from pyspark_tstream.stream import Stream

pytestmark = [pytest.mark.spark, pytest.mark.s3]
OUTAGE_S = 8.0
BATCHES, ROWS = 40, 25
T0 = 1_700_000_000_000


def _append(url: str, options: dict[str, Any], batch: int) -> None:
    ids = list(range(batch * ROWS, (batch + 1) * ROWS))
    Stream.open(url, storage_options=options).append(
        pa.table({"id": ids, "key": [f"dev-{i % 7}" for i in ids], "t": [T0 + i * 10 for i in ids]}),
        key="key", timestamp="t", writer_id="feeder", batch_id=batch)


def _causes(q: Any) -> str:
    """The messages of a stopped query's exception and all its causes (classic Spark)."""
    out, err = [], q._jsq.exception().get()
    while err is not None and len(out) < 20:
        out.append(str(err.toString()))
        err = err.getCause()
    return "\n".join(out)


def _wait(pred: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


#: Where the outage starts: the first request of a kind after the query's first micro-batch.
PHASES = {
    "latestOffset": ("GET", "/src/_tstream/head.json"),  # the source's driver-side poll
    "task-read": ("GET", "/src/data/"),  # a task reading source chunks
    "task-write": ("PUT", "/dst/data/"),  # a task writing the sink's chunks
    "commit": ("PUT", "/dst/_tstream/journal/"),  # the sink's commit, in PySpark's commit runner
    # the sink's writer for the next micro-batch, which PySpark creates afresh in a new process
    # (found by the soak: it failed the query in 4.6 s before a 503 counted as the store answering)
    "sink-writer": ("GET", "/dst/_tstream/head.json"),
}


# storeRetryTimeout=0 is shown on the source's poll: a commit whose journal write failed also
# repeats its conditional create to settle the outcome (journal.RESOLVE_ATTEMPTS), which can
# outlast a short outage whatever the option says
#
# "drop" outages give no answer at all (connections closed: a store restarting, a partition).
# A process whose store never answered gives up after its attempts (a wrong endpoint fails in
# seconds); the next micro-batch's writer is such a process, yet its query reached the store:
# the driver remembers stores that answered it (reach_memo), so it waits those out too.
CASES = [*((p, True, "503") for p in PHASES), ("sink-writer", True, "drop"), ("latestOffset", False, "503")]


@pytest.mark.parametrize("phase,patient,action", CASES,
                         ids=[f"{p}-{a}-storeRetryTimeout-{'default' if ok else '0'}" for p, ok, a in CASES])
def test_a_streaming_query_rides_out_a_store_outage(spark: Any, moto_server: str, fault_proxy: FaultProxy,
                                                    tmp_path: Path, phase: str, patient: bool,
                                                    action: str) -> None:
    proxy = fault_proxy
    tag = uuid.uuid4().hex[:12]
    src, dst = f"s3://{BUCKET}/outage-{tag}/src", f"s3://{BUCKET}/outage-{tag}/dst"
    direct = s3_storage_options(moto_server)
    Stream.create(src, segments=2, storage_options=direct,
                  schema=pa.schema([("id", pa.int64()), ("key", pa.string()), ("t", pa.int64())]))
    _append(src, direct, 0)
    through = spark_storage_options(proxy.endpoint)  # the query reaches the store only through the proxy
    if not patient:
        through["storeRetryTimeout"] = "0"
    q = (spark.readStream.format("tstream").options(**through).load(src).drop(*SYSTEM)
         .writeStream.format("tstream").options(**through).option("checkpointLocation", str(tmp_path / "ckpt"))
         .option("keyColumn", "key").option("timestampColumn", "t")
         .trigger(processingTime="500 milliseconds").start(dst))

    stop = threading.Event()

    def produce() -> None:  # the producer does not go through the proxy: it never pauses
        for b in range(1, BATCHES):
            if stop.is_set():
                return
            _append(src, direct, b)
            time.sleep(0.4)

    def copied() -> list[int]:
        try:
            return Stream.open(dst, storage_options=direct).read()["id"].to_pylist()
        except StreamNotFoundError:  # the sink has not created the stream yet
            return []

    feeder = threading.Thread(target=produce, daemon=True)
    try:
        _wait(lambda: len(copied()) >= ROWS, 120, "the first micro-batch")
        feeder.start()
        method, fragment = PHASES[phase]
        proxy.outage_at(method, fragment, OUTAGE_S, action)
        _wait(lambda: proxy.outage_requests, 30, f"the outage to start at a {phase} request")
        started = time.monotonic()
        first = next(r for r in proxy.requests if r[2].startswith("outage"))
        assert first[0] == method and fragment in first[1], first
        if not patient:
            # the bounded attempts (<= 5.2 s) run out well inside the outage: the query stops
            _wait(lambda: not q.isActive, OUTAGE_S + 60, "the query to stop")
            assert time.monotonic() - started < OUTAGE_S + 5
            assert q.exception() is not None
            detail = _causes(q)  # the store's error, from a Python worker, is in the Java cause chain
            assert "StorageError" in detail and "attempts over" in detail, detail[:3000]
            return
        _wait(lambda: time.monotonic() - started > OUTAGE_S, OUTAGE_S + 5, "the outage to end")
        assert q.isActive and q.exception() is None, q.exception()
        failed = [r for r in proxy.requests if r[2].startswith("outage")]
        # the call under way kept retrying past its 8 attempts
        assert sum(1 for r in failed if r[0] == method and fragment in r[1]) > 8, failed
        feeder.join(120)
        _wait(lambda: len(copied()) >= BATCHES * ROWS, 180, "every record to be copied")
        time.sleep(2.0)  # one more trigger: nothing may be copied twice
        assert q.isActive and q.exception() is None, q.exception()
        ids = copied()
        assert sorted(ids) == list(range(BATCHES * ROWS)), "records lost or copied twice"
    finally:
        stop.set()
        if q.isActive:
            q.stop()
