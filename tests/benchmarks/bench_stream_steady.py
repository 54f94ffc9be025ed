"""Steady-state source throughput: many micro-batches of one long-running query.

Usage::

    python tests/benchmarks/bench_stream_steady.py                # 5M rows, 50 files, 5 per batch
    python tests/benchmarks/bench_stream_steady.py --rounds 3 --per-trigger 10
    python tests/benchmarks/bench_stream_steady.py --smoke        # 200k rows, 1 round (CI)

The same rows sit in two places: a tstream stream of ``--files`` chunks (one segment, one chunk
per append, so a chunk is a file) and a folder of as many Parquet files. One query per source
reads them with ``maxFilesPerTrigger`` into ``noop`` under ``Trigger.AvailableNow``, so it runs
``files / per-trigger`` micro-batches. What a long-running query sees is the steady state: rows
per second of trigger time over every micro-batch but the first (which pays the query's start),
and the median trigger time. The whole query's wall time (start and stop included) is printed
too. Rounds alternate which source goes first; figures are medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _data import CpuMeter, make_table, median, render
from bench_spark import build_session


def prepare(root: str, rows: int, files: int) -> tuple[str, str]:
    """(tstream URL, Parquet folder) holding the same ``rows`` rows as ``files`` chunks/files."""
    from pyspark_tstream.api.stream import Stream

    table = make_table(rows)
    folder = os.path.join(root, "files")
    os.makedirs(folder, exist_ok=True)
    url = "file://" + os.path.join(root, "stream")
    stream = Stream.create(url, segments=1)
    per = -(-rows // files)
    for i in range(files):
        part = table.slice(i * per, per)
        pq.write_table(part, os.path.join(folder, f"part-{i:04d}.parquet"), compression="snappy",
                       use_dictionary=["key"])
        stream.append(part, timestamp="ts")
    return url, folder


def run(spark: Any, reader: Any, root: str, name: str, cpu: CpuMeter) -> dict[str, Any]:
    ckpt = os.path.join(root, f"ckpt-{name}-{time.monotonic_ns()}")
    c0 = cpu.snapshot()
    t0 = time.perf_counter()
    q = reader.writeStream.format("noop").option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    q.awaitTermination()
    wall = time.perf_counter() - t0
    jvm, py = cpu.between(c0, cpu.snapshot())
    if q.exception() is not None:
        raise RuntimeError(f"{name}: {q.exception()}")
    progress = [json.loads(p.json) if hasattr(p, "json") else p for p in q.recentProgress]
    batches = [p for p in progress if p.get("numInputRows", 0)]
    shutil.rmtree(ckpt, ignore_errors=True)
    steady = batches[1:] or batches
    trig = [p["durationMs"]["triggerExecution"] / 1000 for p in steady]
    return {"wall": wall, "rows": sum(p["numInputRows"] for p in batches), "batches": len(batches),
            "steady_rows": sum(p["numInputRows"] for p in steady), "steady_s": sum(trig),
            "trigger_med": median(trig), "cpu_jvm": jvm, "cpu_py": py}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--files", type=int, default=50)
    ap.add_argument("--per-trigger", type=int, default=5, help="maxFilesPerTrigger of both sources")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="100k rows, 8 files, 1 round, no warm-up (CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.files, args.per_trigger, args.rounds = 100_000, 8, 2, 1
    root = tempfile.mkdtemp(prefix="tstream-steady-")
    try:
        url, folder = prepare(root, args.rows, args.files)
        spark = build_session()
        cpu = CpuMeter(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
        schema = spark.read.parquet(folder).schema
        k = str(args.per_trigger)
        sides = {
            "tstream": lambda: spark.readStream.format("tstream").option("maxFilesPerTrigger", k).load(url),
            "file source": lambda: spark.readStream.schema(schema).option("maxFilesPerTrigger", k).parquet(folder),
        }
        for name, reader in sides.items() if not args.smoke else ():  # warm-up: first Python use, JIT
            run(spark, reader(), root, name, cpu)
        got: dict[str, list[dict[str, Any]]] = {n: [] for n in sides}
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for name in order:
                d = run(spark, sides[name](), root, name, cpu)
                if d["rows"] != args.rows:
                    raise AssertionError(f"{name} read {d['rows']} rows, expected {args.rows}")
                got[name].append(d)
        spark.stop()
        print(f"# Steady-state source throughput: {args.rows:,} rows in {args.files} files/chunks, "
              f"maxFilesPerTrigger={args.per_trigger} (~{args.files // args.per_trigger} micro-batches), "
              f"noop sink, {args.rounds} round(s), medians\n")
        body = []
        for name, ds in got.items():
            body.append([name, median([d["batches"] for d in ds]),
                         f"{median([d['steady_rows'] / d['steady_s'] for d in ds]) / 1e6:.2f}",
                         f"{median([d['trigger_med'] for d in ds]):.3f}",
                         f"{median([d['wall'] for d in ds]):.2f}",
                         f"{median([d['rows'] / d['wall'] for d in ds]) / 1e6:.2f}",
                         f"{median([d['cpu_jvm'] for d in ds]):.2f}", f"{median([d['cpu_py'] for d in ds]):.2f}"])
        print(render(["source", "micro-batches", "steady Mrows/s", "median trigger s", "query wall s",
                      "whole-query Mrows/s", "CPU JVM s", "CPU Python s"], body))
        ratio = median([t["steady_rows"] / t["steady_s"] / (f["steady_rows"] / f["steady_s"])
                        for t, f in zip(got["tstream"], got["file source"])])
        print(f"\nsteady-state throughput tstream / file source: ×{ratio:.2f} "
              "(rows per second of trigger time, every micro-batch but the first)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
