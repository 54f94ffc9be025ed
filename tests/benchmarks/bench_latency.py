"""End-to-end latency: a producer process appending every 250 ms → a streaming query → foreachBatch.

Usage::

    python tests/benchmarks/bench_latency.py                  # 60 s per source, 2 rounds
    python tests/benchmarks/bench_latency.py --seconds 120 --interval 0.1
    python tests/benchmarks/bench_latency.py --smoke          # 10 s per source, 1 round (CI)

A separate Python process (the producer) appends ``--rows`` records every ``--interval``
seconds, each stamped with the wall time just before the append call (``sent_ms``):

* tstream: ``Stream.append`` (one commit per append, a one-shot writer: the tick follows it);
* file source: one Parquet file per append, written under a hidden name then renamed into the
  folder ``readStream.parquet`` watches (the usual atomic landing pattern).

The consumer is a streaming query with ``trigger(processingTime="0 seconds")`` whose
``foreachBatch`` collects the batch's ``sent_ms`` values; a record's latency is the wall time
when its batch's rows reached the driver minus its ``sent_ms`` (producer and consumer share the
machine's clock). The first 2 s of appends are left out (query warm-up). Figures are
percentiles over all appends of all rounds, per source; rounds alternate which source goes
first. Each source is reported twice: every append after those 2 s, and the steady state,
the appends from ``STEADY_AFTER_S`` on: a query's first seconds run its first Python tasks
(worker processes, imports) and compile its plans, and that warm-up, not the steady state,
is what a short run's p90/p99 show.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _data import report

WARMUP_S = 2.0
#: Appends this many seconds after the producer started count as the steady state.
STEADY_AFTER_S = 10.0
NOTE = ("latency = wall time when a batch's rows reached foreachBatch's driver code − the producer's "
        "wall time just before its append call.")


def produce(kind: str, target: str, seconds: float, interval: float, rows: int) -> None:
    """The producer process: append ``rows`` rows every ``interval`` s for ``seconds`` s."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    stream = None
    if kind == "tstream":
        from pyspark_tstream.api.stream import Stream

        stream = Stream.open(target)
    end = time.time() + seconds
    n = 0
    next_at = time.time()
    while time.time() < end:
        sent = time.time() * 1000
        table = pa.table({"sent_ms": pa.array([sent] * rows, pa.float64()),
                          "n": pa.array(range(n * rows, (n + 1) * rows), pa.int64())})
        if stream is not None:
            stream.append(table)
        else:
            tmp = os.path.join(target, f".tmp-{n:06d}.parquet")
            pq.write_table(table, tmp)
            os.rename(tmp, os.path.join(target, f"part-{n:06d}.parquet"))
        n += 1
        next_at += interval
        time.sleep(max(0.0, next_at - time.time()))


def measure(spark: Any, kind: str, root: str, seconds: float, interval: float,
            rows: int) -> list[tuple[float, float]]:
    """(seconds since the producer started, latency ms) of every append after the warm-up, for one source."""
    import pyarrow as pa

    tag = f"{kind.replace(' ', '')}-{time.monotonic_ns()}"
    seed = pa.table({"sent_ms": pa.array([0.0], pa.float64()), "n": pa.array([-1], pa.int64())})
    if kind == "tstream":
        from pyspark_tstream.api.stream import Stream

        target = "file://" + os.path.join(root, f"stream-{tag}")
        Stream.create(target, segments=1).append(seed)
        reader = spark.readStream.format("tstream").load(target)
    else:
        import pyarrow.parquet as pq

        target = os.path.join(root, f"files-{tag}")
        os.makedirs(target)
        pq.write_table(seed, os.path.join(target, "seed.parquet"))
        reader = spark.readStream.schema("sent_ms double, n bigint").parquet(target)
    seen: dict[float, float] = {}
    batches: list[int] = []

    def on_batch(df: Any, batch_id: int) -> None:
        batches.append(batch_id)
        sent = [r[0] for r in df.select("sent_ms").distinct().collect()]
        now = time.time() * 1000  # the batch's rows are on the driver now
        for s in sent:
            if s > 0:
                seen.setdefault(s, now - s)

    q = (reader.writeStream.foreachBatch(on_batch).trigger(processingTime="0 seconds")
         .option("checkpointLocation", os.path.join(root, f"ckpt-{tag}")).start())
    try:
        # the query is up and has run its first batch (the seed record) before the first append
        deadline = time.time() + 300
        while not batches and time.time() < deadline and q.isActive:
            time.sleep(0.1)
        time.sleep(1.0)
        started = time.time() * 1000
        subprocess.run([sys.executable, os.path.abspath(__file__), "--produce", "tstream" if kind == "tstream"
                        else "files", target, str(seconds), str(interval), str(rows)], check=True)
        sent_total = int(seconds / interval)
        deadline = time.time() + 10
        while len(seen) < sent_total - 1 and time.time() < deadline:
            time.sleep(0.1)
    finally:
        q.stop()
    if q.exception() is not None:
        raise RuntimeError(f"{kind}: {q.exception()}")
    return [((s - started) / 1000, lat) for s, lat in seen.items() if s >= started + WARMUP_S * 1000]


def main(argv: list[str] | None = None) -> None:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--produce":
        kind, target, seconds, interval, rows = sys.argv[2:7]
        produce(kind, target, float(seconds), float(interval), int(rows))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="producer run time per source and round")
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between appends")
    ap.add_argument("--rows", type=int, default=1000, help="records per append")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="10 s per source, 1 round (CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.seconds, args.rounds = 10.0, 1
    from bench_spark import build_session

    root = tempfile.mkdtemp(prefix="tstream-latency-")
    try:
        spark = build_session()
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        kinds = ["tstream", "file source"]
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
        for r in range(args.rounds):
            for kind in kinds if r % 2 == 0 else kinds[::-1]:
                got[kind] += measure(spark, kind, root, args.seconds, args.interval, args.rows)
        spark.stop()
        body = []
        for kind, timed in got.items():
            spans = ((f"after {WARMUP_S:.0f} s", WARMUP_S), (f"steady: after {STEADY_AFTER_S:.0f} s", STEADY_AFTER_S))
            for span, lo in spans:
                lats = [lat for at, lat in timed if at >= lo]
                if not lats:
                    body.append([kind, span, 0, "-", "-", "-", "-"])
                    continue
                p = np.percentile(np.array(lats), [50, 90, 99])
                body.append([kind, span, len(lats), f"{p[0]:.0f}", f"{p[1]:.0f}", f"{p[2]:.0f}", f"{max(lats):.0f}"])
        title = (f"End-to-end latency: producer appends {args.rows} records every {args.interval * 1000:.0f} ms "
                 f"for {args.seconds:.0f} s → processingTime=0 query → foreachBatch; {args.rounds} round(s)")
        print(report(title, ["source", "span", "appends", "p50 ms", "p90 ms", "p99 ms", "max ms"], body, NOTE))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
