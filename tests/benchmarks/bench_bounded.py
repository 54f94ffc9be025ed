"""Bounded reads: what a limited read and a limited query's first batch cost as history grows,
and the batch sizes each read limit gives on chunks that overlap in time.

    python tests/benchmarks/bench_bounded.py            # 10 vs 100,000 commits
    python tests/benchmarks/bench_bounded.py --smoke    # 10 vs 1,000 commits, for CI

Histories are built in-process on memory:// with the real commit code; only the chunks a
bounded read may touch have data files (the others are metadata only, so touching one fails).
Store calls are counted through the store observer; times are the median of repeats.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data import counted_stream
from histories import HISTORY_T0, commit_history, micro_batches, overlapping_chunks
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.conf.options import SourceOptions
from pyspark_tstream.read.ends import Limits


def measure(n: int, reps: int) -> dict[str, float]:
    from pyspark_tstream.datasource.stream_reader import TStreamStreamReader
    from pyspark_tstream.spark.arrow import spark_schema

    mid = n // 2
    s = commit_history(n, real=set(range(0, 40)) | set(range(max(mid - 20, 0), mid + 40)))
    url = f"memory://{s.store.root}"
    out: dict[str, list[float]] = {"read_calls": [], "read_ms": [], "plan_calls": [], "plan_ms": [], "cached": []}
    for _ in range(reps):
        reader, c = counted_stream(url)
        c.n = 0
        t = time.perf_counter()
        got = reader.read(start=HISTORY_T0 + mid * 10, limit=10)
        out["read_ms"].append((time.perf_counter() - t) * 1000)
        out["read_calls"].append(c.n)
        assert got.num_rows == 10
        stream, c = counted_stream(url)
        c.n = 0
        t = time.perf_counter()
        src = TStreamStreamReader(SourceOptions.from_options({"path": url, "maxRecordsPerTrigger": "10"}),
                                  spark_schema(stream.schema), stream)
        start = src.initialOffset()
        end = src.latestOffset(start, src.getDefaultReadLimit())
        src.partitions(start, end)
        out["plan_ms"].append((time.perf_counter() - t) * 1000)
        out["plan_calls"].append(c.n)
        out["cached"].append(src._window.cached_entries)
    return {k: statistics.median(v) for k, v in out.items()}


def batch_sizes() -> list[tuple[str, list[int]]]:
    """Batch sizes on 1,000 records in three chunks overlapping in time (one record per ms)."""
    s = overlapping_chunks(f"memory://bench-{uuid.uuid4().hex[:8]}/s")
    chunks = s.journal.read_entry(s.state.pos).chunks
    per_row = sum(c.bytes for c in chunks) / sum(c.rows for c in chunks)
    rows: list[tuple[str, list[int]]] = []
    for label, limits, exact in (
            ("maxRecordsPerTrigger=100", Limits(max_records=100), True),
            ("maxRecordsPerTrigger=100 (marks only)", Limits(max_records=100), False),
            (f"maxBytesPerTrigger={int(per_row * 100)} (~100 rows)", Limits(max_bytes=int(per_row * 100)), True),
            ("maxFilesPerTrigger=3", Limits(max_files=3), True)):
        rows.append((label, [t.num_rows for _, _, t in micro_batches(s, limits, exact)]))
    seq = Stream.create(f"memory://bench-{uuid.uuid4().hex[:8]}/s", segments=1)
    import pyarrow as pa

    for b in range(10):
        seq.append(pa.table({"id": list(range(b * 100, b * 100 + 100))}))
    rows.append(("maxFilesPerTrigger=3 (10 sequential chunks of 100)",
                 [t.num_rows for _, _, t in micro_batches(seq, Limits(max_files=3))]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    sizes = (10, 1_000) if args.smoke else (10, 100_000)
    reps = 3 if args.smoke else 5
    print(f"{'commits':>8} | {'seek+read 10: calls':>20} {'ms':>7} | {'1st batch plan: calls':>22} {'ms':>7} "
          f"{'cached entries':>15}")
    for n in sizes:
        m = measure(n, reps)
        print(f"{n:>8} | {m['read_calls']:>20.0f} {m['read_ms']:>7.1f} | {m['plan_calls']:>22.0f} "
              f"{m['plan_ms']:>7.1f} {m['cached']:>15.0f}")
    print("\nbatch sizes, 1,000 records in 3 chunks overlapping in time (1 record per ms):")
    for label, got in batch_sizes():
        print(f"  {label:<52} {len(got):>3} batches: {got}")


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
