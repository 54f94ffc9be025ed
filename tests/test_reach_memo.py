"""The driver remembers stores that answered it, so a fresh writer process of a running query is
patient with an outage in which the store gives no answer at all (``reach_memo``)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import StorageError
from pyspark_tstream.spark import reach_memo
from pyspark_tstream.store.storage import Store
from s3servers import BUCKET, s3_storage_options
from test_s3_spark import spark_storage_options


@pytest.fixture(autouse=True)
def _memo_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "memos"
    monkeypatch.setenv(reach_memo.MEMO_DIR_ENV, str(folder))
    return folder


def _reached(url: str, options: dict[str, Any] | None = None) -> Store:
    store = Store(url, options)
    store.reached = True
    return store


def test_a_store_that_answered_is_remembered_and_others_are_not(tmp_path: Path) -> None:
    endpoint = {"endpoint_url": "http://127.0.0.1:9000", "key": "AKIAEXAMPLEKEY123", "secret": "s3cr3t-v4lue-long"}
    store = _reached("s3://bucket/a/stream", endpoint)
    assert not reach_memo.answered_before(store)
    reach_memo.remember(store)
    assert reach_memo.answered_before(Store("s3://bucket/a/stream", endpoint))
    # another endpoint (a typo) or another stream was never answered from here
    typo = {**endpoint, "endpoint_url": "http://127.0.0.1:9001"}
    assert not reach_memo.answered_before(Store("s3://bucket/a/stream", typo))
    assert not reach_memo.answered_before(Store("s3://bucket/b/stream", endpoint))
    # credentials neither name the memo nor are written into it
    assert reach_memo.answered_before(Store("s3://bucket/a/stream", {**endpoint, "secret": "another-secret-value"}))
    memo = reach_memo.memo_path(store)
    assert os.path.getsize(memo) == 0 and "s3cr3t" not in memo


def test_a_store_that_never_answered_leaves_no_memo() -> None:
    store = Store("s3://bucket/never/stream", {"endpoint_url": "http://127.0.0.1:9"})
    reach_memo.remember(store)  # not reached: nothing to remember
    assert not reach_memo.answered_before(store)
    assert not os.path.exists(reach_memo.memo_path(store))


def test_an_old_memo_is_ignored() -> None:
    store = _reached("s3://bucket/old/stream")
    reach_memo.remember(store)
    past = time.time() - reach_memo.MEMO_MAX_AGE_S - 60
    os.utime(reach_memo.memo_path(store), (past, past))
    assert not reach_memo.answered_before(store)
    reach_memo.remember(store)  # answering again refreshes it
    assert reach_memo.answered_before(store)


def test_a_memo_folder_that_cannot_be_written_only_costs_the_patience(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(reach_memo.MEMO_DIR_ENV, str(blocker / "reached"))
    store = _reached("s3://bucket/ro/stream")
    reach_memo.remember(store)  # no error
    assert not reach_memo.answered_before(store)


def _sink_options(endpoint: str, **extra: str) -> dict[str, str]:
    return {"path": f"s3://{BUCKET}/memo-sink-{uuid.uuid4().hex[:8]}/stream", **spark_storage_options(endpoint),
            **extra}


@pytest.mark.slow
@pytest.mark.s3
def test_a_streaming_writer_waits_out_a_silent_store_only_if_it_answered_before(fault_proxy: Any) -> None:
    """What PySpark does for every micro-batch: ask ``DataSource.streamWriter`` in a new process.
    The first writer reaches the store and leaves a memo; a later one, meeting a store that drops
    every connection, waits it out; a batch write, or a streaming writer of another endpoint,
    still fails after its attempts."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType
    from pyspark_tstream.datasource.source import TStreamDataSource

    schema = StructType([StructField("k", StringType()), StructField("t", LongType())])
    options = _sink_options(fault_proxy.endpoint, storeretrytimeout="20s", keycolumn="k", timestampcolumn="t")
    TStreamDataSource(options).streamWriter(schema, False)  # the first micro-batch: creates the stream
    created = Stream.open(options["path"], storage_options=s3_storage_options(fault_proxy.endpoint))
    assert created.schema is None  # the first commit that lands fixes the schema, not the writer's start

    fault_proxy.outage(30.0, "drop")
    t0 = time.monotonic()
    with pytest.raises(StorageError, match="attempts over"):
        TStreamDataSource(options).writer(schema, False)  # a batch write is one-shot: fails fast
    assert time.monotonic() - t0 < 10
    fault_proxy.outage(10.0, "drop")  # longer than the 8 attempts (2.6-5.2 s)
    t0 = time.monotonic()
    TStreamDataSource(options).streamWriter(schema, False)  # the next micro-batch waits
    assert time.monotonic() - t0 >= 9.5

    fault_proxy.outage(30.0, "drop")
    other = _sink_options(fault_proxy.endpoint.replace("127.0.0.1", "localhost"), storeretrytimeout="20s")
    t0 = time.monotonic()
    with pytest.raises(StorageError, match="attempts over"):
        TStreamDataSource(other).streamWriter(schema, False)
    assert time.monotonic() - t0 < 10
