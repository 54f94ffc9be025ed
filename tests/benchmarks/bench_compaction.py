"""Reading a stream of many small chunks before and after compaction.

Usage::

    python tests/benchmarks/bench_compaction.py               # 200,000 rows: 1 vs 2,000 appends, file + S3 + Spark
    python tests/benchmarks/bench_compaction.py --smoke       # 20,000 rows in 200 appends, no Spark (< 60 s)
    python tests/benchmarks/bench_compaction.py --no-s3 --no-spark

What it does, per backend (``file://`` and ``s3://`` on a SeaweedFS it starts on loopback with
``tests/s3servers.py`` and stops by PID):

1. writes the same rows (``_data.make_table``: ts, key, val, a 64-byte body) twice, keyed on
   ``key`` over 4 segments with compaction off: once as ONE append ("single": 4 chunks), once as
   ``--appends`` appends ("small": ``4 × appends`` chunks, what a stream fed by frequent
   micro-batches holds);
2. times ``Stream.read()`` of everything from a fresh handle, and
   ``spark.read.format("tstream").load(url)`` aggregated (every column decoded), on "single",
   on "small" before compaction, and after ``Stream.compact()`` (before and after the vacuum
   that deletes the replaced files);
3. prints the compaction's own cost (wall, rows/s, store calls) and each read's ratio to the
   single-append read — the goal is ×2 or better after compaction.

Method: each read runs ``--rounds`` times after one uncounted warm-up; figures are medians.
Server and client share this machine's cores: expect ±20 % noise.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # tests/: the S3 server helpers

import s3servers  # noqa: E402
from _data import StoreCalls, make_table, render  # noqa: E402
from _spark import build_session  # noqa: E402
from pyspark_tstream.api.stream import Stream  # noqa: E402


def timed(fn: Callable[[], int], rounds: int, expect: int) -> float:
    """Median wall of ``fn`` over ``rounds`` after a warm-up; checks the row count."""
    walls = []
    for r in range(rounds + 1):
        gc.collect()
        t0 = time.perf_counter()
        got = fn()
        wall = time.perf_counter() - t0
        if got != expect:
            raise RuntimeError(f"read {got} rows, expected {expect}")
        if r:
            walls.append(wall)
    return statistics.median(walls)


def python_read(url: str, options: dict[str, Any]) -> Callable[[], int]:
    return lambda: Stream.open(url, storage_options=options).read().num_rows


def spark_read(spark: Any, url: str, options: dict[str, Any]) -> Callable[[], int]:
    spark_opts = {f"storage.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in options.items()}

    def run() -> int:
        df = spark.read.format("tstream").options(**spark_opts).load(url)
        # decode every column (a bare count() may skip them)
        row = df.selectExpr("count(*) AS n", "sum(val) AS v", "max(length(body)) AS b", "max(key) AS k",
                            "max(_seq) AS q").collect()[0]
        return int(row["n"])
    return run


def run_backend(name: str, root: str, options: dict[str, Any], table: pa.Table, appends: int, rounds: int,
                spark: Any) -> tuple[list[list[str]], list[str]]:
    rows = table.num_rows
    single, small = f"{root}/single", f"{root}/small"
    s = Stream.create(single, segments=4, storage_options=options, compaction="off")
    s.append(table, key="key", timestamp="ts")
    t0 = time.perf_counter()
    s = Stream.create(small, segments=4, storage_options=options, compaction="off")
    per = -(-rows // appends)
    for start in range(0, rows, per):
        s.append(table.slice(start, per), key="key", timestamp="ts")
    write_s = time.perf_counter() - t0
    expected = Stream.open(single, storage_options=options).read()

    def files(url: str) -> int:
        st = Stream.open(url, storage_options=options)
        return len({c.path for c in st.plan(st.state.head_tso, st.state.tick)})

    out: list[list[str]] = []
    base: dict[str, float] = {}

    def measure(label: str, url: str) -> None:
        py = timed(python_read(url, options), rounds, rows)
        sp = timed(spark_read(spark, url, options), rounds, rows) if spark is not None else None
        if not base:
            base.update(py=py, spark=sp or 0.0)
        out.append([name, label, f"{files(url):,}", f"{py:.3f}", f"{py / base['py']:.1f}×",
                    "-" if sp is None else f"{sp:.3f}", "-" if sp is None else f"{sp / base['spark']:.1f}×"])

    measure("single append", single)
    measure(f"{appends:,} appends, before", small)
    calls = StoreCalls()
    handle = Stream.open(small, storage_options=options)
    handle.store.observer = calls
    t0 = time.perf_counter()
    counts = handle.compact()
    compact_s = time.perf_counter() - t0
    handle.store.observer = None
    after = Stream.open(small, storage_options=options).read()
    # the same records, bit for bit: user columns and every system column
    key = [("_segment", "ascending"), ("_seq", "ascending")]
    if not after.sort_by(key).equals(Stream.open(small, storage_options=options).read().sort_by(key)) or \
            after.num_rows != rows:
        raise RuntimeError("compaction changed the records")
    measure(f"{appends:,} appends, compacted", small)
    vac = Stream.open(small, storage_options=options).vacuum(grace_ms=0)
    measure(f"{appends:,} appends, compacted + vacuum", small)
    del expected
    notes = [f"{name}: wrote {appends:,} appends in {write_s:.1f} s; compaction merged {counts.chunks:,} chunks "
             f"({counts.rows:,} rows) into {counts.macros} macro-chunks in {compact_s:.2f} s "
             f"({counts.rows / max(compact_s, 1e-9):,.0f} rows/s, {calls.n:,} store calls); "
             f"vacuum deleted {vac.replaced or 0:,} replaced files"]
    return out, notes


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--appends", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="20,000 rows in 200 appends, 1 round, no Spark")
    ap.add_argument("--spark", dest="spark", action="store_true", default=None)
    ap.add_argument("--no-spark", dest="spark", action="store_false")
    ap.add_argument("--no-s3", action="store_true")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.appends, args.rounds = 20_000, 200, 1
    with_spark = (not args.smoke) if args.spark is None else args.spark
    table = make_table(args.rows)
    spark = build_session("tstream-bench-compaction", {"spark.driver.memory": "2g"}) if with_spark else None
    rows: list[list[str]] = []
    notes: list[str] = []
    tmp = tempfile.mkdtemp(prefix="tstream-bench-compaction-")
    try:
        r, n = run_backend("file", f"file://{tmp}", {}, table, args.appends, args.rounds, spark)
        rows += r
        notes += n
        if not args.no_s3:
            with s3servers.running_seaweedfs() as endpoint:
                opts = s3servers.s3_storage_options(endpoint)
                r, n = run_backend("s3", f"s3://{s3servers.BUCKET}/bench-{uuid.uuid4().hex[:8]}", opts, table,
                                   args.appends, args.rounds, spark)
                rows += r
                notes += n
    finally:
        if spark is not None:
            spark.stop()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.rows:,} records, 4 segments; median of {args.rounds} reads after a warm-up; "
          "× = wall over the single-append read of the same backend\n")
    print(render(["backend", "stream", "files read", "Stream.read s", "×", "spark s", "×"], rows))
    print()
    for line in notes:
        print(line)


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    with contextlib.suppress(KeyboardInterrupt):
        main()
    exit_now(0)
