"""Commit throughput against writers: SeaweedFS behind a latency proxy, writers as processes.

Usage::

    python tests/benchmarks/bench_commit_scaling.py                 # 1, 4, 16, 64 writers, 20 s each
    python tests/benchmarks/bench_commit_scaling.py --writers 16 --seconds 10 --latency-ms 30
    python tests/benchmarks/bench_commit_scaling.py --smoke         # 1 and 4 writers, 3 s each (CI)
    python tests/benchmarks/bench_commit_scaling.py --spark         # 4 streaming queries, one session

Each writer is a process calling ``Stream.append`` with ``--rows`` records at a time, as writer
``w<i>`` with batch ids 0, 1, 2, … (an idempotent producer), for ``--seconds`` seconds after a
common start time (their imports and opens are not measured). Every request to the store goes
through a proxy that adds ``--latency-ms`` (30 ms by default: an object store's round trip).
Printed per writer count: acknowledged commits per second in total, the commit latency p50 and
p99 (one ``append`` call), the journal entries those commits took (group commit folds several
commits into one entry) and the machine's load average. Then everything is read back (without
the proxy) and every (writer, batch) must be there exactly once, with ``_seq`` dense per
segment: the run fails otherwise. Below each row: the writers' store calls per commit by kind
and object (``objects``: every object those calls touched, a batched read or delete counting
each of its objects).

``--spark``: ``--queries`` (4) streaming queries in one local Spark session, each reading its own
``rate`` source (``--rows`` records per second) with 1 s processing-time triggers and writing
``format("tstream")`` into one stream through the proxy (the sink's commit is group commit's
path; the queries' commits race for the same slots) for ``--seconds``. Printed: micro-batches
committed per second in total, the batch commit's time p50/p99 from the queries' progress
(``addBatch``: the tasks' data writes and the journal commit; the sink commits inside it) and
the whole trigger's, the journal entries those batches took, and exactly-once: the rate
source numbers each query's rows 0, 1, 2, …, so each query's ids read back must be a dense
prefix covering at least every batch its progress reported, and every (writer, batch) must be
in the journal once. Not part of ``--smoke``.

``--floor``: the same writer processes, proxy and server, but each "commit" is only the store
requests no design can avoid: the data PUT (a Parquet file of ``--rows`` records, as ``append``
writes) and one small conditional create on a key of its own (never contended). What this
machine, the proxy and the server sustain for N writers doing two round trips each: the
ceiling for any commit protocol here (group commit adds a listing, a request PUT and reads
when contended). Printed beside it: requests/s and the writers' CPU per "commit".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import uuid
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/: s3servers


def worker(url: str, opts: dict[str, Any], name: str, start_at: float, seconds: float, rows: int,
           out: str) -> None:
    """One writer process: append until ``start_at + seconds``; write latencies to ``out``."""
    import pyarrow as pa
    from pyspark_tstream.api.stream import Stream

    stream = Stream.open(url, opts)
    calls: dict[str, int] = {}

    def count(op: str, rel: str) -> None:
        first, _, more = rel.partition(" (+")
        kind = op + " " + re.sub(r"[0-9a-f]{6,}|[0-9]+", "#", first)
        calls[kind] = calls.get(kind, 0) + 1
        calls["objects"] = calls.get("objects", 0) + 1 + (int(more.rstrip(")")) if more else 0)

    stream.store.observer = count  # every store call a commit makes, by kind
    table = pa.table({"writer": [name] * rows, "batch": [0] * rows, "i": list(range(rows))})
    stream.refresh()
    open(out + ".ready", "w").close()
    go = os.path.join(os.path.dirname(out), "go")
    while not os.path.exists(go):  # every writer imported and opened: the clock starts together
        time.sleep(0.02)
    with open(go) as f:
        start_at = float(f.read())
    time.sleep(max(0.0, start_at - time.time()))
    lat: list[float] = []
    folded = 0
    batch = 0
    calls.clear()
    end = start_at + seconds
    cpu0 = time.process_time()
    prof = None
    if os.environ.get("TSTREAM_BENCH_PROFILE") and name == "w0":  # where a writer's CPU goes
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    while time.time() < end:
        t = table.set_column(1, "batch", pa.array([batch] * rows, pa.int64()))
        t0 = time.perf_counter()
        ack = stream.append(t, writer_id=name, batch_id=batch)
        lat.append(time.perf_counter() - t0)
        assert not ack.duplicate, ack
        batch += 1
    cpu = time.process_time() - cpu0
    if prof is not None:
        import pstats

        prof.disable()
        with open(os.environ["TSTREAM_BENCH_PROFILE"], "w") as f:
            order = os.environ.get("TSTREAM_BENCH_PROFILE_SORT", "tottime")
            pstats.Stats(prof, stream=f).sort_stats(order).print_stats(40)
    stream.context.journal.hints.settle(5)
    with open(out, "w") as f:
        json.dump({"lat": lat, "batches": batch, "folded": folded, "cpu": cpu, "calls": calls}, f)


def floor_worker(url: str, opts: dict[str, Any], name: str, start_at: float, seconds: float, rows: int,
                 out: str) -> None:
    """A writer process of ``--floor``: a data PUT and one uncontended conditional create per loop."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark_tstream.store.storage import Store

    store = Store(url, opts)
    buf = io.BytesIO()
    pq.write_table(pa.table({"writer": [name] * rows, "batch": [0] * rows, "i": list(range(rows))}), buf)
    data = buf.getvalue()
    open(out + ".ready", "w").close()
    go = os.path.join(os.path.dirname(out), "go")
    while not os.path.exists(go):
        time.sleep(0.02)
    with open(go) as f:
        start_at = float(f.read())
    time.sleep(max(0.0, start_at - time.time()))
    lat: list[float] = []
    end = start_at + seconds
    cpu0 = time.process_time()
    while time.time() < end:
        t0 = time.perf_counter()
        store.write(f"data/floor/{name}-{len(lat)}.parquet", data)
        assert store.put_if_absent(f"_tstream/floor/{name}-{len(lat)}.json", b'{"floor": true}')
        lat.append(time.perf_counter() - t0)
    cpu = time.process_time() - cpu0
    with open(out, "w") as f:
        json.dump({"lat": lat, "batches": len(lat), "folded": 0, "cpu": cpu}, f)


def run_floor(endpoint: str, proxy_endpoint: str, writers: int, seconds: float, rows: int,
              folder: str) -> dict[str, Any]:
    """``--floor`` for ``writers`` processes: loops/s, latency, requests/s, CPU per loop."""
    import s3servers

    url = f"s3://{s3servers.BUCKET}/floor-{uuid.uuid4().hex[:8]}/stream"
    proxied = s3servers.s3_storage_options(proxy_endpoint)
    results = _spawn("--floor-worker", url, proxied, writers, seconds, rows, folder)
    lat = np.array([x for r in results for x in r["lat"]])
    return {"writers": writers, "commits": len(lat), "per_s": len(lat) / seconds, "requests_s": 2 * len(lat) / seconds,
            "p50_ms": float(np.percentile(lat, 50) * 1000) if len(lat) else 0.0,
            "p99_ms": float(np.percentile(lat, 99) * 1000) if len(lat) else 0.0,
            "cpu_ms": 1000 * sum(r["cpu"] for r in results) / max(len(lat), 1), "load": os.getloadavg()[0]}


def _spawn(flag: str, url: str, opts: dict[str, Any], writers: int, seconds: float, rows: int,
           folder: str) -> list[dict[str, Any]]:
    """Start ``writers`` processes (``flag``), start their clocks together, return their results."""
    procs, outs = [], []
    for i in range(writers):
        out = os.path.join(folder, f"{flag.strip('-')}-w{writers}-{i}.json")
        outs.append(out)
        procs.append(subprocess.Popen([sys.executable, __file__, flag, json.dumps(
            [url, opts, f"w{i}", 0.0, seconds, rows, out])]))
    while not all(os.path.exists(o + ".ready") for o in outs):
        if any(p.poll() for p in procs):
            break
        time.sleep(0.05)
    with open(os.path.join(folder, "go.tmp"), "w") as f:
        f.write(str(time.time() + 0.5))
    os.replace(os.path.join(folder, "go.tmp"), os.path.join(folder, "go"))
    failed = [p.wait() for p in procs]
    os.remove(os.path.join(folder, "go"))
    if any(failed):
        raise SystemExit(f"{sum(1 for f in failed if f)} writer process(es) failed")
    return [json.load(open(o)) for o in outs]


def run(endpoint: str, proxy_endpoint: str, writers: int, seconds: float, rows: int, folder: str) -> dict[str, Any]:
    import s3servers
    from pyspark_tstream.api.stream import Stream

    url = f"s3://{s3servers.BUCKET}/bench-{uuid.uuid4().hex[:8]}/stream"
    direct = s3servers.s3_storage_options(endpoint)
    proxied = s3servers.s3_storage_options(proxy_endpoint)
    import pyarrow as pa

    Stream.create(url, storage_options=direct, segments=4,
                  schema=pa.schema([("writer", pa.string()), ("batch", pa.int64()), ("i", pa.int64())]))
    results = _spawn("--worker", url, proxied, writers, seconds, rows, folder)
    lat = np.array([x for r in results for x in r["lat"]])
    sent = {(f"w{i}", b) for i, r in enumerate(results) for b in range(r["batches"])}
    stream = Stream.open(url, direct)
    t = stream.read()
    got = list(zip(t["writer"].to_pylist(), t["batch"].to_pylist()))
    counts: dict[tuple[str, int], int] = {}
    for k in got:
        counts[k] = counts.get(k, 0) + 1
    lost = len(sent - set(counts))
    dup = sum(1 for k, n in counts.items() if n != rows) + len(set(counts) - sent)
    for seg in set(t["_segment"].to_pylist()):
        seqs = sorted(s for s, g in zip(t["_seq"].to_pylist(), t["_segment"].to_pylist()) if g == seg)
        assert seqs == list(range(len(seqs))), f"segment {seg}: _seq not dense"
    entries = stream.state.pos
    return {"writers": writers, "commits": len(lat), "per_s": len(lat) / seconds,
            "p50_ms": float(np.percentile(lat, 50) * 1000) if len(lat) else 0.0,
            "p99_ms": float(np.percentile(lat, 99) * 1000) if len(lat) else 0.0,
            "entries": entries, "cpu_ms": 1000 * sum(r["cpu"] for r in results) / max(len(lat), 1),
            "lost": lost, "duplicated": dup, "load": os.getloadavg()[0],
            "calls": {op: sum(r["calls"].get(op, 0) for r in results) / max(len(lat), 1)
                      for op in sorted({op for r in results for op in r["calls"]})}}


def run_spark(endpoint: str, proxy_endpoint: str, queries: int, seconds: float, rows: int,
              folder: str) -> dict[str, Any]:
    """``queries`` streaming queries of one session write one stream (module docstring)."""
    import s3servers
    from pyspark.sql import SparkSession
    from pyspark_tstream.api.stream import Stream
    from sparkfixtures import SESSION_CONF, _register

    url = f"s3://{s3servers.BUCKET}/bench-spark-{uuid.uuid4().hex[:8]}/stream"
    direct = s3servers.s3_storage_options(endpoint)
    Stream.create(url, storage_options=direct, segments=4)
    opts = {"storage.endpoint_url": proxy_endpoint, "storage.key": s3servers.ACCESS_KEY,
            "storage.secret": s3servers.SECRET_KEY,
            "storage.client_kwargs": json.dumps({"region_name": s3servers.REGION})}
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("bench-commit-scaling")
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    _register(spark)
    try:
        started = []
        for q in range(queries):
            started.append(
                spark.readStream.format("rate").option("rowsPerSecond", rows).option("numPartitions", 1).load()
                .selectExpr(f"'q{q}' as q", "value as id", "timestamp as t")
                .writeStream.format("tstream").options(**opts)
                .option("checkpointLocation", os.path.join(folder, f"spark-ckpt-{q}"))
                .option("keyColumn", "q").option("timestampColumn", "t")
                .trigger(processingTime="1 second").start(url))
        # warm-up (not measured): the session's first micro-batches start the Python workers
        warm_until = time.time() + 180
        while not all(any(p["numInputRows"] > 0 for p in query.recentProgress) for query in started):
            if time.time() > warm_until or any(query.exception() is not None for query in started):
                break
            time.sleep(0.2)
        first = [max((p["batchId"] for p in query.recentProgress), default=-1) for query in started]
        t0 = time.time()
        time.sleep(seconds)  # a benchmark: the queries run on their own triggers meanwhile
        for query in started:
            query.stop()
        elapsed = time.time() - t0
        every = [[p for p in query.recentProgress if p["numInputRows"] > 0] for query in started]
        progress = [[p for p in ps if p["batchId"] > f] for ps, f in zip(every, first)]
        errors = [str(query.exception()) for query in started if query.exception() is not None]
    finally:
        spark.stop()
    if errors:
        raise SystemExit(f"{len(errors)} query(ies) failed: {errors}")
    add = np.array([p["durationMs"].get("addBatch", 0) for ps in progress for p in ps], dtype=float)
    trig = np.array([p["durationMs"].get("triggerExecution", 0) for ps in progress for p in ps], dtype=float)
    stream = Stream.open(url, direct)
    for writer in [w for w in stream.state.writers if w.startswith("query-")]:
        stream.writer(writer).close()  # a stopped query's session holds the tick back until released
    t = stream.read()
    lost = dup = 0
    if not all(progress):
        raise SystemExit("a query committed no micro-batch in the measured time: raise --seconds")
    for q, ps in enumerate(every):
        ids = sorted(i for qq, i in zip(t["q"].to_pylist(), t["id"].to_pylist()) if qq == f"q{q}")
        reported = sum(int(p["numInputRows"]) for p in ps)
        dup += len(ids) - len(set(ids))
        lost += max(0, reported - len(set(ids))) + (0 if sorted(set(ids)) == list(range(len(set(ids)))) else 1)
    parts: list[tuple[str, Any]] = []
    for e in stream.journal.log.read_entries(range(1, stream.state.pos + 1)):
        if e.op == "append" and e.chunks:
            parts += [(f.writer, f.batch) for f in e.folds] if e.folds else [(e.writer, e.batch)]
    dup += len(parts) - len(set(parts))
    entries = sum(1 for e in stream.journal.log.read_entries(range(1, stream.state.pos + 1))
                  if e.op == "append" and e.chunks)
    return {"queries": queries, "batches": len(parts), "per_s": sum(map(len, progress)) / elapsed,
            "p50_ms": float(np.percentile(add, 50)) if len(add) else 0.0,
            "p99_ms": float(np.percentile(add, 99)) if len(add) else 0.0,
            "trigger_p50_ms": float(np.percentile(trig, 50)) if len(trig) else 0.0,
            "trigger_p99_ms": float(np.percentile(trig, 99)) if len(trig) else 0.0,
            "entries": entries, "folded": sum(1 for e in stream.journal.log.read_entries(
                range(1, stream.state.pos + 1)) if len(e.folds) > 1),
            "lost": lost, "duplicated": dup, "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, nargs="*", default=[1, 4, 16, 64])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--latency-ms", type=float, default=30.0)
    ap.add_argument("--smoke", action="store_true", help="1 and 4 writers, 3 s each")
    ap.add_argument("--spark", action="store_true", help="streaming queries of one Spark session instead")
    ap.add_argument("--queries", type=int, default=4, help="with --spark: streaming queries")
    ap.add_argument("--floor", action="store_true",
                    help="only a data PUT and one uncontended conditional create per commit: the ceiling here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--floor-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*json.loads(args.worker))
        return
    if args.floor_worker:
        floor_worker(*json.loads(args.floor_worker))
        return
    if args.smoke:
        args.writers, args.seconds = [1, 4], 3.0
    import tempfile

    import s3servers

    rows_out = []
    with s3servers.running_seaweedfs() as endpoint, tempfile.TemporaryDirectory() as folder:
        proxy = s3servers.FaultProxy(endpoint, latency=args.latency_ms / 1000)
        proxy._server.handle_error = lambda request, client_address: None  # clients that gave up
        proxy.start()
        try:
            if args.spark:
                r = run_spark(endpoint, proxy.endpoint, args.queries, args.seconds, args.rows, folder)
                print(f"{r['queries']} streaming queries, 1 s triggers, {args.rows} rows/s each, "
                      f"{args.latency_ms:.0f} ms per request: {r['per_s']:.2f} batches/s  "
                      f"commit (addBatch) p50 {r['p50_ms']:.0f} ms p99 {r['p99_ms']:.0f} ms  "
                      f"trigger p50 {r['trigger_p50_ms']:.0f} ms p99 {r['trigger_p99_ms']:.0f} ms  "
                      f"{r['batches']} batches in {r['entries']} entries ({r['folded']} folding several)  "
                      f"lost {r['lost']} duplicated {r['duplicated']}  load {r['load']:.1f}", flush=True)
                if r["lost"] or r["duplicated"]:
                    raise SystemExit("records lost or duplicated")
                return
            if args.floor:
                print(f"floor: a data PUT + one uncontended conditional create per commit, "
                      f"{args.latency_ms:.0f} ms per request")
                print("| writers | commits/s | requests/s | p50 | p99 | writer CPU per commit | load |")
                print("|---|---|---|---|---|---|---|")
                for n in args.writers:
                    r = run_floor(endpoint, proxy.endpoint, n, args.seconds, args.rows, folder)
                    print(f"| {n} | {r['per_s']:.1f} | {r['requests_s']:.0f} | {r['p50_ms']:.0f} ms | "
                          f"{r['p99_ms']:.0f} ms | {r['cpu_ms']:.0f} ms | {r['load']:.1f} |", flush=True)
                return
            for n in args.writers:
                r = run(endpoint, proxy.endpoint, n, args.seconds, args.rows, folder)
                rows_out.append(r)
                print(f"{r['writers']:>3} writers: {r['per_s']:7.1f} commits/s  p50 {r['p50_ms']:6.0f} ms  "
                      f"p99 {r['p99_ms']:6.0f} ms  {r['commits']} commits in {r['entries']} entries  "
                      f"lost {r['lost']} duplicated {r['duplicated']}  writer CPU {r['cpu_ms']:.0f} ms/commit  "
                      f"load {r['load']:.1f}", flush=True)
                print("    store calls per commit: " + ", ".join(f"{op} {n:.2f}" for op, n in r["calls"].items()),
                      flush=True)
        finally:
            proxy.stop()
    print(f"\n{args.latency_ms:.0f} ms per request, {args.rows} records per commit, {args.seconds:.0f} s per row")
    print("| writers | commits/s | p50 | p99 | commits per entry | writer CPU per commit | lost / duplicated | load |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows_out:
        print(f"| {r['writers']} | {r['per_s']:.1f} | {r['p50_ms']:.0f} ms | {r['p99_ms']:.0f} ms | "
              f"{r['commits'] / max(r['entries'], 1):.1f} | {r['cpu_ms']:.0f} ms | "
              f"{r['lost']} / {r['duplicated']} | {r['load']:.1f} |")
    if any(r["lost"] or r["duplicated"] for r in rows_out):
        raise SystemExit("records lost or duplicated")


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
