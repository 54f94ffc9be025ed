"""Soak: producers that die and come back, a consumer that must see every record exactly once.

Usage::

    python tests/benchmarks/soak.py --minutes 30     # the real soak
    python tests/benchmarks/soak.py --smoke          # ~1 minute, a kill every 15 s, a scale every 20 s,
                                                     # 2 % of store requests failed, an 8 s outage (CI)
    python tests/benchmarks/soak.py --minutes 20 --faults 0.03 --outage-every 180 --outage-seconds 20

What runs, on its own SeaweedFS (``weed mini`` on loopback, stopped by PID at the end):

* one ``s3://`` stream, 4 segments, ``retention=age=1m,groups=true`` (records older than a minute
  go once the consumer group has them), ``writerLeaseMs=5000``;
* three producers, each a child process with a producer session (``Stream.writer``) appending
  200 records every 0.2 s with its own clock skew (0, -3 s, +2 s) and idempotent batch ids
  (writer id + batch number, resumed from the journal after a restart). Every ``--kill-every``
  seconds one producer (in turn) is SIGKILLed and started again: its lease then holds the tick
  until it expires, and a batch it wrote but had not committed is orphaned;
* a fourth producer is a Spark query (``rate`` source, 200 rows/s → ``writeStream.format
  ("tstream")``, writer ``spark``, its own checkpoint); at every kill, once it has committed a
  micro-batch since its last start, it is stopped where it is (possibly inside a micro-batch)
  and started again from its checkpoint: the sink's
  exactly-once commit, not the producer, keeps its records from being lost or duplicated;
* one Spark consumer query (``local[2]``): ``consumerGroup=soak``, a zero-delay watermark on
  ``_timestamp``, ``foreachBatch`` storing each micro-batch's ids, ``_tso`` and ``_timestamp``
  under its batch id (a replay overwrites, so the store holds what Spark delivered exactly once
  or not); every third kill it too is stopped where it is and started again from its checkpoint;
* a second consumer query, ``consumerGroup=windows``: counts per 5-second window of
  ``_timestamp`` with a zero-delay watermark in append mode (a window is emitted once the
  watermark passes it, and a record arriving after that would be dropped). Every emitted
  window's count must equal the number of delivered records in it (§3.4: tick-aligned
  micro-batches drop nothing);
* every ``--scale-every`` seconds the stream scales while everyone writes and reads: a split of
  an active segment, then a merge of two adjacent ones, in turn (§3.5: one writer's records of
  one key must reach the consumer in ``_tso`` order with ids increasing across the scales);
* every ``--vacuum-every`` seconds ``vacuum(grace_ms=30 s)`` deletes what retention truncated
  and what compaction replaced, while the queries read;
* with ``--faults F``, every store request of everyone (producers, Spark's tasks and drivers,
  this process's scales and vacuums) goes through a proxy that fails a random fraction ``F`` of
  them: an S3 ``503 SlowDown`` or ``500 InternalError``, a connection dropped unanswered, or
  one dropped after the server applied the request (a PUT that landed, a conditional create the
  client cannot tell it won). The store's own retries must absorb them; a producer whose append
  still fails appends the same batch id again;
* with ``--outage-every S --outage-seconds D`` that proxy also fails *every* request for ``D``
  seconds every ``S`` seconds (first after ``S``; an outage waits until every Spark query has
  reached the store since its last start: a query that never reached its store fails fast, by
  design): the store is down, answering ``503`` in odd outages and dropping every connection
  unanswered in even ones. The Spark queries wait it out (``storeRetryTimeout``, 2 minutes by
  default); the producers retry their appends; this process's scales, vacuums and tick polls go
  through one stream opened with a patient ``RetryPolicy``. Kills and query restarts wait until
  the store is back, so that every
  restart's first store calls meet a store that answers;
* this process's Python RSS and the Spark JVM's RSS are sampled at start and end, and the RSS
  of each Python streaming-source runner (the driver-side process where a query's stream
  reader plans its micro-batches) 30 s in and at the end.

At the end the producers are stopped (sessions closed), the consumer catches up to the tick, and
the table prints records in (``info().rows``) and out, lost (committed, never delivered) and
duplicated (delivered twice), RSS, chunk and metadata object counts (compaction is on, as by
default: macro-chunks are counted apart), and the tick lag (now - tick) seen while running.
Exit code 1 if anything was lost or duplicated, if the Spark producer's ids have a gap, if one
writer's records of one key were delivered out of order, if a window's count is wrong, or if
``fsck`` (``Stream.verify``, straight to the store) finds damage at the end; problems it calls
repairable (metadata that ``tstream repair`` rebuilds) are printed, not failed on. A query that
fails is a failure too, except when Spark's own Python runner did not connect back within its
fixed 10 s (an overloaded machine): that query is restarted from its checkpoint, up to 5 times,
and the table names it.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # tests/: the S3 server helpers

import s3servers  # noqa: E402 - found through the path set above

SKEWS_MS = (0, -3_000, 2_000)
#: Ids of the Spark producer's records: SPARK_IDS + the rate source's ``value`` (0, 1, 2, ...).
SPARK_IDS = 9 * 10**12
ROWS = 200
#: Window of the windowed consumer's counts.
WINDOW_MS = 5_000
VACUUM_GRACE_MS = 30_000
#: Spark's message when a new Python runner did not connect back within its (fixed) 10 s.
SPARK_WORKER_TIMEOUT = "Python worker failed to connect back"
#: What the fault proxy reports about outages, apart from its per-request counts.
OUTAGE_STATS = ("outages", "failed in outages")


def writer_key(i: int) -> tuple[int, int]:
    """(writer, key) of a record id, as the producers built them: writer 0-2 or 9 (Spark)."""
    if i >= SPARK_IDS:
        return 9, (i - SPARK_IDS) % 97
    return i // 10**12, i % 97


def order_breaks(rows: list[tuple[int, int, int]]) -> int:
    """Delivered (id, tso, ms) rows where one writer's later record of a key precedes an earlier
    one in ``_tso`` order (§3.5): each producer numbers its records in time order."""
    last: dict[tuple[int, int], int] = {}
    breaks = 0
    for i, _, _ in sorted(rows, key=lambda r: r[1]):
        wk = writer_key(i)
        if last.get(wk, -1) > i:
            breaks += 1
        last[wk] = max(last.get(wk, -1), i)
    return breaks


def window_errors(rows: list[tuple[int, int, int]], windows: dict[int, int]) -> tuple[int, int]:
    """(windows whose emitted count differs from the delivered records in them, records counted)."""
    truth = Counter(ms // WINDOW_MS * WINDOW_MS for _, _, ms in rows)
    wrong = sum(1 for start, n in windows.items() if truth.get(start, 0) != n)
    return wrong, sum(windows.values())


def scale_once(stream: Any, split_turn: bool) -> str:
    """Split the first active segment, or merge the first two adjacent ones (whichever is due)."""
    segs = sorted(stream.refresh().segments, key=lambda g: g.lo)
    if split_turn or len(segs) < 2:
        stream.scale(split=segs[0].id)
        return "split"
    for a, b in zip(segs, segs[1:]):
        if a.hi == b.lo:
            stream.scale(merge=[a.id, b.id])
            return "merge"
    return "none"


def _opts(endpoint: str) -> dict[str, Any]:
    return s3servers.s3_storage_options(endpoint)


def producer(url: str, endpoint: str, writer: str, skew: int) -> None:
    """Child process: append forever (until killed or SIGTERM) as session ``writer``."""
    import pyarrow as pa
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.errors import TStreamError

    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    while True:  # a producer restarted during a store outage waits for the store
        try:
            s = Stream.open(url, _opts(endpoint))
            done = [b for b, _ in s.state.writers[writer].batches] if writer in s.state.writers else []
            p = s.writer(writer)
            break
        except TStreamError as e:
            if not e.retriable:
                raise
            print(f"open failed: {type(e).__name__}: {e}", flush=True)
            time.sleep(1)
    batch = max(done, default=-1) + 1  # resume after the last committed batch
    n = int(writer[-1])
    while not stop["now"]:
        now = int(time.time() * 1000) + skew
        ids = [n * 10**12 + batch * 1000 + i for i in range(ROWS)]
        try:
            p.append(pa.table({"id": ids, "key": [f"k{i % 97}" for i in ids],
                               "t": [now + i // 50 for i in range(ROWS)]}), key="key", timestamp="t", batch_id=batch)
        except Exception as e:  # noqa: BLE001 - a store failure past its retries: the same batch again
            print(f"append failed: {type(e).__name__}: {e}", flush=True)
            time.sleep(1)
            continue  # (its id makes the retry idempotent if the failed append did commit)
        batch += 1
        time.sleep(0.2)
    p.close()


def fault_proxy(upstream: str, rate: float, stats: str, outage_seconds: float = 0.0) -> None:
    """Child process: a :class:`s3servers.RandomFaultProxy` failing ``rate`` of the requests to
    ``upstream``, and all of them for ``outage_seconds`` at each SIGUSR1 (the soak's driver owns
    the outage schedule); prints its endpoint, serves until SIGTERM, then writes its counts to
    ``stats``."""
    import threading

    done = threading.Event()
    due = threading.Event()  # an outage asked for (begun by the loop, not inside the handler)
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGUSR1, lambda *_: due.set())
    proxy = s3servers.RandomFaultProxy(upstream, rate, seed=int(time.time())).start()
    print(proxy.endpoint, flush=True)
    outages = 0
    while not done.wait(0.2):
        if due.is_set():
            due.clear()
            # every other outage drops connections unanswered (a store restarting, a network
            # partition) instead of answering 503: a process that never heard from the store
            # gives up on that kind after its attempts, unless the driver remembers the store
            proxy.outage(outage_seconds, ("503", "drop")[outages % 2])
            outages += 1
    Path(stats).write_text(json.dumps({**proxy.counts, "outages": outages, "failed in outages": proxy.outage_requests}))
    proxy.stop()


def _start_proxy(upstream: str, rate: float, stats: Path,
                 outage_seconds: float) -> tuple[subprocess.Popen[str], str]:
    """The fault proxy in its own process (it handles every request: in this one it would compete
    with the consumers' Python for the GIL): (process, endpoint)."""
    proc = subprocess.Popen([sys.executable, __file__, "--proxy-for", upstream, "--faults", str(rate),
                             "--stats", str(stats), "--outage-seconds", str(outage_seconds)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    atexit.register(lambda: proc.poll() is None and proc.kill())  # a soak that fails stops it too
    return proc, proc.stdout.readline().strip()


def _stop_proxy(proc: subprocess.Popen[str], stats: Path) -> Counter[str]:
    proc.terminate()
    proc.wait(timeout=30)
    return Counter(json.loads(stats.read_text())) if stats.exists() else Counter()


def _source_runners(jvm: int | None) -> dict[int, int]:
    """RSS (kB) of each Python streaming-source runner the Spark JVM started: one long-lived
    process per running query, where a tstream stream reader plans every micro-batch."""
    out: dict[int, int] = {}
    for d in Path("/proc").iterdir() if jvm else ():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().split()[3]) == jvm and \
                        b"python_streaming_source_runner" in (d / "cmdline").read_bytes():
                    out[int(d.name)] = _rss_kb(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _jvm_pid() -> int | None:
    me = str(os.getpid())
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text().split()
                if stat[3] == me and "java" in (d / "cmdline").read_text():
                    return int(d.name)
            except OSError:
                continue
    return None


def _spawn(url: str, endpoint: str, i: int, log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen([sys.executable, __file__, "--producer", f"w{i}", "--url", url, "--endpoint", endpoint,
                             "--skew", str(SKEWS_MS[i])], stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def soak(minutes: float, kill_every: float, scale_every: float, vacuum_every: float, faults: float = 0.0,
         outage_every: float = 0.0, outage_seconds: float = 0.0) -> int:
    import pyspark_tstream
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark_tstream.api.groups import Group
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.store.failures import RetryPolicy
    from pyspark_tstream.timestamps import physical

    work = Path(tempfile.mkdtemp(prefix="tstream-soak-"))
    rss_py0 = _rss_kb(os.getpid())
    with s3servers.running_seaweedfs() as direct:
        # every client (producers, Spark, this driver's scales and vacuums) goes through the
        # proxy when faults are asked for; the final listing goes to the server itself
        proxy, endpoint = (_start_proxy(direct, faults, work / "faults.json", outage_seconds)
                           if faults or outage_every else (None, direct))
        # This driver owns the outage schedule: an outage starts only once every Spark query has
        # reached the store since its last (re)start, and kills and restarts wait until the
        # store is back. A query that never reached its store does not wait one out (by design:
        # a wrong endpoint fails in seconds); under load a fresh query's first micro-batch
        # can take 18.7 s, so a schedule counted by the clock alone would meet one.
        outage_until = 0.0

        def near_outage() -> bool:
            """Whether the store is down, or came back under 3 s ago."""
            return time.monotonic() < outage_until + 3
        opts = _opts(endpoint)
        url = f"s3://{s3servers.BUCKET}/soak-{uuid.uuid4().hex[:8]}/stream"
        import pyarrow as pa

        schema = pa.schema([("id", pa.int64()), ("key", pa.string()), ("t", pa.int64())])
        stream = Stream.create(url, segments=4, schema=schema, retention="age=1m,groups=true",
                               writer_lease_ms=5_000, storage_options=opts)
        # this process's polls, scales and vacuums: one stream, reached at once, that waits out
        # an outage as the Spark queries do (a Store is patient only once it has answered)
        admin = Stream.open(url, opts, retry=RetryPolicy(patience=max(60.0, 3 * outage_seconds)))
        # registered before any record exists: retention must wait for them from the first record
        Group.create(stream, "soak", start="0")
        Group.create(stream, "windows", start="0")
        spark = (SparkSession.builder.master("local[2]").appName("tstream-soak")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        pyspark_tstream.register(spark)
        jvm = _jvm_pid()
        rss_jvm0 = _rss_kb(jvm) if jvm else 0
        seen: dict[int, list[tuple[int, int, int]]] = {}
        windows: dict[int, dict[int, int]] = {}

        def collect(df: Any, batch_id: int) -> None:  # a replay overwrites
            seen[batch_id] = [tuple(r) for r in df.selectExpr("id", "_tso", "unix_millis(_timestamp)").collect()]

        def collect_windows(df: Any, batch_id: int) -> None:
            windows[batch_id] = {r[0]: r[1] for r in df.selectExpr("unix_millis(window.start)", "count").collect()}

        sopts = {"storage.endpoint_url": endpoint, "storage.key": s3servers.ACCESS_KEY,
                 "storage.secret": s3servers.SECRET_KEY,
                 "storage.client_kwargs": json.dumps({"region_name": s3servers.REGION})}

        def consumer() -> Any:
            return (spark.readStream.format("tstream").options(**sopts).option("consumerGroup", "soak").load(url)
                    .withWatermark("_timestamp", "0 seconds")
                    .writeStream.foreachBatch(collect).option("checkpointLocation", str(work / "ckpt"))
                    .trigger(processingTime="2 seconds").start())

        def window_consumer() -> Any:
            return (spark.readStream.format("tstream").options(**sopts).option("consumerGroup", "windows")
                    .load(url).withWatermark("_timestamp", "0 seconds")
                    .groupBy(F.window("_timestamp", f"{WINDOW_MS // 1000} seconds")).count()
                    .writeStream.outputMode("append").foreachBatch(collect_windows)
                    .option("checkpointLocation", str(work / "windows-ckpt"))
                    .trigger(processingTime="3 seconds").start())

        def spark_producer() -> Any:
            return (spark.readStream.format("rate").option("rowsPerSecond", 200).load()
                    .selectExpr(f"{SPARK_IDS} + value AS id", "concat('k', CAST(value % 97 AS STRING)) AS key",
                                "unix_millis(timestamp) AS t")
                    .writeStream.format("tstream").options(**sopts).option("keyColumn", "key")
                    .option("timestampColumn", "t").option("writerId", "spark")
                    .option("checkpointLocation", str(work / "producer-ckpt"))
                    .trigger(processingTime="1 second").start(url))

        q, wq = consumer(), window_consumer()
        producer_q = spark_producer()
        procs = [_spawn(url, endpoint, i, work / f"w{i}.log") for i in range(3)]
        kills, max_lag, victim, restarts, restart_due, consumer_restarts = 0, 0, 0, 0, False, 0
        spark_timeouts: list[str] = []  # queries restarted after Spark's Python runner timed out
        scales: Counter[str] = Counter()
        vacuumed: Counter[str] = Counter()
        began = time.monotonic()
        next_kill, next_scale, next_vacuum = began + kill_every, began + scale_every, began + vacuum_every
        next_outage, outages_begun = began + outage_every, 0

        def queries_reached_store() -> bool:
            """The Spark producer has committed since its start and both consumers have planned a
            micro-batch since theirs (``recentProgress`` belongs to the query object)."""
            return (any(p["numInputRows"] for p in producer_q.recentProgress)
                    and bool(q.recentProgress) and bool(wq.recentProgress))
        runners0: dict[int, int] = {}
        try:
            # a run with outages lasts until one has happened (up to 3 minutes more), so a loaded
            # machine's slow query starts do not leave the store up throughout
            while time.monotonic() - began < minutes * 60 or (
                    outage_every and proxy is not None and not outages_begun
                    and time.monotonic() - began < minutes * 60 + 180):
                time.sleep(1)
                # an outage that is due holds kills and restarts until it begins: each restart
                # makes a query fresh again, and an outage waits for fresh queries
                outage_due = bool(outage_every) and proxy is not None and time.monotonic() >= next_outage
                if not runners0 and time.monotonic() - began >= 30:  # once the queries are warm
                    runners0 = _source_runners(jvm)
                if outage_due and queries_reached_store():
                    proxy.send_signal(signal.SIGUSR1)
                    outages_begun += 1
                    outage_due = False
                    outage_until = time.monotonic() + outage_seconds
                    next_outage = time.monotonic() + outage_every
                tick = admin.refresh().tick
                if tick:
                    max_lag = max(max_lag, int(time.time() * 1000) - physical(tick))
                # restarts wait for the store: a producer session opened during an outage has
                # no patience (the Python API's default policy) and would only retry its open
                if time.monotonic() >= next_kill and not near_outage() and not outage_due:
                    os.killpg(procs[victim].pid, signal.SIGKILL)
                    procs[victim].wait()
                    procs[victim] = _spawn(url, endpoint, victim, work / f"w{victim}.log")
                    kills += 1
                    victim = (victim + 1) % 3
                    restart_due = True
                    if kills % 3 == 0:  # the consumer too, wherever it is
                        q.stop()
                        q = consumer()
                        consumer_restarts += 1
                    next_kill = time.monotonic() + kill_every  # a slow restart does not bunch kills
                if time.monotonic() >= next_scale:
                    scales[scale_once(admin, scales["split"] <= scales["merge"])] += 1
                    next_scale = time.monotonic() + scale_every
                if time.monotonic() >= next_vacuum:
                    vacuumed.update(admin.vacuum(grace_ms=VACUUM_GRACE_MS).to_dict())
                    next_vacuum = time.monotonic() + vacuum_every
                if (restart_due and not near_outage() and not outage_due
                        and any(p["numInputRows"] for p in producer_q.recentProgress)):
                    # it has committed since its start: stop it wherever it is now, perhaps
                    # inside a micro-batch; its checkpoint resumes it
                    producer_q.stop()
                    producer_q = spark_producer()
                    restarts += 1
                    restart_due = False
                for name, query in (("Spark producer", producer_q), ("consumer", q), ("window consumer", wq)):
                    error = query.exception()
                    if error is None:
                        continue
                    if SPARK_WORKER_TIMEOUT not in str(error) or len(spark_timeouts) >= 5:
                        raise RuntimeError(f"{name} failed: {error}")
                    # Spark's own 10 s limit for a new Python runner to connect back (hard-coded
                    # in PythonWorkerFactory) fails a query on an overloaded machine (load 9 on
                    # 2 cores); a user restarts such a query from its
                    # checkpoint, as this does. Any other error fails the soak.
                    spark_timeouts.append(name)
                    if query is producer_q:
                        producer_q = spark_producer()
                    elif query is q:
                        q = consumer()
                    else:
                        wq = window_consumer()
        finally:
            producer_q.stop()
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        s = admin
        for w in list(s.refresh().writers):  # killed sessions: release them so the tick reaches the end
            s.writer(w).close()
        final = s.refresh()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            delivered = {r[0] for rows in seen.values() for r in rows}
            if len(delivered) >= final.rows:
                break
            time.sleep(2)
        runners1 = _source_runners(jvm)  # while the queries still run
        time.sleep(8)  # the window query's last batches
        q.stop()
        wq.stop()
        rss_py1, rss_jvm1 = _rss_kb(os.getpid()), (_rss_kb(jvm) if jvm else 0)
        spark.stop()
        rows = [r for batch in seen.values() for r in batch]
        counts = Counter(r[0] for r in rows)
        out_total = sum(counts.values())
        lost = final.rows - len(counts)
        dup = out_total - len(counts)
        once = list({r[0]: r for r in rows}.values())  # each record once (duplicates counted above)
        breaks = order_breaks(once)
        emitted: dict[int, int] = {}
        twice = 0
        for batch in windows.values():
            for start, n in batch.items():
                twice += start in emitted
                emitted[start] = n
        wrong, counted = window_errors(once, emitted)
        spark_ids = sorted(i - SPARK_IDS for i in counts if i >= SPARK_IDS)
        spark_gaps = (spark_ids[-1] + 1 - len(spark_ids)) if spark_ids else 0
        injected = _stop_proxy(proxy, work / "faults.json") if proxy is not None else Counter()
        retried = sum(log.read_text(errors="replace").count("append failed")
                      for log in work.glob("w*.log"))
        objects = s3servers.boto3_client(direct).get_paginator("list_objects_v2")
        prefix = url.split(f"s3://{s3servers.BUCKET}/", 1)[1] + "/"
        keys = [o["Key"] for page in objects.paginate(Bucket=s3servers.BUCKET, Prefix=prefix)
                for o in page.get("Contents", [])]
        # the stream after it all, checked as `tstream fsck` does (straight to the store)
        report = Stream.open(url, _opts(direct)).verify()
        damage = [pr for pr in report.problems if not pr.repairable]
        chunks = sum(1 for k in keys if k[len(prefix):].startswith("data/"))
        macros = sum(1 for k in keys if k[len(prefix):].startswith("data/") and "/m-" in k)
        meta = sum(1 for k in keys if k[len(prefix):].startswith("_tstream/"))
        table = [("minutes", f"{minutes:g}"), ("producer kills", kills), ("Spark producer restarts", restarts),
                 ("consumer restarts", consumer_restarts),
                 ("restarts after Spark's Python runner start timed out",
                  ", ".join(spark_timeouts) or "none"),
                 ("scales (split / merge)", f"{scales['split']} / {scales['merge']}; epoch {final.epoch}"),
                 ("vacuum (files / metadata deleted)",
                  " / ".join(f"{k} {v}" for k, v in sorted(vacuumed.items()) if v) or "nothing"),
                 ("store requests / faults injected",
                  f"{sum(v for k, v in injected.items() if k not in OUTAGE_STATS)} / "
                  + (", ".join(f"{k} {v}" for k, v in sorted(injected.items())
                               if k != "pass" and k not in OUTAGE_STATS) or "none")),
                 ("outages / requests failed in them",
                  " / ".join(str(injected.get(k, 0)) for k in OUTAGE_STATS) if outage_every else "-"),
                 ("producer appends failed and retried", retried),
                 ("records in (committed)", final.rows), ("records out (delivered)", out_total),
                 ("lost", lost), ("duplicated", dup),
                 ("Spark producer records / id gaps", f"{len(spark_ids)} / {spark_gaps}"),
                 ("per-key order breaks", breaks),
                 ("windows emitted / wrong / emitted twice", f"{len(emitted)} / {wrong} / {twice}"),
                 ("records counted in emitted windows", counted),
                 ("head (truncated by retention)", final.head_pos),
                 ("fsck problems: damage / repairable",
                  f"{len(damage)} / {len(report.problems) - len(damage)}"
                  + "".join(f"; {pr.kind}: {pr.message[:160]}" for pr in report.problems[:3])),
                 ("Python RSS start/end MB", f"{rss_py0 // 1024} / {rss_py1 // 1024}"),
                 ("Spark JVM RSS start/end MB", f"{rss_jvm0 // 1024} / {rss_jvm1 // 1024}"),
                 # the queries that ran throughout (the consumer restarts): a stream reader that
                 # kept history would grow here
                 ("source runner RSS at 30 s / end MB",
                  ", ".join(f"{runners0[p] // 1024} / {runners1[p] // 1024}" for p in sorted(runners0)
                            if p in runners1) or "-"),
                 ("chunk objects (of them macro-chunks)", f"{chunks} ({macros})"), ("metadata objects", meta),
                 ("max tick lag s", f"{max_lag / 1000:.1f}")]
        width = max(len(r[0]) for r in table)
        print("\n".join(f"{k:<{width}}  {v}" for k, v in table))
        # the windows must count most records, or their check says nothing
        ok_windows = wrong == 0 and twice == 0 and counted >= len(counts) // 2
        return 0 if lost == 0 and dup == 0 and spark_gaps == 0 and spark_ids and breaks == 0 and ok_windows \
            and not damage else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--kill-every", type=float, default=60.0, help="seconds between producer kills")
    ap.add_argument("--scale-every", type=float, default=45.0, help="seconds between scales (split, merge)")
    ap.add_argument("--vacuum-every", type=float, default=60.0, help="seconds between vacuums")
    ap.add_argument("--faults", type=float, default=0.0,
                    help="fraction of store requests failed (503, 500, dropped, applied then dropped)")
    ap.add_argument("--outage-every", type=float, default=0.0,
                    help="seconds between store outages (every request fails for --outage-seconds)")
    ap.add_argument("--outage-seconds", type=float, default=20.0, help="length of each outage")
    ap.add_argument("--smoke", action="store_true", help="about a minute, a kill every 15 s")
    ap.add_argument("--proxy-for", help=argparse.SUPPRESS)
    ap.add_argument("--stats", help=argparse.SUPPRESS)
    ap.add_argument("--producer", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--endpoint", help=argparse.SUPPRESS)
    ap.add_argument("--skew", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.proxy_for:
        fault_proxy(args.proxy_for, args.faults, args.stats, args.outage_seconds)
        return 0
    if args.producer:
        producer(args.url, args.endpoint, args.producer, args.skew)
        return 0
    if args.smoke:
        return soak(1.0, 15.0, 20.0, 30.0, faults=0.02, outage_every=25.0, outage_seconds=8.0)
    return soak(args.minutes, args.kill_every, args.scale_every, args.vacuum_every, args.faults,
                args.outage_every, args.outage_seconds if args.outage_every else 0.0)


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    exit_now(main())
