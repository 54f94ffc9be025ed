"""A streaming query rides out an object-store outage longer than the store's bounded retries.

A query on S3 runs for weeks; the store will be unreachable for a while now and then (a
regional incident, a network partition, throttling storms). The store's 8 attempts wait out
2.6-5.2 s; a streaming query's driver-side calls (``latestOffset``, planning, the sink's
commit) have no retry loop above them but Spark's, which stops the query. With
``storeRetryTimeout`` (default 2 minutes) every store call of the query, on the driver and in
its tasks, keeps retrying transient failures for that long once the store has answered.

Here a query copies one stream to another, both through a proxy in front of moto, while a
producer keeps appending to the source directly; the proxy then fails every request for 8 s,
from the first request of one kind on, once for each kind the query makes. With the default
the query goes on and copies every record exactly once; with ``storeRetryTimeout=0`` (the
bounded attempts only, the behaviour before) it stops with the store's error.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import T0, wait_for
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import StreamNotFoundError
from s3servers import BUCKET, FaultProxy, s3_storage_options
from test_s3_spark import SYSTEM, spark_storage_options

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.s3]
OUTAGE_S = 8.0
ROWS = 25  # records per appended batch


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


#: Where the outage starts: the first request of a kind after the query's first micro-batch.
PHASES = {
    "latestOffset": ("GET", "/src/_tstream/head.json"),  # the source's driver-side poll
    "task-read": ("GET", "/src/data/"),  # a task reading source chunks
    "task-write": ("PUT", "/dst/data/"),  # a task writing the sink's chunks
    "commit": ("PUT", "/dst/_tstream/journal/"),  # the sink's commit, in PySpark's commit runner
    # the sink's writer for the next micro-batch, which PySpark creates afresh in a new process
    # (it must wait out an outage from its first call: a 503 is the store answering): the
    # first head read after a commit wrote the head hint, its last request
    "sink-writer": ("GET", "/dst/_tstream/head.json", ("PUT", "/dst/_tstream/head.json")),
}


#: The outages, in order, of one running query: where each starts and how the store fails.
#: "drop" gives no answer at all (connections closed: a store restarting, a partition). A process
#: whose store never answered gives up after its attempts (a wrong endpoint fails in seconds);
#: the next micro-batch's writer is such a process, yet its query reached the store: the driver
#: remembers stores that answered it (reach_memo), so it waits those out too.
OUTAGES = [*((p, "503") for p in PHASES), ("sink-writer", "drop")]


class _Copy:
    """A query copying ``src`` to ``dst`` through the proxy, while a producer appends to ``src``
    directly (it never pauses) until :meth:`stop_producing`."""

    def __init__(self, spark: Any, moto_server: str, proxy: FaultProxy, tmp_path: Path, **extra: str) -> None:
        tag = uuid.uuid4().hex[:12]
        self.src, self.dst = f"s3://{BUCKET}/outage-{tag}/src", f"s3://{BUCKET}/outage-{tag}/dst"
        self.direct = s3_storage_options(moto_server)
        Stream.create(self.src, segments=2, storage_options=self.direct,
                      schema=pa.schema([("id", pa.int64()), ("key", pa.string()), ("t", pa.int64())]))
        _append(self.src, self.direct, 0)
        self.appended = 1
        through = {**spark_storage_options(proxy.endpoint), **extra}  # the query reaches the store only via the proxy
        self.q = (spark.readStream.format("tstream").options(**through).load(self.src).drop(*SYSTEM)
                  .writeStream.format("tstream").options(**through)
                  .option("checkpointLocation", str(tmp_path / "ckpt"))
                  .option("keyColumn", "key").option("timestampColumn", "t")
                  .trigger(processingTime="500 milliseconds").start(self.dst))
        self._stop = threading.Event()
        self._feeder = threading.Thread(target=self._produce, daemon=True)

    def _produce(self) -> None:
        while not self._stop.is_set():
            _append(self.src, self.direct, self.appended)
            self.appended += 1
            time.sleep(0.4)

    def start_producing(self) -> None:
        self._feeder.start()

    def stop_producing(self) -> int:
        """Stop the producer; the number of records it appended in all."""
        self._stop.set()
        if self._feeder.is_alive():
            self._feeder.join(60)
        return self.appended * ROWS

    def copied(self) -> list[int]:
        try:
            table = Stream.open(self.dst, storage_options=self.direct).read()
        except StreamNotFoundError:  # the sink has not created the stream yet
            return []
        # no column until the sink's first commit lands (that commit fixes the schema)
        return table["id"].to_pylist() if "id" in table.column_names else []

    def close(self) -> None:
        self._stop.set()
        if self.q.isActive:
            self.q.stop()


def _outage(proxy: FaultProxy, phase: str, action: str) -> tuple[float, list[tuple[str, str, str]]]:
    """Start an outage at the next request of ``phase``; (when it started, the requests it failed)
    once it is over."""
    method, fragment, *after = PHASES[phase]
    seen = len(proxy.requests)
    proxy.outage_at(method, fragment, OUTAGE_S, action, after=after[0] if after else None)
    wait_for(lambda: any(r[2].startswith("outage") for r in proxy.requests[seen:]), 30,
             f"the outage to start at a {phase} request")
    started = time.monotonic()
    failed = [r for r in proxy.requests[seen:] if r[2].startswith("outage")]
    assert failed[0][0] == method and fragment in failed[0][1], failed[0]
    wait_for(lambda: time.monotonic() - started > OUTAGE_S, OUTAGE_S + 5, "the outage to end")
    return started, [r for r in proxy.requests[seen:] if r[2].startswith("outage")]


def test_a_streaming_query_rides_out_store_outages_at_every_kind_of_call(
        spark: Any, moto_server: str, fault_proxy: FaultProxy, tmp_path: Path) -> None:
    """One query meets an 8 s outage at each kind of store call it makes in turn, and goes on
    after each: in the end every record is copied exactly once."""
    copy = _Copy(spark, moto_server, fault_proxy, tmp_path)
    try:
        wait_for(lambda: len(copy.copied()) >= ROWS, 120, "the first micro-batch")
        copy.start_producing()
        for phase, action in OUTAGES:
            _, failed = _outage(fault_proxy, phase, action)
            assert copy.q.isActive and copy.q.exception() is None, (phase, action, copy.q.exception())
            method, fragment, *_ = PHASES[phase]
            # the call under way kept retrying past its 8 attempts
            assert sum(1 for r in failed if r[0] == method and fragment in r[1]) > 8, (phase, action, failed)
            before = len(copy.copied())  # the query copies again before the next outage
            wait_for(lambda: len(copy.copied()) > before, 60, f"a micro-batch after the {phase} {action} outage")  # noqa: B023 - called in this iteration only
        total = copy.stop_producing()
        wait_for(lambda: len(copy.copied()) >= total, 180, "every record to be copied")
        time.sleep(2.0)  # one more trigger: nothing may be copied twice
        assert copy.q.isActive and copy.q.exception() is None, copy.q.exception()
        assert sorted(copy.copied()) == list(range(total)), "records lost or copied twice"
    finally:
        copy.close()


def test_with_store_retry_timeout_0_an_outage_stops_the_query(
        spark: Any, moto_server: str, fault_proxy: FaultProxy, tmp_path: Path) -> None:
    """``storeRetryTimeout=0`` keeps only the bounded attempts (the behaviour before). Shown on
    the source's poll: a commit whose journal write failed also repeats its conditional create
    to settle the outcome (journal.RESOLVE_ATTEMPTS), which can outlast a short outage whatever
    the option says."""
    copy = _Copy(spark, moto_server, fault_proxy, tmp_path, storeRetryTimeout="0")
    try:
        wait_for(lambda: len(copy.copied()) >= ROWS, 120, "the first micro-batch")
        copy.start_producing()
        method, fragment, *_ = PHASES["latestOffset"]
        fault_proxy.outage_at(method, fragment, OUTAGE_S)
        wait_for(lambda: fault_proxy.outage_requests, 30, "the outage to start at a latestOffset request")
        started = time.monotonic()
        # the bounded attempts (<= 5.2 s) run out well inside the outage: the query stops
        wait_for(lambda: not copy.q.isActive, OUTAGE_S + 60, "the query to stop")
        assert time.monotonic() - started < OUTAGE_S + 5
        assert copy.q.exception() is not None
        detail = _causes(copy.q)  # the store's error, from a Python worker, is in the Java cause chain
        assert "StorageError" in detail and "attempts over" in detail, detail[:3000]
    finally:
        copy.close()
