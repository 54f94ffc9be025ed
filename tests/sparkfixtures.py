"""Spark session for the tests (a pytest plugin, loaded from ``conftest.py``).

``spark`` is one classic local session per test run, with ``pyspark_tstream.DefaultSource``
registered explicitly, so ``format("tstream")`` works under any install mode (a default
``pip install -e .`` hides the package from Spark's own discovery).

Spark Connect cannot share a process with a classic session (PySpark refuses to start a local
Connect server while one exists, and Connect mode then sticks to the process), so the Connect
test runs its own Python process: ``tests/test_spark_connect.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from typing import Any

import pytest

# Small and deterministic: two cores, two shuffle partitions, UTC, no UI, loopback only (no
# hostname lookup), so tests behave the same on a laptop and in CI.
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def _default_source() -> Any:
    """``pyspark_tstream.DefaultSource``, or ``None`` while the data source is not written yet."""
    import pyspark_tstream

    source = getattr(pyspark_tstream, "DefaultSource", None)
    if source is None and importlib.util.find_spec("pyspark_tstream.datasource.source") is not None:
        # The package __init__ swallows import errors so Spark's discovery survives them;
        # a test run must not: import again to raise the real error.
        importlib.import_module("pyspark_tstream.datasource.source")
    return source


def _register(session: Any) -> None:
    if _default_source() is not None:
        from pyspark_tstream import register

        register(session)  # PySpark 4.0 refuses to re-register what its discovery found


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A classic local Spark session for the whole run, with ``tstream`` registered."""
    from pyspark.sql import SparkSession

    with pytest.MonkeyPatch.context() as env:
        # Workers must run the interpreter that has pyspark_tstream installed.
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = SparkSession.builder.master("local[2]").appName("tstream-tests")
        warehouse = str(tmp_path_factory.mktemp("spark-warehouse"))
        for key, value in {**SESSION_CONF, "spark.sql.warehouse.dir": warehouse}.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        try:
            _register(session)
            yield session
        finally:
            session.stop()
