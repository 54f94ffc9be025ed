"""Peak memory of the Python workers for the sink and the source, at one batch size and 10× it.

Usage::

    python tests/benchmarks/bench_memory.py                 # 500k-row and 5M-row micro-batches
    python tests/benchmarks/bench_memory.py --rows 1000000  # 1M and 10M
    python tests/benchmarks/bench_memory.py --smoke         # 20k and 200k rows (CI)

Each query runs one micro-batch (``Trigger.AvailableNow``):

* sink: a folder of Parquet files → ``writeStream.format("tstream")`` (keyColumn, timestampColumn);
* source: the stream that sink wrote → ``readStream.format("tstream")`` → ``noop``;
* and the same through ``benchfloor`` (a Python source/sink that only moves Arrow batches), the
  memory PySpark's Arrow runner needs anyway.

Measured: the peak resident set (``VmHWM``) of every Python process Spark runs for the query:
the executor workers and the driver-side streaming runners. Workers are reused between
queries by default, and keep what earlier tasks made resident, so the session runs with
``spark.python.worker.reuse=false`` (a fresh worker per task) and a sampler reads the peak of
every Python process below the JVM while the query runs; processes that were already there
count only if they grew (their peak is reset first: ``5`` written to ``/proc/<pid>/clear_refs``,
Linux ≥ 4.0). The largest is the figure a worker's memory must allow for. Linux only. The
JVM's own memory is not included.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _data import make_table, report, write_input
from bench_spark import SINK_OPTIONS, build_session

HEADERS = ["query", "micro-batch rows", "batch MB (Arrow)", "peak RSS MB (largest Python process)",
           "Python processes busy", "wall s"]
NOTE = ("peak RSS = VmHWM, reset before each query; 'floor' = benchfloor, which only moves Arrow batches. "
        "The difference between tstream and its floor is tstream's own buffering.")


def python_descendants(root_pid: int) -> list[int]:
    """Python processes below ``root_pid`` (the JVM): workers, the daemon, streaming runners."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parents[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root_pid, []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().startswith("python"):
                    out.append(pid)
        except OSError:
            continue
    return out


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[-40:]
    except OSError:
        return "?"


def reset_peaks(pids: list[int]) -> None:
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def peak_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class PeakWatch:
    """Peak RSS of a JVM's Python processes during one query (also those that exit during it)."""

    def __init__(self, jvm_pid: int) -> None:
        self.jvm_pid = jvm_pid
        self.peaks: dict[int, float] = {}

    def __enter__(self) -> PeakWatch:
        before = python_descendants(self.jvm_pid)
        reset_peaks(before)
        # a reset peak restarts at the current RSS: idle processes stay there, busy ones grow
        self.start = {pid: peak_mb(pid) for pid in before}
        self.peaks = {}
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:  # catches processes that end before the query does
        while not self._stop.wait(0.05):
            self._sample()

    def _sample(self) -> None:
        for pid in python_descendants(self.jvm_pid):
            self.peaks[pid] = max(self.peaks.get(pid, 0.0), peak_mb(pid))

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=500_000, help="the smaller micro-batch; the larger is 10x")
    ap.add_argument("--smoke", action="store_true", help="20k and 200k rows (CI)")
    ap.add_argument("--verbose", action="store_true", help="print every Python process's peak")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows = 20_000
    if not os.path.exists("/proc/self/status"):
        print("bench_memory: needs Linux /proc; nothing measured")
        return
    root = tempfile.mkdtemp(prefix="tstream-memory-")
    try:
        sizes = [args.rows, args.rows * 10]
        table = make_table(sizes[-1])
        folders = {}
        for n in sizes:
            folders[n] = os.path.join(root, f"in-{n}")
            write_input(table.slice(0, n), folders[n])
        # a fresh worker per task: a reused worker keeps the memory of earlier tasks resident
        spark = build_session({"spark.python.worker.reuse": "false"})
        jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        schema = spark.read.parquet(folders[sizes[0]]).schema

        def stream_query(reader: Any, sink: Any, name: str) -> tuple[float, int, float]:
            with PeakWatch(jvm) as watch:
                t0 = time.perf_counter()
                w = reader.writeStream.option("checkpointLocation", os.path.join(root, f"ck-{name}"))
                q = sink(w.trigger(availableNow=True))
                q.awaitTermination()
                wall = time.perf_counter() - t0
            if q.exception() is not None:
                raise RuntimeError(f"{name}: {q.exception()}")
            busy = {p: mb for p, mb in watch.peaks.items() if mb > watch.start.get(p, 0.0) + 1}
            if args.verbose:
                print(name, {f"{p}:{_cmd(p)}": round(mb) for p, mb in sorted(busy.items())}, file=sys.stderr)
            return max(busy.values(), default=0.0), len(busy), wall

        # warm-up: start the Python daemon and workers, JIT (not measured)
        warm = "file://" + os.path.join(root, "warm")
        stream_query(spark.readStream.schema(schema).parquet(folders[sizes[0]]),
                     lambda w: w.format("tstream").options(**SINK_OPTIONS).start(warm), "warm-sink")
        stream_query(spark.readStream.format("tstream").load(warm), lambda w: w.format("noop").start(), "warm-src")
        rows = []
        for n in sizes:
            url = "file://" + os.path.join(root, f"stream-{n}")
            def src(n: int = n) -> Any:
                return spark.readStream.schema(schema).parquet(folders[n])

            sink = stream_query(src(), lambda w, url=url: w.format("tstream").options(**SINK_OPTIONS).start(url),
                                f"sink-{n}")
            floor_sink = stream_query(src(), lambda w: w.format("benchfloor").start(), f"fsink-{n}")
            source = stream_query(spark.readStream.format("tstream").load(url), lambda w: w.format("noop").start(),
                                  f"src-{n}")
            floor_src = stream_query(spark.readStream.format("benchfloor").option("rows", n).option("partitions", 2)
                                     .load(), lambda w: w.format("noop").start(), f"fsrc-{n}")
            mb = table.slice(0, n).nbytes / 1e6
            for what, got in (("sink", sink), ("sink floor", floor_sink), ("source", source),
                              ("source floor", floor_src)):
                rows.append([what, f"{n:,}", f"{mb:.0f}", f"{got[0]:.0f}", got[1], f"{got[2]:.1f}"])
        spark.stop()
        print(report(f"Peak RSS of Spark's Python processes per query, one micro-batch of {sizes[0]:,} and "
                     f"{sizes[1]:,} rows (local[2])", HEADERS, rows, NOTE))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
