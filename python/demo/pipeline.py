"""``python -m pyspark_tstream.demo``: skewed producers, one event-time consumer, zero records dropped.

A real Spark pipeline on a local ``file://`` stream in a temp folder:

* **Three producers** (sites) whose clocks disagree: ``site-east`` runs 4 s slow, ``site-west``
  is right, ``site-north`` runs 2 s fast. Each is a Spark streaming query
  (parquet inbox → ``writeStream.format("tstream")`` with ``writerId=<site>``), so each is a
  *live writer*: the stream's **tick** (its completeness frontier) is the minimum over them of
  their latest committed timestamp.
* **One consumer**: ``readStream.format("tstream").option("startingAgo", "5m")``, a 1-second
  windowed count with ``withWatermark("_timestamp", "0 seconds")``. Its micro-batches end on
  ticks, so every record of a closed window is already in: nothing is dropped.
* **A naive twin** for contrast: the same records, one file per round in arrival order (what a
  Kafka topic or a file folder delivers), through Spark's file source with the same zero-delay
  watermark. Its watermark races ahead with the fastest clock and Spark drops what arrives
  behind it.

Event times come from simulated clocks (each round is 2 s of event time per site, ending a
little before the real "now"), so every run prints the same story and the checks are exact.
``run`` returns the numbers as a dict for the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..timestamps import now_ms, physical

#: Clock skew of each producer (ms). The order is the order they are listed in the output.
SKEWS_MS: dict[str, int] = {"site-east": -4_000, "site-west": 0, "site-north": 2_000}
#: Event time each producer covers per round (by its own clock). Kept at or below the smallest
#: gap between the slowest clock and the others (4 s) so the tick moves once per round.
ROUND_MS = 2_000
#: Tumbling window of the consumer's count.
WINDOW_MS = 1_000
#: The consumer starts this far back: it sees every live record but skips the old backfill.
STARTING_AGO = "5m"
#: The backfill (a one-shot batch write that creates the stream) is this old.
BACKFILL_AGE_MS = 2 * 3_600_000
#: Rounds must fit between the backfill's exclusion and now (see ``_origin``).
MAX_ROUNDS = 100
#: Micro-batch trigger of every continuous query: frequent enough to feel live, sparse enough
#: that five idle queries do not keep two cores busy.
TRIGGER = "100 milliseconds"

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}

#: Every record: which site, which device, a reading, and the event time by the site's clock.
ARROW_SCHEMA = pa.schema([("site", pa.string()), ("device", pa.string()), ("value", pa.float64()),
                          ("t", pa.timestamp("ms", tz="UTC"))])
SPARK_DDL = "site STRING, device STRING, value DOUBLE, t TIMESTAMP"


# --- small helpers ------------------------------------------------------------------------------

def hms(ms: int) -> str:
    """``HH:MM:SS.mmm`` (UTC) of epoch ms: the demo's times all fall on one day."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def window_of(ms: int) -> int:
    """Start (epoch ms) of the tumbling window holding ``ms``."""
    return ms - ms % WINDOW_MS


def _windows_lines(windows: list[tuple[int, int]], per_line: int = 4) -> list[str]:
    """``[12:00:01–02) 40  [12:00:02–03) 38 …`` (window start, count), a few per line."""
    cells = [f"[{hms(start)[:8]}–{hms(start + WINDOW_MS)[6:8]}) {count:<3d}" for start, count in windows]
    return ["  ".join(cells[i:i + per_line]).rstrip() for i in range(0, len(cells), per_line)]


def _write_atomically(table: pa.Table, folder: Path, name: str) -> None:
    """Write a parquet file and rename it into ``folder``: a file source never sees half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}-{name}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, folder / name)


def _progress(query: Any) -> list[dict[str, Any]]:
    """The query's recent progress reports as plain dicts (PySpark returns objects or dicts)."""
    out = []
    for p in query.recentProgress:
        out.append(p if isinstance(p, dict) else json.loads(p.json))
    return out


def _offset_tso(offset: Any) -> int | None:
    """The ``tso`` of a tstream source offset as progress reports show it (JSON text or dict;
    PySpark 4.0 shows a dict's repr, or "None" before the first batch)."""
    if offset == "None":
        return None
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except json.JSONDecodeError:
            import ast

            offset = ast.literal_eval(offset)
    return None if offset is None else int(offset["tso"])


def _watermark_ms(progress: dict[str, Any]) -> int | None:
    text = (progress.get("eventTime") or {}).get("watermark")
    if not text:
        return None
    ms = int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    return ms or None  # Spark reports 1970-01-01 before the first watermark


def _origin(rounds: int) -> int:
    """Simulated true time at the start of round 0 (epoch ms, on a whole second).

    Far enough in the past that every simulated event time, even the fast clock's, is before
    the real now (so no arrival-time cap applies), and recent enough that ``startingAgo`` covers
    them all while it skips the backfill.
    """
    now = now_ms()
    return now - now % 1000 - rounds * ROUND_MS - 10_000


@dataclass
class Round:
    """What one round wrote and what the two consumers did with it."""

    number: int
    written: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # site -> rows, first t, last t
    tick: int = 0
    waiting: int = 0  # rows committed above the tick
    batches: list[dict[str, Any]] = field(default_factory=list)
    naive: dict[str, Any] = field(default_factory=dict)


def _events(rng: random.Random, site: str, round_no: int, origin: int) -> pa.Table:
    """One round of a site's readings: event times by the site's clock, irregularly spaced."""
    start = origin + round_no * ROUND_MS + SKEWS_MS[site]
    rows: dict[str, list[Any]] = {"site": [], "device": [], "value": [], "t": []}
    t = start + rng.randint(0, 60)
    while t < start + ROUND_MS:
        rows["site"].append(site)
        rows["device"].append(f"{site}-{rng.randint(1, 4)}")
        rows["value"].append(round(rng.gauss(20.0, 2.0), 2))
        rows["t"].append(t)
        t += rng.randint(15, 85)  # jitter: readings arrive at irregular intervals
    return pa.table(rows, schema=ARROW_SCHEMA)


def _session() -> Any:
    """A small local Spark session (``local[2]``) with ``tstream`` registered explicitly."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname lookup, no warning about it
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("tstream-demo")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _register(spark: Any) -> None:
    # Spark discovers pyspark_tstream by itself under a strict editable or a regular install;
    # registering explicitly also covers a default editable install.
    from ..datasource.registration import register

    register(spark)


# --- the pipeline -------------------------------------------------------------------------------

class Demo:
    """Builds the queries, runs the rounds, and keeps what the report needs."""

    def __init__(self, spark: Any, url: str, work: Path, rounds: int, seed: int,
                 echo: Callable[[str], None]) -> None:
        self.spark = spark
        self.url = url
        self.work = work
        self.rounds = rounds
        self.rng = random.Random(seed)
        self.echo = echo
        self.origin = _origin(rounds)
        self.queries: dict[str, Any] = {}
        self.all_events: list[tuple[int, int, str]] = []  # (t, round, site) of every live record
        self.streamed: dict[int, int] = {}  # window start -> count, from the tstream consumer
        self.emitted_in: dict[int, list[tuple[int, int]]] = defaultdict(list)  # batch -> windows
        self.naive_streamed: dict[int, int] = {}
        self.naive_emitted_in: dict[int, list[tuple[int, int]]] = defaultdict(list)
        self.duplicates = 0  # windows emitted twice (append mode never should)
        self.seen_batches: set[int] = set()
        self.seen_naive: set[int] = set()
        self.consumer_batches: list[dict[str, Any]] = []
        self.spark_dropped = 0
        self.needed_delay_ms = 0  # the smallest watermark delay with which the naive twin drops nothing

    # -- setup ---------------------------------------------------------------------------------
    def backfill(self) -> int:
        """Create the stream with a one-shot batch ``df.write`` of old records."""
        old = self.origin - BACKFILL_AGE_MS
        rows = 120
        table = pa.table({"site": ["site-west"] * rows, "device": [f"site-west-{i % 4 + 1}" for i in range(rows)],
                          "value": [20.0 + (i % 7) / 10 for i in range(rows)],
                          "t": [old + i * 30_000 for i in range(rows)]}, schema=ARROW_SCHEMA)
        _write_atomically(table, self.work / "backfill", "part-0.parquet")
        (self.spark.read.schema(SPARK_DDL).parquet(str(self.work / "backfill"))
         .write.format("tstream").mode("append")
         .option("keyColumn", "site").option("timestampColumn", "t")
         # stream config, used because this write creates the stream: one segment per site
         # (keys "site-*" hash to three different segments), and the producers are declared
         # so the tick waits for each one's first commit instead of racing ahead of the first.
         .option("segments", "3").option("writers", ",".join(SKEWS_MS))
         .save(self.url))
        return rows

    def start(self) -> None:
        """Start the three producer queries, the tstream consumer and the naive consumer."""
        from pyspark.sql import functions as F

        spark, work = self.spark, self.work
        for site in SKEWS_MS:
            inbox = work / "inbox" / site
            inbox.mkdir(parents=True, exist_ok=True)
            self.queries[site] = (
                spark.readStream.schema(SPARK_DDL).parquet(str(inbox))
                .writeStream.format("tstream").queryName(f"producer {site}")
                .option("checkpointLocation", str(work / "checkpoints" / site))
                .option("writerId", site).option("keyColumn", "site").option("timestampColumn", "t")
                .trigger(processingTime=TRIGGER).start(self.url))

        def windows(df: Any, column: str) -> Any:
            return (df.withWatermark(column, "0 seconds")
                    .groupBy(F.window(column, f"{WINDOW_MS // 1000} second")).count()
                    .select(F.unix_millis(F.col("window.start")).alias("start"), "count"))

        def collect(into: dict[int, int], log: dict[int, list[tuple[int, int]]]) -> Callable[[Any, int], None]:
            def on_batch(df: Any, batch_id: int) -> None:
                for row in df.collect():
                    if row["start"] in into:
                        self.duplicates += 1
                    into[row["start"]] = row["count"]
                    log[batch_id].append((row["start"], row["count"]))
            return on_batch

        consumer = spark.readStream.format("tstream").option("startingAgo", STARTING_AGO).load(self.url)
        self.queries["consumer"] = (
            windows(consumer, "_timestamp").writeStream.queryName("consumer (tstream)")
            .foreachBatch(collect(self.streamed, self.emitted_in)).outputMode("append")
            .option("checkpointLocation", str(work / "checkpoints" / "consumer"))
            .trigger(processingTime=TRIGGER).start())
        topic = work / "topic"
        topic.mkdir(parents=True, exist_ok=True)
        self.queries["naive"] = (
            windows(spark.readStream.schema(SPARK_DDL).parquet(str(topic)), "t")
            .writeStream.queryName("consumer (naive file source)")
            .foreachBatch(collect(self.naive_streamed, self.naive_emitted_in)).outputMode("append")
            .option("checkpointLocation", str(work / "checkpoints" / "naive"))
            .trigger(processingTime=TRIGGER).start())

    def stop(self) -> None:
        """Stop every query still running (safe to call twice)."""
        for q in self.queries.values():
            try:
                q.stop()
            except Exception:  # noqa: BLE001  # pragma: no cover - stopping is best effort
                pass

    # -- one round -----------------------------------------------------------------------------
    def round(self, number: int, stream: Any) -> Round:
        """Each site writes one round; then both consumers catch up (no sleeps: we wait on Spark)."""
        r = Round(number)
        tables = []
        for site in SKEWS_MS:
            table = _events(self.rng, site, number, self.origin)
            ts = [int(v.timestamp() * 1000) for v in table["t"].to_pylist()]
            r.written[site] = (table.num_rows, ts[0], ts[-1])
            self.all_events += [(t, number, site) for t in ts]
            _write_atomically(table, self.work / "inbox" / site, f"round-{number:04d}.parquet")
            tables.append(table)
        # The naive twin gets the round as one file: one micro-batch per round, in arrival order.
        _write_atomically(pa.concat_tables(tables), self.work / "topic", f"round-{number:04d}.parquet")
        for site in SKEWS_MS:  # the producers run in parallel; wait until each has committed
            self.queries[site].processAllAvailable()
        self._catch_up(r, stream)
        return r

    def shutdown(self, stream: Any) -> Round:
        """Stop the producers and close their writer sessions: the tick stops waiting for them."""
        from ..api.stream import Stream

        for site in SKEWS_MS:
            self.queries.pop(site).stop()
        # Spark does not tell a sink that its query stopped, so a stopped query still holds the
        # tick until its lease (writerLeaseMs) runs out; closing the session releases it now.
        for site in SKEWS_MS:
            Stream.open(self.url).writer(site).close()
        r = Round(-1)
        self._catch_up(r, stream)
        return r

    def _catch_up(self, r: Round, stream: Any) -> None:
        """Read the tick, let both consumers process everything, and record what they did."""
        state = stream.refresh()
        r.tick = state.tick
        r.waiting = sum(1 for t, _, _ in self.all_events if t > physical(state.tick))
        self.queries["consumer"].processAllAvailable()
        self.queries["naive"].processAllAvailable()
        for p in _progress(self.queries["consumer"]):
            if p["batchId"] in self.seen_batches:
                continue
            self.seen_batches.add(p["batchId"])
            self.spark_dropped += sum(int(op.get("numRowsDroppedByWatermark", 0))
                                      for op in p.get("stateOperators", []))
            src = p["sources"][0]
            rows = int(src.get("numInputRows", 0))
            closed = sorted(self.emitted_in.get(p["batchId"], []))
            if rows or closed:  # skip idle and empty bookkeeping batches
                batch = {"round": r.number, "batch": p["batchId"], "start": _offset_tso(src.get("startOffset")),
                         "end": _offset_tso(src.get("endOffset")), "rows": rows,
                         "watermark": _watermark_ms(p), "closed": closed}
                r.batches.append(batch)
                self.consumer_batches.append(batch)
        rows, closed = 0, []
        for p in _progress(self.queries["naive"]):
            if p["batchId"] in self.seen_naive:
                continue
            self.seen_naive.add(p["batchId"])
            rows += int(p["sources"][0].get("numInputRows", 0))
            closed += self.naive_emitted_in.get(p["batchId"], [])
        r.naive = {"rows": rows, "closed": sorted(closed)}

    # -- output --------------------------------------------------------------------------------
    def print_round(self, r: Round, naive_before: int | None) -> tuple[int, int]:
        """Print one round; returns (late, dropped) rows of the naive consumer this round."""
        echo = self.echo
        if r.number >= 0:
            echo(f"round {r.number}   true time {hms(self.origin + (r.number + 1) * ROUND_MS)}")
            for site, (rows, first_t, last_t) in r.written.items():
                echo(f"  {site:<11} wrote {rows:3d} rows, event times {hms(first_t)} … {hms(last_t)} by its clock")
        else:
            echo("shutdown  the producer queries stop and their writer sessions close "
                 "(Stream.open(url).writer(site).close())")
        slowest = min(SKEWS_MS, key=SKEWS_MS.__getitem__)
        if not r.tick:
            echo("  tick        none yet: it waits for every declared writer's first commit")
        elif r.number >= 0:
            echo(f"  tick        {hms(physical(r.tick))} = min over the live writers' latest commits "
                 f"({slowest}: slowest clock); {r.waiting} newer rows wait above it")
        else:
            echo(f"  tick        {hms(physical(r.tick))}: no live writer is left, so the tick is the newest "
                 f"record; {r.waiting} rows wait above it")
        for b in r.batches:
            if b["rows"]:
                first = f"now-{STARTING_AGO}" if b["start"] is None else hms(physical(b["start"]))
                if b is self.consumer_batches[0]:
                    first = f"now-{STARTING_AGO} = {first}"
                echo(f"  tstream     batch {b['batch']:<2d} ({first}, {hms(physical(b['end']))}]  {b['rows']:3d} rows")
            else:
                wm = hms(b["watermark"]) if b["watermark"] else "-"
                echo(f"  tstream     batch {b['batch']:<2d} no new rows; the watermark moves to {wm}")
            for line in _windows_lines(b["closed"]):
                echo(f"              closes {line}")
        late = dropped = 0
        if naive_before is not None:
            for t, rnd, _ in self.all_events:
                if rnd == r.number:
                    # Spark's rules: a row is late if its event time is at or below the watermark,
                    # and a windowed aggregation drops it if its window ended by then
                    late += t <= naive_before
                    dropped += window_of(t) + WINDOW_MS <= naive_before
                    self.needed_delay_ms = max(self.needed_delay_ms, naive_before - window_of(t) - WINDOW_MS + 1)
        if r.number >= 0 and naive_before is None:
            echo(f"  naive       {r.naive['rows']:3d} rows in one batch; no watermark yet")
        elif r.number >= 0 and naive_before is not None:
            echo(f"  naive       {r.naive['rows']:3d} rows in one batch; its watermark is {hms(naive_before)}: "
                 f"{late} rows arrived behind it, {dropped} in windows it already closed → dropped")
        for line in _windows_lines(r.naive["closed"]):
            echo(f"              closes {line}")
        echo("")
        return late, dropped


def run(url: str | None = None, rounds: int = 6, *, spark: Any = None, seed: int = 7,
        workdir: str | None = None, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the demo and return its numbers (see the module docstring for the story).

    ``url`` must not hold a stream yet (default: a new temp folder). ``spark``: an existing
    session to use (default: a new ``local[2]`` one, stopped at the end). ``workdir`` holds the
    producers' inboxes and checkpoints (default: a new temp folder).
    """
    if not 1 <= rounds <= MAX_ROUNDS:
        raise ValueError(f"rounds={rounds} must be between 1 and {MAX_ROUNDS}")
    from ..api.stream import Stream
    from ..errors import StreamNotFoundError

    began = time.monotonic()
    work = Path(workdir or tempfile.mkdtemp(prefix="tstream-demo-"))
    url = url or f"file://{work}/stream"
    try:
        Stream.open(url)
    except StreamNotFoundError:
        pass
    else:
        raise ValueError(f"{url} already holds a stream; the demo needs a new URL")
    own_session = spark is None
    if own_session:
        echo("starting Spark (local[2]) …")
        spark = _session()
    _register(spark)
    demo = Demo(spark, url, work, rounds, seed, echo)
    try:
        return _run(demo, began)
    finally:
        demo.stop()
        if own_session:
            spark.stop()


def _run(demo: Demo, began: float) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from ..api.stream import Stream

    echo, spark, url = demo.echo, demo.spark, demo.url
    backfill = demo.backfill()
    stream = Stream.open(url)
    echo("")
    echo(f"stream     {url}  (3 segments; key = site, one segment per site)")
    echo("producers  " + "   ".join(f"{s} (clock {v / 1000:+.1f} s)" for s, v in SKEWS_MS.items()))
    echo("           each a Spark streaming query: parquet inbox → writeStream.format(\"tstream\"), writerId=<site>")
    echo(f"consumer   readStream.format(\"tstream\").option(\"startingAgo\", \"{STARTING_AGO}\")")
    echo("           .withWatermark(\"_timestamp\", \"0 seconds\")"
         ".groupBy(window(\"_timestamp\", \"1 second\")).count()")
    echo("naive      the same records, one file per round in arrival order (like a Kafka topic):")
    echo("           readStream.parquet(…).withWatermark(\"t\", \"0 seconds\") with the same windowed count")
    echo(f"event time simulated clocks, {ROUND_MS // 1000} s per round per site, from {hms(demo.origin)} UTC "
         f"on {datetime.fromtimestamp(demo.origin / 1000, tz=timezone.utc):%Y-%m-%d}")
    echo(f"backfill   a one-shot df.write of {backfill} records from 2 h ago created the stream; one-shot "
         f"writes never hold the tick, and startingAgo={STARTING_AGO} skips them")
    echo("")
    demo.start()
    naive_late = naive_predicted = 0
    naive_wm: int | None = None
    ticks = []
    for number in range(demo.rounds):
        r = demo.round(number, stream)
        ticks.append(r.tick)
        late, dropped = demo.print_round(r, naive_wm)
        naive_late += late
        naive_predicted += dropped
        # Spark's watermark for the next batch: the max event time of everything seen so far
        round_max = max(t for t, rnd, _ in demo.all_events if rnd == number)
        naive_wm = round_max if naive_wm is None else max(naive_wm, round_max)
    last = demo.shutdown(stream)
    ticks.append(last.tick)
    demo.print_round(last, None)
    demo.stop()

    # --- the batch answer over the same data, and the comparison -------------------------------
    final = stream.refresh()
    batch_df = spark.read.format("tstream").option("startingAgo", STARTING_AGO).load(url)
    batch = {row["start"]: row["count"] for row in
             batch_df.groupBy(F.window("_timestamp", f"{WINDOW_MS // 1000} second")).count()
             .select(F.unix_millis(F.col("window.start")).alias("start"), "count").collect()}
    raised = batch_df.filter(F.col("_timestamp") != F.col("t")).count()
    truth: dict[int, int] = defaultdict(int)
    rounds_of: dict[int, set[int]] = defaultdict(set)
    for t, rnd, _ in demo.all_events:
        truth[window_of(t)] += 1
        rounds_of[window_of(t)].add(rnd)
    consumed = sum(b["rows"] for b in demo.consumer_batches)
    watermark = max((t for t, _, _ in demo.all_events if t <= physical(final.tick)), default=0)
    closed = [w for w in sorted(truth) if w + WINDOW_MS <= watermark]
    mismatched = [w for w in closed if demo.streamed.get(w) != batch.get(w)]
    dropped = sum(truth[w] - demo.streamed.get(w, 0) for w in closed)
    naive_closed = [w for w in sorted(truth) if naive_wm is not None and w + WINDOW_MS <= naive_wm]
    naive_dropped = sum(truth[w] - demo.naive_streamed.get(w, 0) for w in naive_closed)
    naive_short = [w for w in naive_closed if demo.naive_streamed.get(w, 0) < truth[w]]

    total = len(demo.all_events)
    echo(f"{'window (1 s)':<21} {'written in rounds':<18} {'records':>7} {'tstream':>8} {'batch':>6}   naive")
    for w in sorted(truth):
        ours = str(demo.streamed[w]) if w in demo.streamed else "open"
        naive = str(demo.naive_streamed.get(w, 0)) if w in naive_closed else "open"
        if w in naive_closed and demo.naive_streamed.get(w, 0) < truth[w]:
            naive += f"  ({truth[w] - demo.naive_streamed.get(w, 0)} dropped)"
        echo(f"{hms(w)[:8]} – {hms(w + WINDOW_MS)[:8]}   {','.join(map(str, sorted(rounds_of[w]))):<18} "
             f"{truth[w]:>7} {ours:>8} {batch.get(w, '-')!s:>6}   {naive}")
    echo("")
    data_batches = sum(1 for b in demo.consumer_batches if b["rows"])
    echo(f"tstream  {dropped} of {total} records dropped: streaming == batch in {len(closed) - len(mismatched)} of "
         f"{len(closed)} closed windows (Spark's numRowsDroppedByWatermark: {demo.spark_dropped}); "
         f"{consumed} records in {data_batches} tick-aligned micro-batches.")
    echo("         A window closes only once the slowest clock has passed it, because every batch ends on the tick.")
    echo(f"moved    {raised} of {total} records have a _timestamp other than their event time t (writer "
         "lanes: a time moves only for its own writer's earlier records or the tick).")
    echo(f"naive    {naive_late} of {total} records arrived behind its watermark and {naive_dropped} were dropped: "
         f"{len(naive_short)} of {len(naive_closed)} closed windows are short.")
    echo("         Its watermark follows the fastest clock. To drop nothing here it needs "
         f"withWatermark(\"t\", \"{-(-demo.needed_delay_ms // 100) / 10:g} seconds\"): a delay guessed in advance")
    echo("         and paid in latency on every window. tstream measures it instead: that is the tick.")
    elapsed = time.monotonic() - began
    echo(f"\nran in {elapsed:.0f} s. Look around: tstream info {url}   |   tstream read {url} --tail 5 --format table")
    return {
        "url": url, "rounds": demo.rounds, "records": total, "backfill": backfill, "consumed": consumed,
        "waiting": total - consumed, "ticks": ticks, "batches": demo.consumer_batches,
        "closed_windows": len(closed), "streamed": dict(demo.streamed), "batch": batch, "truth": dict(truth),
        "mismatched": len(mismatched), "dropped": dropped, "duplicates": demo.duplicates,
        "spark_dropped": demo.spark_dropped, "raised": raised,
        "naive_late": naive_late, "naive_dropped": naive_dropped, "naive_predicted": naive_predicted,
        "naive_short_windows": len(naive_short), "naive_closed_windows": len(naive_closed),
        "naive_needed_delay_ms": demo.needed_delay_ms,
        "seconds": round(elapsed, 1),
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m pyspark_tstream.demo [--url URL] [--rounds N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m pyspark_tstream.demo",
        description="Producers with skewed clocks write through the Spark sink; an event-time consumer with a "
                    "zero-delay watermark drops nothing, a naive one drops plenty. Runs on local Spark.")
    parser.add_argument("--url", help="file:// URL that holds no stream yet, reachable by Spark's workers "
                                      "(default: a new temp folder)")
    parser.add_argument("--rounds", type=int, default=6, help=f"rounds of writing (1..{MAX_ROUNDS}, default 6)")
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--rounds must be between 1 and {MAX_ROUNDS}")
    run(args.url, args.rounds)

