"""Streams end to end on the stores beyond S3 (Azurite's Azure Blob, fake-gcs-server's GCS, and
``file://`` for comparison), started by the tests: several writer processes commit every batch exactly once, the CLI's
``info`` works and shows no secret, and Spark writes and reads back every row.

All in the slow set: each case starts a server, interpreters or Spark.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import commits_in
from helpers import CHILD_EXIT, run_cli
from pyspark_tstream.api.stream import Stream
from servers import AZURITE_KEY, SERVED, backend_params

pytestmark = pytest.mark.slow

#: (writer, batch) pairs: processes p and p + 2 commit writer w{p % 2}'s batches, and each
#: process retries every batch once after it was acknowledged.
WRITERS, BATCHES, ROWS = 2, 2, 25

#: Every backend beyond memory but S3, whose end-to-end cases are in tests/test_s3_streams.py and
#: tests/test_s3_spark.py (moto and SeaweedFS).
BACKENDS = [pytest.param("file", id="file"),
            *(p for p in backend_params(fast=()) if p.values[0] not in SERVED or SERVED[p.values[0]][1] != "s3")]

_WRITER = """
import json, sys
import pyarrow as pa
from pyspark_tstream.api.stream import Stream
url, options, writer = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
s = Stream.open(url, storage_options=options)
for b in range(int(sys.argv[4])):
    rows = int(sys.argv[5])
    data = pa.table({"writer": [writer] * rows, "batch": [b] * rows, "i": list(range(rows)),
                     "key": [f"k{(b * 7 + i) % 13}" for i in range(rows)]})
    for attempt in range(2):  # the second is a retry of an acknowledged batch: a no-op
        ack = s.append(data, key="key", writer_id=writer, batch_id=b)
        print(json.dumps([writer, b, attempt, ack.pos, ack.duplicate]), flush=True)
""" + CHILD_EXIT


@pytest.mark.parametrize("backend", BACKENDS)
def test_four_writer_processes_commit_every_batch_exactly_once(backend: str,
                                                               backend_root: tuple[str, dict[str, Any]]) -> None:
    url, options = backend_root
    Stream.create(url, segments=2, storage_options=options, compaction="off")
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, url, json.dumps(options), f"w{p % WRITERS}",
                               str(BATCHES), str(ROWS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in range(4)]
    outcomes = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-3000:] for _, err in outcomes]
    acks = [json.loads(line) for out, _ in outcomes for line in out.splitlines()]
    assert len(acks) == 4 * BATCHES * 2
    # every retry of an acknowledged batch is a duplicate; so is the losing twin's first try
    assert all(dup for _, _, attempt, _, dup in acks if attempt == 1)
    pairs = sorted((f"w{w}", b) for w in range(WRITERS) for b in range(BATCHES))
    winners = sorted((w, b) for w, b, _, _, dup in acks if not dup)
    assert winners == pairs
    s = Stream.open(url, storage_options=options)
    entries = s.journal.log.read_entries(range(1, s.state.pos + 1))
    assert sorted((w, b) for w, b, _, _ in commits_in(entries)) == pairs  # one commit per batch
    t = s.read()
    counts = t.group_by(["writer", "batch"]).aggregate([("i", "count"), ("i", "count_distinct")])
    assert t.num_rows == len(pairs) * ROWS and counts.num_rows == len(pairs)
    assert set(counts["i_count"].to_pylist()) == {ROWS} == set(counts["i_count_distinct"].to_pylist())


@pytest.mark.parametrize("backend", [*backend_params(fast=())])
def test_cli_info_works_and_prints_no_secret(backend: str, backend_root: tuple[str, dict[str, Any]],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    url, options = backend_root
    s = Stream.create(url, segments=2, storage_options=options)
    s.append(pa.table({"key": ["a", "b", "c"], "v": [1, 2, 3]}), key="key", writer_id="w", batch_id=0)
    flags = [arg for key, value in options.items()
             for arg in ("--storage-option", f"{key}={json.dumps(value) if isinstance(value, dict) else value}")]
    code, out, err = run_cli(capsys, "info", url, *flags)
    assert code == 0, err
    assert f"stream   {s.store.display_url}\n" in out and "records  3 in " in out
    secrets = {"moto": ["testing"], "azurite": [AZURITE_KEY]}.get(backend, [])
    assert all(secret not in out + err for secret in secrets)


def _spark_options(options: dict[str, Any]) -> dict[str, str]:
    return {f"storage.{k}": json.dumps(v) if isinstance(v, dict) else str(v) for k, v in options.items()}


@pytest.mark.spark
@pytest.mark.parametrize("backend", ["azurite", "fakegcs"])
def test_spark_write_and_available_now_read_round_trip(spark: Any, backend: str,
                                                        backend_root: tuple[str, dict[str, Any]],
                                                        tmp_path: Path) -> None:
    url, options = backend_root
    opts = _spark_options(options)
    df = spark.range(0, 500).selectExpr("id", "concat('dev-', cast(id % 7 as string)) as key",
                                        "timestamp_millis(1700000000000 + id * 10) as t")
    (df.repartition(2).write.format("tstream").mode("append").options(**opts).option("keyColumn", "key")
     .option("timestampColumn", "t").option("segments", "2").save(url))
    dst = (tmp_path / "copy").as_uri()
    q = (spark.readStream.format("tstream").options(**opts).load(url)
         .select("id", "key", "t")
         .writeStream.format("tstream").option("checkpointLocation", str(tmp_path / "ckpt"))
         .option("keyColumn", "key").option("timestampColumn", "t")
         .trigger(availableNow=True).start(dst))
    q.awaitTermination()
    assert q.exception() is None
    assert sorted(Stream.open(url, storage_options=options).read()["id"].to_pylist()) == list(range(500))
    assert sorted(Stream.open(dst).read()["id"].to_pylist()) == list(range(500))
    assert sorted(r["id"] for r in spark.read.format("tstream").options(**opts).load(url).select("id").collect()) \
        == list(range(500))
    assert AZURITE_KEY not in str(q.recentProgress)  # offsets and progress name no secret
