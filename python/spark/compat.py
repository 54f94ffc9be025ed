"""What the running PySpark offers the adapters: one named, feature-detected flag per API.

Invariant: every version-dependent code path in ``datasource/`` and ``sink/`` branches on a flag
of :data:`FEATURES`, never on a version string, and each flag is detected from the public API
itself (an import, a keyword, a method), so a PySpark that backports or drops an API gets the
path that matches it. Each :class:`Feature` also records the first PySpark minor that has it
and the fallback tstream uses without it; ``tests/test_compat.py`` checks the detection against
the running PySpark's version and the README's feature × version table against this list, so a
silent degradation fails a test.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"
#: The process PySpark commits and aborts a streaming sink's micro-batches in (4.0 and later).
STREAM_COMMIT_WORKER = "pyspark.sql.worker.python_streaming_sink_runner"


@dataclass(frozen=True)
class Feature:
    """One PySpark API tstream uses when present."""

    name: str
    since: tuple[int, int]  # first PySpark (major, minor) that has it
    api: str  # what is detected
    fallback: str  # what tstream does without it (the README table says the same)
    present: bool


def _arrow_schema_timezone() -> bool:
    from pyspark.sql.pandas.types import to_arrow_schema

    return "timezone" in inspect.signature(to_arrow_schema).parameters


def _stream_arrow_writer() -> bool:
    import pyspark.sql.datasource as ds

    return hasattr(ds, "DataSourceStreamArrowWriter")


def _filter_pushdown() -> bool:
    from pyspark.sql.datasource import DataSourceReader

    return hasattr(DataSourceReader, "pushFilters") and importlib.util.find_spec(PUSHDOWN_WORKER) is not None


def _read_limits() -> bool:
    from pyspark.sql.datasource import DataSourceStreamReader

    if importlib.util.find_spec("pyspark.sql.streaming.datasource") is None:
        return False
    import pyspark.sql.streaming.datasource as sds

    return hasattr(sds, "ReadMaxRows") and len(inspect.signature(DataSourceStreamReader.latestOffset).parameters) > 1


def _available_now() -> bool:
    if importlib.util.find_spec("pyspark.sql.streaming.datasource") is None:
        return False
    import pyspark.sql.streaming.datasource as sds

    return hasattr(sds, "SupportsTriggerAvailableNow")


def _detect() -> dict[str, Feature]:
    specs = [
        ("arrow_schema_timezone", (4, 2), "to_arrow_schema(schema, timezone=...)", _arrow_schema_timezone,
         "`to_arrow_schema(schema, timestamp_utc=True)`: the same Arrow schema, nothing changes"),
        ("stream_arrow_writer", (4, 1), "DataSourceStreamArrowWriter", _stream_arrow_writer,
         "the streaming sink's writer is also a `DataSourceArrowWriter`, and PySpark 4.0's task worker "
         "hands such a writer Spark's Arrow batches (it checks only that, for streaming writers too): the "
         "same batches, chunks and speed class as 4.1+. A worker that hands Rows instead gets them "
         "converted back to Arrow with the query's schema (flat columns from numpy buffers, without "
         "`pa.array`, which would import pandas into each worker)"),
        ("filter_pushdown", (4, 1), "DataSourceReader.pushFilters", _filter_pushdown,
         "batch reads read every chunk of the time range and Spark filters the rows: the same result, "
         "more I/O; bound reads with `startingTimestamp`/`endingTimestamp` instead"),
        ("read_limits", (4, 2), "DataSourceStreamReader.latestOffset(start, limit)", _read_limits,
         "`maxRecordsPerTrigger`, `maxBytesPerTrigger`, `maxFilesPerTrigger` do not apply (a warning is "
         "logged): each micro-batch reads up to the tick. Spark cannot tell the source which trigger "
         "runs, and a limit would stop `Trigger.AvailableNow` short"),
        ("available_now", (4, 2), "SupportsTriggerAvailableNow", _available_now,
         "Spark runs `Trigger.AvailableNow` as one batch, up to the tick, with no trailing no-data batch "
         "(its Trigger.Once fallback for a source without this API): windows that batch's watermark "
         "closes are emitted by the next run that reads new data. To emit them in the same run, start the "
         "query with `trigger(processingTime=\"0 seconds\")`, then call `query.processAllAvailable()` and "
         "`query.stop()`. Spark's `spark.sql.streaming.triggerAvailableNowWrapper.enabled` is not "
         "supported: its wrapper does not tell a restarted source where the query stopped"),
    ]
    return {name: Feature(name, since, api, fallback, bool(probe()))
            for name, since, api, probe, fallback in specs}


FEATURES: dict[str, Feature] = _detect()


def has(name: str) -> bool:
    """Whether the running PySpark has feature ``name`` (a key of :data:`FEATURES`)."""
    return FEATURES[name].present


def arrow_schema(spark_struct: StructType) -> pa.Schema:
    """``to_arrow_schema`` with UTC timestamps, in whichever keyword this PySpark takes."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if has("arrow_schema_timezone"):
        return to_arrow_schema(spark_struct, timezone="UTC")
    return to_arrow_schema(spark_struct, timestamp_utc=True)  # type: ignore[call-arg]  # PySpark < 4.1's keyword


def called_for_filter_pushdown() -> bool:
    """Whether the function calling this one was called by PySpark's filter-pushdown worker.

    PySpark has no API telling ``DataSource.reader`` that filter pushdown is on, yet a reader with
    ``pushFilters`` fails while it is off; only the pushdown worker (PySpark >= 4.1) asks for a
    reader when it is on. Without pushdown this is False: the plain reader is always correct,
    only slower.
    """
    return has("filter_pushdown") and _called_by(PUSHDOWN_WORKER)


def called_for_stream_commit() -> bool:
    """Whether the function calling this one was called by PySpark's streaming-sink commit runner.

    That runner commits (or aborts) each micro-batch by asking ``DataSource.streamWriter`` for a
    fresh writer in its own process, so nothing but the caller says the query is already
    running: it started on the driver, and this batch's tasks have written their chunks. When it
    cannot be told (not CPython, a PySpark that renamed the runner) this is False, and the
    commit behaves as a query's start does (see ``storeRetryTimeout``).
    """
    return _called_by(STREAM_COMMIT_WORKER)


def _called_by(worker: str, reach: int = 4) -> bool:
    """Whether one of the ``reach`` frames above the caller of this module's public helper
    (the ``DataSource`` method asking) belongs to module ``worker``."""
    if not hasattr(sys, "_getframe"):
        return False
    try:
        frame: Any = sys._getframe(3)  # past this function, the helper and the DataSource method
    except ValueError:
        return False
    short = worker.rsplit(".", 1)[-1]
    for _ in range(reach):
        if frame is None:
            break
        g = frame.f_globals
        spec = g.get("__spec__")
        names = (g.get("__name__") or "", getattr(spec, "name", None) or "")
        if any(n.rsplit(".", 1)[-1] == short for n in names):
            return True
        frame = frame.f_back
    return False
