# Databricks notebook source
# MAGIC %md
# MAGIC # tstream quickstart
# MAGIC
# MAGIC **tstream** stores timestamped streams as Parquet chunks plus a small JSON journal on a filesystem or
# MAGIC object store, and plugs into Spark as `format("tstream")`: a sink (`df.write`, `df.writeStream`) and a
# MAGIC source (`spark.read`, `spark.readStream`). No broker, no server.
# MAGIC
# MAGIC In this notebook you will
# MAGIC 1. create a stream,
# MAGIC 2. write to it with the Spark sink and read it back with the source,
# MAGIC 3. run a streaming pipeline from one stream into another, exactly once,
# MAGIC 4. look at `info()`, and
# MAGIC 5. see what a **tick** is: the point up to which the stream is complete.
# MAGIC
# MAGIC Requirements: Databricks Runtime 17.0 or later (Spark 4.0+) and the `pyspark-tstream` wheel (the next cells
# MAGIC install it), or locally `pip install -e . --config-settings editable_mode=strict`.

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
# MAGIC `ROOT` is where the notebook keeps its streams and checkpoints; every run starts fresh. A driver-local
# MAGIC folder works locally and on a single-node cluster. On a multi-node cluster, point it at a folder every
# MAGIC node sees, e.g. a Unity Catalog volume (`/Volumes/main/default/scratch/tstream-notebooks`).

# COMMAND ----------

import os
import shutil

import pandas as pd
from pyspark.sql import functions as F
from pyspark_tstream import Stream, register
from pyspark_tstream.timestamps import iso, now_ms, physical

ROOT = os.environ.get("TSTREAM_NOTEBOOK_ROOT", "/tmp/tstream-notebooks") + "/01_quickstart"
shutil.rmtree(ROOT, ignore_errors=True)
URL = f"file://{ROOT}/telemetry"
CHECKPOINTS = f"file://{ROOT}/checkpoints"

try:
    spark  # Databricks (and the notebook tests) provide `spark` and `display`  # noqa: B018
except NameError:  # plain `python notebooks/01_quickstart.py`
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").config("spark.sql.session.timeZone", "UTC").getOrCreate()

    def display(obj):  # a stand-in for Databricks' display
        obj.show(truncate=False) if hasattr(obj, "show") else print(obj)

# Spark finds `tstream` by itself when the package was installed before the session started;
# register() also covers a notebook-scoped install and is a no-op otherwise (on every PySpark 4.x).
register(spark)

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. Create a stream
# MAGIC A stream is a folder. Records are routed by a key to **segments** (here 4); the same key always lands in
# MAGIC the same segment, in order. You can also skip this step: the first write through the sink creates the
# MAGIC stream (with sink options like `segments` as its config).

# COMMAND ----------

stream = Stream.create(URL, segments=4)
info = stream.info()
print(info.url, "| segments:", [s.id for s in info.segments], "| rows:", info.rows)
assert info.rows == 0 and len(info.segments) == 4

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. Write with the sink, read with the source
# MAGIC `keyColumn` routes records to segments; `timestampColumn` gives each record its time (otherwise: arrival
# MAGIC time). A batch `df.write` is a one-shot write: one atomic commit.

# COMMAND ----------

START_MS = now_ms() - 10 * 60_000  # readings from the last ten minutes, one every 500 ms
readings = spark.range(1000).select(
    F.concat(F.lit("device-"), (F.col("id") % 8).cast("string")).alias("device"),
    F.round(F.lit(20.0) + F.rand(seed=1) * 5, 2).alias("temp"),
    F.timestamp_millis(F.lit(START_MS) + F.col("id") * 500).alias("t"),
)
(readings.write.format("tstream").mode("append")
 .option("keyColumn", "device").option("timestampColumn", "t")
 .save(URL))

# COMMAND ----------

# MAGIC %md
# MAGIC Every record read back carries system columns: `_timestamp` (its time, ms), `_tso` (hybrid timestamp:
# MAGIC milliseconds << 18 | a logical counter, unique and increasing within a segment), `_segment` and `_seq`
# MAGIC (its dense position in the segment).

# COMMAND ----------

df = spark.read.format("tstream").load(URL)
df.printSchema()
display(df.orderBy("_tso").limit(10))

per_segment = (df.groupBy("_segment")
               .agg(F.count("*").alias("records"), F.countDistinct("device").alias("devices"),
                    F.min("_seq").alias("first_seq"), F.max("_seq").alias("last_seq"))
               .orderBy("_segment"))
display(per_segment)

assert df.count() == 1000
assert df.where("_timestamp != t").count() == 0  # client times (in the past) are kept exactly
# a device lives in exactly one segment, and _seq is dense from 0 in every segment
assert df.groupBy("device").agg(F.countDistinct("_segment").alias("n")).where("n > 1").count() == 0
assert all(r["last_seq"] == r["records"] - 1 and r["first_seq"] == 0 for r in per_segment.collect())

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. A streaming pipeline, exactly once
# MAGIC Read the stream with `readStream`, keep the hot readings, and write them into a second stream with
# MAGIC `writeStream`. `trigger(availableNow=True)` processes what is there and stops; the checkpoint remembers
# MAGIC where it got to. Each micro-batch is one atomic commit keyed by (writer, batchId), where the writer id
# MAGIC comes from the checkpoint location, so a batch Spark replays after a crash is not written twice.

# COMMAND ----------

ALERTS = f"file://{ROOT}/alerts"


def run_alerts():
    """One availableNow run of the alert pipeline; returns the finished query."""
    query = (spark.readStream.format("tstream").load(URL)
             .where("temp > 24")
             .select("device", "temp", "t")
             .writeStream.format("tstream")
             .option("checkpointLocation", f"{CHECKPOINTS}/alerts")
             .option("keyColumn", "device").option("timestampColumn", "t")
             .trigger(availableNow=True)
             .start(ALERTS))
    query.awaitTermination()
    return query


run_alerts()
hot = df.where("temp > 24").count()
assert spark.read.format("tstream").load(ALERTS).count() == hot
print(f"{hot} alerts after the first run")

# COMMAND ----------

# MAGIC %md
# MAGIC New data arrives, this time through the plain Python API (no Spark needed). It is one atomic commit and
# MAGIC returns an S2-style ack. The next run of the pipeline picks up only what is new.

# COMMAND ----------

more = pd.DataFrame({"device": [f"device-{i % 8}" for i in range(40)],
                     "temp": [25.0 + i % 3 for i in range(40)],
                     "t": pd.to_datetime([START_MS + 500_000 + i * 100 for i in range(40)], unit="ms", utc=True)})
ack = stream.append(more, key="device", timestamp="t")
print(f"appended {ack.rows} records, ids {ack.first_id} … {ack.last_id}")

run_alerts()
alerts = spark.read.format("tstream").load(ALERTS)
assert alerts.count() == hot + 40, "only the new hot readings were added"
display(alerts.groupBy("device").count().orderBy("device"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 4. `info()`
# MAGIC A snapshot of the stream: the tick, segments, writers, first and last ids, size. The same is available from
# MAGIC the shell: `tstream info <url>`.

# COMMAND ----------

info = Stream.open(URL).info()
print({k: getattr(info, k) for k in ("rows", "chunks", "bytes", "first_time", "last_time", "tick_time")})
segments = pd.DataFrame([g.to_dict() for g in info.segments])
display(segments[["id", "key_range", "rows", "chunks", "bytes", "next_seq", "last_id"]])
alerts_info = Stream.open(ALERTS).info()
display(pd.DataFrame.from_dict(alerts_info.to_dict()["writers"], orient="index"))
assert info.rows == 1040 and alerts_info.rows == hot + 40
assert len(alerts_info.writers) == 1  # the pipeline's one streaming query, across both runs

# COMMAND ----------

# MAGIC %md
# MAGIC ## 5. Ticks: how far is the stream complete?
# MAGIC Producers run on different machines with different clocks. The stream's **tick** is the minimum, over the
# MAGIC *live* writers (streaming sink queries and Python producer sessions), of their latest committed timestamp.
# MAGIC Nothing at or below the tick can arrive any more, so readers stop there: a batch read ends at the tick by
# MAGIC default, and a streaming read's micro-batches end on ticks.
# MAGIC
# MAGIC Two gateways write here; `gateway-slow`'s clock is 3 s behind. The stream declares both as its `writers`,
# MAGIC so the tick waits for the first commit of each instead of racing ahead with whoever commits first.

# COMMAND ----------

TICKS = f"file://{ROOT}/ticks"
ticks = Stream.create(TICKS, segments=2, writers=["gateway-slow", "gateway-fast"])
slow = Stream.open(TICKS).writer("gateway-slow")  # a producer session: it holds the tick while open
fast = Stream.open(TICKS).writer("gateway-fast")
true_now = now_ms() - 60_000


def readings_at(gateway, clock_ms, n=5):
    """``n`` readings of ``gateway``, 100 ms apart, ending at ``clock_ms`` by its own clock."""
    return [{"gateway": gateway, "n": i, "t": clock_ms - (n - 1 - i) * 100} for i in range(n)]


def visible():
    return spark.read.format("tstream").load(TICKS).count()


fast.append(readings_at("gateway-fast", true_now), key="gateway", timestamp="t")
print("after gateway-fast commits: tick =", ticks.refresh().tick, "(waiting for gateway-slow)", "| visible:", visible())
assert ticks.state.tick == 0 and visible() == 0

slow.append(readings_at("gateway-slow", true_now - 3_000), key="gateway", timestamp="t")
tick_ms = physical(ticks.refresh().tick)
print("after gateway-slow commits: tick =", iso(tick_ms), "| visible:", visible())
assert tick_ms == true_now - 3_000  # the slow clock's latest record
assert visible() == 5  # gateway-fast's readings are newer than the tick: not complete yet

# COMMAND ----------

# MAGIC %md
# MAGIC The slow gateway catches up, then both sessions close: with no live writer left, the tick is the newest
# MAGIC record and everything is visible. (A writer that just goes silent is dropped from the tick after
# MAGIC `writerLeaseMs`, 60 s by default.)

# COMMAND ----------

slow.append(readings_at("gateway-slow", true_now + 1_000), key="gateway", timestamp="t")
print("slow caught up: tick =", iso(physical(ticks.refresh().tick)), "| visible:", visible())
assert physical(ticks.state.tick) == true_now  # now gateway-fast is the one behind
slow.close()
fast.close()
print("both closed:    tick =", iso(physical(ticks.refresh().tick)), "| visible:", visible())
assert visible() == 15
display(spark.read.format("tstream").load(TICKS).orderBy("_tso"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Your workspace's cloud store
# MAGIC Everything above works on the cloud URL of your workspace's store: pass its credential from a secret scope
# MAGIC as `storage.<key>` options (tstream reads and writes the store from Python, so a Unity Catalog grant does
# MAGIC not reach it). On Azure, with a service principal:
# MAGIC
# MAGIC ```python
# MAGIC opts = {"storage.tenant_id": dbutils.secrets.get("tstream", "tenant-id"),
# MAGIC         "storage.client_id": dbutils.secrets.get("tstream", "client-id"),
# MAGIC         "storage.client_secret": dbutils.secrets.get("tstream", "client-secret")}
# MAGIC url = "abfss://streams@myaccount.dfs.core.windows.net/telemetry"
# MAGIC df.write.format("tstream").options(**opts).mode("append").save(url)
# MAGIC read_native(spark, url, **opts).groupBy("device").count()  # Spark's own ABFS reader, same options
# MAGIC ```
# MAGIC
# MAGIC On Google Cloud, `{"storage.token": dbutils.secrets.get("tstream", "gcs-key-json")}` and a `gs://` URL; on
# MAGIC AWS with an instance profile, no option. Volumes, what each store guarantees, and writers on several nodes:
# MAGIC `docs/databricks.md`.

# COMMAND ----------

# MAGIC %md
# MAGIC ## Summary
# MAGIC Next: `02_seek_and_asof` (start a read anywhere in time, windowed counts that drop nothing) and
# MAGIC `03_scaling_and_retention` (split and merge segments, stream cuts, truncation).

# COMMAND ----------

RESULTS = {"records": info.rows, "alerts": alerts_info.rows, "tick_visible": visible()}
print(RESULTS)
