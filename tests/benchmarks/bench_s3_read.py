"""Reading a whole tstream stream from S3 (SeaweedFS on loopback) against ``file://``.

Usage::

    python tests/benchmarks/bench_s3_read.py              # 1M rows, 3 rounds, with Spark
    python tests/benchmarks/bench_s3_read.py --smoke      # 20k rows, 1 round, no Spark (< 60 s)
    python tests/benchmarks/bench_s3_read.py --rows 5000000 --no-spark --latency-ms 50

What it does:

1. starts its own SeaweedFS (``weed mini``) on free loopback ports, with the helpers of
   ``tests/s3servers.py``, and stops it by PID at the end;
2. writes the same rows (``ts`` int64, ``key`` string of 1000 values, ``val`` int64, a 64-byte
   ``body``; see ``_data.make_table``) to an ``s3://`` stream and a ``file://`` stream, in
   appends of ``--batch-rows`` (keyed on ``key``, 4 segments);
3. times ``Stream.read()`` of the whole stream from a fresh handle (so the journal is read
   too), and ``spark.read.format("tstream").load(url).count()``, on both;
4. writes ``--small-appends`` appends of ``--small-rows`` rows to one segment (many small
   chunks: a stream fed by frequent micro-batches) and reads it with the chunk GETs batched
   (``Store.read_many``, 32 in flight: what ``Stream.read`` does) and with one chunk per store
   call (the same code, the batch size forced to one chunk). Loopback answers in ~2 ms, far
   faster than a real object store, so the small-chunk reads run a second time through an HTTP
   proxy that adds ``--latency-ms`` to every request (``s3+lat``).

Method: every variant of one table section runs once per round, the order reversed every other
round so no variant always gets the warmer caches; one uncounted warm-up round first; figures
are medians. ``MB`` is the stored (Parquet) size the journal records, so MB/s is store
throughput; ``calls`` are store calls counted through ``Store.observer`` (one batched read is one
call for many objects; ``GETs`` counts the objects). ``s3/file`` is the S3 wall time over the
``file://`` wall time of the same read. Server, proxy and client share this machine's cores:
expect ±20 % noise.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # tests/: the S3 server helpers

import s3servers  # noqa: E402
from _data import make_table, render  # noqa: E402
from _spark import build_session  # noqa: E402
from pyspark_tstream.api.stream import Stream  # noqa: E402
from pyspark_tstream.read import reading  # noqa: E402

_PLUS = re.compile(r" \(\+(\d+)\)$")


@dataclass
class Calls:
    """Store calls seen through ``Store.observer``: calls, and the objects they touched."""

    calls: int = 0
    objects: int = 0

    def __call__(self, op: str, rel: str) -> None:
        self.calls += 1
        extra = _PLUS.search(rel)  # read_many labels its call "<first> (+n)"
        self.objects += 1 + (int(extra.group(1)) if extra else 0)


@dataclass
class Case:
    """One variant to time: ``run`` returns (rows read, store calls or None)."""

    backend: str
    what: str
    url: str
    options: dict[str, Any]
    run: Callable[[], tuple[int, Calls | None]]
    expect_rows: int
    walls: list[float] = field(default_factory=list)
    calls: Calls | None = None
    chunks: int = 0
    stored_bytes: int = 0

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)


@contextlib.contextmanager
def one_chunk_per_call() -> Iterator[None]:
    """Make ``reading`` fetch each chunk in its own store call (the un-batched baseline)."""
    saved = reading.BATCH_FETCH_BYTES
    reading.BATCH_FETCH_BYTES = 1  # every chunk is larger, so each fetch group holds one
    try:
        yield
    finally:
        reading.BATCH_FETCH_BYTES = saved


def write_stream(url: str, options: dict[str, Any], table: pa.Table, batch_rows: int,
                 segments: int, key: str | None) -> float:
    """Create a stream at ``url``, append ``table`` in slices of ``batch_rows``; seconds taken."""
    t0 = time.perf_counter()
    s = Stream.create(url, segments=segments, storage_options=options)
    for start in range(0, table.num_rows, batch_rows):
        s.append(table.slice(start, batch_rows), key=key, timestamp="ts")
    return time.perf_counter() - t0


def python_read(url: str, options: dict[str, Any], batched: bool = True) -> Callable[[], tuple[int, Calls]]:
    """``Stream.read()`` of everything from a fresh handle (journal reads included)."""
    def run() -> tuple[int, Calls]:
        calls = Calls()
        with contextlib.nullcontext() if batched else one_chunk_per_call():
            s = Stream.open(url, storage_options=options)
            s.store.observer = calls
            return s.read().num_rows, calls
    return run


def spark_count(spark: Any, url: str, options: dict[str, Any]) -> Callable[[], tuple[int, None]]:
    """``spark.read.format("tstream").load(url).count()`` (tasks run in Python workers)."""
    # Spark options are strings: nested fsspec arguments travel as JSON (storage.client_kwargs)
    spark_opts = {f"storage.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in options.items()}

    def run() -> tuple[int, None]:
        return spark.read.format("tstream").options(**spark_opts).load(url).count(), None
    return run


def measure(cases: list[Case], rounds: int) -> None:
    """Run every case once per round (order reversed every other round), warm-up uncounted."""
    for r in range(rounds + 1):
        for case in cases if r % 2 == 0 else cases[::-1]:
            gc.collect()
            pa.default_memory_pool().release_unused()  # start each read from the same heap
            t0 = time.perf_counter()
            rows, calls = case.run()
            wall = time.perf_counter() - t0
            if rows != case.expect_rows:
                raise RuntimeError(f"{case.backend} {case.what}: {rows} rows, expected {case.expect_rows}")
            if r:
                case.walls.append(wall)
                case.calls = calls
    for case in cases:
        state = Stream.open(case.url, storage_options=case.options).state
        case.chunks, case.stored_bytes = state.chunks, state.bytes


def report(cases: list[Case], writes: list[list[Any]], latency_ms: float) -> str:
    """The tables: writes, reads (throughput, store calls, s3/file) and the batching effect."""
    lines = ["Writes (setup, one pass):", "",
             render(["backend", "stream", "rows", "s", "rows/s"],
                    [[b, w, f"{n:,}", f"{s:.2f}", f"{n / s:,.0f}"] for b, w, n, s in writes])]
    file_wall = {c.what: c.wall for c in cases if c.backend == "file"}
    rows = []
    for c in cases:
        mb = c.stored_bytes / 1e6
        ratio = "" if c.backend == "file" or c.what not in file_wall else f"{c.wall / file_wall[c.what]:.2f}×"
        rows.append([c.backend, c.what, f"{c.expect_rows:,}", str(c.chunks), f"{mb:.1f}", f"{c.wall:.3f}",
                     f"{c.expect_rows / c.wall:,.0f}", f"{mb / c.wall:.1f}",
                     "-" if c.calls is None else str(c.calls.calls),
                     "-" if c.calls is None else str(c.calls.objects), ratio])
    lines += ["", f"Reads (median wall; s3+lat = s3 through a proxy adding {latency_ms:g} ms per request):",
              "", render(["backend", "read", "rows", "chunks", "MB", "s", "rows/s", "MB/s", "calls", "GETs",
                          "s3/file"], rows)]
    batched = {c.backend: c for c in cases if c.what == "small chunks, batched"}
    single = {c.backend: c for c in cases if c.what == "small chunks, one per call"}
    lines += ["", "Batched read_many vs one chunk per call (same chunks, same decode):"]
    for backend, b in batched.items():
        s = single[backend]
        lines.append(f"  {backend:7s} {s.wall / b.wall:5.2f}× faster batched "
                     f"({s.calls.calls if s.calls else '-'} store calls → {b.calls.calls if b.calls else '-'})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch-rows", type=int, default=250_000, help="rows per append (big stream)")
    ap.add_argument("--small-appends", type=int, default=200)
    ap.add_argument("--small-rows", type=int, default=5_000, help="rows per small append")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=20.0,
                    help="added per request for the s3+lat small-chunk reads (0: skip them)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, 1 round, no Spark (CI, < 60 s)")
    ap.add_argument("--spark", dest="spark", action="store_true", default=None, help="include Spark")
    ap.add_argument("--no-spark", dest="spark", action="store_false", help="skip the Spark count")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.batch_rows, args.small_appends, args.small_rows, args.rounds = 20_000, 5_000, 20, 500, 1
    with_spark = (not args.smoke) if args.spark is None else args.spark

    started = time.perf_counter()
    table = make_table(args.rows)
    small = make_table(args.small_appends * args.small_rows, seed=11)
    work = tempfile.mkdtemp(prefix="tstream-bench-s3-")
    run_id = uuid.uuid4().hex[:8]
    writes: list[list[Any]] = []
    cases: list[Case] = []
    proxy: s3servers.FaultProxy | None = None
    try:
        with s3servers.running_seaweedfs() as endpoint:
            where = {"s3": (f"s3://{s3servers.BUCKET}/bench-{run_id}", s3servers.s3_storage_options(endpoint)),
                     "file": (f"file://{work}", {})}
            for backend, (root, opts) in where.items():
                secs = write_stream(f"{root}/big", opts, table, args.batch_rows, 4, "key")
                writes.append([backend, f"{-(-args.rows // args.batch_rows)} appends, 4 segments", args.rows, secs])
                secs = write_stream(f"{root}/small", opts, small, args.small_rows, 1, None)
                writes.append([backend, f"{args.small_appends} appends, 1 segment", small.num_rows, secs])

            big = [Case(b, "Stream.read() whole stream", f"{r}/big", o, python_read(f"{r}/big", o), args.rows)
                   for b, (r, o) in where.items()]
            smalls = dict(where)
            if args.latency_ms > 0:
                proxy = s3servers.FaultProxy(endpoint, latency=args.latency_ms / 1000).start()
                smalls["s3+lat"] = (where["s3"][0], s3servers.s3_storage_options(proxy.endpoint))
            chunky = [Case(b, f"small chunks, {label}", f"{r}/small", o, python_read(f"{r}/small", o, batched),
                           small.num_rows)
                      for b, (r, o) in smalls.items()
                      for label, batched in (("batched", True), ("one per call", False))]
            measure(big, args.rounds)
            measure(chunky, args.rounds)
            cases = big + chunky
            if with_spark:
                spark = build_session("tstream-bench-s3", {"spark.driver.memory": "2g"})
                try:
                    counts = [Case(b, "spark.read count()", f"{r}/big", o, spark_count(spark, f"{r}/big", o),
                                   args.rows) for b, (r, o) in where.items()]
                    measure(counts, args.rounds)
                    cases += counts
                finally:
                    spark.stop()
    finally:
        if proxy is not None:
            proxy.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(report(cases, writes, args.latency_ms))
    print(f"\n{args.rows:,} rows; {args.rounds} round(s) after a warm-up; "
          f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
