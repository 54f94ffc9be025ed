# Databricks notebook source
# MAGIC %md
# MAGIC # Scaling segments, stream cuts and retention
# MAGIC
# MAGIC A stream's records are spread over **segments** by a hash of their routing key. When some keys get hot,
# MAGIC split their segment; when traffic cools down, merge neighbours back (Pravega's model). Each scale seals
# MAGIC segments and creates successors in a new **epoch**; readers follow successors, and the records of one key
# MAGIC stay in order across scales.
# MAGIC
# MAGIC History can be dropped from the front: `truncate` (before a time or a **stream cut**), `trim` (keep the
# MAGIC newest N records, an age or a size; also available as a stream's `retention` policy) and `vacuum` (delete
# MAGIC the files). A streaming query that falls behind truncated data fails with an exact report, or skips the
# MAGIC gap with `failOnDataLoss=false`.

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

import json
import os
import shutil

import matplotlib.pyplot as plt
import pandas as pd
from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark_tstream import Stream, register
from pyspark_tstream.timestamps import iso, now_ms

ROOT = os.environ.get("TSTREAM_NOTEBOOK_ROOT", "/tmp/tstream-notebooks") + "/03_scaling_and_retention"
shutil.rmtree(ROOT, ignore_errors=True)
os.makedirs(ROOT, exist_ok=True)
URL = f"file://{ROOT}/clicks"
CHECKPOINTS = f"file://{ROOT}/checkpoints"

try:
    spark  # Databricks (and the notebook tests) provide `spark` and `display`  # noqa: B018
except NameError:  # plain `python notebooks/03_scaling_and_retention.py`
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").config("spark.sql.session.timeZone", "UTC").getOrCreate()

    def display(obj):  # a stand-in for Databricks' display
        if hasattr(obj, "savefig"):
            obj.savefig(f"{ROOT}/figure.png")
            print("figure saved to", f"{ROOT}/figure.png")
        else:
            obj.show(truncate=False) if hasattr(obj, "show") else print(obj)

# Spark finds `tstream` by itself when the package was installed before the session started;
# register() also covers a notebook-scoped install and is a no-op otherwise (on every PySpark 4.x).
register(spark)


def label(segment_id):
    """Segment ids carry their creation epoch in the high 32 bits: show them as ``epoch.number``."""
    return f"{segment_id >> 32}.{segment_id & 0xFFFFFFFF}"


def segments_table(stream):
    return pd.DataFrame([{"segment": label(s.id), "key_range": s.key_range, "rows": s.rows}
                         for s in stream.info().segments])

# COMMAND ----------

# MAGIC %md
# MAGIC ## Traffic with a hot spot
# MAGIC Twelve users click; each click carries `n`, that user's running count, so order is easy to check. The
# MAGIC stream starts with 2 segments. Event times are simulated, one append per second of data, starting ten
# MAGIC minutes ago. In phase A (seconds 0–9) every user clicks twice a second.

# COMMAND ----------

stream = Stream.create(URL, segments=2)
USERS = [f"user-{i:02d}" for i in range(12)]
T0 = now_ms() - now_ms() % 1000 - 600_000
clicks_so_far = {u: 0 for u in USERS}
HOT_USERS: set = set()  # filled in below, once we know which users segment 0 owns


def clicks(second, hot=False):
    """One second of clicks: twice per user, six times for HOT_USERS when ``hot``."""
    rows = []
    for user in USERS:
        rate = 6 if hot and user in HOT_USERS else 2
        for k in range(rate):
            rows.append({"user": user, "n": clicks_so_far[user], "t": T0 + second * 1000 + k * (1000 // rate)})
            clicks_so_far[user] += 1
    return sorted(rows, key=lambda r: r["t"])


def write(seconds, hot=False):
    for second in seconds:
        stream.append(clicks(second, hot), key="user", timestamp="t")


write(range(10))
MOMENTS = {"phase A": now_ms()}  # wall-clock moments of the stream's life, for segments_at below
placed = stream.read(columns=["user", "_segment"]).to_pandas().drop_duplicates()
HOT_USERS = set(placed.loc[placed["_segment"] == 0, "user"])
print("segment 0 owns", sorted(HOT_USERS))
display(segments_table(stream))
assert stream.info().rows == 240 and placed["user"].is_unique  # each user lives in one segment

# COMMAND ----------

# MAGIC %md
# MAGIC ## A consumer that will fall behind
# MAGIC An archiving job reads the stream with `availableNow` now and then. It runs once here, and again only at
# MAGIC the very end, after retention has removed data it never read.

# COMMAND ----------


def run_archiver(fail_on_data_loss=True):
    """One availableNow run of the archiving consumer; returns the records it read."""
    query = (spark.readStream.format("tstream").option("failOnDataLoss", str(fail_on_data_loss).lower())
             .load(URL).writeStream.format("noop")
             .option("checkpointLocation", f"{CHECKPOINTS}/archiver")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return sum(p["numInputRows"] for p in [p if isinstance(p, dict) else json.loads(p.json)
                                           for p in query.recentProgress])


archived = run_archiver()
print("archiver read", archived, "records")
assert archived == 240

# COMMAND ----------

# MAGIC %md
# MAGIC ## Phase B: segment 0 gets hot, so split it
# MAGIC From second 10 the users of segment 0 click six times a second. After five seconds the per-segment rates
# MAGIC show it; `scale(split=0)` seals segment 0 and gives each half of its key range to a new segment in
# MAGIC epoch 1. (A stream can also scale itself: the `scaling` config sets a policy evaluated on commit.)

# COMMAND ----------

write(range(10, 15), hot=True)
rates = (spark.read.format("tstream").option("startingTimestamp", str(T0 + 10_000)).load(URL)
         .groupBy("_segment").agg((F.count("*") / 5).alias("records_per_second")).orderBy("_segment"))
display(rates)
hottest = max(rates.collect(), key=lambda r: r["records_per_second"])["_segment"]
assert hottest == 0

split = stream.scale(split=0)
MOMENTS["after the split"] = now_ms()
print("split:", {k: [label(s) for s in v] if isinstance(v, list) else v for k, v in split.to_dict().items()})
print("successors of 0.0:", [label(s) for s in stream.successors(0)],
      "| predecessors of", label(split.created[0]), ":",
      [label(s) for s in stream.predecessors(split.created[0])])
assert stream.successors(0) == list(split.created) and stream.predecessors(split.created[1]) == [0]
write(range(15, 30), hot=True)
display(segments_table(stream))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Phase C: traffic cools down, merge the halves back
# MAGIC From second 30 everyone clicks twice a second again. `scale(merge=[...])` seals the two adjacent halves and
# MAGIC creates one segment for their joint key range, in epoch 2.

# COMMAND ----------

merge = stream.scale(merge=split.created)
print("merge:", {k: [label(s) for s in v] if isinstance(v, list) else v for k, v in merge.to_dict().items()})
write(range(30, 45))
display(segments_table(stream))
assert merge.epoch == 2 and stream.predecessors(merge.created[0]) == list(split.created)

# COMMAND ----------

# MAGIC %md
# MAGIC `epoch_at` and `segments_at` answer "which segments were active at that moment?" from the journal, which
# MAGIC records when each commit and scale happened (so they take wall-clock moments of the stream's life, noted
# MAGIC above as `MOMENTS`).

# COMMAND ----------

MOMENTS["after the merge"] = now_ms()
history = pd.DataFrame([{"moment": f"{name} ({iso(ms)[11:23]})", "epoch": stream.epoch_at(ms),
                         "segments": [(label(s.id), [round(x, 2) for x in s.key_range])
                                      for s in stream.segments_at(ms)]}
                        for name, ms in MOMENTS.items()])
display(history)
assert list(history["epoch"]) == [0, 1, 2]
assert [len(s) for s in history["segments"]] == [2, 3, 2]

# COMMAND ----------

# MAGIC %md
# MAGIC ## Records per second, per segment
# MAGIC The load of segment 0 triples, is shared by its two successors after the split, and comes back together in
# MAGIC one segment after the merge; segment 0.1 (the other half of the key space) never changes.

# COMMAND ----------

all_clicks = spark.read.format("tstream").load(URL)
per_second = (all_clicks
              .groupBy("_segment", ((F.unix_millis("_timestamp") - T0) / 1000).cast("int").alias("second"))
              .count().toPandas()
              .pivot(index="second", columns="_segment", values="count").fillna(0).sort_index())

fig, ax = plt.subplots(figsize=(10, 4))
# the untouched half of the key space (segment 0.1) at the bottom, the hot half's segments above it
order = sorted(per_second.columns, key=lambda c: (c != 1, c))
bottom = pd.Series(0.0, index=per_second.index)
for segment in order:
    ax.bar(per_second.index, per_second[segment], width=0.9, bottom=bottom, label=f"segment {label(segment)}")
    bottom += per_second[segment]
for second, text in ((14.5, "split 0.0"), (29.5, "merge 1.2 + 1.3")):
    ax.axvline(second, color="black", linestyle="--", linewidth=1)
    ax.text(second + 0.3, bottom.max() * 1.02, text)
ax.set_ylim(0, bottom.max() * 1.12)
ax.set_xlabel("second of data (event time)")
ax.set_ylabel("records per second")
ax.set_title("records per second per segment")
ax.legend(loc="upper right", fontsize="small")
display(fig)
assert per_second.to_numpy().sum() == stream.info().rows == sum(clicks_so_far.values())

# COMMAND ----------

# MAGIC %md
# MAGIC ## Per-key order across scales
# MAGIC A hot user's clicks went to segment 0.0, then to one of its successors, then to the merged segment. Read in
# MAGIC the stream's order (`_tso`), each user's `n` still counts 0, 1, 2, … without a gap or a swap.

# COMMAND ----------

by_user = Window.partitionBy("user").orderBy("_tso")
out_of_order = (all_clicks.withColumn("position", F.row_number().over(by_user) - 1)
                .where(F.col("position") != F.col("n")).count())
one_user = min(HOT_USERS)
path = (all_clicks.where(F.col("user") == one_user)
        .withColumn("segment", F.concat_ws(".", F.shiftright("_segment", 32), F.col("_segment").bitwiseAND(0xFFFFFFFF)))
        .groupBy("_segment", "segment").agg(F.min("n").alias("first_n"), F.max("n").alias("last_n"),
                                 F.min("_timestamp").alias("from"), F.max("_timestamp").alias("to"))
        .orderBy("first_n"))
print(f"the path of {one_user} through the segments:")
display(path)
assert out_of_order == 0
assert [r["_segment"] >> 32 for r in path.collect()] == [0, 1, 2]

# COMMAND ----------

# MAGIC %md
# MAGIC ## Stream cuts
# MAGIC A **stream cut** is a position in every active segment: `cut_at(t)` gives, per segment, the `_seq` of the
# MAGIC first record at or after `t`. It names an exact point across segments, e.g. to truncate at.

# COMMAND ----------

CUT_TIME = T0 + 35_000
cut = stream.cut_at(CUT_TIME)
print("cut at", iso(CUT_TIME), {label(s): seq for s, seq in cut.items()})
records = stream.read(columns=["_segment", "_seq", "_timestamp"]).to_pandas()
for segment, seq in cut.items():
    rows = records[records["_segment"] == segment].set_index("_seq")["_timestamp"]
    assert rows[seq] >= pd.Timestamp(CUT_TIME, unit="ms", tz="UTC") > rows[seq - 1]

# COMMAND ----------

# MAGIC %md
# MAGIC ## Truncate, and a consumer that fell behind
# MAGIC `truncate(cut)` drops everything before the cut: at once for readers (one journal record), while the files
# MAGIC go later with `vacuum`. The archiver last read up to second 10; its next run would have to read records
# MAGIC that are gone. By default (`failOnDataLoss=true`) it fails and says exactly what was lost.

# COMMAND ----------

stream.truncate(cut)
remaining = spark.read.format("tstream").load(URL).count()
print("after truncate:", remaining, "records, from", stream.info().first_time)
assert remaining == 10 * 24  # seconds 35..44 of phase C

error = None
try:
    run_archiver()
except Exception as e:  # noqa: BLE001 - StreamingQueryException: the data-loss report is in its message
    error = str(e)
assert error is not None and "failOnDataLoss" in error
print(next(line for line in error.splitlines() if "errors.DataLossError:" in line).split(": ", 1)[1])

# COMMAND ----------

# MAGIC %md
# MAGIC With `failOnDataLoss=false` the archiver logs the gap, skips it, and carries on from the new head.

# COMMAND ----------

archived = run_archiver(fail_on_data_loss=False)
print("archiver read", archived, "records after skipping the gap")
assert archived == remaining

# COMMAND ----------

# MAGIC %md
# MAGIC ## Trim and vacuum
# MAGIC `trim(maxlen=N)` keeps the newest N records (Redis' `XTRIM MAXLEN`); `max_age` and `max_bytes` work the
# MAGIC same way, and a stream created with a `retention` policy (e.g. the sink option
# MAGIC `.option("retention", "age=7d")`) trims itself as it is written. `vacuum` deletes the files of truncated
# MAGIC records once no reader can still be using them (`grace_ms`, 10 minutes by default; 0 here).

# COMMAND ----------

stream.trim(maxlen=100)
assert stream.read().num_rows == spark.read.format("tstream").load(URL).count() == 100
deleted = stream.vacuum(grace_ms=0)
print("vacuum deleted", deleted)
info = stream.info()
print({k: getattr(info, k) for k in ("epoch", "first_time", "last_time", "sealed_segments")},
      "| readable:", stream.read().num_rows)
assert deleted.chunks > 0

# COMMAND ----------

RESULTS = {"records": int(per_second.to_numpy().sum()), "epochs": info.epoch + 1,
           "out_of_order": out_of_order, "after_truncate": remaining, "after_trim": 100}
print(RESULTS)
