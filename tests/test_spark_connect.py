"""tstream from a Spark Connect session (``SparkSession.builder.remote("local[2]")``).

Connect cannot share a process with the classic ``spark`` fixture, so the session runs in a
child Python process and reports what it saw as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CHILD_EXIT

pytestmark = [pytest.mark.slow, pytest.mark.spark]  # a Connect server of its own: ~40 s

SCRIPT = r'''
import json, sys
from pyspark.sql import SparkSession
from pyspark_tstream import DefaultSource
root = sys.argv[1]
spark = (SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.dataSource.register(DefaultSource)
src, dst = f"file://{root}/src", f"file://{root}/dst"
# client times one ms apart: a batch never splits a millisecond, and arrival times could put
# all 300 records in one (then one batch is the documented overshoot, not a split)
(spark.range(300).selectExpr("id", "concat('k', cast(id % 3 as string)) as key",
                             "timestamp_millis(1700000000000 + id) as t")
      .write.format("tstream").mode("append").option("keyColumn", "key").option("timestampColumn", "t")
      .save(src))
q = (spark.readStream.format("tstream").option("maxRecordsPerTrigger", "100").load(src)
     .select("id", "key", "_timestamp").writeStream.format("tstream")
     .option("checkpointLocation", f"{root}/ck").option("timestampColumn", "_timestamp")
     .trigger(availableNow=True).start(dst))
q.awaitTermination()
out = spark.read.format("tstream").load(dst)
print(json.dumps({"rows": out.count(), "distinct": out.select("id").distinct().count(),
                  "columns": out.columns, "batches": len(q.recentProgress)}))
spark.stop()
''' + CHILD_EXIT


def test_read_and_write_from_spark_connect(tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("SPARK_REMOTE", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["rows"] == 300 and result["distinct"] == 300
    assert result["columns"] == ["id", "key", "_timestamp", "_tso", "_segment", "_seq"]
    assert result["batches"] >= 2  # the read limit split the stream into micro-batches
