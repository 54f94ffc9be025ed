"""tstream through Spark against Spark's native Parquet, on the same rows.

Usage::

    python tests/benchmarks/bench_spark.py                 # 5M rows, 3 rounds
    python tests/benchmarks/bench_spark.py --rows 20000000 --rounds 5
    python tests/benchmarks/bench_spark.py --smoke         # 50k rows, 1 round, well under 90 s
    python tests/benchmarks/bench_spark.py --profile       # plus cProfile of tstream's Python side
    python tests/benchmarks/bench_spark.py --only source --no-floors --no-breakdown

Five pairs, each tstream variant run back to back with its native twin:

* sink, streaming: file source -> tstream sink (keyColumn, timestampColumn) vs the Parquet file
  sink, ``Trigger.AvailableNow`` and one micro-batch;
* sink, batch: ``df.write.format("tstream")`` vs ``df.write.parquet``;
* source, streaming: ``readStream.format("tstream")`` vs ``readStream.parquet``, both into ``noop``;
* source, batch: ``count``, ``sum(val)``, ``max(length(body))`` over ``read.format("tstream")``
  vs ``read.parquet``;
* history: the same aggregate over ``read_native`` (Spark's own Parquet scan of the planned
  chunks, system columns from ``_metadata.row_index``) vs ``read.parquet``; its "floor" is
  ``read.parquet`` of the very chunk files, without system columns.

Method (as in perf-baseline.md): one session, one uncounted warm-up round (the first Python use
costs seconds), then N rounds in which every pair runs once, the pairs' order rotating and the
side that goes first alternating. Figures are medians of wall time; the ratio is the median of
the per-round ``native / tstream`` wall ratios, i.e. tstream's throughput per row relative to
native (>= 1.0 means tstream is at least as fast). Every write goes to a fresh location that is
removed after it is measured. Results are checked (row counts, aggregates), not just timed.

Each query also runs through ``benchfloor`` (``_floors.py``), a Python data source that only moves
Arrow batches, read in as many tasks as tstream plans: the best any Python source or sink can do
here. tstream's gap to the floor is its
own work; the floor's gap to native is PySpark's. The sinks also run a "stored floor": the floor
sink writing what it is given to one Parquet file per task at pyarrow's cheapest settings, the
least any Python sink that keeps its rows can pay.

Then a breakdown of where tstream's time goes: CPU seconds of the JVM and of the Python processes
(from /proc), streaming progress durations, query start/stop, tasks per stage, the chunk layout
and read plan, the fixed cost of a small micro-batch, and the single-threaded cost of tstream's
own Python code (what each Spark task runs) next to plain pyarrow doing the Parquet part alone.
On a 2-core box everything is CPU-bound, so CPU seconds explain wall time better than anything.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _data import SIDES, CpuMeter, Pair, folder_bytes, make_table, median, render, spread, write_input
from _spark import build_session as _session

SINK_OPTIONS = {"keyColumn": "key", "timestampColumn": "ts"}
DURATIONS = ("triggerExecution", "latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def build_session(extra: dict[str, str] | None = None, master: str = "local[2]") -> Any:
    """The benchmark session (:mod:`_spark`) with the ``benchfloor`` floor source registered too."""
    spark = _session("tstream-bench", extra, master)
    import _floors
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(_floors)  # workers cannot import the bench folder
    spark.dataSource.register(_floors.FloorDataSource)
    return spark


def _progress(query: Any) -> list[dict[str, Any]]:
    return [p if isinstance(p, dict) and not hasattr(p, "json") else json.loads(p.json)
            for p in query.recentProgress]


class Bench:
    """The eight variants, plus the bookkeeping each one reports."""

    def __init__(self, spark: Any, root: str, rows: int, input_dir: str, source_url: str) -> None:
        self.spark = spark
        self.root = root
        self.rows = rows
        self.input_dir = input_dir
        self.source_url = source_url
        self.schema = spark.read.parquet(input_dir).schema
        self.expected: tuple[int, int, int] | None = None
        self.sink_layouts: dict[str, dict[str, Any]] = {}
        self.floor_partitions = len(source_partitions(source_url))
        self.cpu = CpuMeter(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))

    # -- helpers ------------------------------------------------------------------------------
    def _fresh(self, name: str) -> str:
        return os.path.join(self.root, "out", f"{name}-{uuid.uuid4().hex[:8]}")

    def _tasks(self, group: str) -> list[int]:
        """Tasks per stage of the jobs Spark ran under ``group`` (a streaming query's runId)."""
        tracker = self.spark.sparkContext.statusTracker()
        stages = []
        for job in sorted(tracker.getJobIdsForGroup(group)):
            info = tracker.getJobInfo(job)
            for sid in sorted(info.stageIds) if info else []:
                stage = tracker.getStageInfo(sid)
                if stage is not None and stage.numCompletedTasks:
                    stages.append(stage.numCompletedTasks)
        return stages

    def _stream(self, reader: Callable[[], Any], writer: Callable[[Any], Any], name: str) -> dict[str, Any]:
        ckpt = self._fresh(f"ckpt-{name}")
        cpu0 = self.cpu.snapshot()
        t0 = time.perf_counter()
        q = writer(reader().writeStream.option("checkpointLocation", ckpt).trigger(availableNow=True))
        started = time.perf_counter() - t0
        q.awaitTermination()
        wall = time.perf_counter() - t0
        cpu = self.cpu.between(cpu0, self.cpu.snapshot())
        if q.exception() is not None:
            raise RuntimeError(f"{name} failed: {q.exception()}")
        progress = _progress(q)
        durations = {k: sum(p.get("durationMs", {}).get(k, 0) for p in progress) / 1000 for k in DURATIONS}
        rows = sum(p.get("numInputRows", 0) for p in progress)
        shutil.rmtree(ckpt, ignore_errors=True)
        return {"wall": wall, "start": started, "cpu": cpu, "durations": durations, "rows": rows,
                "batches": len(progress), "tasks": self._tasks(str(q.runId))}

    def _batch(self, fn: Callable[[], Any], name: str) -> dict[str, Any]:
        sc = self.spark.sparkContext
        group = f"bench-{name}-{uuid.uuid4().hex[:8]}"
        sc.setJobGroup(group, name)
        try:
            cpu0 = self.cpu.snapshot()
            t0 = time.perf_counter()
            result = fn()
            wall = time.perf_counter() - t0
            cpu = self.cpu.between(cpu0, self.cpu.snapshot())
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        return {"wall": wall, "cpu": cpu, "result": result, "tasks": self._tasks(group)}

    def _check_stream_output(self, url: str, kind: str) -> dict[str, Any]:
        from pyspark_tstream.api.stream import Stream

        info = Stream.open(url).info()
        if info.rows != self.rows:
            raise AssertionError(f"{kind}: the stream holds {info.rows} rows, expected {self.rows}")
        layout = stream_layout(url)
        self.sink_layouts[kind] = layout
        return layout

    # -- sinks --------------------------------------------------------------------------------
    def sink_stream_tstream(self, r: int) -> dict[str, Any]:
        url = "file://" + self._fresh("ts-sink")
        d = self._stream(lambda: self.spark.readStream.schema(self.schema).parquet(self.input_dir),
                         lambda w: w.format("tstream").options(**SINK_OPTIONS).start(url), "sink-ts")
        d["layout"] = self._check_stream_output(url, "stream sink")
        shutil.rmtree(url[len("file://"):], ignore_errors=True)
        return d

    def sink_stream_native(self, r: int) -> dict[str, Any]:
        path = self._fresh("pq-sink")
        d = self._stream(lambda: self.spark.readStream.schema(self.schema).parquet(self.input_dir),
                         lambda w: w.format("parquet").start(path), "sink-pq")
        d["layout"] = dict(zip(("files", "bytes"), folder_bytes(path)))
        shutil.rmtree(path, ignore_errors=True)
        return d

    def sink_batch_tstream(self, r: int) -> dict[str, Any]:
        url = "file://" + self._fresh("ts-write")
        d = self._batch(lambda: self.spark.read.parquet(self.input_dir).write.format("tstream")
                        .mode("append").options(**SINK_OPTIONS).save(url), "write-ts")
        d["layout"] = self._check_stream_output(url, "batch write")
        shutil.rmtree(url[len("file://"):], ignore_errors=True)
        return d

    def sink_batch_native(self, r: int) -> dict[str, Any]:
        path = self._fresh("pq-write")
        d = self._batch(lambda: self.spark.read.parquet(self.input_dir).write.parquet(path), "write-pq")
        d["layout"] = dict(zip(("files", "bytes"), folder_bytes(path)))
        shutil.rmtree(path, ignore_errors=True)
        return d

    # -- sources ------------------------------------------------------------------------------
    def source_stream_tstream(self, r: int) -> dict[str, Any]:
        d = self._stream(lambda: self.spark.readStream.format("tstream").load(self.source_url),
                         lambda w: w.format("noop").start(), "source-ts")
        self._check_rows(d, "tstream stream source")
        return d

    def source_stream_native(self, r: int) -> dict[str, Any]:
        d = self._stream(lambda: self.spark.readStream.schema(self.schema).parquet(self.input_dir),
                         lambda w: w.format("noop").start(), "source-pq")
        self._check_rows(d, "parquet stream source")
        return d

    def _agg(self, df: Any) -> tuple[int, int, int]:
        from pyspark.sql import functions as F

        row = df.agg(F.count(F.lit(1)), F.sum("val"), F.max(F.length("body"))).collect()[0]
        return int(row[0]), int(row[1]), int(row[2])

    def source_batch_tstream(self, r: int) -> dict[str, Any]:
        d = self._batch(lambda: self._agg(self.spark.read.format("tstream").load(self.source_url)), "read-ts")
        self._check_agg(d["result"], "tstream batch read")
        return d

    def source_batch_native(self, r: int) -> dict[str, Any]:
        d = self._batch(lambda: self._agg(self.spark.read.parquet(self.input_dir)), "read-pq")
        self._check_agg(d["result"], "parquet batch read")
        return d

    def history_native(self, r: int) -> dict[str, Any]:
        from pyspark_tstream import read_native

        d = self._batch(lambda: self._agg(read_native(self.spark, self.source_url)), "history-ts")
        self._check_agg(d["result"], "read_native")
        return d

    def history_chunks(self, r: int) -> dict[str, Any]:
        """``spark.read.parquet`` of the very chunk files read_native scans, no system columns."""
        d = self._batch(lambda: self._agg(self.spark.read.parquet(*self.chunk_files)), "history-files")
        self._check_agg(d["result"], "parquet read of the chunk files")
        return d

    @property
    def chunk_files(self) -> list[str]:
        from pyspark_tstream.api.stream import Stream

        stream = Stream.open(self.source_url)
        chunks = stream.plan(stream.state.head_tso, stream.state.tick)
        return sorted({"file://" + stream.store.full(c.path) for c in chunks})

    def _check_rows(self, d: dict[str, Any], what: str) -> None:
        if d["rows"] != self.rows:
            raise AssertionError(f"{what} read {d['rows']} rows, expected {self.rows}")

    def _check_agg(self, got: tuple[int, int, int], what: str) -> None:
        if self.expected is not None and got != self.expected:
            raise AssertionError(f"{what} computed {got}, expected {self.expected}")

    # -- floors: the same queries through a do-nothing Python data source ----------------------
    def sink_stream_floor(self, r: int) -> dict[str, Any]:
        return self._stream(lambda: self.spark.readStream.schema(self.schema).parquet(self.input_dir),
                            lambda w: w.format("benchfloor").start(), "sink-floor")

    def sink_batch_floor(self, r: int) -> dict[str, Any]:
        return self._batch(lambda: self.spark.read.parquet(self.input_dir).write.format("benchfloor")
                           .mode("append").save(), "write-floor")

    def _stored_folder(self) -> str:
        path = self._fresh("floor-stored")
        os.makedirs(path)
        return path

    def _stored_check(self, path: str, d: dict[str, Any]) -> dict[str, Any]:
        d["layout"] = dict(zip(("files", "bytes"), folder_bytes(path)))
        got = sum(pq.read_metadata(os.path.join(path, f)).num_rows for f in os.listdir(path))
        shutil.rmtree(path, ignore_errors=True)
        if got != self.rows:
            raise AssertionError(f"the stored floor wrote {got} rows, expected {self.rows}")
        return d

    def sink_stream_stored(self, r: int) -> dict[str, Any]:
        path = self._stored_folder()
        return self._stored_check(path, self._stream(
            lambda: self.spark.readStream.schema(self.schema).parquet(self.input_dir),
            lambda w: w.format("benchfloor").option("store", path).start(), "sink-stored"))

    def sink_batch_stored(self, r: int) -> dict[str, Any]:
        path = self._stored_folder()
        return self._stored_check(path, self._batch(
            lambda: self.spark.read.parquet(self.input_dir).write.format("benchfloor").option("store", path)
            .mode("append").save(), "write-stored"))

    def _floor_reader(self, reader: Any) -> Any:
        return reader.format("benchfloor").option("rows", self.rows).option("partitions", self.floor_partitions)

    def source_stream_floor(self, r: int) -> dict[str, Any]:
        d = self._stream(lambda: self._floor_reader(self.spark.readStream).load(),
                         lambda w: w.format("noop").start(), "source-floor")
        self._check_rows(d, "floor stream source")
        return d

    def source_batch_floor(self, r: int) -> dict[str, Any]:
        d = self._batch(lambda: self._agg(self._floor_reader(self.spark.read).load()), "read-floor")
        if d["result"][0] != self.rows:
            raise AssertionError(f"floor batch read counted {d['result'][0]} rows, expected {self.rows}")
        return d

    def pairs(self, floors: bool) -> list[Pair]:
        def f(fn: Callable[[int], dict[str, Any]]) -> Callable[[int], dict[str, Any]] | None:
            return fn if floors else None

        return [
            Pair("sink", "stream: file source -> sink (availableNow)", self.sink_stream_tstream,
                 self.sink_stream_native, f(self.sink_stream_floor), f(self.sink_stream_stored)),
            Pair("sink", "batch: df.write", self.sink_batch_tstream, self.sink_batch_native,
                 f(self.sink_batch_floor), f(self.sink_batch_stored)),
            Pair("source", "stream: source -> noop (availableNow)", self.source_stream_tstream,
                 self.source_stream_native, f(self.source_stream_floor)),
            Pair("source", "batch: read + count/sum/max agg", self.source_batch_tstream,
                 self.source_batch_native, f(self.source_batch_floor)),
            # "floor" here: Spark's plain Parquet scan of the same chunk files (no system columns)
            Pair("history", "read_native + count/sum/max agg", self.history_native,
                 self.source_batch_native, f(self.history_chunks)),
        ]

    # -- fixed costs --------------------------------------------------------------------------
    def tiny_batches(self, rows: int = 1000) -> dict[str, dict[str, Any]]:
        """One small micro-batch through each streaming pair: the per-batch fixed costs."""
        tiny = os.path.join(self.root, "tiny")
        write_input(make_table(rows), tiny)
        url = "file://" + self._fresh("ts-tiny")
        out = {
            "sink tstream": self._stream(lambda: self.spark.readStream.schema(self.schema).parquet(tiny),
                                         lambda w: w.format("tstream").options(**SINK_OPTIONS).start(url),
                                         "tiny-sink-ts"),
            "sink native": self._stream(lambda: self.spark.readStream.schema(self.schema).parquet(tiny),
                                        lambda w: w.format("parquet").start(self._fresh("pq-tiny")),
                                        "tiny-sink-pq"),
        }
        out["source tstream"] = self._stream(lambda: self.spark.readStream.format("tstream").load(url),
                                             lambda w: w.format("noop").start(), "tiny-source-ts")
        out["source native"] = self._stream(lambda: self.spark.readStream.schema(self.schema).parquet(tiny),
                                            lambda w: w.format("noop").start(), "tiny-source-pq")
        return out


def stream_layout(url: str) -> dict[str, Any]:
    """Chunks, sizes and row groups of a stream (from its journal and one chunk footer)."""
    from pyspark_tstream.api.stream import Stream

    stream = Stream.open(url)
    chunks = stream.plan(stream.state.head_tso, stream.state.tick)
    groups = []
    for c in chunks[:8]:
        groups.append(pq.ParquetFile(stream.store.full(c.path)).metadata.num_row_groups)
    return {"chunks": len(chunks), "segments": len({c.seg for c in chunks}),
            "bytes": sum(c.bytes for c in chunks), "rows": sum(c.rows for c in chunks),
            "row_groups": (min(groups), max(groups)) if groups else (0, 0)}


def source_partitions(url: str) -> list[Any]:
    """The partitions tstream plans for a full read of the stream at ``url``.

    As Spark runs the planner: in a Python worker without a session, so with the planner's
    default parallelism, not this driver's (the floor must get as many tasks: each Python task
    costs PySpark ~0.3 s here, whatever it reads).
    """
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.datasource.partitions import ReadSpec, TStreamPartition
    from pyspark_tstream.read.tasks import plan_tasks
    from pyspark_tstream.spark.arrow import spark_schema

    stream = Stream.open(url)
    state = stream.state
    spec = ReadSpec.of(stream, spark_schema(stream.schema))
    return [TStreamPartition(t, spec) for t in plan_tasks(stream.plan(state.head_tso, state.tick), state.head_tso,
                                                          state.tick)]


# -- tstream's own Python cost, single-threaded in this process -----------------------------------
def python_costs(table: pa.Table, source_url: str, root: str, profile: bool) -> list[list[Any]]:
    """What one Spark task's Python code costs per row, next to plain pyarrow doing the same."""
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.chunkfile.encoding import chunk_encodings
    from pyspark_tstream.datasource.partitions import read_partition
    from pyspark_tstream.write.writing import ROW_GROUP_ROWS, write_batches

    n = table.num_rows
    rows: list[list[Any]] = []

    def timed(label: str, fn: Callable[[], Any], note: str = "") -> None:
        # best of 3 by CPU time: a neighbour on the box (or a cold allocator) stretches single
        # runs, not the work done
        runs = []
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            runs.append((time.process_time() - c0, time.perf_counter() - t0))
        cpu, dt = min(runs)
        rows.append([label, f"{dt:.2f}", f"{cpu:.2f}", f"{n / cpu / 1e6:.2f}", f"{cpu / n * 1e9:.0f}", note])
        if not profile:
            return
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        fn()
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(14)
        print(f"\n### cProfile (CPU time): {label}\n```\n{out.getvalue().strip()}\n```")

    # Spark hands an Arrow writer 10k-row batches (spark.sql.execution.arrow.maxRecordsPerBatch)
    batches = table.to_batches(max_chunksize=10_000)
    scratch = "file://" + os.path.join(root, "out", f"py-{uuid.uuid4().hex[:8]}")
    spec = Stream.create(scratch, segments=4).write_spec(table.schema, key="key", timestamp="ts")
    timed("tstream write_batches (1 task, 10k-row batches in)", lambda: write_batches(spec, iter(batches)),
          "routing, raw timestamps, Parquet encode")
    ref = os.path.join(root, "out", "ref.parquet")
    timed("pyarrow write_table alone, same Parquet options, 1 file", lambda: pq.write_table(
        table, ref, row_group_size=ROW_GROUP_ROWS, write_statistics=False, **chunk_encodings(table, "snappy")),
        "the Parquet encode inside the line above")
    shutil.rmtree(scratch[len("file://"):], ignore_errors=True)

    stream = Stream.open(source_url)
    parts = source_partitions(source_url)

    def read_all() -> None:
        for p in parts:
            for _ in read_partition(p):
                pass

    timed(f"tstream read_partition x{len(parts)} (fetch, decode, floor, shape)", read_all,
          f"{sum(len(p.task.chunks) for p in parts)} chunks")
    blobs = [stream.store.read(c.path) for p in parts for c in p.task.chunks]
    timed("pyarrow read_table alone, same chunks already in memory",
          lambda: [pq.read_table(pa.BufferReader(b)) for b in blobs], "the decode inside the line above")
    os.remove(ref)
    return rows


# -- the report ---------------------------------------------------------------------------------
def report(bench: Bench, pairs: list[Pair], rows: int, rounds: int) -> None:
    # the floor columns of the sides that ran: (side, label)
    extra = [(side, label) for side, label in (("floor", "floor"), ("stored", "stored floor"))
             if any(p.walls[side] for p in pairs)]
    shown = {side for side, _ in extra}
    head = ["group", "what", "tstream s [min–max]", "native s [min–max]", "tstream Mrows/s",
            "native Mrows/s", "throughput ratio ts/native"]
    head += [f"{label} {what}" for _, label in extra for what in ("s", "ratio")]
    body = []
    for p in pairs:
        t, nv = median(p.walls["tstream"]), median(p.walls["native"])
        line = [p.group, p.name, f"{t:.2f} [{spread(p.walls['tstream'])}]",
                f"{nv:.2f} [{spread(p.walls['native'])}]", f"{rows / t / 1e6:.2f}",
                f"{rows / nv / 1e6:.2f}", f"×{median(p.ratios['tstream']):.2f}"]
        for side, _ in extra:
            line += ([f"{median(p.walls[side]):.2f}", f"×{median(p.ratios[side]):.2f}"]
                     if p.walls[side] else ["-", "-"])
        body.append(line)
    print(f"\n## Results: {rows:,} rows, {rounds} round(s), median wall time\n")
    print(render(head, body))
    print("\nthroughput ratio = median over rounds of native wall / tstream wall (≥ 1.0: tstream is at "
          "least as fast per row).")
    if "floor" in shown:
        print("floor = the same query through `benchfloor`, a Python data source that only moves Arrow "
              "batches (no storage, no decode or encode); floor ratio = native wall / floor wall. "
              "tstream cannot beat its floor: the gap to it is tstream's own work, the gap from it to "
              "native is PySpark's.")
    if "stored" in shown:
        print("stored floor = the floor sink that also writes every batch it is given to one Parquet file "
              "per task (pyarrow; no codec, dictionary or statistics): what any Python sink that keeps "
              "its rows pays at least. tstream's gap to it is routing, ordering, stamping, encodings "
              "and the commit.")

    print("\n## Where the time goes (medians over rounds, seconds)\n")
    head = ["query", "wall", "CPU JVM", "CPU Python", "start()", "triggerExecution", "start/stop",
            "latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "tasks per stage"]
    body = []
    for p in pairs:
        for side in SIDES:
            ds = p.details[side]
            if not ds:
                continue
            label = f"{p.group} {p.name.split(':')[0]} {side}"
            tasks = "+".join(str(x) for x in ds[-1]["tasks"]) or "-"
            cpu = [f"{median([d['cpu'][i] for d in ds]):.2f}" for i in (0, 1)]
            if "durations" in ds[0]:
                dur = {k: median([d["durations"][k] for d in ds]) for k in DURATIONS}
                stop = median([d["wall"] - d["durations"]["triggerExecution"] for d in ds])
                body.append([label, f"{median([d['wall'] for d in ds]):.2f}", *cpu,
                             f"{median([d['start'] for d in ds]):.2f}", f"{dur['triggerExecution']:.2f}",
                             f"{stop:.2f}"] + [f"{dur[k]:.2f}" for k in DURATIONS[1:]] + [tasks])
            else:
                body.append([label, f"{median([d['wall'] for d in ds]):.2f}", *cpu] + ["-"] * 8 + [tasks])
    print(render(head, body))
    print("\nCPU = CPU seconds of the Spark JVM and of its Python processes (workers, streaming "
          "runners) during the query; the box has 2 cores, so CPU/2 is a floor on the wall time.")
    print("start() = time until `start()` returned; start/stop = wall − triggerExecution: query start "
          "(for a Python source, a driver-side Python runner process) and shutdown.")

    print("\n## Storage layout\n")
    body = []
    for kind, lay in bench.sink_layouts.items():
        body.append([f"tstream {kind}", lay["chunks"], lay["segments"], f"{lay['bytes'] / 1e6:.0f}",
                     f"{lay['rows'] / max(lay['chunks'], 1):,.0f}", "{}–{}".format(*lay["row_groups"])])
    for p in pairs:
        for side, label in (("native", "native"), ("stored", "stored floor")):
            if p.group == "sink" and p.details[side]:
                lay = p.details[side][-1]["layout"]
                body.append([f"{label} {p.name.split(':')[0]}", lay["files"], "-", f"{lay['bytes'] / 1e6:.0f}",
                             f"{rows / max(lay['files'], 1):,.0f}", "-"])
    src = stream_layout(bench.source_url)
    body.append(["tstream source stream (batch-written)", src["chunks"], src["segments"],
                 f"{src['bytes'] / 1e6:.0f}", f"{src['rows'] / max(src['chunks'], 1):,.0f}",
                 "{}–{}".format(*src["row_groups"])])
    parts = source_partitions(bench.source_url)
    body.append([f"tstream read plan: {len(parts)} partitions", "/".join(str(len(q.task.chunks)) for q in parts),
                 "-", "/".join(f"{q.task.bytes / 1e6:.0f}" for q in parts), "-", "-"])
    files, size = folder_bytes(bench.input_dir)
    body.append(["native input folder (pyarrow, snappy)", files, "-", f"{size / 1e6:.0f}",
                 f"{rows / files:,.0f}", "1"])
    print(render(["data", "files/chunks", "segments", "MB", "rows per file", "row groups per file"], body))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="50k rows, 1 round (CI)")
    ap.add_argument("--body", choices=("string", "binary"), default="string", help="type of the body column")
    ap.add_argument("--only", default="", help="comma-separated groups or pair numbers (1-5) to run")
    ap.add_argument("--no-breakdown", action="store_true", help="skip tiny batches and Python costs")
    ap.add_argument("--no-floors", action="store_true", help="skip the do-nothing Python data source runs")
    ap.add_argument("--profile", action="store_true", help="cProfile tstream's Python read and write")
    ap.add_argument("--master", default="local[2]",
                    help="Spark master: local[1] leaves a core per task for its Python worker, as an "
                         "executor with spark.task.cpus=2 does (local[2]: every core runs a task)")
    ap.add_argument("--dir", default=None, help="work folder (default: a new temp folder, removed after)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.rounds = 50_000, 1

    root = args.dir or tempfile.mkdtemp(prefix="tstream-bench-")
    os.makedirs(root, exist_ok=True)
    started = time.perf_counter()
    try:
        t0 = time.perf_counter()
        table = make_table(args.rows, body_type=args.body)
        input_dir = os.path.join(root, f"input-{args.rows}")
        shutil.rmtree(input_dir, ignore_errors=True)
        write_input(table, input_dir)
        gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        spark = build_session(master=args.master)
        boot = time.perf_counter() - t0
        source_url = "file://" + os.path.join(root, f"source-{uuid.uuid4().hex[:8]}")
        t0 = time.perf_counter()
        spark.read.parquet(input_dir).write.format("tstream").mode("append").options(**SINK_OPTIONS) \
            .save(source_url)
        prep = time.perf_counter() - t0
        bench = Bench(spark, root, args.rows, input_dir, source_url)
        bench.expected = bench._agg(spark.read.parquet(input_dir))
        print(f"# tstream vs native Parquet through Spark {spark.version}, {args.master}\n")
        print(f"data: {args.rows:,} rows (ts, key ×{1000}, val, body {args.body} 64 B), "
              f"{table.nbytes / 1e6:.0f} MB decoded; generated in {gen:.1f} s; session {boot:.1f} s; "
              f"source stream written in {prep:.1f} s (includes the first Python use). Python "
              f"{sys.version.split()[0]}, pyarrow {pa.__version__}, {os.cpu_count()} cores.")

        pairs = bench.pairs(floors=not args.no_floors)
        if args.only:
            keep = set(args.only.split(","))
            pairs = [p for i, p in enumerate(pairs, 1) if str(i) in keep or p.group in keep]
        for p in pairs:  # warm-up: JIT, Python workers, file listing caches
            p.run(0, record=False)
        for r in range(args.rounds):
            k = r % len(pairs)
            for p in pairs[k:] + pairs[:k]:
                p.run(r, record=True)
            print(f"round {r + 1}/{args.rounds} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        report(bench, pairs, args.rows, args.rounds)

        if not args.no_breakdown:
            print("\n## Fixed cost of one small micro-batch (1000 rows), seconds\n")
            tiny = bench.tiny_batches()
            print(render(["query", "wall", "CPU JVM", "CPU Python", "start()", "triggerExecution", "addBatch",
                          "start/stop"],
                         [[k, f"{d['wall']:.2f}", f"{d['cpu'][0]:.2f}", f"{d['cpu'][1]:.2f}", f"{d['start']:.2f}",
                           f"{d['durations']['triggerExecution']:.2f}",
                           f"{d['durations']['addBatch']:.2f}",
                           f"{d['wall'] - d['durations']['triggerExecution']:.2f}"] for k, d in tiny.items()]))
            print("\n## tstream's Python code alone (this process, one thread)\n")
            costs = python_costs(table, source_url, root, args.profile)
            print(render(["work", "wall s", "CPU s", "Mrows/CPU-s", "CPU ns/row", "note"], costs))
            print(f"\nA Spark task runs exactly this code; with {args.master} on {os.cpu_count()} cores the "
                  "tasks share them with the JVM (Arrow IPC, noop/aggregate, the Parquet scan of the file source).")
        spark.stop()
        print(f"\ntotal {time.perf_counter() - started:.0f} s")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
