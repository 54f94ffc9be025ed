"""The Spark source: seeks, tick-aligned micro-batches, read limits, pushdown, bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.spark.compat import has
from pyspark_tstream.timestamps import iso, now_ms

pytestmark = pytest.mark.spark


def _fill(url: str, batches: int = 5, rows: int = 100, start_ms: int = 1_700_000_000_000) -> Stream:
    s = Stream.create(url, segments=2)
    for b in range(batches):
        base = start_ms + b * rows * 10
        s.append(pa.table({"id": list(range(b * rows, (b + 1) * rows)),
                           "k": [f"k{i % 4}" for i in range(rows)],
                           "t": [base + i * 10 for i in range(rows)]}), key="k", timestamp="t")
    return s


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


@pytest.mark.slow
def test_batch_seeks(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    _fill(url)  # ids 0..499 at t = 1.7e12 + id * 10
    def read() -> Any:
        return spark.read.format("tstream")

    assert _ids(read().option("startingTimestamp", str(1_700_000_000_000 + 4_000)).load(url)) == list(range(400, 500))
    assert _ids(read().option("startingTimestamp", iso(1_700_000_000_000 + 4_990)).load(url)) == [499]
    assert _ids(read().option("startingTail", "7").load(url)) == list(range(493, 500))
    bounded = (spark.read.format("tstream").option("startingTimestamp", str(1_700_000_000_000 + 100))
               .option("endingTimestamp", str(1_700_000_000_000 + 200)).load(url))
    assert _ids(bounded) == list(range(10, 20))
    assert spark.read.format("tstream").option("startingAgo", "1h").load(url).count() == 0
    recent = Stream.create(f"file://{tmp_path}/recent", segments=1)
    recent.append([{"id": 1}])
    assert _ids(spark.read.format("tstream").option("startingAgo", "1h").load(f"file://{tmp_path}/recent")) == [1]


def test_stream_starting_latest_then_new_data(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = _fill(url, batches=2)
    ckpt = str(tmp_path / "ck")

    def run() -> list[int]:
        got: list[int] = []
        q = (spark.readStream.format("tstream").option("startingOffsets", "latest").load(url)
             .writeStream.foreachBatch(lambda df, _: got.extend(_ids(df)))
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        q.awaitTermination()
        return sorted(got)

    assert run() == []
    s.append(pa.table({"id": [1000, 1001], "k": ["a", "b"], "t": [1_800_000_000_000, 1_800_000_000_001]}),
             key="k", timestamp="t")
    assert run() == [1000, 1001]


def _offset(v: Any) -> Any:
    """A progress report's offset: JSON, or on PySpark 4.0/4.1 a dict's repr or "None"."""
    if not isinstance(v, str):
        return v
    if v == "None":
        return None
    try:
        return json.loads(v)
    except json.JSONDecodeError:
        import ast

        return ast.literal_eval(v)


def _progress_offsets(q: Any) -> list[tuple[int, int, int]]:
    out = []
    for p in q.recentProgress:
        src = p["sources"][0] if isinstance(p, dict) else json.loads(p.json)["sources"][0]
        if src["numInputRows"] or src["startOffset"] != src["endOffset"]:
            start, end = _offset(src["startOffset"]), _offset(src["endOffset"])
            out.append((start["tso"] if start else -1, end["tso"], src["numInputRows"]))
    return out


def _drain(spark: Any, url: str, option: str, value: str, checkpoint: Path) -> tuple[list[int], list[int]]:
    """Ids read and micro-batch sizes of a ``Trigger.AvailableNow`` query with one read-limit option."""
    got: list[int] = []
    q = (spark.readStream.format("tstream").option(option, value).load(url).writeStream
         .foreachBatch(lambda df, _: got.extend(_ids(df)))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination()
    return got, [n for _, _, n in _progress_offsets(q)]


@pytest.mark.slow  # ~40 s; test_a_run_emits_every_window_its_data_closes pins tick-aligned windows by default
def test_tick_aligned_batches_with_skewed_writers(spark: Any, tmp_path: Path) -> None:
    """Writers with skewed, overlapping clocks; a zero-delay watermark drops nothing."""
    from pyspark.sql import functions as F

    url = f"file://{tmp_path}/s"
    Stream.create(url, segments=3, timestamping_uncapped=True)
    skews = {"east": -3_000, "west": 0, "north": 1_500}
    producers = {w: Stream.open(url).writer(w) for w in skews}
    rng = random.Random(11)
    seen: list[dict[str, Any]] = []
    ck_batches, ck_windows = str(tmp_path / "ck1"), str(tmp_path / "ck2")

    def collect(df: Any, batch_id: int) -> None:
        rows = df.agg(F.min("_tso").alias("lo"), F.max("_tso").alias("hi"), F.count("*").alias("n")).collect()[0]
        if rows["n"]:
            seen.append({"batch": batch_id, "lo": rows["lo"], "hi": rows["hi"], "n": rows["n"]})

    ends: list[int] = []
    emitted: list[Any] = []

    def count_windows() -> None:
        q2 = (spark.readStream.format("tstream").load(url).withWatermark("_timestamp", "0 seconds")
              .groupBy(F.window("_timestamp", "1 second")).count()
              .writeStream.foreachBatch(lambda df, _: emitted.extend(df.collect())).outputMode("append")
              .option("checkpointLocation", ck_windows).trigger(availableNow=True).start())
        q2.awaitTermination()

    for round_ in range(5):
        for w in rng.sample(list(skews), k=3):
            base = now_ms() + skews[w]
            times = sorted(base + rng.randint(-2_000, 300) for _ in range(40))
            producers[w].append(pa.table({"w": [w] * 40, "dev": [f"{w}-{i % 3}" for i in range(40)], "t": times}),
                                key="dev", timestamp="t", batch_id=round_)
        if round_ == 4:
            for p in producers.values():
                p.close()
        q1 = (spark.readStream.format("tstream").option("maxRecordsPerTrigger", "70").load(url).writeStream
              .foreachBatch(collect).option("checkpointLocation", ck_batches).trigger(availableNow=True).start())
        q1.awaitTermination()
        ends += [end for _, end, _ in _progress_offsets(q1)]
        count_windows()
    # every batch sits entirely above every earlier batch's end offset
    for i, b in enumerate(seen):
        assert all(b["lo"] > e for e in ends[:i]), f"batch {b} holds records at or below an earlier end"
    assert sum(b["n"] for b in seen) == 5 * 3 * 40
    assert all(b["n"] <= 70 for b in seen) or not has("read_limits")  # < 4.2: no limits (README)
    # a streaming windowed count with a zero-delay watermark equals the batch answer
    batch = {r["window"]["start"]: r["count"] for r in spark.read.format("tstream").load(url)
             .groupBy(F.window("_timestamp", "1 second")).count().collect()}
    streamed = {r["window"]["start"]: r["count"] for r in emitted}
    assert len(streamed) == len(emitted), "a window was emitted twice"
    assert streamed, "no window was closed"
    for start, count in streamed.items():
        assert batch[start] == count, f"window {start}: streamed {count}, batch {batch[start]}"
    last = max(batch)
    if has("available_now"):
        assert set(batch) - set(streamed) <= {last}, "a closed window was dropped"
    else:  # PySpark < 4.2: AvailableNow is one batch with no trailing no-data batch, so windows its
        # watermark closed stay in Spark's state until a run with new data (README, "PySpark versions")
        assert all(w > max(streamed) for w in set(batch) - set(streamed)), "a closed window was dropped"


@pytest.mark.parametrize("how", ["availableNow", "processAllAvailable"])
def test_a_run_emits_every_window_its_data_closes(spark: Any, tmp_path: Path, how: str) -> None:
    """A zero-delay windowed count over 10 s of records, one run: the 9 windows the last record's
    watermark closes come out in that run. With ``Trigger.AvailableNow`` only where PySpark has
    ``SupportsTriggerAvailableNow`` (4.2+: a trailing no-data batch emits them; before, Spark runs
    one batch and they wait for a later run with data); the recipe the README gives for 4.0/4.1
    (``processingTime=0``, ``processAllAvailable()``, ``stop()``) on every version."""
    from pyspark.sql import functions as F

    url = f"file://{tmp_path}/s"
    t0 = 1_700_000_000_000
    Stream.create(url, segments=2).append(
        pa.table({"v": list(range(100)), "t": [t0 + i * 100 for i in range(100)]}), timestamp="t")
    emitted: list[Any] = []
    w = (spark.readStream.format("tstream").load(url).withWatermark("_timestamp", "0 seconds")
         .groupBy(F.window("_timestamp", "1 second")).count()
         .writeStream.foreachBatch(lambda df, _: emitted.extend(df.collect())).outputMode("append")
         .option("checkpointLocation", str(tmp_path / "ck")))
    if how == "availableNow":
        q = w.trigger(availableNow=True).start()
        q.awaitTermination()
    else:
        q = w.trigger(processingTime="0 seconds").start()
        q.processAllAvailable()
        q.stop()
    assert q.exception() is None
    counts = sorted(r["count"] for r in emitted)
    if how == "availableNow" and not has("available_now"):
        assert counts == [], counts  # README, "PySpark versions": they wait for the next run with data
    else:
        assert counts == [10] * 9, counts  # the 10th window is still open: its end is above the watermark


def test_read_limits_bound_batches_and_available_now_drains(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=1)
    for b in range(10):
        s.append(pa.table({"id": list(range(b * 100, b * 100 + 100))}))
    for option, value, bound in (("maxRecordsPerTrigger", "250", lambda n, f: n <= 250),
                                 ("maxFilesPerTrigger", "3", lambda n, f: n <= 300)):
        got, sizes = _drain(spark, url, option, value, tmp_path / option)
        if has("read_limits"):
            assert sum(sizes) == 1000 and len(sizes) >= 4, sizes
            assert all(bound(n, None) for n in sizes), sizes
        else:  # PySpark < 4.2, the documented fallback: no limits, AvailableNow drains in one batch
            assert sizes == [1000], sizes
        assert sorted(got) == list(range(1000))


def test_filter_pushdown_skips_chunks(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = _fill(url)  # five chunks per segment, one per 1-second range
    first_chunks = [c.path for c in s.journal.read_entry(1).chunks]
    for path in first_chunks:  # break the oldest data: only a read that prunes it can succeed
        s.store.write(path, b"garbage")
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = spark.read.format("tstream").load(url).filter("_timestamp >= timestamp_millis(1700000003000)")
        if not has("filter_pushdown"):  # PySpark 4.0, the documented fallback: every chunk is read
            with pytest.raises(Exception, match=first_chunks[0]):
                df.count()
            return
        assert _ids(df) == list(range(300, 500))
        with pytest.raises(Exception, match=first_chunks[0]):
            spark.read.format("tstream").load(url).count()
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


def test_bad_source_options_and_corrupt_chunk(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = _fill(url, batches=1)
    with pytest.raises(Exception, match="(?i)startingtimestmp.*did you mean startingTimestamp.*Valid read options"):
        spark.read.format("tstream").option("startingTimestmp", "0").load(url).count()
    with pytest.raises(Exception, match="(?i)maxrecordspertrigger"):
        spark.readStream.format("tstream").option("maxRecordsPerTrigger", "-3").load(url)
    with pytest.raises(Exception, match="no stream at"):
        spark.read.format("tstream").load(f"file://{tmp_path}/missing").count()
    path = s.journal.read_entry(1).chunks[0].path
    s.store.write(path, b"not parquet")
    with pytest.raises(Exception, match=path):
        spark.read.format("tstream").load(url).count()


@pytest.mark.slow
def test_fail_on_data_loss_and_consumer_group(spark: Any, tmp_path: Path) -> None:
    from pyspark_tstream.api.groups import Group

    url = f"file://{tmp_path}/s"
    s = _fill(url, batches=2)
    ckpt = str(tmp_path / "ck")

    def run(fail: bool) -> list[int]:
        got: list[int] = []
        q = (spark.readStream.format("tstream").option("failOnDataLoss", str(fail).lower())
             .option("consumerGroup", "audit").option("maxRecordsPerTrigger", "100").load(url)
             .writeStream.foreachBatch(lambda df, _: got.extend(_ids(df)))
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        q.awaitTermination()
        return sorted(got)

    assert run(True) == list(range(200))
    # Spark commits a batch's end when it plans the next one: the first batch's end is recorded
    # (PySpark < 4.2 reads it all in one batch: nothing planned after it yet)
    first_chunk_end = max(c.hi for c in s.journal.read_entry(1).chunks)
    if has("read_limits"):
        assert Group.positions(s)["audit"] >= first_chunk_end
    for b in (2, 3):  # more data arrives, then retention removes part of it before the query reads
        s.append(pa.table({"id": list(range(b * 100, b * 100 + 100)), "k": ["k0"] * 100,
                           "t": [1_700_000_010_000 + b * 1_000 + i for i in range(100)]}), key="k", timestamp="t")
    s.truncate(1_700_000_013_000)
    with pytest.raises(Exception, match=r"removed by retention or truncation.*segment \d+ _seq \d+\.\.\d+"):
        run(True)
    assert run(False) == list(range(300, 400))


def test_stream_follows_successors_across_scales_and_starting_cut(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2)
    rows: list[tuple[str, int, int]] = []
    ckpt = str(tmp_path / "ck")

    def append(batch: int) -> None:
        s.append(pa.table({"k": [f"k{i % 6}" for i in range(60)], "batch": [batch] * 60, "i": list(range(60))}),
                 key="k")

    def run() -> None:
        q = (spark.readStream.format("tstream").load(url).writeStream
             .foreachBatch(lambda df, _: rows.extend((r["k"], r["batch"], r["i"]) for r in
                                                     df.orderBy("_tso").collect()))
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        q.awaitTermination()

    append(0)
    run()
    s.scale(split=s.refresh().segments[0].id, parts=3)
    append(1)
    s.scale(merge=[g.id for g in s.refresh().segments[:2]])
    append(2)
    run()
    assert len(rows) == 180
    for k in {r[0] for r in rows}:
        seq = [(b, i) for kk, b, i in rows if kk == k]
        assert seq == sorted(seq), f"key {k} out of order across scales"
    # a JSON stream cut: start each listed segment at a _seq
    segs = {g.id: g for g in s.refresh().segments}
    target = next(g for g in segs.values() if g.rows > 3)
    cut = json.dumps({str(target.id): 3})
    got = spark.read.format("tstream").option("startingOffsets", cut).load(url)
    mine = got.filter(f"_segment = {target.id}").orderBy("_seq").collect()
    assert [r["_seq"] for r in mine] == list(range(3, target.next_seq))
    # other segments start where the cut starts in time (a Pravega cut: positions at one time)
    bound = s.cut_bound({target.id: 3})
    everything = s.read()
    expect = sum(1 for seg, seq, tso in zip(everything["_segment"].to_pylist(), everything["_seq"].to_pylist(),
                                            everything["_tso"].to_pylist())
                 if (seg == target.id and seq >= 3) or (seg != target.id and tso > bound))
    assert got.count() == expect


@pytest.mark.slow  # test_read_limits_bound_batches_and_available_now_drains pins the limits by default
def test_read_limits_hold_on_overlapping_chunks(spark: Any, tmp_path: Path) -> None:
    """``spark.range(1000).repartition(3)`` with a client timestamp column writes three
    chunks overlapping in time; record and byte limits bound every micro-batch to the limit plus
    one millisecond's records, and the batches add up to exactly the data (the file limit is
    tested on sequential chunks above: on chunks that overlap everywhere it allows one ms)."""
    from pyspark.sql import functions as F

    url = f"file://{tmp_path}/s"
    t0 = now_ms() - 60_000
    (spark.range(1000).repartition(3).withColumn("t", F.col("id") + F.lit(t0))
     .write.format("tstream").option("timestampColumn", "t").mode("append").save(url))
    s = Stream.open(url)
    data = s.read()
    per_ms = max(pa.table({"m": data["_timestamp"]}).group_by("m").aggregate([("m", "count")])["m_count"].to_pylist())
    chunks = s.journal.read_entry(s.state.pos).chunks
    assert any(a.lo < b.hi and b.lo < a.hi for a in chunks for b in chunks if a != b)  # chunks overlap
    per_row = sum(c.bytes for c in chunks) / sum(c.rows for c in chunks)
    for option, value, fits in (("maxRecordsPerTrigger", "100", lambda n: n <= 100 + per_ms),
                                ("maxBytesPerTrigger", str(int(per_row * 100)), lambda n: n <= 100 + per_ms)):
        got, sizes = _drain(spark, url, option, value, tmp_path / option)
        assert sorted(got) == list(range(1000)) and sum(sizes) == 1000, (option, sizes)
        if not has("read_limits"):  # PySpark < 4.2, the documented fallback: one batch to the tick
            assert sizes == [1000], (option, sizes)
            continue
        assert all(fits(n) for n in sizes), (option, per_ms, sizes)
        assert len(sizes) >= 8, (option, sizes)  # the limit cut inside the chunks
