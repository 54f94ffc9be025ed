"""The Spark session the benchmark scripts run on: ``local[2]`` on loopback, UTC, ``tstream`` registered.

One definition, so that every benchmark's figures come from the same session settings; a
script passes only what it measures differently (``extra``).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "4g",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def build_session(app: str = "tstream-bench", extra: dict[str, str] | None = None,
                  master: str = "local[2]") -> SparkSession:
    """A ``master`` (default ``local[2]``) session named ``app`` with :data:`SESSION_CONF` (then
    ``extra``) and ``tstream`` registered explicitly; its Python workers run this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    import pyspark_tstream
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app)
    for key, value in {**SESSION_CONF, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(pyspark_tstream.DefaultSource)
    return spark
