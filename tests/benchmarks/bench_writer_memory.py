"""Peak memory of one sink task: unordered input is sorted in bounded runs, not held whole.

    python tests/benchmarks/bench_writer_memory.py            # 2.5M and 25M rows per task
    python tests/benchmarks/bench_writer_memory.py --smoke    # 0.2M and 2M rows

Each case runs in a fresh process that streams 10k-row Arrow batches (as a Spark task
receives them) through ``write_batches`` on a ``file://`` stream with 4 segments, and reports
rows/s, chunks written, Arrow's peak pool allocation and the process's peak RSS, for three
inputs: ``shuffled`` event times (sorted in bounded runs), ``time-ordered`` ones (a scan of
time-ordered data: streamed a row group at a time) and ``ordered`` (``Stream.append``). The default
sizes are today's benchmark micro-batch per task (5M rows on 2 tasks) and ten times that.
Figures are printed, not asserted (CI runs ``--smoke``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

BATCH = 10_000


MODES = ("shuffled", "time-ordered", "ordered")


def _case(rows: int, mode: str) -> dict:
    import resource

    import numpy as np
    import pyarrow as pa
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.write.writing import write_batches

    url = f"file://{tempfile.mkdtemp(prefix='tstream-mem-')}/s"
    s = Stream.create(url, segments=4)
    rng = np.random.default_rng(1)
    t0 = 1_700_000_000_000

    keys = pa.array([f"dev-{i}" for i in range(1000)])
    bodies = pa.array([f"payload-{i:012d}-abcdefghij" for i in range(BATCH)])

    def batches():  # a Spark task's input: event times (shuffled or ascending), a key, a payload
        for start in range(0, rows, BATCH):
            n = min(BATCH, rows - start)
            ids = start + np.arange(n)
            t = t0 + (rng.integers(0, 3_600_000, n) if mode == "shuffled" else ids)
            yield pa.record_batch({
                "id": ids, "key": keys.take(pa.array(ids % 1000)), "val": rng.random(n),
                "body": bodies.take(pa.array(np.arange(n))),
                "t": pa.array(t, pa.timestamp("ms", tz="UTC"))})

    first = next(batches())
    spec = s.write_spec(first.schema, key="key", timestamp="t")
    pool = pa.default_memory_pool()
    began = time.perf_counter()
    chunks = write_batches(spec, batches(), ordered=mode == "ordered")
    elapsed = time.perf_counter() - began
    return {"rows": rows, "mode": mode, "seconds": elapsed,
            "chunks": len(chunks), "arrow_peak_mb": pool.max_memory() / 2**20,
            "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes, for CI")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        rows, mode = args.case.split(":")
        print(json.dumps(_case(int(rows), mode)))
        return
    sizes = [200_000, 2_000_000] if args.smoke else [2_500_000, 25_000_000]
    print("| rows per task | input | chunks | rows/s | Arrow peak | RSS peak |")
    print("|---|---|---|---|---|---|")
    for rows in sizes:
        for mode in MODES:
            if mode == "ordered" and rows == sizes[-1]:
                continue  # ordered input is Stream.append's: one in-memory table, not a task stream
            out = subprocess.run([sys.executable, __file__, "--case", f"{rows}:{mode}"], check=True,
                                 capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(f"| {rows:,} | {r['mode']} | {r['chunks']} | {rows / r['seconds']:,.0f} | "
                  f"{r['arrow_peak_mb']:,.0f} MB | {r['rss_peak_mb']:,.0f} MB |")


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
