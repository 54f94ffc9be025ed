"""Reads of fresh (uncompacted) data at 64 segments against one segment.

    python tests/benchmarks/bench_fresh_reads.py                 # N = 300 appends, with Spark
    python tests/benchmarks/bench_fresh_reads.py --smoke         # N = 30, 1 repeat (CI)
    python tests/benchmarks/bench_fresh_reads.py --no-spark      # the Python reads only
    python tests/benchmarks/bench_fresh_reads.py --spark-shape   # also one 1M-row df.write from 200 tasks
    python tests/benchmarks/bench_fresh_reads.py --appends 0 --spark-shape   # that alone

N appends of 256 records each (``Stream.append``, a 1000-value key, one ms per record) into a
``file://`` stream of 1 segment and into one of 64 segments, compaction off: the data as a live
reader finds it. Since format v5 an append writes one shared file with a slice per segment, so
the 64-segment stream holds N files of ~61 slices of ~4 rows each. Each read is timed on both
streams (best of the repeats, the two streams interleaved so a busy machine slows both alike):
everything, and the newest 10 appends (from the first record of append N-10), through
``Stream.read``, ``to_reader`` (consumed), a Spark batch read (``count`` and ``sum``) and an
``availableNow`` streaming read into ``noop``. The ratio is the 64-segment time over the
1-segment time.

``--spark-shape``: Spark's production shape, one ``df.write`` of 1M rows from 200 tasks (Spark's
default shuffle partitions) into a 64-segment stream and into a 1-segment one (compaction off),
then ``spark.read.format("tstream").load(url).agg(sum(v))`` and an ``availableNow`` streaming
read of it, best of 3 interleaved rounds. Heavy: run it by hand on a quiet machine.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data import render
from pyspark_tstream.api.stream import Stream

ROWS = 256
NEWEST = 10
SEGMENTS = (1, 64)


def fill(url: str, segments: int, appends: int, base: int) -> None:
    """``appends`` appends of :data:`ROWS` records, ``ts`` one ms apart from ``base``."""
    s = Stream.create(url, segments=segments, compaction="off")
    rng = np.random.default_rng(7)
    keys = pa.array([f"key-{i:04d}" for i in range(1000)])
    for i in range(appends):
        ts = np.arange(base + i * ROWS, base + (i + 1) * ROWS, dtype=np.int64)
        s.append(pa.table({"ts": ts, "key": keys.take(pa.array(rng.integers(0, 1000, ROWS))),
                           "v": rng.integers(0, 1000, ROWS)}), key="key", timestamp="ts")


def best(fn: Callable[[], int], reps: int) -> tuple[float, int]:
    """The least time of ``reps`` calls of ``fn`` and the rows it returned."""
    times, rows = [], 0
    for _ in range(reps):
        t = time.perf_counter()
        rows = fn()
        times.append(time.perf_counter() - t)
    return min(times), rows


def python_reads(url: str, start: int) -> dict[str, Callable[[], int]]:
    def read_all() -> int:
        return int(Stream.open(url).read().num_rows)

    def read_new() -> int:
        return int(Stream.open(url).read(start=start).num_rows)

    def reader(**kw: Any) -> Callable[[], int]:
        return lambda: sum(b.num_rows for b in Stream.open(url).to_reader(system_columns=True, **kw))

    return {"Stream.read, everything": read_all, f"Stream.read, newest {NEWEST} appends": read_new,
            "to_reader, everything": reader(), f"to_reader, newest {NEWEST} appends": reader(start=start)}


def spark_reads(spark: Any, url: str, start: int, root: str) -> dict[str, Callable[[], int]]:
    from pyspark.sql import functions as F

    def batch(**opts: str) -> Callable[[], int]:
        def run() -> int:
            row = spark.read.format("tstream").options(**opts).load(url).agg(F.count("*"), F.sum("v")).collect()[0]
            return int(row[0])
        return run

    runs = [0]

    def stream(**opts: str) -> Callable[[], int]:
        def run() -> int:
            runs[0] += 1
            ckpt = f"{root}/ckpt-{runs[0]}"
            q = (spark.readStream.format("tstream").options(**opts).load(url).writeStream.format("noop")
                 .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
            q.awaitTermination()
            rows = sum(int(p["numInputRows"]) for p in q.recentProgress)
            shutil.rmtree(ckpt, ignore_errors=True)
            return rows
        return run

    since = {"startingTimestamp": str(start)}
    return {"Spark batch, everything": batch(), f"Spark batch, newest {NEWEST} appends": batch(**since),
            "Spark availableNow, everything": stream(), f"Spark availableNow, newest {NEWEST} appends": stream(**since)}


def table(results: dict[str, dict[int, tuple[float, int]]]) -> str:
    rows = []
    for name, by in results.items():
        (t1, n1), (t64, n64) = by[1], by[64]
        assert n1 == n64, (name, n1, n64)  # both streams hold the same records
        rows.append([name, f"{n1:,}", f"{t1:.4f}", f"{t64:.4f}", f"×{t64 / t1:.2f}"])
    return render(["read", "rows", "1 segment s", "64 segments s", "64/1"], rows)


def measure(reads: dict[int, dict[str, Callable[[], int]]], reps: int) -> dict[str, dict[int, tuple[float, int]]]:
    """Each read on both streams, interleaved: the best of ``reps`` rounds."""
    out: dict[str, dict[int, tuple[float, int]]] = {}
    for name in reads[1]:
        for s in SEGMENTS:
            reads[s][name]()  # warm: imports, the Spark plan's first compile
        got: dict[int, list[tuple[float, int]]] = {s: [] for s in SEGMENTS}
        for _ in range(reps):
            for s in SEGMENTS:
                got[s].append(best(reads[s][name], 1))
        out[name] = {s: (min(t for t, _ in got[s]), got[s][-1][1]) for s in SEGMENTS}
    return out


def spark_shape(spark: Any, root: str, rounds: int) -> str:
    """One df.write of 1M rows from 200 tasks into 64 vs 1 segment, read back by Spark."""
    from pyspark.sql import functions as F

    base = int(time.time() * 1000) - 86_400_000 - 2_000_000
    df = (spark.range(1_000_000, numPartitions=8)
          .select((F.lit(base) + F.col("id")).alias("ts"), F.concat(F.lit("key-"), (F.col("id") % 1000)
                  .cast("string")).alias("key"), (F.col("id") % 997).alias("v"))
          .repartition(200))
    urls = {}
    for s in SEGMENTS:
        urls[s] = f"file://{root}/shape{s}"
        Stream.create(urls[s], segments=s, compaction="off")
        df.write.format("tstream").option("keyColumn", "key").option("timestampColumn", "ts").mode("append") \
            .save(urls[s])
    runs = [0]

    def read(url: str) -> int:
        return int(spark.read.format("tstream").load(url).agg(F.count("*"), F.sum("v")).collect()[0][0])

    def stream(url: str) -> int:
        runs[0] += 1
        q = (spark.readStream.format("tstream").load(url).writeStream.format("noop")
             .option("checkpointLocation", f"{root}/shape-ckpt-{runs[0]}").trigger(availableNow=True).start())
        q.awaitTermination()
        return sum(int(p["numInputRows"]) for p in q.recentProgress)

    reads = {s: {"spark.read ... agg(sum(v))": (lambda u=urls[s]: read(u)),
                 "availableNow streaming read": (lambda u=urls[s]: stream(u))} for s in SEGMENTS}
    return table(measure(reads, rounds))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--appends", type=int, default=300, help="N: appends of 256 records into each stream (0: none)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved rounds per read (best counts)")
    ap.add_argument("--smoke", action="store_true", help="N = 30, 1 round (CI)")
    ap.add_argument("--no-spark", dest="spark", action="store_false", help="the Python reads only")
    ap.add_argument("--spark-shape", action="store_true", help="also one 1M-row df.write from 200 tasks (heavy)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.appends, args.reps = 30, 1
    root = tempfile.mkdtemp(prefix="bench-fresh-")
    spark = None
    try:
        if args.spark or args.spark_shape:
            from _spark import build_session

            spark = build_session("tstream-bench-fresh-reads")
        if args.appends:
            fresh_reads(args, root, spark if args.spark else None)
        if args.spark_shape:
            print("\n# Spark's production shape: one df.write of 1M rows from 200 tasks, 1 vs 64 segments "
                  f"(best of {args.reps})\n")
            print(spark_shape(spark, root, args.reps), flush=True)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(root, ignore_errors=True)


def fresh_reads(args: argparse.Namespace, root: str, spark: Any) -> None:
    """The N-append streams, then each read's table: the Python reads, then Spark's."""
    base = int(time.time() * 1000) - 86_400_000 - args.appends * ROWS
    start = base + (args.appends - NEWEST) * ROWS
    urls = {s: f"file://{root}/s{s}" for s in SEGMENTS}
    t = time.perf_counter()
    for s in SEGMENTS:
        fill(urls[s], s, args.appends, base)
    print(f"filled 2 streams with {args.appends} appends × {ROWS} records in {time.perf_counter() - t:.1f} s")
    print(f"\n# Fresh reads: {args.appends} appends × {ROWS} records, 1 vs 64 segments, compaction off "
          f"(best of {args.reps})\n")
    print(table(measure({s: python_reads(urls[s], start) for s in SEGMENTS}, args.reps)), flush=True)
    if spark is not None:
        print()
        print(table(measure({s: spark_reads(spark, urls[s], start, root) for s in SEGMENTS}, args.reps)), flush=True)


if __name__ == "__main__":
    main()
