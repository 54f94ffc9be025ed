"""tstream side by side with what a user would pick instead: delta-rs and pyiceberg.

Usage::

    python tests/benchmarks/bench_peers.py --smoke                # CI: tiny sizes, both stores
    python tests/benchmarks/bench_peers.py --store file --rounds 3
    python tests/benchmarks/bench_peers.py --store s3 --small-appends 200 --bulk-rows 200000

One workload goes to three serverless "table or stream on storage" libraries: tstream's Python
API (4 segments), delta-rs (``write_deltalake``, ``DeltaTable``, ``QueryBuilder``) and pyiceberg
(a SQL catalog on sqlite). Records: ``key`` (64 keys), ``ts`` (epoch ms, one per record, so
"the first 1,000 records at T" has one right answer), ``value`` (float64), ``payload`` (100
bytes). Phases, on a fresh table per system and round:

1. small appends: ``--small-appends`` appends of 100 records, one commit each;
2. bulk append: one append of ``--bulk-rows`` records;
3. full scan: every record, from a fresh handle;
4. seek by time (cold): a fresh handle, the first 1,000 records at or after a time T inside the
   bulk append;
5. tail (cold): one more 100-record commit, then a fresh handle reads the newest 100 records;
6. writers: ``--writers`` processes append 100-record commits for ``--writer-seconds`` to one
   fresh table; a commit the library reports failed is counted, not retried.

Every answer is checked: row counts, the exact records of a seek and a tail (every column), and
rows == acknowledged commits × 100 after the writers. A wrong answer ends the run with exit 1.

``--store s3`` runs against SeaweedFS on loopback (``tests/s3servers.py``) behind the tests'
proxy adding ``--latency-ms`` to every request (an object store's latency; loopback answers in
~2 ms); the proxy counts the requests of each phase. Each peer is configured for safe concurrent
commits as its docs say: delta-rs with ``AWS_CONDITIONAL_PUT=etag`` (commits by ``If-None-Match``
puts), pyiceberg through its SQL catalog (a compare-and-set on the catalog row). Rounds
interleave the systems (the order rotates every round, after one uncounted warm-up round in
full runs); a phase reports each system's best round. Ratios divide tstream's figure by the best
peer's (> 1: tstream ahead). Server, proxy, clients and writer processes share this machine's
cores: expect ±20 % noise.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # tests/: the S3 server helpers

from _data import render  # noqa: E402
from _peers import KINDS, SMALL_ROWS, System, Where, WrongAnswer, check_same, records  # noqa: E402

SEEK_ROWS = 1_000
TAIL_ROWS = 100
SYSTEMS = ("tstream", "delta-rs", "pyiceberg")
PHASES = ("small appends", "bulk append", "full scan", "seek by time (cold)", "tail (cold)", "writers")


# -- measuring -------------------------------------------------------------------------------------
@dataclass
class Figure:
    """One system's result of one phase in one round."""

    value: float  # the phase's throughput (higher is better) or latency in s (lower is better)
    text: str
    requests: int | None = None
    failed: int = 0


@dataclass
class Results:
    """Figures by (store, phase, system), every round's; the best one is reported."""

    figures: dict[tuple[str, str, str], list[Figure]] = field(default_factory=dict)

    def add(self, store: str, phase: str, system: str, fig: Figure) -> None:
        self.figures.setdefault((store, phase, system), []).append(fig)

    def best(self, store: str, phase: str, system: str) -> Figure | None:
        figs = self.figures.get((store, phase, system))
        if not figs:
            return None
        return min(figs, key=lambda f: f.value) if LOWER_IS_BETTER[phase] else max(figs, key=lambda f: f.value)


LOWER_IS_BETTER = {"small appends": False, "bulk append": False, "full scan": False,
                   "seek by time (cold)": True, "tail (cold)": True, "writers": False}


class Counter:
    """Requests the latency proxy forwarded (None on a folder)."""

    def __init__(self, proxy: Any) -> None:
        self.proxy = proxy

    def reset(self) -> None:
        if self.proxy is not None:
            self.proxy.reset()

    def count(self) -> int | None:
        return None if self.proxy is None else len(self.proxy.requests)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def rate(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:,.0f} k" if x >= 1e4 else f"{x:,.1f}"


def p99(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.99) - 1)] if xs else float("nan")


def run_round(store: str, where: Where, order: list[str], args: argparse.Namespace, base_ts: int,
              counter: Counter, results: Results | None, tag: str) -> None:
    """Every phase for every system, phase by phase (the systems interleave)."""
    schema = records(0, 1, base_ts).schema
    systems = {name: KINDS[name](where, f"t_{tag}_{name.replace('-', '_')}") for name in order}
    small, bulk = args.small_appends, args.bulk_rows

    def record(phase: str, name: str, fig: Figure) -> None:
        if results is not None:
            results.add(store, phase, name, fig)

    def timed(name: str, fn: Callable[[], Any]) -> tuple[Any, float, int | None]:
        counter.reset()
        t0 = time.perf_counter()
        out = fn()
        wall = time.perf_counter() - t0
        systems[name].settle()
        return out, wall, counter.count()

    for s in systems.values():
        s.create(schema)
    for name, s in systems.items():  # small appends
        lat = []
        counter.reset()
        t0 = time.perf_counter()
        for i in range(small):
            a = time.perf_counter()
            s.append(records(i * SMALL_ROWS, SMALL_ROWS, base_ts))
            lat.append(time.perf_counter() - a)
        wall = time.perf_counter() - t0
        s.settle()
        req = counter.count()
        per = f", {req / small:.1f} requests each" if req is not None else ""
        record("small appends", name, Figure(small / wall, f"{small / wall:.1f} commits/s, p99 {ms(p99(lat))}{per}",
                                             req))
    first_bulk = small * SMALL_ROWS
    for name, s in systems.items():  # bulk append
        data = records(first_bulk, bulk, base_ts)
        _, wall, req = timed(name, lambda s=s, data=data: s.append(data))
        record("bulk append", name, Figure(bulk / wall, f"{rate(bulk / wall)} rec/s" + reqs(req), req))
    total = first_bulk + bulk
    for name, s in systems.items():  # full scan
        rows, wall, req = timed(name, s.scan)
        if rows != total:
            raise WrongAnswer(f"{name} full scan: {rows} records, expected {total}")
        record("full scan", name, Figure(total / wall, f"{rate(total / wall)} rec/s" + reqs(req), req))
    t = base_ts + first_bulk + bulk // 2
    want = records(first_bulk + bulk // 2, SEEK_ROWS, base_ts)
    for name, s in systems.items():  # seek by time, cold
        got, wall, req = timed(name, lambda s=s: s.seek(t, SEEK_ROWS))
        check_same(name, f"seek to {t}", got, want)
        record("seek by time (cold)", name, Figure(wall, ms(wall) + reqs(req), req))
    newest = records(total, TAIL_ROWS, base_ts)
    for name, s in systems.items():  # tail, cold, after one more commit
        s.append(newest)
        s.settle()
        got, wall, req = timed(name, lambda s=s: s.tail(TAIL_ROWS))
        check_same(name, "tail", got, newest)
        record("tail (cold)", name, Figure(wall, ms(wall) + reqs(req), req))
    for name in systems:  # writer processes, each system on a fresh table
        fig = run_writers(KINDS[name](where, f"w_{tag}_{name.replace('-', '_')}"), args, base_ts, counter, schema)
        record("writers", name, fig)


def reqs(n: int | None) -> str:
    return "" if n is None else f", {n:,} requests"


def _writer(kind: str, where: Where, table: str, seconds: float, first: int, base_ts: int,
            ready: Any, go: Any, out: Any) -> None:
    """One writer process: 100-record commits until ``seconds`` pass; a failure is counted."""
    s = KINDS[kind](where, table)
    s.append(records(first, SMALL_ROWS, base_ts))  # warm the handle: not counted
    acked, failed, lat = 1, 0, []
    ready.wait()
    go.wait()
    end = time.perf_counter() + seconds
    i = 1
    while time.perf_counter() < end:
        a = time.perf_counter()
        try:
            s.append(records(first + i * SMALL_ROWS, SMALL_ROWS, base_ts))
            acked += 1
            lat.append(time.perf_counter() - a)
        except Exception:  # noqa: BLE001 - what a user sees: the library gave up on this commit
            failed += 1
        i += 1
    s.settle()
    out.put((acked, failed, lat))
    out.close()
    out.join_thread()
    os._exit(0)  # skip teardown: a library's runtime threads must not keep the process alive


def run_writers(s: System, args: argparse.Namespace, base_ts: int, counter: Counter, schema: pa.Schema) -> Figure:
    """``--writers`` processes on one fresh table; rows read back == acknowledged commits × 100."""
    s.create(schema)
    ctx = mp.get_context("spawn")  # no fork: the libraries' runtimes hold threads
    n = args.writers
    ready, go, out = ctx.Barrier(n + 1), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(s.name, s.where, s.table, args.writer_seconds,
                                               (w + 1) * 10_000_000, base_ts, ready, go, out))
             for w in range(n)]
    for p in procs:
        p.start()
    ready.wait(timeout=120)
    counter.reset()
    t0 = time.perf_counter()
    go.set()
    got = [out.get(timeout=args.writer_seconds + 300) for _ in procs]
    wall = time.perf_counter() - t0
    req = counter.count()
    for p in procs:
        p.join(timeout=60)
    acked = sum(g[0] for g in got)
    failed = sum(g[1] for g in got)
    lat = [x for g in got for x in g[2]]
    rows = s.scan()
    if rows != acked * SMALL_ROWS:
        raise WrongAnswer(f"{s.name} after {n} writers: {rows} records, {acked} commits of {SMALL_ROWS} acknowledged")
    commits = acked - n  # the warm-up commits were before the clock
    text = f"{commits / wall:.1f} commits/s, p99 {ms(p99(lat))}, {failed} failed" + reqs(req)
    return Figure(commits / wall, text, req, failed)


# -- reporting -------------------------------------------------------------------------------------
def versions() -> str:
    import deltalake
    import pyiceberg
    from pyspark_tstream import __version__ as tv

    return (f"tstream {tv}, deltalake {deltalake.__version__}, pyiceberg {pyiceberg.__version__}, "
            f"pyarrow {pa.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} cores")


def ratio(store: str, phase: str, results: Results) -> str:
    mine = results.best(store, phase, "tstream")
    peers = [f for name in SYSTEMS[1:] if (f := results.best(store, phase, name)) is not None]
    if mine is None or not peers:
        return "-"
    if LOWER_IS_BETTER[phase]:
        return f"{min(p.value for p in peers) / mine.value:.2f}"
    return f"{mine.value / max(p.value for p in peers):.2f}"


def report(results: Results, stores: list[str], args: argparse.Namespace, latency_ms: float) -> str:
    lines = [f"# tstream vs delta-rs vs pyiceberg ({versions()})", ""]
    for store in stores:
        where = "a local folder" if store == "file" else f"S3 (SeaweedFS behind {latency_ms:g} ms a request)"
        lines += [f"## {where}: {args.small_appends} small appends of {SMALL_ROWS}, one {args.bulk_rows:,}-record "
                  f"append, {args.writers} writer processes × {args.writer_seconds:g} s; best of "
                  f"{args.rounds} round(s)", ""]
        rows = []
        for phase in PHASES:
            cells = [(f.text if (f := results.best(store, phase, name)) else "-") for name in SYSTEMS]
            rows.append([phase, *cells, ratio(store, phase, results)])
        failed = []
        for name in SYSTEMS:
            n = sum(f.failed for f in results.figures.get((store, "writers", name), []))
            failed.append(f"{n}")
        rows.append(["failed commits (all rounds)", *failed, ""])
        lines += [render(["phase", *SYSTEMS, "tstream / best peer"], rows), ""]
        geo = [float(r) for p in PHASES if (r := ratio(store, p, results)) != "-"]
        if geo:
            lines.append(f"geometric mean of the ratios: {statistics.geometric_mean(geo):.2f}")
            lines.append("")
    lines.append("Ratio > 1: tstream ahead of the best peer. Every answer was checked (counts, the exact "
                 "records of the seek and the tail, rows == acknowledged after the writers).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", choices=["file", "s3", "both"], default=None,
                    help="where the tables live (default: both)")
    ap.add_argument("--small-appends", type=int, default=500)
    ap.add_argument("--bulk-rows", type=int, default=1_000_000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--writer-seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=30.0, help="added per request on S3")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted rounds first")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, 1 round, no warm-up (CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.small_appends, args.bulk_rows, args.writers, args.writer_seconds, args.rounds = 8, 20_000, 2, 2.0, 1
        args.warmup = 0
    stores = ["file", "s3"] if args.store in (None, "both") else [args.store]
    started = time.perf_counter()
    base_ts = time.time_ns() // 1_000_000 - 86_400_000 - 100_000_000
    results = Results()
    work = tempfile.mkdtemp(prefix="tstream-bench-peers-")
    try:
        for store in stores:
            if store == "file":
                measure(store, lambda tag: Where(folder(work, tag)), Counter(None), args, base_ts, results)
            else:
                run_s3(args, work, base_ts, results)
    except WrongAnswer as e:
        print(f"WRONG ANSWER: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report(results, stores, args, args.latency_ms))
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


def folder(work: str, tag: str) -> str:
    path = os.path.join(work, tag)
    os.makedirs(path, exist_ok=True)
    return path


def measure(store: str, where: Callable[[str], Where], counter: Counter, args: argparse.Namespace,
            base_ts: int, results: Results) -> None:
    """``--warmup`` uncounted rounds, then ``--rounds`` rounds, the order rotating."""
    warm = args.warmup
    for r in range(warm + args.rounds):
        k = r % len(SYSTEMS)
        order = list(SYSTEMS[k:] + SYSTEMS[:k])
        tag = f"r{r}_{uuid.uuid4().hex[:6]}"
        run_round(store, where(tag), order, args, base_ts, counter, results if r >= warm else None, tag)


def run_s3(args: argparse.Namespace, work: str, base_ts: int, results: Results) -> None:
    import s3servers

    with s3servers.running_seaweedfs() as endpoint:
        proxy = s3servers.FaultProxy(endpoint, latency=args.latency_ms / 1000).start()
        try:
            run_id = uuid.uuid4().hex[:8]

            def where(tag: str) -> Where:
                os.makedirs(os.path.join(work, tag), exist_ok=True)
                return Where(f"s3://{s3servers.BUCKET}/peers-{run_id}/{tag}",
                             {"endpoint": proxy.endpoint, "key": s3servers.ACCESS_KEY,
                              "secret": s3servers.SECRET_KEY, "region": s3servers.REGION,
                              "catalog": os.path.join(work, tag, "catalog.db")})

            measure("s3", where, Counter(proxy), args, base_ts, results)
        finally:
            proxy.stop()


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    exit_now(main())
