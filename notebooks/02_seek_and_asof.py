# Databricks notebook source
# MAGIC %md
# MAGIC # Seeking in time, as-of reads, and windows that drop nothing
# MAGIC
# MAGIC A tstream stream keeps its history, indexed by time, so a read can start anywhere:
# MAGIC
# MAGIC | option | starts at |
# MAGIC |---|---|
# MAGIC | `startingOffsets` | `earliest` (default), `latest`, or a stream cut `{"<segment>": <seq>}` |
# MAGIC | `startingTimestamp` | the first records with `_timestamp >=` it (epoch ms or ISO-8601) |
# MAGIC | `startingAgo` | now minus a duration (`90s`, `15m`, `1h`, `7d`) |
# MAGIC | `startingTail` | N records before the end |
# MAGIC
# MAGIC Batch reads can also stop early with `endingTimestamp` (exclusive), which gives **as-of** answers: the
# MAGIC state of the world as it was at a past moment. Finally, a streaming event-time aggregation with a
# MAGIC **zero-delay watermark** counts every record, because tstream's micro-batches end on **ticks**.

# COMMAND ----------

# MAGIC %md
# MAGIC ## Install
# MAGIC Needs **Databricks Runtime 17.0 or later** (Spark 4.0+; PySpark 4.0 to 4.3 are supported). With
# MAGIC `pyspark-tstream` installed as a cluster library, the next cell only reports that it is there. Otherwise it
# MAGIC installs the wheel (built with `python -m build`, see the README) from the volume folder it names, for the
# MAGIC driver and the executors: change the folder to where you put the wheel.

# COMMAND ----------

# MAGIC %pip install --no-index --find-links /Volumes/main/default/libs pyspark-tstream

# COMMAND ----------

# MAGIC %md
# MAGIC ## Setup
# MAGIC `ROOT` holds the streams and checkpoints (fresh on every run). On a multi-node cluster use a folder every
# MAGIC node sees, e.g. a Unity Catalog volume (`/Volumes/main/default/scratch/tstream-notebooks`).

# COMMAND ----------

import ast
import json
import os
import shutil

import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark_tstream import Stream, register
from pyspark_tstream.spark.compat import has
from pyspark_tstream.timestamps import iso, now_ms, physical

ROOT = os.environ.get("TSTREAM_NOTEBOOK_ROOT", "/tmp/tstream-notebooks") + "/02_seek_and_asof"
shutil.rmtree(ROOT, ignore_errors=True)
URL = f"file://{ROOT}/readings"
CHECKPOINTS = f"file://{ROOT}/checkpoints"

try:
    spark  # Databricks (and the notebook tests) provide `spark` and `display`  # noqa: B018
except NameError:  # plain `python notebooks/02_seek_and_asof.py`
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").config("spark.sql.session.timeZone", "UTC").getOrCreate()

    def display(obj):  # a stand-in for Databricks' display
        obj.show(truncate=False) if hasattr(obj, "show") else print(obj)

# Spark finds `tstream` by itself when the package was installed before the session started;
# register() also covers a notebook-scoped install and is a no-op otherwise (on every PySpark 4.x).
register(spark)


def progress(query):
    """A query's progress reports as dicts (classic PySpark and Spark Connect differ in type)."""
    return [p if isinstance(p, dict) else json.loads(p.json) for p in query.recentProgress]


def end_tso(report):
    """Where a tstream micro-batch ended: the ``tso`` of its end offset (a tick)."""
    end = report["sources"][0]["endOffset"]
    if isinstance(end, str):  # JSON text; PySpark 4.0 (Databricks Runtime 17) shows a dict's repr
        end = json.loads(end) if end.startswith('{"') else ast.literal_eval(end)
    return end["tso"]

# COMMAND ----------

# MAGIC %md
# MAGIC ## An hour of readings
# MAGIC Six devices report every 10 seconds; the last hour is written in six commits (one per 10 minutes of
# MAGIC data) through the Python API. `expected` keeps the same data in pandas to check every answer below.

# COMMAND ----------

END_MS = now_ms() - now_ms() % 10_000 - 60_000  # the last reading: about a minute ago
DEVICES = [f"device-{i}" for i in range(6)]
times = [END_MS - i * 10_000 for i in range(360)][::-1]
expected = pd.DataFrame({
    "device": [d for _ in times for d in DEVICES],
    "temp": [round(20 + (j % 17) * 0.25 + k * 0.5, 2) for j in range(len(times)) for k in range(len(DEVICES))],
    "t": [t for t in times for _ in DEVICES],
})
stream = Stream.create(URL, segments=2)
for part in range(6):
    chunk = expected.iloc[part * 360:(part + 1) * 360]
    stream.append(pa.table({"device": chunk["device"].tolist(), "temp": chunk["temp"].tolist(),
                            "t": pa.array(chunk["t"].tolist(), pa.timestamp("ms", tz="UTC"))}),
                  key="device", timestamp="t")
print(stream.info().rows, "records from", stream.info().first_time, "to", stream.info().last_time)
assert stream.info().rows == len(expected) == 2160

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. Where a read starts
# MAGIC Each seek costs a handful of small metadata reads however long the history is (a time index, not a scan).

# COMMAND ----------


def read(**options):
    reader = spark.read.format("tstream")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load(URL)


def summary(name, df):
    row = df.agg(F.count("*").alias("n"), F.min("t").alias("first"), F.max("t").alias("last")).collect()[0]
    return {"read": name, "records": row["n"], "first": row["first"], "last": row["last"]}


HALF = END_MS - 30 * 60_000 + 1  # between two readings
by_timestamp = read(startingTimestamp=iso(HALF))
before = now_ms()
by_ago = read(startingAgo="15m")
n_ago = by_ago.count()
after = now_ms()
by_tail = read(startingTail=12)
window_from, window_to = END_MS - 40 * 60_000, END_MS - 35 * 60_000
bounded = read(startingTimestamp=window_from, endingTimestamp=window_to)

display(pd.DataFrame([summary("startingTimestamp = 30 min before the end", by_timestamp),
                      summary("startingAgo = 15m", by_ago),
                      summary("startingTail = 12", by_tail),
                      summary("startingTimestamp .. endingTimestamp (5 min)", bounded)]))

assert by_timestamp.count() == (expected["t"] >= HALF).sum() == 180 * 6
# "ago" is relative to the moment of the read: the count lies between the counts at `before` and `after`
assert (expected["t"] >= after - 15 * 60_000).sum() <= n_ago <= (expected["t"] >= before - 15 * 60_000).sum()
tail_times = [r[0] for r in by_tail.select(F.unix_millis("t")).collect()]
assert len(tail_times) == 12 and set(tail_times) == {END_MS, END_MS - 10_000}  # the last two readings of 6 devices
assert bounded.count() == ((expected["t"] >= window_from) & (expected["t"] < window_to)).sum() == 30 * 6

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. As-of: the fleet as it was 20 minutes ago
# MAGIC `endingTimestamp` cuts the history at a past moment. The latest reading per device before that moment
# MAGIC (`max_by` over `_tso`, the stream's order) is the state of the fleet **as of** then: reproducible however
# MAGIC much data arrived since.

# COMMAND ----------

AS_OF = END_MS - 20 * 60_000 + 4_321
as_of = (read(endingTimestamp=AS_OF)
         .groupBy("device")
         .agg(F.max_by("temp", "_tso").alias("temp"), F.max("_timestamp").alias("reading_time"))
         .orderBy("device"))
print("as of", iso(AS_OF))
display(as_of)

truth = expected[expected["t"] < AS_OF].sort_values("t").groupby("device").last()
got = {r["device"]: r["temp"] for r in as_of.collect()}
assert got == truth["temp"].to_dict()
assert {int(r["reading_time"].timestamp() * 1000) for r in as_of.collect()} == {AS_OF - 4_321}

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. Streaming from a point in time
# MAGIC The same options start a streaming query. They apply when the query starts for the first time; after that
# MAGIC its checkpoint decides where it continues (the Spark convention, as with Kafka).

# COMMAND ----------


def count_from(checkpoint, **options):
    """Run a streaming read once (availableNow) into the no-op sink; return the rows it read."""
    reader = spark.readStream.format("tstream")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    query = (reader.load(URL).writeStream.format("noop")
             .option("checkpointLocation", f"{CHECKPOINTS}/{checkpoint}")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return sum(p["numInputRows"] for p in progress(query))


first_run = count_from("from-half", startingTimestamp=HALF)
second_run = count_from("from-half", startingTimestamp=END_MS - 50 * 60_000)  # ignored: the checkpoint wins
from_latest = count_from("from-latest", startingOffsets="latest")
print(f"first run: {first_run}   restart: {second_run}   startingOffsets=latest: {from_latest}")
assert (first_run, second_run, from_latest) == (1080, 0, 0)

# COMMAND ----------

# MAGIC %md
# MAGIC ## 4. Windowed counts with a zero-delay watermark
# MAGIC Two plants stream sensor readings; **plant-a's clock runs 5 seconds slow**. With a Kafka topic or a file
# MAGIC folder, a streaming query with `withWatermark("_timestamp", "0 seconds")` would see plant-b's newer
# MAGIC readings first, move its watermark past plant-a's, and silently drop plant-a's readings as late.
# MAGIC
# MAGIC tstream ends every micro-batch on a **tick**: the minimum, over the live writers, of their latest committed
# MAGIC timestamp. Plant-b's newer readings wait until plant-a's clock has passed them, so when a window closes,
# MAGIC all its records are in. Both plants are declared `writers` of the stream, so the tick also waits for each
# MAGIC one's first commit.
# MAGIC
# MAGIC Each plant is its own routing key, and the two keys land in different segments: within a segment time
# MAGIC never goes back, so a slow clock sharing a segment with a fast one would see its records raised to the fast
# MAGIC one's time. The windowed counts go into another tstream stream (`counts`); each round runs the query with
# MAGIC `availableNow` and the same checkpoint.

# COMMAND ----------

SENSORS = f"file://{ROOT}/sensors"
COUNTS = f"file://{ROOT}/counts"
PLANTS = {"plant-a": -5_000, "plant-b": 0}  # clock skew, ms
sensors = Stream.create(SENSORS, segments=2, writers=list(PLANTS))
producers = {plant: Stream.open(SENSORS).writer(plant) for plant in PLANTS}
ORIGIN = now_ms() - now_ms() % 1000 - 120_000  # simulated true time of round 0


def produce(round_no):
    """Each plant sends 2 s of readings, every 50 ms, stamped by its own (skewed) clock."""
    for plant, skew in PLANTS.items():
        start = ORIGIN + round_no * 2_000 + skew
        producers[plant].append([{"plant": plant, "reading": i, "t": start + i * 50} for i in range(40)],
                                key="plant", timestamp="t")


def count_windows():
    """One availableNow run of the windowed count; returns its progress reports."""
    query = (spark.readStream.format("tstream").load(SENSORS)
             .withWatermark("_timestamp", "0 seconds")
             .groupBy(F.window("_timestamp", "1 second")).count()
             .select(F.col("window.start").alias("window_start"), F.col("count").alias("records"))
             .writeStream.format("tstream").outputMode("append")
             .option("checkpointLocation", f"{CHECKPOINTS}/counts")
             .trigger(availableNow=True).start(COUNTS))
    query.awaitTermination()
    return progress(query)


dropped_by_watermark = consumed = 0
for round_no in range(4):
    produce(round_no)
    tick = sensors.refresh().tick
    reports = count_windows()
    dropped_by_watermark += sum(op.get("numRowsDroppedByWatermark", 0)
                                for p in reports for op in p.get("stateOperators", []))
    consumed += sum(p["numInputRows"] for p in reports)
    print(f"round {round_no}: tick {iso(physical(tick))[11:23]} (plant-a's clock); micro-batches " + ", ".join(
        f"up to {iso(physical(end_tso(p)))[11:23]}: {p['numInputRows']} rows" for p in reports if p["numInputRows"])
        + f"; {sensors.state.rows - consumed} newer rows wait above the tick")

for producer in producers.values():  # the plants shut down: the tick moves to the newest reading
    producer.close()
count_windows()

# COMMAND ----------

# MAGIC %md
# MAGIC Compare the streamed counts with a batch count over the same stream: every window the stream closed has
# MAGIC exactly the batch answer, and only the newest window (still open) is missing. Before PySpark 4.2
# MAGIC (Databricks Runtime 17) an `availableNow` run is one micro-batch, so the last few closed windows come out
# MAGIC with the next run that reads new data.

# COMMAND ----------

streamed = spark.read.format("tstream").load(COUNTS).select("window_start", F.col("records").alias("streamed"))
batch = (spark.read.format("tstream").load(SENSORS)
         .groupBy(F.window("_timestamp", "1 second")).count()
         .select(F.col("window.start").alias("window_start"), F.col("count").alias("batch")))
comparison = batch.join(streamed, "window_start", "left").orderBy("window_start")
display(comparison)

rows = comparison.collect()
closed = [r for r in rows if r["streamed"] is not None]
assert all(r["streamed"] == r["batch"] for r in closed), "a closed window differs from the batch answer"
assert rows[:len(closed)] == closed, "a window was skipped"  # only the newest windows are still open
if has("available_now"):
    assert len(closed) == len(rows) - 1  # the newest window is still open
# else (PySpark < 4.2, e.g. Databricks Runtime 17): an availableNow run is one micro-batch with no trailing
# no-data batch, so the windows that batch's watermark closes stay in Spark's state until a run with new data.
assert dropped_by_watermark == 0
assert sum(r["batch"] for r in rows) == 4 * 2 * 40

# COMMAND ----------

RESULTS = {"seek_half": int(by_timestamp.count()), "as_of_devices": len(got), "windows_closed": len(closed),
           "dropped_by_watermark": dropped_by_watermark}
print(RESULTS)
