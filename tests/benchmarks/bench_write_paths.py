"""How fast could a batch write be without Python? Spark-only stand-ins for a JVM write path.
And the Python API's write path: ``Stream.append`` latency and data files per commit.

    python tests/benchmarks/bench_write_paths.py             # 5M rows, 3 interleaved rounds
    python tests/benchmarks/bench_write_paths.py --smoke     # 50k rows, 1 round (CI)
    python tests/benchmarks/bench_write_paths.py --only append   # Stream.append alone, no Spark

``df.write.format("tstream")`` runs tstream's writer in Python tasks, and on 2 busy cores the
Arrow hand-off alone costs what Spark's whole Parquet write does (docs/performance.md). A JVM
write path would do in Spark what each sink task does: route rows to segments by key, order each
segment's rows by client time (docs/design.md §3.2), add the raw timestamp column, write Parquet.
The variants below do exactly that much with Spark expressions and nothing more — no tstream
hash (Spark has none: ``xxhash64`` stands in), no logical counter for equal milliseconds (it
would need a window), no chunk descriptions, no commit — so they bound from above what such a
path could reach, next to native ``df.write.parquet`` and tstream's own write of the same rows:

* ``one file per task``: rows sorted by one long key (segment, then time), one file per task,
  each segment a row range of it (chunks would become views of shared files);
* ``a file per segment``: ``partitionBy`` the segment, one file per (task, segment), each a chunk.

``Stream.append`` (``--only append``, no Spark): ``--appends`` appends of ``--append-rows``
keyed records (256) into a ``file://`` stream of 1 and of 64 segments, each its own commit;
printed per stream: the append's latency p50 and p90 (the data write, the commit and what
runs after it), and the data files each commit wrote (the files its journal entry names).
A commit writes one data file, a slice per segment it reaches (docs/design.md, "Shared files").
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _data import make_table, median, report, spread, write_input
from _spark import build_session

SEGMENTS = 4  # the stream's segments (tstream's default)
#: Stream.append: the streams' segment counts, and appends measured per stream (after a warm-up).
APPEND_SEGMENTS = (1, 64)
APPEND_WARMUP = 5


def variants(spark: Any, source: str) -> dict[str, Any]:
    """Name -> ``fn(out)`` writing the rows of ``source`` to a new location ``out``."""
    from pyspark.sql import functions as F

    def routed() -> Any:
        df = spark.read.parquet(source)
        return df.withColumn("_seg", F.pmod(F.xxhash64("key"), F.lit(SEGMENTS)))

    def one_file_per_task(out: str) -> None:
        df = routed().withColumn("_order", F.col("_seg") * F.lit(1 << 46) + F.col("ts"))
        (df.sortWithinPartitions("_order").withColumn("__raw", F.shiftleft("ts", 18))
         .drop("_order").write.parquet(out))

    def file_per_segment(out: str) -> None:
        (routed().sortWithinPartitions("_seg", "ts").withColumn("__raw", F.shiftleft("ts", 18))
         .write.partitionBy("_seg").parquet(out))

    return {
        "native df.write.parquet": lambda out: spark.read.parquet(source).write.parquet(out),
        "Spark-only: route + sort, one file per task": one_file_per_task,
        "Spark-only: route + sort, a file per segment": file_per_segment,
        "tstream df.write.format(\"tstream\")": lambda out: (
            spark.read.parquet(source).write.format("tstream").mode("append")
            .options(keyColumn="key", timestampColumn="ts").save("file://" + out)),
    }


def append_latencies(root: str, segments: int, appends: int, rows: int) -> tuple[list[float], list[int]]:
    """Seconds per ``Stream.append`` of ``rows`` keyed records, and data files each wrote."""
    from pyspark_tstream.api.stream import Stream

    s = Stream.create(f"file://{root}/append-{segments}", segments=segments)
    table = make_table(rows * (appends + APPEND_WARMUP)).select(["key", "ts", "val", "body"])
    walls, files = [], []
    for i in range(appends + APPEND_WARMUP):
        t0 = time.perf_counter()
        ack = s.append(table.slice(i * rows, rows), key="key", timestamp="ts")
        if i >= APPEND_WARMUP:
            walls.append(time.perf_counter() - t0)
            # the files its journal entry names (compaction's files after it are not the commit's)
            files.append(len({c.path for c in s.journal.read_entry(ack.pos).chunks}))
    return walls, files


def append_report(root: str, appends: int, rows: int) -> str:
    table = []
    for segments in APPEND_SEGMENTS:
        walls, files = append_latencies(root, segments, appends, rows)
        ms = sorted(w * 1e3 for w in walls)
        p90 = ms[int(0.9 * (len(ms) - 1))]
        table.append([str(segments), f"{rows:,}", str(appends), f"{median(ms):.1f}", f"{p90:.1f}",
                      f"{median([float(f) for f in files]):.0f}", str(max(files))])
    return report(f"Stream.append: {rows:,} keyed records an append, file://",
                  ["segments", "records", "appends", "p50 ms", "p90 ms", "data files per commit", "max"], table,
                  "Each append is one commit; its records for every segment it reaches are slices of one data "
                  "file (one PUT on an object store).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="50k rows, 1 round (CI)")
    ap.add_argument("--only", choices=("append", "spark"), help="run only the Stream.append table or the Spark one")
    ap.add_argument("--appends", type=int, default=200, help="Stream.append: appends per stream")
    ap.add_argument("--append-rows", type=int, default=256, help="Stream.append: records an append")
    args = ap.parse_args()
    rows, rounds = (50_000, 1) if args.smoke else (args.rows, args.rounds)
    appends = 20 if args.smoke else args.appends
    if args.only != "spark":
        root = tempfile.mkdtemp(prefix="tstream-append-")
        try:
            print(append_report(root, appends, args.append_rows))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if args.only == "append":
            return
        print()
    root = tempfile.mkdtemp(prefix="tstream-write-paths-")
    try:
        source = os.path.join(root, "input")
        write_input(make_table(rows), source)
        spark = build_session("tstream-write-paths")
        fns = variants(spark, source)
        walls: dict[str, list[float]] = {name: [] for name in fns}
        for fn in fns.values():  # warm-up: JIT, file cache, Python workers
            out = os.path.join(root, f"warm-{uuid.uuid4().hex[:8]}")
            fn(out)
            shutil.rmtree(out, ignore_errors=True)
        for r in range(rounds):
            # interleaved, each round in another order: the shared VM's drift hits all alike
            order = list(fns.items())
            for name, fn in order[r % len(order):] + order[:r % len(order)]:
                out = os.path.join(root, f"out-{uuid.uuid4().hex[:8]}")
                t0 = time.perf_counter()
                fn(out)
                walls[name].append(time.perf_counter() - t0)
                shutil.rmtree(out, ignore_errors=True)
        native = median(walls["native df.write.parquet"])
        table = [[name, f"{median(w):.2f}", spread(w), f"{rows / median(w) / 1e6:.2f}", f"×{native / median(w):.2f}"]
                 for name, w in walls.items()]
        print(report(f"Batch write paths: {rows:,} rows, {rounds} round(s), {spark.sparkContext.master}",
                     ["write", "wall s (median)", "min–max", "Mrows/s", "throughput vs native"], table,
                     "The Spark-only rows are upper bounds for a JVM write path (see the module docstring): "
                     "they skip tstream's hash, logical counters, chunk descriptions and commit."))
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
