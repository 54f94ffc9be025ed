"""Commit throughput against writers: SeaweedFS behind a latency proxy, writers as processes.

Usage::

    python tests/benchmarks/bench_commit_scaling.py                 # 1, 4, 16, 64 writers, 20 s each
    python tests/benchmarks/bench_commit_scaling.py --writers 16 --seconds 10 --latency-ms 30
    python tests/benchmarks/bench_commit_scaling.py --smoke         # 1 and 4 writers, 3 s each (CI)

Each writer is a process calling ``Stream.append`` with ``--rows`` records at a time, as writer
``w<i>`` with batch ids 0, 1, 2, … (an idempotent producer), for ``--seconds`` seconds after a
common start time (their imports and opens are not measured). Every request to the store goes
through a proxy that adds ``--latency-ms`` (issue #35: 30 ms, an object store's round trip).
Printed per writer count: acknowledged commits per second in total, the commit latency p50 and
p99 (one ``append`` call), the journal entries those commits took (group commit folds several
commits into one entry) and the machine's load average. Then everything is read back (without
the proxy) and every (writer, batch) must be there exactly once, with ``_seq`` dense per
segment: the run fails otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
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
    table = pa.table({"writer": [name] * rows, "batch": [0] * rows, "i": list(range(rows))})
    stream.refresh()
    open(out + ".ready", "w").close()
    go = os.path.join(os.path.dirname(out), "go")
    while not os.path.exists(go):  # every writer imported and opened: the clock starts together
        time.sleep(0.02)
    start_at = float(open(go).read())
    time.sleep(max(0.0, start_at - time.time()))
    lat: list[float] = []
    folded = 0
    batch = 0
    end = start_at + seconds
    cpu0 = time.process_time()
    while time.time() < end:
        t = table.set_column(1, "batch", pa.array([batch] * rows, pa.int64()))
        t0 = time.perf_counter()
        ack = stream.append(t, writer_id=name, batch_id=batch)
        lat.append(time.perf_counter() - t0)
        assert not ack.duplicate, ack
        batch += 1
    cpu = time.process_time() - cpu0
    stream.context.journal.hints.settle(5)
    with open(out, "w") as f:
        json.dump({"lat": lat, "batches": batch, "folded": folded, "cpu": cpu}, f)


def run(endpoint: str, proxy_endpoint: str, writers: int, seconds: float, rows: int, folder: str) -> dict[str, Any]:
    import s3servers
    from pyspark_tstream.api.stream import Stream

    url = f"s3://{s3servers.BUCKET}/bench-{uuid.uuid4().hex[:8]}/stream"
    direct = s3servers.s3_storage_options(endpoint)
    proxied = s3servers.s3_storage_options(proxy_endpoint)
    import pyarrow as pa

    Stream.create(url, storage_options=direct, segments=4,
                  schema=pa.schema([("writer", pa.string()), ("batch", pa.int64()), ("i", pa.int64())]))
    start_at = 0.0  # set by the "go" file once every writer is ready
    procs, outs = [], []
    for i in range(writers):
        out = os.path.join(folder, f"w{writers}-{i}.json")
        outs.append(out)
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(
            [url, proxied, f"w{i}", start_at, seconds, rows, out])]))
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
    results = [json.load(open(o)) for o in outs]
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
            "lost": lost, "duplicated": dup, "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, nargs="*", default=[1, 4, 16, 64])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--latency-ms", type=float, default=30.0)
    ap.add_argument("--smoke", action="store_true", help="1 and 4 writers, 3 s each")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*json.loads(args.worker))
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
            for n in args.writers:
                r = run(endpoint, proxy.endpoint, n, args.seconds, args.rows, folder)
                rows_out.append(r)
                print(f"{r['writers']:>3} writers: {r['per_s']:7.1f} commits/s  p50 {r['p50_ms']:6.0f} ms  "
                      f"p99 {r['p99_ms']:6.0f} ms  {r['commits']} commits in {r['entries']} entries  "
                      f"lost {r['lost']} duplicated {r['duplicated']}  writer CPU {r['cpu_ms']:.0f} ms/commit  "
                      f"load {r['load']:.1f}", flush=True)
        finally:
            proxy.stop()
    print(f"\n{args.latency_ms:.0f} ms per request, {args.rows} records per commit, {args.seconds:.0f} s per row")
    print("| writers | commits/s | p50 | p99 | commits per entry | writer CPU per commit | lost / duplicated | load |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows_out:
        print(f"| {r['writers']} | {r['per_s']:.1f} | {r['p50_ms']:.0f} ms | {r['p99_ms']:.0f} ms | "
              f"{r['commits'] / max(r['entries'], 1):.1f} | {r['cpu_ms']:.0f} ms | {r['lost']} / {r['duplicated']} | {r['load']:.1f} |")
    if any(r["lost"] or r["duplicated"] for r in rows_out):
        raise SystemExit("records lost or duplicated")


if __name__ == "__main__":
    main()
