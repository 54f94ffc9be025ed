"""A running streaming query and a mergeSchema write: the query delivers the records written
before the change, fails before any record with the new column, and a restart from the same
checkpoint reads on with it, every record once (as Delta's DELTA_SCHEMA_CHANGED does).

The planner-level rules are tested Spark-free in test_schema_changes.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark_tstream.api.stream import Stream

pytestmark = pytest.mark.spark


def _old(ids: range) -> pa.Table:
    return pa.table({"id": list(ids), "a": [f"a{i}" for i in ids]})


def _new(ids: range) -> pa.Table:
    return pa.table({"id": list(ids), "a": [f"a{i}" for i in ids], "b": [i * 10 for i in ids]})


def test_streaming_query_fails_before_a_new_column_and_restart_reads_it(spark: Any, tmp_path: Path) -> None:
    from pyspark.errors import StreamingQueryException

    url = f"file://{tmp_path}/s"
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    s = Stream.create(url, segments=2, schema=pa.schema([("id", pa.int64()), ("a", pa.string())]))
    s.append(_old(range(5)))

    def start() -> Any:
        return (spark.readStream.format("tstream").load(url).writeStream.format("parquet")
                .option("checkpointLocation", ckpt).start(out))

    def delivered() -> list[Any]:
        return spark.read.option("mergeSchema", "true").parquet(out).collect()

    q = start()
    try:
        q.processAllAvailable()
        s.append(_old(range(5, 10)))  # old schema, not yet read: delivered before the change
        s.append(_new(range(10, 15)), merge_schema=True)
        s.append(_new(range(15, 20)))
        with pytest.raises(StreamingQueryException) as e:
            q.processAllAvailable()
    finally:
        q.stop()
    text = str(e.value)
    assert "TSTREAM_SCHEMA_CHANGED" in text or "SchemaChangedError" in text
    assert "gained columns ['b']" in text and "restart the query from the same checkpointLocation" in text
    rows = delivered()
    assert sorted(r["id"] for r in rows) == list(range(10))  # up to the change, each once
    assert "b" not in rows[0].asDict()

    q = start()  # the same checkpoint: Spark's schema now has b
    try:
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    rows = delivered()
    assert sorted(r["id"] for r in rows) == list(range(20))  # every record exactly once
    assert {r["id"]: r["b"] for r in rows} == {i: (i * 10 if i >= 10 else None) for i in range(20)}
