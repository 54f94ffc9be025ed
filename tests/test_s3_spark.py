"""The Spark sink and source on ``s3://`` streams, configured only through ``storage.*`` options.

Spark runs each Python data source task in a separate Python worker process, so everything a
worker needs to reach the store (endpoint, key, secret, region) must travel inside the pickled
reader or writer. No AWS variable is set in this process, and the endpoint exists only in the
options: a task that lost them could not reach the server at all, and SeaweedFS checks every
signature, so a read or write that succeeds there proves the options arrived whole.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import SECRET
from pyspark_tstream.api.stream import Stream
from s3servers import ACCESS_KEY, BUCKET, REGION, SECRET_KEY, boto3_client, free_ports, s3_storage_options

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.s3]

SYSTEM = ("_timestamp", "_tso", "_segment", "_seq")


def spark_storage_options(endpoint: str, *, key: str = ACCESS_KEY,
                          secret: str = SECRET_KEY) -> dict[str, str]:
    """``storage.*`` reader/writer options (strings, as Spark passes them) for ``endpoint``."""
    return {"storage.endpoint_url": endpoint, "storage.key": key, "storage.secret": secret,
            "storage.client_kwargs": json.dumps({"region_name": REGION})}


def _url(tag: str) -> str:
    return f"s3://{BUCKET}/{tag}-{uuid.uuid4().hex[:12]}/stream"


def _bucket_objects(endpoint: str, url: str) -> dict[str, bytes]:
    """Every object under the stream ``url``, read straight from the server."""
    client = boto3_client(endpoint)
    prefix = url.split(f"s3://{BUCKET}/", 1)[1] + "/"
    out: dict[str, bytes] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for obj in page.get("Contents", []):
            out[obj["Key"]] = client.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
    return out


def _events_df(spark: Any, n: int, start: int = 0) -> Any:
    return spark.range(start, start + n).selectExpr(
        "id", "concat('dev-', cast(id % 11 as string)) as key",
        "timestamp_millis(1700000000000 + id * 10) as t", "repeat('x', 32) as body")


def _fill_source(url: str, options: dict[str, Any], batches: int, rows: int, start: int = 0) -> int:
    """Append ``batches`` commits of ``rows`` records through the Python API; returns the next id."""
    s = Stream.open_or_create(url, storage_options=options, config={"segments": 2})
    for b in range(batches):
        first = start + b * rows
        ids = list(range(first, first + rows))
        s.append(pa.table({"id": ids, "key": [f"dev-{i % 11}" for i in ids],
                           "t": [1_700_000_000_000 + i * 10 for i in ids]}),
                 key="key", timestamp="t", writer_id="feeder", batch_id=first)
    return start + batches * rows


@pytest.fixture(params=[
    pytest.param("moto", id="moto"),
    pytest.param("seaweedfs", id="seaweedfs", marks=pytest.mark.seaweedfs),
])
def endpoint(request: pytest.FixtureRequest) -> str:
    """Endpoint of moto and of SeaweedFS (which checks every request's signature)."""
    return request.getfixturevalue(f"{request.param}_server")


def test_no_ambient_aws_credentials() -> None:
    # the premise of every test here: workers can only reach the store through the options
    ambient = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
               "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SHARED_CREDENTIALS_FILE"}
    assert not ambient & set(os.environ)


def test_batch_write_and_read(spark: Any, endpoint: str) -> None:
    url = _url("spark-batch")
    opts = spark_storage_options(endpoint)

    def write(df: Any) -> None:
        (df.write.format("tstream").mode("append").options(**opts).option("keyColumn", "key")
         .option("timestampColumn", "t").option("segments", "3").save(url))

    write(_events_df(spark, 3000).repartition(2))  # two tasks, two worker processes' chunks
    write(_events_df(spark, 1000, start=3000))
    df = spark.read.format("tstream").options(**opts).load(url)
    assert df.columns[-4:] == list(SYSTEM)
    rows = df.select("id", "key", "body", "_segment", "_seq").collect()
    assert sorted(r["id"] for r in rows) == list(range(4000))
    assert all(r["body"] == "x" * 32 for r in rows)
    per_segment: dict[int, list[int]] = {}
    key_segment: dict[str, set[int]] = {}
    for r in rows:
        per_segment.setdefault(r["_segment"], []).append(r["_seq"])
        key_segment.setdefault(r["key"], set()).add(r["_segment"])
    assert len(per_segment) == 3
    assert all(sorted(seqs) == list(range(len(seqs))) for seqs in per_segment.values())
    assert all(len(segs) == 1 for segs in key_segment.values())
    # filters on system columns still read the right slice from the store
    assert df.filter("_timestamp >= timestamp_millis(1700000030000)").count() == 1000

    # the Python API sees exactly what Spark wrote, and the chunks are on the server
    s = Stream.open(url, storage_options=s3_storage_options(endpoint))
    assert s.info().rows == 4000 and s.state.pos == 2
    # each Spark task writes one shared file holding its slices of every segment (wide writes)
    files = [k for k in _bucket_objects(endpoint, url) if k.endswith(".parquet")]
    named = {c.path for c in s.plan(0, s.state.max_tso)}
    assert s.state.chunks >= 3 and 1 <= len(files) == len(named) <= s.state.chunks
    assert all(any(k.endswith(path) for k in files) for path in named)


def test_streaming_s3_to_s3_available_now(spark: Any, endpoint: str, tmp_path: Path) -> None:
    src, dst = _url("spark-src"), _url("spark-dst")
    opts = spark_storage_options(endpoint)
    py_opts = s3_storage_options(endpoint)
    ckpt = str(tmp_path / "ckpt")
    nxt = _fill_source(src, py_opts, batches=3, rows=200)

    def run() -> Any:
        q = (spark.readStream.format("tstream").options(**opts).option("maxFilesPerTrigger", "2")
             .load(src).drop(*SYSTEM)
             .writeStream.format("tstream").options(**opts).option("checkpointLocation", ckpt)
             .option("keyColumn", "key").option("timestampColumn", "t")
             .trigger(availableNow=True).start(dst))
        q.awaitTermination()
        assert q.exception() is None
        return q

    first = run()
    out = Stream.open(dst, storage_options=py_opts)
    assert sorted(out.read()["id"].to_pylist()) == list(range(nxt))
    # six source chunks, two per trigger: the limit made several micro-batches, one commit each
    batches = [p for p in first.recentProgress if p["numInputRows"] > 0]
    assert len(batches) == 3 and out.state.pos == 3  # entry 0 created the stream
    writers = out.info().writers
    assert len(writers) == 1 and next(iter(writers)).startswith("query-")

    # more input, same checkpoint: only the new records are copied, each exactly once
    end = _fill_source(src, py_opts, batches=2, rows=150, start=nxt)
    second = run()
    assert sum(p["numInputRows"] for p in second.recentProgress) == end - nxt
    ids = Stream.open(dst, storage_options=py_opts).read()["id"].to_pylist()
    assert sorted(ids) == list(range(end))


# -- credentials never leak through Spark --------------------------------------------------------
KEY_ID = "AKIA-TSTREAM-SPARK-KEY"


def _explain(df: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(mode="extended")
    return out.getvalue()


def test_credentials_never_leak_through_spark(spark: Any, moto_server: str, seaweedfs_server: str,
                                             tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    src, dst = _url("cred-src"), _url("cred-dst")
    opts = spark_storage_options(moto_server, key=KEY_ID, secret=SECRET)  # moto takes any key
    py_opts = {**s3_storage_options(moto_server), "key": KEY_ID, "secret": SECRET}
    _fill_source(src, py_opts, batches=2, rows=50)
    ckpt = tmp_path / "ckpt"
    reader = spark.readStream.format("tstream").options(**opts).load(src).drop(*SYSTEM)
    q = (reader.writeStream.format("tstream").options(**opts).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start(dst))
    q.awaitTermination()
    assert q.exception() is None
    shown = [q.lastProgress.prettyJson, json.dumps(q.status), _explain(reader)]
    batch = spark.read.format("tstream").options(**opts).load(dst)
    assert batch.count() == 100
    shown.append(_explain(batch))
    shown.append(json.dumps(Stream.open(dst, storage_options=py_opts).info(), default=str))

    # the checkpoint: offsets, commits, metadata, source logs
    files = [p for p in ckpt.rglob("*") if p.is_file()]
    assert any(p.parent.name == "offsets" for p in files)
    shown += [p.read_text(errors="replace") for p in files]
    # everything both streams put in the bucket, metadata and chunks
    blobs = {**_bucket_objects(moto_server, src), **_bucket_objects(moto_server, dst)}
    assert any("_tstream/head.json" in k for k in blobs)
    assert not [k for k, b in blobs.items() if SECRET.encode() in b or KEY_ID.encode() in b]

    # failed Spark operations: a 403 from a server that checks signatures, a dead endpoint,
    # a missing bucket; each error is what the user sees in the notebook
    dead = f"http://127.0.0.1:{free_ports(1)[0]}"
    denied_url = _url("cred-denied")
    _fill_source(denied_url, s3_storage_options(seaweedfs_server), batches=1, rows=5)
    failing = [
        lambda: spark.read.format("tstream").options(
            **spark_storage_options(seaweedfs_server, secret=SECRET)).load(denied_url).count(),
        lambda: spark.read.format("tstream").options(
            **spark_storage_options(dead, key=KEY_ID, secret=SECRET)).load(src).count(),
        lambda: spark.range(3).write.format("tstream").mode("append").options(**opts)
        .save(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/s"),
    ]
    messages = []
    for attempt in failing:
        with pytest.raises(Exception) as info:  # Spark wraps our error in its own exception types
            attempt()
        messages.append(str(info.value))
    assert "StorageError" in messages[0] and "signature" in messages[0].lower()
    assert "StorageError" in messages[1] and "no such bucket" in messages[2]
    shown += messages

    for text in shown:
        assert SECRET not in text, text[:3000]
    # Spark's own plan strings show option values unless spark.redaction.regex matches the key;
    # its default catches storage.secret but not storage.key (the access key id)
    assert "storage.secret=*********(redacted)" in shown[2]
    for text in shown[:2] + shown[4:]:
        assert KEY_ID not in text, text[:3000]
    # driver-side Python logs (botocore DEBUG included) never carry the secret; py4j's DEBUG
    # log echoes every call the user makes into the JVM, .option("storage.secret", ...) too,
    # which is the caller's own text and beyond any data source's reach
    assert any(r.name.startswith("botocore") for r in caplog.records)
    assert not [r.getMessage() for r in caplog.records
                if SECRET in r.getMessage() and not r.name.startswith("py4j")]
