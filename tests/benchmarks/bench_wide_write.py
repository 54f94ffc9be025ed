"""Wide writes: a keyed ``df.write`` behind a shuffle into a many-segment stream.

Usage::

    python tests/benchmarks/bench_wide_write.py             # 1M rows, 64 segments, 200 tasks, 3 rounds
    python tests/benchmarks/bench_wide_write.py --smoke     # 100k rows, 16 segments, 50 tasks, 1 round (< 60 s)
    python tests/benchmarks/bench_wide_write.py --rounds 5 --rows 2000000

Before shared files, each of Spark's 200 shuffle tasks wrote a file per segment it touched: a
1M-row write into 64 segments made 12,800 chunk files and 9.2 MB of journal for one commit, ran at
×0.35 of ``df.write.parquet`` on the same tasks, and a batch read of it took ×2.9 the time of the
same rows in 8 chunks. Now a task writes one shared data file holding a slice of every segment
(``write/shared.py``). What this measures, on the benchmark rows (``_data.make_table``: a
1000-value key, epoch-ms ts, an int64, a 64-byte string):

* (a) the wide write: ``repartition(P)`` then ``write.format("tstream")`` (``keyColumn``,
  ``timestampColumn``, ``segments``) into a fresh ``file://`` stream, vs ``write.parquet`` of the
  same repartitioned rows; data files (``*.parquet`` under ``data/``), metadata bytes (all of
  ``_tstream/``), wall seconds and native/tstream;
* (b) the same rows without the shuffle (``coalesce(2)``: 2 tasks), tstream vs native;
* (c) a batch read of every row (count and ``sum(val)``) of the wide stream, of the 2-task
  stream (few big chunks) and of the native Parquet;
* (d) a one-segment read through the Spark-free API: every segment of the wide stream is planned
  and read alone (``read.reading.read_table`` of its slices) on a store whose reads are counted
  in bytes; bytes fetched / the bytes of its slices (the journal's ``bytes``).

Method as in ``bench_spark.py``: one session, an uncounted warm-up (not with ``--smoke``), then rounds in which every
variant runs once, in a rotating order; medians of wall time; the ratio is the median of the
per-round native / tstream ratios (>= 1.0: tstream is as fast). Nothing is asserted on time; the
script exits 1 only if a read returns the wrong rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _data import make_table, median, render, spread, write_input
from _spark import build_session

WRITES = ("wide tstream", "wide native", "wide stored floor", "2-task tstream", "2-task native")
READS = ("read wide tstream", "read 2-task tstream", "read native")


def layout(folder: str) -> tuple[int, int, int]:
    """(data files under ``data/``, their bytes, metadata bytes under ``_tstream/``) of a stream."""
    files = data = meta = 0
    for sub in ("data", "_tstream"):
        for root, _, names in os.walk(os.path.join(folder, sub)):
            for name in names:
                size = os.path.getsize(os.path.join(root, name))
                if sub == "_tstream":
                    meta += size
                elif name.endswith(".parquet"):
                    files += 1
                    data += size
    return files, data, meta


def parquet_files(folder: str) -> int:
    return sum(1 for _, _, names in os.walk(folder) for n in names if n.endswith(".parquet"))


class ByteCount:
    """Wraps a Store's reads (``read``, ``read_many``, ``read_range``: every path a chunk read
    takes) and counts the bytes they return: what a one-segment read fetched from the store."""

    def __init__(self, store: Any) -> None:
        self.bytes = 0
        self.calls = 0
        for name in ("read", "read_many", "read_range"):
            setattr(store, name, self._counted(getattr(store, name)))

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **kw: Any) -> Any:
            out = fn(*a, **kw)
            blobs = out if isinstance(out, list) else [out]
            self.calls += 1
            self.bytes += sum(len(b) for b in blobs)
            return out
        return wrapped


def segment_reads(url: str) -> tuple[list[tuple[int, int, int, int, int, int]], int]:
    """Per segment of the stream at ``url``: (segment, slices, rows read, rows expected, slice
    bytes, bytes fetched), each segment read alone on a fresh counted store; and the total rows."""
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.read.reading import read_table
    from pyspark_tstream.store.storage import Store

    s = Stream.open(url)
    hi = s.state.tick
    chunks = s.plan(-1, hi)
    by_seg: dict[int, list[Any]] = {}
    for c in chunks:
        by_seg.setdefault(c.seg, []).append(c)
    out = []
    for seg, mine in sorted(by_seg.items()):
        store = Store(url)
        counter = ByteCount(store)
        table = read_table(store, s.schema, mine, -1, hi)
        out.append((seg, len(mine), table.num_rows, sum(c.rows for c in mine),
                    sum(c.bytes for c in mine), counter.bytes))
    return out, sum(c.rows for c in chunks)


def segment_reads_apart(url: str) -> tuple[list[tuple[int, int, int, int, int, int]], int]:
    """:func:`segment_reads` in a fresh Python process without Spark (the Spark-free API as a
    user runs it; this script's own driver process has run Spark reads by then)."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--segment-reads", url],
                         check=True, capture_output=True, text=True).stdout
    per_seg, total = json.loads(out.strip().splitlines()[-1])
    return [tuple(r) for r in per_seg], total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--segment-reads", metavar="URL", help=argparse.SUPPRESS)  # (d) in its own process
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--segments", type=int, default=64)
    ap.add_argument("--partitions", type=int, default=None,
                    help="tasks of the wide write (repartition): 200 (Spark's default), 50 with --smoke")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="100k rows, 16 segments, 50 tasks, 1 round (CI, < 60 s)")
    args = ap.parse_args()
    if args.segment_reads:
        print(json.dumps(segment_reads(args.segment_reads)))
        return 0
    rows, segments, rounds = (100_000, 16, 1) if args.smoke else (args.rows, args.segments, args.rounds)
    parts = args.partitions or (50 if args.smoke else 200)
    load = os.getloadavg()
    root = tempfile.mkdtemp(prefix="tstream-wide-")
    bad = []
    try:
        source = os.path.join(root, "input")
        table = make_table(rows)
        expected = (rows, int(table.column("val").to_numpy().sum()))
        write_input(table, source)
        spark = build_session("tstream-wide-write")
        import _floors
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(_floors)  # workers cannot import the bench folder
        spark.dataSource.register(_floors.FloorDataSource)
        from pyspark.sql import functions as F

        def tstream(df: Any, out: str) -> None:
            (df.write.format("tstream").option("keyColumn", "key").option("timestampColumn", "ts")
             .option("segments", segments).mode("append").save("file://" + out))

        wide = lambda: spark.read.parquet(source).repartition(parts)  # noqa: E731
        narrow = lambda: spark.read.parquet(source).coalesce(2)  # noqa: E731
        writes: dict[str, Callable[[str], None]] = {
            "wide tstream": lambda out: tstream(wide(), out),
            "wide native": lambda out: wide().write.parquet(out),
            # the least any Python sink that keeps its rows pays behind the same shuffle: each task
            # writes what it is given to one Parquet file (_floors.py), no routing or journal
            "wide stored floor": lambda out: (os.makedirs(out), wide().write.format("benchfloor")
                                              .option("store", out).mode("append").save()),
            "2-task tstream": lambda out: tstream(narrow(), out),
            "2-task native": lambda out: narrow().write.parquet(out),
        }
        kept: dict[str, str] = {}  # the last output of each write, for the reads and the layout

        def run_write(name: str) -> float:
            out = os.path.join(root, f"out-{uuid.uuid4().hex[:8]}")
            t0 = time.perf_counter()
            writes[name](out)
            wall = time.perf_counter() - t0
            if name in kept:
                shutil.rmtree(kept[name], ignore_errors=True)
            kept[name] = out
            return wall

        def agg(df: Any) -> tuple[int, int]:
            r = df.agg(F.count(F.lit(1)).alias("n"), F.sum("val").alias("s")).collect()[0]
            return int(r["n"]), int(r["s"])

        reads: dict[str, Callable[[], tuple[int, int]]] = {
            "read wide tstream": lambda: agg(spark.read.format("tstream").load("file://" + kept["wide tstream"])),
            "read 2-task tstream": lambda: agg(spark.read.format("tstream").load("file://" + kept["2-task tstream"])),
            "read native": lambda: agg(spark.read.parquet(kept["wide native"])),
        }

        def run_read(name: str) -> float:
            t0 = time.perf_counter()
            got = reads[name]()
            wall = time.perf_counter() - t0
            if got != expected:
                bad.append(f"{name}: (rows, sum(val)) {got}, expected {expected}")
            return wall

        walls: dict[str, list[float]] = {n: [] for n in WRITES + READS}
        if not args.smoke:  # warm-up: JVM JIT, Python workers, file cache (smoke: a CI check only)
            for name in WRITES:
                run_write(name)
            for name in READS:
                run_read(name)
        for r in range(rounds):
            for names, run in ((WRITES, run_write), (READS, run_read)):
                order = list(names)
                for name in order[r % len(order):] + order[:r % len(order)]:
                    walls[name].append(run(name))

        wide_files, wide_data, wide_meta = layout(kept["wide tstream"])
        narrow_files, narrow_data, narrow_meta = layout(kept["2-task tstream"])
        native_files = parquet_files(kept["wide native"])
        narrow_native_files = parquet_files(kept["2-task native"])

        def ratio(a: str, b: str) -> str:
            return f"×{statistics.median(x / y for x, y in zip(walls[a], walls[b])):.2f}"

        def cell(name: str) -> list[str]:
            w = walls[name]
            return [f"{median(w):.2f}", spread(w)]

        print(f"# Wide writes: {rows:,} rows, {segments} segments, {rounds} round(s), "
              f"{spark.sparkContext.master}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
        print(render(
            ["write", "tasks", "data files", "data MB", "metadata KB", "wall s (median)", "min–max", "vs native"],
            [["wide tstream", parts, wide_files, f"{wide_data / 1e6:.1f}", f"{wide_meta / 1e3:.1f}",
              *cell("wide tstream"), ratio("wide native", "wide tstream")],
             ["wide native", parts, native_files, "-", "-", *cell("wide native"), "×1.00"],
             ["wide stored floor", parts, parquet_files(kept["wide stored floor"]), "-", "-",
              *cell("wide stored floor"), ratio("wide native", "wide stored floor")],
             ["2-task tstream", 2, narrow_files, f"{narrow_data / 1e6:.1f}", f"{narrow_meta / 1e3:.1f}",
              *cell("2-task tstream"), ratio("2-task native", "2-task tstream")],
             ["2-task native", 2, narrow_native_files, "-", "-", *cell("2-task native"), "×1.00"]]))
        print()
        print(render(
            ["batch read (count, sum(val))", "wall s (median)", "min–max", "vs native"],
            [[name, *cell(name), ratio("read native", name)] for name in READS]))
        print()

        per_seg, total = segment_reads_apart("file://" + kept["wide tstream"])
        for seg, _, got, want, _, _ in per_seg:
            if got != want:
                bad.append(f"segment {seg} alone: {got} rows, expected {want}")
        if total != rows:
            bad.append(f"the wide stream's plan names {total} rows, expected {rows}")
        ratios = sorted(fetched / own for *_, own, fetched in per_seg if own)
        seg0 = per_seg[0]
        print(render(
            ["one-segment read (Spark-free)", "slices", "rows", "slice bytes", "bytes fetched",
             "fetched / slice bytes"],
            [[f"segment {seg0[0]}", seg0[1], seg0[2], seg0[4], seg0[5], f"×{seg0[5] / max(1, seg0[4]):.2f}"],
             [f"all {len(per_seg)} segments: median", "-", "-", "-", "-", f"×{statistics.median(ratios):.2f}"],
             [f"all {len(per_seg)} segments: max", "-", "-", "-", "-", f"×{ratios[-1]:.2f}"]]))
        print(f"\nTargets: <= 1 data file per task ({wide_files / parts:.2f}), metadata <= 1 MB "
              f"({wide_meta / 1e6:.2f} MB), wide write >= ×0.8 of native ({ratio('wide native', 'wide tstream')}; "
              f"a Python sink's stored floor: {ratio('wide native', 'wide stored floor')}), "
              f"one-segment read <= ×1.5 of its bytes (max ×{ratios[-1]:.2f}).")
        spark.stop()
    finally:
        if os.environ.get("TSTREAM_BENCH_KEEP"):
            print("kept", root, file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    for line in bad:
        print("WRONG:", line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    exit_now(main())
