"""What round trips cost a read and an append: a local folder with a delay added to each store call.

    python tests/benchmarks/bench_round_trips.py                   # 30 ms a call, both tables
    python tests/benchmarks/bench_round_trips.py --delay-ms 0      # the folder as it is
    python tests/benchmarks/bench_round_trips.py --smoke           # small sizes (CI)

A ``file://`` stream where every store call of this process first sleeps ``--delay-ms`` (the
latency of an object store, or of a FUSE mount such as a Databricks Volume: a local path at
object-store latency), emulated in process so that runs compare code, not networks. Two tables:

* **cold reads**: a fresh handle's seek by time (the first 25 records at the middle of the
  stream) and tail (the newest 30), on a stream of ``--appends`` small appends of 4 segments,
  compacted; every answer checked; median and least over ``--reps`` cold opens;
* **small appends**: a lone writer's appends of 100 records with the head hint (and the listing
  of others' requests) written in line, as ``TSTREAM_UPKEEP=inline`` asks, against written in
  the background (the default); rounds alternate the two, p50/p90/p99 over all appends.

Sleeping releases the GIL, so a background thread's delayed call does not hold the appending
thread: what the table shows is what leaves the append's critical path.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data import report
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.store.storage import Store

#: The store calls delayed: every read, write and listing a read or an append makes.
CALLS = ("read", "read_many", "read_present", "exists", "list", "write", "put_if_absent", "open_output")
T0 = 1_000_000


def delay_store_calls(ms: float) -> None:
    """Make every :data:`CALLS` call of :class:`Store` in this process sleep ``ms`` first."""
    if ms <= 0:
        return

    def slowed(real: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(real)
        def call(self: Store, *a: Any, **kw: Any) -> Any:
            time.sleep(ms / 1e3)
            return real(self, *a, **kw)
        return call

    for name in CALLS:
        setattr(Store, name, slowed(getattr(Store, name)))


def _records(first: int, n: int) -> pa.Table:
    return pa.table({"key": [f"k{i % 8}" for i in range(first, first + n)],
                     "ts": pa.array(range(T0 + first, T0 + first + n), pa.int64()),
                     "v": pa.array(range(first, first + n), pa.int64())})


def build(root: Path, appends: int) -> str:
    """A compacted 4-segment stream of ``appends`` appends of 20 records; its URL."""
    url = f"file://{root}/reads"
    s = Stream.create(url, segments=4)
    for i in range(appends):
        s.append(_records(i * 20, 20), key="key", timestamp="ts")
    s.upkeep.settle(300)
    s.context.journal.hints.settle(30)
    return url


def cold_reads(url: str, appends: int, reps: int) -> list[list[Any]]:
    """A fresh handle's seek and tail, ``reps`` times each; every answer checked."""
    total, mid = appends * 20, appends * 10
    took: dict[str, list[float]] = {"seek (25 records at the middle)": [], "tail (newest 30)": []}
    for _ in range(reps):
        t = time.perf_counter()
        got = Stream.at(Store(url)).read(start=T0 + mid, limit=25, columns=["v"])
        took["seek (25 records at the middle)"].append(time.perf_counter() - t)
        assert sorted(got["v"].to_pylist()) == list(range(mid, mid + 25)), "a wrong seek"
        t = time.perf_counter()
        got = Stream.at(Store(url)).read(tail=30, columns=["v"])
        took["tail (newest 30)"].append(time.perf_counter() - t)
        assert sorted(got["v"].to_pylist()) == list(range(total - 30, total)), "a wrong tail"
    return [[what, len(v), f"{statistics.median(v) * 1e3:.0f}", f"{min(v) * 1e3:.0f}"] for what, v in took.items()]


def small_appends(root: Path, appends: int, rounds: int) -> list[list[Any]]:
    took: dict[bool, list[float]] = {False: [], True: []}
    rows = pa.table({"key": [f"k{j % 64}" for j in range(100)], "ts": pa.array(range(T0, T0 + 100), pa.int64()),
                     "value": np.random.default_rng(0).random(100), "payload": [b"x" * 100] * 100})
    for r in range(rounds):
        for background in ((False, True) if r % 2 == 0 else (True, False)):
            s = Stream.create(f"file://{root}/appends-{r}-{int(background)}", segments=4)
            s.context.journal.hints.background = background
            s.appending.group.background = background
            s.append(rows, key="key", timestamp="ts")
            for _ in range(appends):
                t = time.perf_counter()
                s.append(rows, key="key", timestamp="ts")
                took[background].append(time.perf_counter() - t)
            s.upkeep.settle(300)
            s.context.journal.hints.settle(30)
    out = []
    for background, v in took.items():
        p50, p90, p99 = (float(np.percentile(np.array(v) * 1e3, q)) for q in (50, 90, 99))
        out.append(["background (default)" if background else "in line (TSTREAM_UPKEEP=inline)", len(v),
                    f"{p50:.1f}", f"{p90:.1f}", f"{p99:.1f}"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay-ms", type=float, default=30.0, help="added to every store call (default 30)")
    ap.add_argument("--appends", type=int, default=150, help="appends of the stream the cold reads open")
    ap.add_argument("--reps", type=int, default=15, help="cold opens per read")
    ap.add_argument("--small-appends", type=int, default=60, help="appends per round of the second table")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of the second table (alternating)")
    ap.add_argument("--smoke", action="store_true", help="small sizes, for CI")
    args = ap.parse_args()
    if args.smoke:
        args.appends, args.reps, args.small_appends, args.rounds = 40, 3, 10, 2
    root = Path(tempfile.mkdtemp(prefix="tstream-bench-trips-"))
    url = build(root, args.appends)  # at the folder's own speed: only the reads pay the delay
    delay_store_calls(args.delay_ms)
    print(report(f"Cold reads, {args.delay_ms:g} ms added to each store call ({args.appends} appends, 4 segments)",
                 ["read", "opens", "median ms", "least ms"], cold_reads(url, args.appends, args.reps),
                 "A cold seek makes 3 metadata round trips and the data read; a cold tail the same "
                 "(tests/test_cold_open.py)."))
    print()
    print(report(f"Small appends of one writer, {args.delay_ms:g} ms added to each store call",
                 ["head hint", "appends", "p50 ms", "p90 ms", "p99 ms"],
                 small_appends(root, args.small_appends, args.rounds),
                 "In line, the head hint's write is one round trip of three on the append's critical path."))


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
