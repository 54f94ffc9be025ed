"""Where one sink task's CPU goes, step by step, next to the stored floor's for the same rows.

Usage::

    python tests/benchmarks/bench_sink_breakdown.py              # 1.25M rows, 5 repetitions
    python tests/benchmarks/bench_sink_breakdown.py --smoke      # 50k rows, 1 repetition (CI)
    python tests/benchmarks/bench_sink_breakdown.py --rows 2500000 --reps 9

One Spark task of ``bench_spark.py``'s stream sink and batch write: 5M rows on ``local[2]``
make four tasks of 1.25M rows each, handed over in 10k-row Arrow batches; the rows are
``_data.make_table``'s (ts, a 1000-value key, val, a 64-byte body) and the sink has
``keyColumn=key, timestampColumn=ts`` on a stream of 4 segments. Three shapes of the same
rows:

* ``ordered``: event times ascending (one time-ordered file per task);
* ``stretches``: five time-ordered blocks read out of order (1, 3, 4, 0, 2), i.e. three
  ascending stretches: what Spark's file scan hands a task here (it packs the input files
  largest first, not by time; measured: two or three stretches per task);
* ``random``: the same rows shuffled (a task after a shuffle or a join).

Each repetition runs the real ``write_batches`` on a ``file://`` stream under cProfile with
``time.process_time`` as its clock and sums the CPU of each step's functions (:data:`STEPS`);
the best repetition by total CPU is reported (a neighbour on a shared machine stretches
single runs, not the work). ``commit`` is the driver's journal commit of the task's chunks
(``Stream.commit``), timed on its own. The floor is ``_floors._sink`` (the stored floor of
``bench_spark.py``: the batches as they come to one Parquet file, no codec, no dictionary, no
statistics), timed without the profiler, best of the same repetitions; the tstream total is
timed the same way. Wall time is not used: CPU per row is what a loaded machine does not move.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _data import make_table, render

BATCH = 10_000
SHAPES = ("ordered", "stretches", "random")
#: Block order of the ``stretches`` shape (five time-ordered blocks, three ascending stretches).
BLOCKS = (1, 3, 4, 0, 2)

#: Step -> the functions (file suffix, name) whose cumulative CPU is that step. None nests in
#: another step's function, so the sums do not overlap; what is left is "other".
STEPS: dict[str, tuple[tuple[str, str], ...]] = {
    "gather": (("write/writing.py", "_gathered"),),
    "client times, conform": (("write/writing.py", "client_ms"), ("schema.py", "conform")),
    "route (key -> segment)": (("write/writing.py", "_route"),),
    "split by segment (take)": (("write/writing.py", "_split"),),
    "order (check, sort)": (("write/ordering.py", "time_order"), ("write/ordering.py", "ascending")),
    "reorder (take)": (("write/ordering.py", "in_order"),),
    "stamp (raw _tso, marks)": (("timestamps.py", "raw_hybrid"), ("timestamps.py", "add"),
                                ("timestamps.py", "raw_marks"), ("write/writing.py", "_moved"),
                                ("write/writing.py", "_with_raw")),
    "encode (Parquet)": (("write/writing.py", "_open_chunk"), ("parquet/core.py", "write_table"),
                         ("parquet/core.py", "close")),
    "task message": (("write/writing.py", "_info"), ("write/writing.py", "to_json")),
}


def shaped(table: pa.Table, shape: str) -> list[pa.RecordBatch]:
    """``table``'s rows in ``shape``'s order, as 10k-row batches with buffers of their own (an
    Arrow IPC round trip, as a Python worker receives them from the JVM)."""
    n = table.num_rows
    if shape == "stretches":
        per = -(-n // len(BLOCKS))
        order = np.concatenate([np.arange(b * per, min((b + 1) * per, n)) for b in BLOCKS])
    elif shape == "random":
        order = np.random.default_rng(3).permutation(n)
    else:
        order = np.arange(n)
    sink = pa.BufferOutputStream()
    rows = table.take(pa.array(order))
    with pa.ipc.new_stream(sink, rows.schema) as w:
        for b in rows.to_batches(max_chunksize=BATCH):
            w.write_batch(b)
    return list(pa.ipc.open_stream(sink.getvalue()))


def _cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    c0 = time.process_time()
    out = fn()
    return time.process_time() - c0, out


def _cumulative(stats: dict[Any, Any], funcs: tuple[tuple[str, str], ...]) -> float:
    return sum(v[3] for (path, _, name), v in stats.items()
               if any(path.replace(os.sep, "/").endswith(f) and name == fn for f, fn in funcs))


def _steps(prof: cProfile.Profile) -> dict[str, float]:
    """CPU seconds of each step, and ``other``: the rest of ``write_batches``."""
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    out = {step: _cumulative(stats, funcs) for step, funcs in STEPS.items()}
    out["other"] = _cumulative(stats, (("write/writing.py", "write_batches"),)) - sum(out.values())
    return out


def measure(batches: list[pa.RecordBatch], root: str, reps: int) -> dict[str, Any]:
    """Best-of-``reps`` CPU: tstream's task (total, by step), its commit, and the stored floor."""
    from _floors import _sink
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.write.writing import write_batches

    stream = Stream.create(f"file://{root}/s", segments=4)
    spec = stream.write_spec(batches[0].schema, key="key", timestamp="ts")
    totals, floors, commits, profiled = [], [], [], []
    chunks = 0
    for _ in range(reps):
        cpu, infos = _cpu(lambda: write_batches(spec, iter(batches)))
        totals.append(cpu)
        chunks = len(infos)
        # as the stream sink's driver commits a micro-batch: keyed by (writer, batch), in a session
        commits.append(_cpu(lambda: stream.commit(infos, writer_id="bench", batch_id=len(commits),  # noqa: B023 - called here
                                                  session=True, fresh=True))[0])
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        write_batches(spec, iter(batches))
        prof.disable()
        steps = _steps(prof)
        profiled.append((sum(steps.values()), steps))
        os.makedirs(f"{root}/floor", exist_ok=True)
        floors.append(_cpu(lambda: _sink(iter(batches), f"{root}/floor"))[0])
        shutil.rmtree(f"{root}/floor")
    return {"total": min(totals), "steps": min(profiled, key=lambda p: p[0])[1],
            "commit": min(commits), "floor": min(floors), "chunks": chunks}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_250_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes to run")
    ap.add_argument("--smoke", action="store_true", help="50k rows, 1 repetition (CI)")
    args = ap.parse_args(argv)
    shapes = [s for s in SHAPES if s in args.shapes.split(",")]
    if args.smoke:
        args.rows, args.reps = 50_000, 1
    from pyspark_tstream.spark.task_memory import keep_freed_memory

    keep_freed_memory()  # as a sink task's worker does (the floor's rows are measured with it too)
    table = make_table(args.rows)
    results = {}
    for shape in shapes:
        root = tempfile.mkdtemp(prefix="tstream-breakdown-")
        try:
            results[shape] = measure(shaped(table, shape), root, args.reps)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    rows = []
    for step in [*STEPS, "other"]:
        rows.append([step] + [f"{results[s]['steps'][step]:.3f}" for s in shapes])
    rows.append(["**tstream task, total** (unprofiled)"] + [f"{results[s]['total']:.3f}" for s in shapes])
    rows.append(["commit (driver, Stream.commit)"] + [f"{results[s]['commit']:.3f}" for s in shapes])
    rows.append(["**stored floor** (_floors._sink)"] + [f"{results[s]['floor']:.3f}" for s in shapes])
    rows.append(["tstream task / stored floor"] + [f"×{results[s]['total'] / results[s]['floor']:.2f}"
                                                   for s in shapes])
    rows.append(["chunks written"] + [str(results[s]["chunks"]) for s in shapes])
    print(f"# One sink task's CPU seconds by step: {args.rows:,} rows in {BATCH:,}-row batches, "
          f"best of {args.reps}\n")
    print(render(["step"] + shapes, rows))
    print("\nSteps are cProfile sums (process_time) of the writer's functions; the totals and the "
          "floor are timed without the profiler.")


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
