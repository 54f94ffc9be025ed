"""Group commit through Spark: several streaming queries of one session writing one
stream, their sink commits racing for the same journal slots."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import commits_in
from pyspark_tstream.api.stream import Stream

pytestmark = pytest.mark.spark

QUERIES = 4
FILES = 3  # per query; maxFilesPerTrigger=1: one micro-batch per file
ROWS = 40  # per file


def _inputs(folder: Path, q: int) -> None:
    folder.mkdir(parents=True)
    for f in range(FILES):
        ids = list(range(f * ROWS, (f + 1) * ROWS))
        pq.write_table(pa.table({"q": [q] * ROWS, "id": ids, "device": [f"d{i % 3}" for i in ids],
                                 "t": pa.array([1_700_000_000_000 + i for i in ids], pa.timestamp("ms"))}),
                       folder / f"part-{f:04d}.parquet")


def _committed_parts(s: Stream) -> list[tuple[str, int, int]]:
    """``(writer, batch, rows)`` of every append in the journal (a folding entry's parts one by one)."""
    entries = s.journal.log.read_entries(range(1, s.refresh().pos + 1))
    return [(w, b, sum(c.rows for c in chunks))
            for w, b, _, chunks in commits_in(e for e in entries if e.op == "append" and e.chunks)]


@pytest.mark.slow
def test_concurrent_streaming_queries_into_one_stream_commit_every_batch_once(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/stream"
    Stream.create(url, segments=2)
    queries = []
    for q in range(QUERIES):
        src = tmp_path / f"in{q}"
        _inputs(src, q)
        schema = spark.read.parquet(str(src)).schema
        queries.append(
            spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
            .writeStream.format("tstream").option("checkpointLocation", str(tmp_path / f"ckpt{q}"))
            .option("keyColumn", "device").option("timestampColumn", "t")
            .trigger(availableNow=True).start(url))
    for query in queries:  # all four run at once; each ends after its last file
        query.awaitTermination()
        assert query.exception() is None
    s = Stream.open(url)
    # An ended query does not release its writer (PySpark tells a sink nothing at a query's
    # end), and a live writer's lease ends only by a later journal record (docs/design.md
    # §3.3). A query that starts after the others have finished (which happens under load) has
    # every record floored above their last tick, so the tick holds them back until
    # the writers are released, as `tstream release` does.
    for w in sorted(s.state.writers):
        s.writer(w).close()
    t = Stream.open(url).read()
    for q in range(QUERIES):
        ids = [i for qq, i in zip(t["q"].to_pylist(), t["id"].to_pylist()) if qq == q]
        assert sorted(ids) == list(range(FILES * ROWS)), f"query {q}: a batch lost or duplicated"
    parts = _committed_parts(s)
    writers = {w for w, _, _ in parts}
    assert len(writers) == QUERIES and all(w.startswith("query-") for w in writers)
    # every micro-batch of every query is in the journal exactly once, with all its rows,
    # whether its own commit won a slot or another query's commit folded it
    assert Counter((w, b) for w, b, _ in parts) == Counter((w, b) for w in writers for b in range(FILES))
    assert all(rows == ROWS for _, _, rows in parts)
    assert set(s.info().writers) == writers
