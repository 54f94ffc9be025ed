"""The Spark session the benchmark scripts run on: ``local[2]`` on loopback, UTC, ``tstream`` registered.

One definition, so that every benchmark's figures come from the same session settings; a
script passes only what it measures differently (``extra``).
"""

from __future__ import annotations

import compileall
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


def write_bytecode() -> str:
    """Write the installed tstream's ``.pyc`` files, as ``pip install`` of a wheel does; its folder.

    Every Python process Spark starts imports tstream (a worker per task slot, the streaming
    source's driver-side runner, a batch write's commit). Installed from a wheel, tstream has its
    bytecode, like PySpark and pyarrow. An editable install run with ``PYTHONDONTWRITEBYTECODE=1``
    (the machine these benchmarks' figures come from sets it) has none, and each of those
    processes compiled 27-46 modules from source first: 20-40 ms each, on a query's critical
    path, that no user of a pip-installed tstream pays (``bench_startup.py`` measures both).
    compileall writes the files whatever that variable says; unchanged ones are skipped.
    ``TSTREAM_BENCH_BYTECODE=0`` leaves the install as it is (to measure one without bytecode).
    """
    import pyspark_tstream

    folder = os.path.dirname(os.path.abspath(pyspark_tstream.__file__))
    if os.environ.get("TSTREAM_BENCH_BYTECODE", "1") != "0":
        compileall.compile_dir(folder, quiet=1)
    return folder


def build_session(app: str = "tstream-bench", extra: dict[str, str] | None = None,
                  master: str = "local[2]") -> SparkSession:
    """A ``master`` (default ``local[2]``) session named ``app`` with :data:`SESSION_CONF` (then
    ``extra``) and ``tstream`` registered explicitly; its Python workers run this interpreter,
    with tstream's bytecode written (:func:`write_bytecode`)."""
    write_bytecode()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    import pyspark_tstream
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app)
    for key, value in {**SESSION_CONF, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pyspark_tstream.register(spark)  # spark.dataSource.register refuses a discovered name on 4.0
    return spark
