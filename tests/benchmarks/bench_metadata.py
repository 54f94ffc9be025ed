"""Seek, poll and commit latency (and store calls) as history grows: flat is the goal.

    python tests/benchmarks/bench_metadata.py            # 10, 1k, 100k commits; 10, 10k epochs
    python tests/benchmarks/bench_metadata.py --smoke    # small sizes, for CI

Histories are built in-process on memory:// and file:// with the real commit and scale code
(metadata-only chunks); each figure is the median of repeated operations on the finished history.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data import counted_stream
from histories import HISTORY_T0, add_commit, commit_history, epoch_history
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal.timeindex import COL_MAX_TSO
from pyspark_tstream.timestamps import pack


def measure(s: Stream, url: str, reps: int = 20) -> dict[str, float]:
    out: dict[str, list[float]] = {"seek": [], "poll": [], "commit": [], "seek_calls": [], "commit_calls": []}
    for r in range(reps):
        t = time.perf_counter()
        opened, counter = counted_stream(url)
        target = pack(HISTORY_T0 + ((opened.state.pos * (r + 1)) // (reps + 1)) * 10)
        opened.journal.search(opened.state, COL_MAX_TSO, target)
        out["seek"].append(time.perf_counter() - t)
        out["seek_calls"].append(counter.n)
        t = time.perf_counter()
        opened.refresh()
        out["poll"].append(time.perf_counter() - t)
    writer, counter = counted_stream(url)
    counter.n = 0
    base = writer.state.pos
    for i in range(reps * 2):
        t = time.perf_counter()
        add_commit(writer, base + i, writer="bench")
        out["commit"].append(time.perf_counter() - t)
    out["commit_calls"].append(counter.n / (reps * 2))
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    commits = (10, 1_000) if args.smoke else (10, 1_000, 100_000)
    epochs = (10, 200) if args.smoke else (10, 10_000)
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="tstream-bench-"))
    for backend in ("memory", "file"):
        for n in commits:
            if backend == "file" and n > 10_000:
                continue  # 100k fsynced creates take minutes on file://; memory shows the shape
            url = f"memory://bench-c{n}/s" if backend == "memory" else f"file://{tmp}/c{n}"
            t = time.perf_counter()
            s = commit_history(n, url)
            build = time.perf_counter() - t
            rows.append((backend, f"{n:,} commits", build, measure(s, url)))
        for n in epochs:
            url = f"memory://bench-e{n}/s" if backend == "memory" else f"file://{tmp}/e{n}"
            if backend == "file" and n > 1_000:
                continue
            t = time.perf_counter()
            s = epoch_history(n, url)
            build = time.perf_counter() - t
            rows.append((backend, f"{n:,} epochs", build, measure(s, url)))
    print(f"\n{'backend':8} {'history':>15} {'build s':>8} {'seek ms':>8} {'seek calls':>10} "
          f"{'poll ms':>8} {'commit ms':>9} {'calls/commit':>12}")
    for backend, label, build, m in rows:
        print(f"{backend:8} {label:>15} {build:8.1f} {m['seek'] * 1e3:8.2f} {m['seek_calls']:10.0f} "
              f"{m['poll'] * 1e3:8.3f} {m['commit'] * 1e3:9.2f} {m['commit_calls']:12.2f}")


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
