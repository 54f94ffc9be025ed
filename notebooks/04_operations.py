# Databricks notebook source
# MAGIC %md
# MAGIC # Operating a stream: history, segments, lag and files
# MAGIC
# MAGIC A stream's metadata is readable as tables, like Delta's `DESCRIBE HISTORY` or Iceberg's metadata tables:
# MAGIC `spark.read.format("tstream").option("metadata", KIND).load(url)` for `history`, `segments`, `epochs`,
# MAGIC `groups` and `files` (the same tables from Python with `Stream.metadata(KIND)`, and from the CLI with
# MAGIC `tstream history` and `tstream info --segments/--files`). This notebook builds a stream that two writers
# MAGIC append to while its segments split and merge, then draws its segments over time, follows a consumer's lag
# MAGIC through a run, and counts files and bytes before and after compaction.

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
# MAGIC `ROOT` holds the stream and the checkpoints (fresh on every run). Outside Databricks each figure is also
# MAGIC saved as a PNG in `FIGURES` (`TSTREAM_NOTEBOOK_FIGURES`; the README's pictures are made this way).

# COMMAND ----------

import json
import os
import shutil
import time

import matplotlib

if "DATABRICKS_RUNTIME_VERSION" not in os.environ:
    matplotlib.use("Agg")  # headless: figures go to PNG files
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.patches import Rectangle
from pyspark.sql import functions as F
from pyspark_tstream import Stream, register
from pyspark_tstream.api.groups import Group

ROOT = os.environ.get("TSTREAM_NOTEBOOK_ROOT", "/tmp/tstream-notebooks") + "/04_operations"
shutil.rmtree(ROOT, ignore_errors=True)
os.makedirs(ROOT, exist_ok=True)
FIGURES = os.environ.get("TSTREAM_NOTEBOOK_FIGURES", f"{ROOT}/figures")
os.makedirs(FIGURES, exist_ok=True)
URL = f"file://{ROOT}/orders"
CHECKPOINTS = f"file://{ROOT}/checkpoints"

try:
    spark  # Databricks (and the notebook tests) provide `spark` and `display`  # noqa: B018
except NameError:  # plain `python notebooks/04_operations.py`
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").config("spark.sql.session.timeZone", "UTC").getOrCreate()

    def display(obj):  # a stand-in for Databricks' display (figures: show_figure saves them)
        if hasattr(obj, "savefig"):
            return
        obj.show(truncate=False) if hasattr(obj, "toPandas") else print(obj)

register(spark)


def show_figure(fig, name):
    """display() the figure; outside Databricks also save it as FIGURES/<name>.png."""
    fig.tight_layout()
    display(fig)
    if "DATABRICKS_RUNTIME_VERSION" not in os.environ:
        fig.savefig(f"{FIGURES}/{name}.png", dpi=100)
        print("saved", f"{FIGURES}/{name}.png")
    plt.close(fig)


def label(segment_id):
    """Segment ids carry their creation epoch in the high 32 bits: show them as ``epoch.number``."""
    return f"{segment_id >> 32}.{segment_id & 0xFFFFFFFF}"


def metadata(kind, **options):
    reader = spark.read.format("tstream").option("metadata", kind)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(URL)

# COMMAND ----------

# MAGIC %md
# MAGIC ## A stream with a history
# MAGIC Two services (`web` and `mobile`) append orders; compaction is off for now, so every append leaves its
# MAGIC small files. Between rounds of appends the segments scale: a split of segment 0.0, a split of one of its
# MAGIC children, a merge of two neighbours, and a last split (Pravega's model: each scale begins an epoch).

# COMMAND ----------

stream = Stream.create(URL, segments=2, compaction="off")
appended = 0


def append_round(n_batches, rows=40):
    global appended
    for _ in range(n_batches):
        for writer in ("web", "mobile"):
            batch = [{"customer": f"c{(appended + i) * 7919 % 97}", "amount": (appended + i) % 50 + 0.5,
                      "channel": writer} for i in range(rows)]
            stream.append(batch, key="customer", writer_id=writer, batch_id=appended)
            appended += rows
        time.sleep(0.15)  # spread the epochs over time for the picture


def by_key(ids):
    return sorted(ids, key=lambda i: next(g.lo for g in stream.state.segments if g.id == i))


append_round(4)
stream.scale(split=stream.state.segments[0].id)            # epoch 1: 0.0 -> 1.2, 1.3
append_round(4)
stream.scale(split=by_key([g.id for g in stream.state.segments])[1])  # epoch 2: 1.3 -> 2.4, 2.5
append_round(4)
active = by_key([g.id for g in stream.state.segments])
stream.scale(merge=active[:2])                              # epoch 3: 1.2 + 2.4 -> 3.6
append_round(4)
stream.scale(split=by_key([g.id for g in stream.state.segments])[-1])  # epoch 4: 0.1 -> 4.7, 4.8
append_round(4)
print("appended", appended, "records in", stream.refresh().pos, "commits; epoch", stream.state.epoch)

# COMMAND ----------

# MAGIC %md
# MAGIC ## History: one row per commit
# MAGIC `history` lists the newest 1,000 journal positions by default (`startingPosition`/`endingPosition` choose a
# MAGIC range): when, what (`append`, `scale`, `compact`, `truncate`, ...), by which writer and batch, and what it
# MAGIC added. Commits a group-commit entry folded together share its position.

# COMMAND ----------

history = metadata("history")
display(history.orderBy(F.col("position").desc()).limit(12))
ops = {r["operation"]: r["count"] for r in history.groupBy("operation").count().collect()}
print(ops)
assert ops == {"create": 1, "append": 40, "scale": 4}
per_writer = history.where("operation = 'append'").groupBy("writer_id").agg(F.sum("records").alias("records"))
display(per_writer)
assert sorted(r["records"] for r in per_writer.collect()) == [appended // 2, appended // 2]

# COMMAND ----------

# MAGIC %md
# MAGIC ## Segments and epochs
# MAGIC `segments` has every segment the stream ever had: the epoch that created it (`epoch_start`), the one that
# MAGIC sealed it (`epoch_end`, null while active), its key range and size. `epochs` has when each epoch began and
# MAGIC its active segments.

# COMMAND ----------

segments = metadata("segments").withColumn("label", F.concat_ws(".", F.shiftright("segment", 32),
                                                                  F.col("segment").bitwiseAND(0xFFFFFFFF)))
display(segments.select("label", "epoch_start", "epoch_end", "key_lo", "key_hi", "records", "bytes", "active"))
epochs = metadata("epochs").orderBy("epoch")
display(epochs)
seg = segments.toPandas().set_index("segment")
ep = epochs.withColumn("t", F.unix_millis("started_at") / 1000).toPandas()  # seconds, whatever the time zone
assert len(ep) == 5 and seg["active"].sum() == len(stream.state.segments)
assert int(seg["records"].sum()) == appended

# COMMAND ----------

# MAGIC %md
# MAGIC ## The segments over time
# MAGIC Pravega's picture of scaling: time runs left to right, the key space bottom to top; each epoch is a column
# MAGIC with a box per active segment. A split shows one box becoming two at the same height; a merge, two becoming
# MAGIC one.

# COMMAND ----------

t0 = ep["t"].iloc[0]
ends = list(ep["t"].iloc[1:]) + [stream.refresh().wall / 1000]
colors = plt.get_cmap("tab10")
fig, ax = plt.subplots(figsize=(10, 4.5))
for (_, row), end in zip(ep.iterrows(), ends):
    x0, x1 = row["t"] - t0, end - t0
    for s in row["segments"]:
        lo, hi = seg.loc[s, "key_lo"], seg.loc[s, "key_hi"]
        ax.add_patch(Rectangle((x0, lo), x1 - x0, hi - lo, facecolor=colors((s & 0xFFFFFFFF) % 10), alpha=0.55,
                               edgecolor="black", linewidth=1))
        ax.text((x0 + x1) / 2, (lo + hi) / 2, label(s), ha="center", va="center", fontsize=9)
    ax.axvline(x0, color="black", linewidth=0.6, linestyle=":")
    ax.text(x0 + 0.01, 1.02, f"epoch {row['epoch']}", fontsize=8)
ax.set_xlim(0, ends[-1] - t0)
ax.set_ylim(0, 1.08)
ax.set_xlabel("seconds since the stream was created")
ax.set_ylabel("key space (hash of the routing key)")
ax.set_title("segments over time: one box per segment per epoch")
show_figure(fig, "segments_over_time")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Consumer lag over a run
# MAGIC A streaming query reads the stream with `maxRecordsPerTrigger` (so it catches up in steps) and commits its
# MAGIC position to consumer group `audit` (`consumerGroup`). Each batch's progress has the source's `endOffset`
# MAGIC (where the batch ended) and, on PySpark 4.2 and later, `latestOffset`: the stream's tick when the batch was
# MAGIC planned. Both are `{"tso", "pos", "time"}`; `latestOffset.time - endOffset.time` is how far behind the query
# MAGIC is in time, `latestOffset.pos - endOffset.pos` in commits. Records behind is what the stream had minus what
# MAGIC the query read; afterwards the `groups` table shows the group's `lag_records`.

# COMMAND ----------

sink = (spark.readStream.format("tstream").option("maxRecordsPerTrigger", 300).option("consumerGroup", "audit")
        .load(URL).writeStream.format("memory").queryName("audit_orders")
        .option("checkpointLocation", f"{CHECKPOINTS}/audit").trigger(processingTime="0 seconds").start())
sink.processAllAvailable()
progress = [p for p in sink.recentProgress if p.numInputRows > 0]
sink.stop()


def offset(text):
    return json.loads(text) if text else None


lag = []
read_so_far = 0
for p in progress:
    source = p.sources[0]
    read_so_far += p.numInputRows
    end, latest = offset(source.endOffset), offset(getattr(source, "latestOffset", None))
    lag.append({"batch": p.batchId, "records_read": p.numInputRows, "records_behind": appended - read_so_far,
                "commits_behind": latest["pos"] - end["pos"] if latest else None,
                "seconds_behind": (pd.Timestamp(latest["time"]) - pd.Timestamp(end["time"])).total_seconds()
                if latest else None})
lag = pd.DataFrame(lag)
display(lag)
assert lag["records_behind"].iloc[-1] == 0 and lag["records_read"].max() <= 300

fig, ax = plt.subplots(figsize=(10, 3.8))
ax.plot(lag["batch"], lag["records_behind"], marker="o", label="records behind (stream - read)")
ax.set_xlabel("micro-batch")
ax.set_ylabel("records behind")
if lag["seconds_behind"].notna().any():
    ax2 = ax.twinx()
    ax2.plot(lag["batch"], lag["seconds_behind"], marker="s", color="tab:orange",
             label="latestOffset.time - endOffset.time")
    ax2.set_ylabel("seconds behind (event time)")
    ax2.legend(loc="upper center", fontsize="small")
ax.legend(loc="upper right", fontsize="small")
ax.set_title("consumer lag over a run (maxRecordsPerTrigger=300)")
show_figure(fig, "consumer_lag")

# COMMAND ----------

# MAGIC %md
# MAGIC A Python consumer group reading part of the stream: the `groups` table shows its pending records per
# MAGIC consumer and the records not yet delivered to the group. The query's group `audit` is one batch behind:
# MAGIC Spark commits a batch's end to the source (and so to the group) when it starts the next batch, and the last
# MAGIC batch had none after it.

# COMMAND ----------

billing = Group.create(stream, "billing", "0")
billing.read("worker-1", count=250)
billing.read("worker-2", count=150)
groups = metadata("groups")
display(groups)
lag_by_group = {r["group"]: r["lag_records"] for r in groups.where("consumer is null").collect()}
print(lag_by_group)
assert lag_by_group == {"audit": int(lag["records_read"].iloc[-1]), "billing": appended - 400}

# COMMAND ----------

# MAGIC %md
# MAGIC ## Files and bytes before and after compaction
# MAGIC Every append wrote a small file per segment it touched (one Spark task writes one file shared by its
# MAGIC segments; the `files` table lists it once per segment slice and once on its own, `kind = shared`).
# MAGIC `compact()` merges each segment's small pieces into macro-chunks: far fewer files to open for a read.

# COMMAND ----------


def file_counts():
    files = metadata("files").where("segment is not null").groupBy("segment").agg(
        F.count("*").alias("files"), F.sum("bytes").alias("bytes")).toPandas()
    files["segment"] = files["segment"].map(label)
    return files.set_index("segment").sort_index()


before = file_counts()
done = stream.compact()
print("compaction:", done)
after = file_counts()
table = before.join(after, lsuffix="_before", rsuffix="_after")
display(table.reset_index())
assert after["files"].sum() < before["files"].sum()
assert int(metadata("files").where("segment is not null").agg(F.sum("records")).first()[0]) == appended

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
x = range(len(table))
ax1.bar([i - 0.2 for i in x], table["files_before"], width=0.4, label="before")
ax1.bar([i + 0.2 for i in x], table["files_after"], width=0.4, label="after")
ax1.set_xticks(list(x), table.index)
ax1.set_xlabel("segment")
ax1.set_ylabel("files")
ax1.set_title("files per segment")
ax1.legend()
ax2.bar([i - 0.2 for i in x], table["bytes_before"] / 1024, width=0.4, label="before")
ax2.bar([i + 0.2 for i in x], table["bytes_after"] / 1024, width=0.4, label="after")
ax2.set_xticks(list(x), table.index)
ax2.set_xlabel("segment")
ax2.set_ylabel("KiB")
ax2.set_title("bytes per segment")
ax2.legend()
fig.suptitle("before and after compaction")
show_figure(fig, "compaction_files")

# COMMAND ----------

# MAGIC %md
# MAGIC The compaction is in the history too.

# COMMAND ----------

last = metadata("history", startingPosition=stream.refresh().pos).first()
print(last)
assert last["operation"] == "compact" and last["records"] == 0 and last["files"] == len(after)

# COMMAND ----------

RESULTS = {"records": appended, "epochs": len(ep), "appends": ops["append"],
           "lag_end": int(lag["records_behind"].iloc[-1]), "billing_lag": lag_by_group["billing"],
           "compacted": bool(after["files"].sum() < before["files"].sum())}
print(RESULTS)
