"""``spark.read.format("tstream").option("metadata", KIND)``: every metadata table of a stream with
appends from two writers, a split, a merge, a compaction, a truncation and a consumer group that
read part of it, equal row for row to ``Stream.metadata(KIND)``; a bad kind, or the option on
``readStream``, fails at query start naming the valid kinds."""

from __future__ import annotations

from typing import Any

import pytest
from metadata_history import Built, build
from pyspark_tstream import keys as K

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(f"file://{tmp_path_factory.mktemp('meta-spark')}/s")


def _rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Timestamps as epoch ms (Spark hands naive local datetimes, Arrow aware UTC ones)."""
    out = []
    for r in rows:
        out.append({k: (round(v.timestamp() * 1000) if hasattr(v, "timestamp") else v) for k, v in r.items()})
    return out


@pytest.mark.parametrize("kind", K.METADATA_KINDS)
def test_each_table_reads_as_the_python_api_builds_it(spark: Any, built: Built, kind: str) -> None:
    # the option key in another case: Spark lower-cases it
    df = spark.read.format("tstream").option("METADATA", kind).load(built.stream.url)
    expected = built.stream.metadata(kind)
    assert df.columns == expected.column_names
    got = _plain(_rows(df))
    want = _plain(expected.to_pylist())
    if kind == "groups":  # idle time moves on between the two reads
        got = [{**r, "idle_ms": None} for r in got]
        want = [{**r, "idle_ms": None} for r in want]
    assert got == want


def test_history_through_spark_is_one_row_per_commit(spark: Any, built: Built) -> None:
    df = spark.read.format("tstream").option("metadata", "history").load(built.stream.url)
    rows = df.orderBy("position").collect()
    assert [(r.operation, r.writer_id) for r in rows] == [("create", None), *built.ops]
    assert dict(df.dtypes)["committed_at"] == "timestamp" and dict(df.dtypes)["position"] == "bigint"
    ranged = (spark.read.format("tstream").option("metadata", "history").option("startingPosition", "2")
              .option("endingPosition", "4").load(built.stream.url))
    assert [r.position for r in ranged.collect()] == [2, 3, 4]


def test_segments_and_groups_through_spark(spark: Any, built: Built) -> None:
    seg = spark.read.format("tstream").option("metadata", "segments").load(built.stream.url)
    children = seg.where(seg.segment.isin(*built.split.created)).collect()
    assert [r.epoch_start for r in children] == [built.split.epoch] * 2
    assert dict(seg.dtypes)["key_lo"] == "double" and dict(seg.dtypes)["epoch_end"] == "bigint"
    groups = spark.read.format("tstream").option("metadata", "groups").load(built.stream.url)
    own = groups.where(groups.consumer.isNull()).collect()[0]
    assert own.lag_records == built.stream.read().num_rows - built.delivered
    ep = spark.read.format("tstream").option("metadata", "epochs").load(built.stream.url)
    assert dict(ep.dtypes)["segments"] == "array<bigint>"


def test_a_bad_kind_fails_naming_the_valid_ones(spark: Any, built: Built) -> None:
    with pytest.raises(Exception, match="metadata='snapshots' is not one of history, segments, epochs, groups, files"):
        spark.read.format("tstream").option("metadata", "snapshots").load(built.stream.url).collect()


def test_metadata_on_read_stream_fails_at_start(spark: Any, built: Built, tmp_path: Any) -> None:
    df = spark.readStream.format("tstream").option("metadata", "history").load(built.stream.url)
    with pytest.raises(Exception, match="is a batch read: use spark.read.*valid kinds: history, segments"):
        q = df.writeStream.format("memory").queryName("meta_stream").start()
        try:
            q.processAllAvailable()
        finally:
            q.stop()
