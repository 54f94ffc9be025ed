"""The Python processes Spark starts for tstream, replayed in fresh interpreters (tests and benchmarks).

Spark starts a Python process for the streaming source's driver-side runner (once per query), a
worker per task slot (it unpickles the reader or writer, then reads or writes) and a process for
a batch write's commit. :func:`run` does one such role's real work — unpickle what Spark ships,
then plan, read, write or commit — in a new interpreter that starts as a PySpark worker does
(PySpark, pyarrow and numpy loaded), and reports what the role cost that process: the seconds
from unpickling to done, the modules it loaded and the memory pool it left pyarrow with.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from helpers import CHILD_EXIT, T0

_CHILD = """
import json, pickle, sys, time
import pyspark.sql.datasource, pyarrow, numpy  # what a PySpark worker has loaded when it unpickles
before = set(sys.modules)
began = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    role, payload = pickle.load(f)
if role == "read":  # a source task: Spark's pickled reader reads its partitions
    reader, partitions, rows = payload
    got = sum(b.num_rows for p in partitions for b in reader.read(p))
    assert got == rows, (got, rows)
elif role == "plan":  # the streaming source's driver-side runner: open, plan a micro-batch
    from pyspark_tstream.datasource.source import TStreamDataSource
    source = TStreamDataSource(payload)
    reader = source.streamReader(source.schema())
    start = reader.initialOffset()
    assert reader.partitions(start, reader.latestOffset(start, reader.getDefaultReadLimit()))
elif role == "write":  # a sink task: Spark's pickled writer writes rows into chunk files
    writer, items = payload  # Arrow batches, or Rows (PySpark 4.0's stream sink)
    assert writer.write(iter(items)).chunks
elif role == "commit":  # a batch write's commit: Spark's pickled writer commits the tasks' messages
    writer, messages = payload
    writer.commit(messages)
else:
    raise ValueError(role)
seconds = time.perf_counter() - began
print(json.dumps([seconds, sorted(set(sys.modules) - before), pyarrow.default_memory_pool().backend_name,
                  sys.modules["pyspark_tstream"].__file__]))
""" + CHILD_EXIT


@dataclass(frozen=True)
class Outcome:
    """What one role cost a fresh process."""

    seconds: float  # from unpickling the job to its end
    modules: frozenset[str]  # modules the role loaded
    pool: str  # pyarrow's default memory pool when the role was done (task_memory)
    package: str  # the pyspark_tstream/__init__.py the process imported


def run(role: str, payload: Any, scratch: Path, env: dict[str, str] | None = None) -> Outcome:
    """Do ``role``'s work on ``payload`` in a fresh interpreter (see the module docstring), with
    ``env`` added to this process's environment."""
    path = scratch / f"job-{role}.pickle"
    path.write_bytes(pickle.dumps((role, payload)))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env} if env else None)
    if done.returncode != 0:
        raise AssertionError(f"role {role!r} failed in its process:\n{done.stderr[-3000:]}")
    seconds, modules, pool, package = json.loads(done.stdout.strip().splitlines()[-1])
    return Outcome(seconds, frozenset(modules), pool, package)


def stream(folder: Path, appends: int = 3, rows: int = 40) -> str:
    """A small two-segment stream (``id``, key ``k``, time ``t``) at ``folder/s``; its URL."""
    from pyspark_tstream.api.stream import Stream

    url = f"file://{folder}/s"
    s = Stream.create(url, segments=2)
    for a in range(appends):
        ids = list(range(a * rows, (a + 1) * rows))
        s.append(pa.table({"id": ids, "k": [f"k{i % 5}" for i in ids],
                           "t": pa.array([T0 + i for i in ids], pa.timestamp("ms", tz="UTC"))}),
                 key="k", timestamp="t")
    return url


def spark_rows(batch: pa.RecordBatch) -> list[Any]:
    """``batch`` as the Rows PySpark 4.0 hands its stream writer: a TIMESTAMP as a naive
    datetime in local time."""
    from pyspark.sql import Row

    def value(v: Any) -> Any:
        return v.astimezone().replace(tzinfo=None) if isinstance(v, datetime) else v

    return [Row(**{k: value(v) for k, v in r.items()}) for r in batch.to_pylist()]


def rows_for(schema: pa.Schema, ids: list[int]) -> pa.RecordBatch:
    """Rows of :func:`stream`'s schema that a sink task receives."""
    return pa.RecordBatch.from_pydict({"id": ids, "k": [f"k{i % 3}" for i in ids],
                                       "t": pa.array([T0 + i for i in ids], pa.timestamp("ms", tz="UTC"))},
                                      schema=schema)


def jobs(url: str, checkpoint: str | None = None) -> dict[str, tuple[str, Any]]:
    """Each role's payload on the stream at ``url``, as Spark would ship it: name -> (role, payload)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.datasource.source import TStreamDataSource

    s = Stream.open(url)
    rows = s.info().rows
    source = TStreamDataSource({"path": url})
    reader = source.streamReader(source.schema())
    start = reader.initialOffset()
    parts = list(reader.partitions(start, reader.latestOffset(start, reader.getDefaultReadLimit())))
    batch_reader = source.reader(source.schema())
    options = {"path": url, "keyColumn": "k", "timestampColumn": "t"}
    spark_schema = from_arrow_schema(s.schema)
    sink = TStreamDataSource(options)
    writer = sink.writer(spark_schema, overwrite=False)
    stream_sink = TStreamDataSource({**options, "checkpointLocation": checkpoint or url + "-ckpt"})
    batch = rows_for(s.schema, list(range(10_000, 10_100)))
    return {
        "source driver (plan a micro-batch)": ("plan", {"path": url}),
        "source task (stream)": ("read", (reader, parts, rows)),
        "source task (batch)": ("read", (batch_reader, list(batch_reader.partitions()), rows)),
        "sink task (batch)": ("write", (writer, [batch])),
        "sink task (stream)": ("write", (stream_sink.streamWriter(spark_schema, overwrite=False), [batch])),
        "sink task (stream, Rows)": ("write", (stream_sink.streamWriter(spark_schema, overwrite=False),
                                               spark_rows(batch))),
        "batch write commit": ("commit", (writer, [writer.write(iter([batch]))])),
    }
