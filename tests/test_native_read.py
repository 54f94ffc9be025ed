"""The native history read (``read_native``): exactly the rows of ``spark.read.format("tstream")``.

Every case reads one stream both ways and compares schemas and all rows (user and system
columns): seeks, bounded reads, stream cuts, floors raised by skewed writers, a tick held back
by a live writer, truncation, schema growth, and chunks that are views of part of a file
(macro-chunks of overlapping lanes, cut inside). Both ways a row finds its chunk's numbers are
run: lookups in literal maps (few files) and the broadcast join (many files).
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import T0
from pyspark_tstream import read_native
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.datasource import native
from pyspark_tstream.errors import UnsupportedOperationError
from pyspark_tstream.journal.entries import Chunk
from pyspark_tstream.timestamps import iso

pytestmark = pytest.mark.spark


def _sorted_rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def _same(spark: Any, url: str, **options: Any) -> list[tuple[Any, ...]]:
    """Both reads of ``url`` with ``options``; assert they agree, return the rows."""
    python = spark.read.format("tstream").options(**_text(options)).load(url)
    native = read_native(spark, url, **options)
    assert native.schema == python.schema
    want = _sorted_rows(python)
    assert _sorted_rows(native) == want
    return want


def _text(options: dict[str, Any]) -> dict[str, str]:
    return {k: json.dumps(v) if isinstance(v, dict) else str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in options.items()}


def _same_as_core(spark: Any, url: str, **options: Any) -> list[tuple[Any, ...]]:
    """Like :func:`_same`, against the core read (``reading.read_task``) of the same plan in this
    process: a monkeypatched ``Stream.plan`` does not reach the data source's Python workers."""
    from pyspark_tstream.conf.options import SourceOptions
    from pyspark_tstream.datasource.batch_reader import batch_range
    from pyspark_tstream.read.reading import read_task
    from pyspark_tstream.read.tasks import plan_tasks

    s = Stream.open(url)
    lo, hi, start_cut, end_cut = batch_range(SourceOptions.from_options({**_text(options), "path": url}), s)
    want = []
    for task in plan_tasks(s.plan(lo, hi), lo, hi, parallelism=1, start_cut=start_cut or None,
                           end_cut=end_cut or None):
        for batch in read_task(s.store, s.schema, task):
            want += [tuple(r[n] for n in batch.schema.names if n != "_timestamp") for r in batch.to_pylist()]
    native = read_native(spark, url, **options).drop("_timestamp")
    assert _sorted_rows(native) == sorted(want)
    return sorted(want)


def _skewed(url: str) -> Stream:
    """Three writers whose clocks disagree, overlapping in time: floors raise many records."""
    s = Stream.create(url, segments=3)
    rng = random.Random(5)
    writers = [Stream.open(url).writer(w) for w in ("a", "b", "c")]
    for batch in range(4):
        for n, w in enumerate(writers):
            # each writer's batches overlap its previous one: floors raise records above their time
            times = sorted(T0 + batch * 1_000 - n * 700 + rng.randint(0, 1_500) for _ in range(50))
            w.append(pa.table({"id": [batch * 1000 + n * 100 + i for i in range(50)],
                               "k": [f"k{i % 5}" for i in range(50)], "t": times,
                               "v": [rng.random() for _ in range(50)]}),
                     key="k", timestamp="t", batch_id=batch)
    for w in writers:
        w.close()
    return s


# the join (many files) runs in the slow set; the lookups (few files) by default
@pytest.fixture(params=["lookup", pytest.param("join", marks=pytest.mark.slow)])
def branch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with system columns from literal lookups (few files) or from the join (many)."""
    if request.param == "join":
        monkeypatch.setattr(native, "LOOKUP_FILES", 0)
    return str(request.param)


def test_native_read_equals_python_read(spark: Any, tmp_path: Path, branch: str) -> None:
    url = f"file://{tmp_path}/s"
    s = _skewed(url)
    everything = _same(spark, url)
    assert len(everything) == 4 * 3 * 50
    # columns: id, k, t, v, _timestamp, _tso, _segment, _seq; floors raised some records
    assert any(r[5] >> 18 > r[2] for r in everything)
    _same(spark, url, startingTimestamp=T0 + 1_200, endingTimestamp=iso(T0 + 2_500))
    _same(spark, url, startingTail=37)
    segs = sorted({r[-2] for r in everything})
    cut = {str(seg): 7 for seg in segs[:2]}
    _same(spark, url, startingOffsets=cut)
    _same(spark, url, endingOffsets={str(segs[0]): 20})
    assert len(_same(spark, url, startingOffsets={str(segs[0]): 10},
                     endingOffsets={str(segs[0]): 12, str(segs[1]): 0})) > 2
    assert _same(spark, url, startingOffsets="latest") == []  # nothing after the tick
    assert s.refresh().rows == 600


def _scan(df: Any) -> tuple[list[str], str]:
    """The columns Spark's Parquet scan reads for ``df``, and its physical plan."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    read_schema = plan.split("ReadSchema: struct<", 1)[1].split(">", 1)[0]
    return [f.split(":")[0] for f in read_schema.split(",")], plan


def test_projection_is_pruned_and_vectorized(spark: Any, tmp_path: Path, branch: str) -> None:
    url = f"file://{tmp_path}/s"
    _skewed(url)
    cols, plan = _scan(read_native(spark, url).select("id", "_seq"))
    assert cols == ["id", "_tmp_metadata_row_index"], plan  # a full read of whole chunks filters nothing
    assert "Batched: true" in plan, plan  # Spark's vectorized Parquet reader
    # a file of several numberings (an append's slices of several segments) takes the join too
    sliced = any(c.shared for c in Stream.open(url).plan(0, 1 << 62))
    assert sliced and ("BroadcastHashJoin" in plan) == (branch == "join" or sliced), plan
    # a query of user columns only pays for no system column: no lookup (the join that cuts a
    # file of several slices into its chunks' rows stays)
    cols, plan = _scan(read_native(spark, url).select("id"))
    assert ("Join" not in plan or sliced) and "element_at" not in plan, plan
    # a bounded read filters by time: the raw timestamps are read too
    cols, plan = _scan(read_native(spark, url, startingTimestamp=T0 + 1_200).select("id"))
    assert cols[:2] == ["id", "__tstream_raw_tso"] and "_tmp_metadata_row_index" in cols, plan
    assert read_native(spark, url).select("id", "_seq").count() == 600


def test_compacted_views_and_cuts_inside_them(spark: Any, tmp_path: Path, branch: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Macro-chunks of overlapping writer lanes (unsorted), read whole, by time and cut inside."""
    url = f"file://{tmp_path}/s"
    _skewed(url)
    s = Stream.open(url)
    before = _same(spark, url)
    s.compact()
    s.vacuum(grace_ms=0)
    st = s.refresh()
    whole = s.plan(st.head_tso, st.tick)
    assert whole and all(c.floor == 0 for c in whole) and not all(c.sorted for c in whole)
    assert _same(spark, url) == before
    _same(spark, url, startingTimestamp=T0 + 1_200, endingTimestamp=iso(T0 + 2_500))
    segs = sorted({r[-2] for r in before})
    cuts = {"startingOffsets": {str(segs[0]): 13, str(segs[1]): 40}, "endingOffsets": {str(segs[0]): 71}}
    _same(spark, url, **cuts)
    _same(spark, url, startingTail=37)
    # a plan of the middle journal positions names views of part of each macro-chunk
    planned = Stream.plan
    monkeypatch.setattr(Stream, "plan", lambda self, lo, hi, **kw: planned(self, lo, hi, first_pos=4, last_pos=9))
    views = Stream.open(url).plan(st.head_tso, st.tick)
    assert any(c.offset > 0 for c in views), views
    assert 0 < len(_same_as_core(spark, url)) < len(before)
    assert _same_as_core(spark, url, **cuts)
    assert _same_as_core(spark, url, startingTimestamp=T0 + 1_200, endingTimestamp=iso(T0 + 2_500))


def test_delta_encoded_time_columns_read_alike(spark: Any, tmp_path: Path) -> None:
    """Timestamp, date and counter columns are DELTA_BINARY_PACKED in chunks and macro-chunks
    (``chunkfile/encoding.py``); Spark's vectorized reader returns the rows the Python path does."""
    import numpy as np
    import pyarrow.parquet as pq

    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2, compaction="off")
    for b in range(6):
        ms = T0 + b * 1_000 + np.arange(400)
        s.append(pa.table({"ts": pa.array(ms * 1000, pa.timestamp("us", tz="UTC")),
                           "day": pa.array((ms // 86_400_000).astype(np.int32), pa.date32()),
                           "n": pa.array(b * 400 + np.arange(400), pa.int64()),
                           "k": [f"k{i % 3}" for i in range(400)]}), key="k", timestamp="ts")

    def encodings() -> set[str]:
        st = s.refresh()
        return {e for c in s.plan(st.head_tso, st.tick)
                for e in pq.ParquetFile(tmp_path / "s" / c.path).metadata.row_group(0).column(0).encodings}

    assert "DELTA_BINARY_PACKED" in encodings()
    before = _same(spark, url)
    assert len(before) == 2_400
    _same(spark, url, startingTimestamp=T0 + 1_500, endingTimestamp=iso(T0 + 4_200))
    s.compact()
    s.vacuum(grace_ms=0)
    assert "DELTA_BINARY_PACKED" in encodings()
    assert _same(spark, url) == before


def test_tick_held_by_a_live_writer_bounds_both_reads(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2, writers=["slow", "fast"])
    fast = Stream.open(url).writer("fast")
    fast.append(pa.table({"id": list(range(30)), "t": [T0 + i for i in range(30)]}), timestamp="t", batch_id=0)
    assert _same(spark, url) == []  # "slow" has not committed: the tick has not moved
    slow = Stream.open(url).writer("slow")
    slow.append(pa.table({"id": [100, 101], "t": [T0 + 10, T0 + 11]}), timestamp="t", batch_id=0)
    fast.append(pa.table({"id": [200], "t": [T0 + 90_000]}), timestamp="t", batch_id=1)
    ids = {r[0] for r in _same(spark, url)}
    assert {100, 101} <= ids and 200 not in ids, "records above the tick wait for it"
    assert s.refresh().tick < max(c.hi for c in s.plan(s.state.head_tso, s.state.max_tso))


def test_truncation_and_data_loss(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2)
    for b in range(4):
        s.append(pa.table({"id": list(range(b * 100, b * 100 + 100)), "k": [f"k{i % 3}" for i in range(100)],
                           "t": [T0 + b * 1_000 + i for i in range(100)]}), key="k", timestamp="t")
    s.truncate(T0 + 2_000)
    assert len(_same(spark, url)) == 200
    # a batch read starting before the truncation point starts at the new head
    assert len(_same(spark, url, startingTimestamp=T0 + 500, failOnDataLoss=True)) == 200
    cut = {str(g.id): g.first_seq + 5 for g in s.refresh().segments}
    assert len(_same(spark, url, startingOffsets=cut, failOnDataLoss=False)) == 190


def test_merged_schema_reads_nulls_for_old_chunks(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=1)
    s.append(pa.table({"id": [1, 2], "t": [T0, T0 + 1]}), timestamp="t")
    s.append(pa.table({"id": [3], "t": [T0 + 2], "extra": ["x"]}), timestamp="t", merge_schema=True)
    got = _same(spark, url)
    assert [r[2] for r in got] == [None, None, "x"]


def _one_chunk(tmp_path: Path) -> tuple[str, Any]:
    """A one-segment stream of ten records (ids 0..9) in one chunk: its URL and that chunk."""
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=1)
    s.append(pa.table({"id": list(range(10)), "t": [T0 + i for i in range(10)]}), timestamp="t")
    (chunk,) = s.plan(s.state.head_tso, s.state.tick)
    return url, chunk


@pytest.mark.parametrize("floors", ["shared", "per view"])
def test_chunk_views_of_one_file(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 floors: str) -> None:
    """A plan may name rows [offset, offset + rows) of a larger file (a macro-chunk view)."""
    url, chunk = _one_chunk(tmp_path)
    # per view: floors above the records' times, so they decide _tso (and each view needs its own)
    raise_ = (lambda n: chunk.hi - chunk.floor + n) if floors == "per view" else (lambda n: 0)

    def view(rows: int, at: int) -> Chunk:
        floor = chunk.floor + raise_(at)
        # times as a commit records them: a floor above every record decides them all (a floor
        # counts the view's own rows, as a shared file's slice has it: format v3)
        lo, hi = (floor, floor + rows - 1) if floors == "per view" else (chunk.lo, chunk.hi)
        return dataclasses.replace(chunk, rows=rows, seq=chunk.seq + at, floor=floor, offset=at, lo=lo, hi=hi)

    # two views, not adjacent, of one file: a row range each (and a floor each: the join)
    views = [view(3, 2), view(4, 6)]
    monkeypatch.setattr(Stream, "plan", lambda self, lo, hi, **kw: views)
    got = _same_as_core(spark, url)
    assert [r[0] for r in got] == [2, 3, 4, 6, 7, 8, 9]
    assert (min(r[-3] for r in got) > chunk.hi) == (floors == "per view")
    assert [r[-1] for r in got] == [2, 3, 4, 6, 7, 8, 9]  # _seq numbers the file's rows
    # adjacent views of one file share one row range
    views[1:] = [view(5, 5)]
    assert [r[0] for r in _same_as_core(spark, url)] == list(range(2, 10))


def test_stores_spark_cannot_reach_fail_clearly(spark: Any) -> None:
    with pytest.raises(UnsupportedOperationError, match="memory:// stores; use spark.read.format"):
        read_native(spark, "memory://native-test/s")
    with pytest.raises(UnsupportedOperationError, match="hadoop-aws"):
        read_native(spark, "s3://bucket/s", **{"storage.endpoint_url": "http://127.0.0.1:1"})
    # Azure and GCS: the connector, its jar and the Python read are named; no credential is shown,
    # and nothing reached the store (the check comes before the stream is opened)
    secret = "s3cr3t-VALUE-42"
    cases = [("gs://bucket/s", {"storage.token": json.dumps({
                 "type": "service_account", "client_email": "r@p.iam.gserviceaccount.com",
                 "private_key_id": "kid", "private_key": secret})},
              "GCS connector (com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem)"),
             ("abfss://box@acct.dfs.core.windows.net/s", {"storage.account_key": secret},
              "hadoop-azure connector (org.apache.hadoop.fs.azurebfs.AzureBlobFileSystem)")]
    for url, options, connector in cases:
        with pytest.raises(UnsupportedOperationError) as info:
            read_native(spark, url, **options)
        text = str(info.value)
        assert connector in text and "spark.jars" in text and "spark.read.format('tstream')" in text, text
        assert secret not in text


def test_connector_settings_reach_the_scan_but_no_plan(spark: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The credentials a connector takes go into this scan's reader options only: the rows come
    back, and neither the plan strings nor the session's configuration show them."""
    import contextlib
    import io

    from pyspark_tstream.spark.hadoop import HadoopLocation

    url, _ = _one_chunk(tmp_path)
    secret = "s3cr3t-VALUE-42"
    settings = {"fs.azure.account.key.acct.dfs.core.windows.net": secret,
                "fs.gs.auth.service.account.private.key": secret}
    monkeypatch.setattr(native, "hadoop_location",
                        lambda url, protocol, root, options: HadoopLocation("file://" + root, settings))
    df = read_native(spark, url)
    assert sorted(r.id for r in df.collect()) == list(range(10))
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        df.explain(mode="extended")
        df.explain(mode="formatted")
    qe = df._jdf.queryExecution()
    texts = [shown.getvalue(), qe.toString(), qe.executedPlan().toString(),
             spark.sparkContext._jsc.hadoopConfiguration().toString()]
    assert "FileScan parquet" in texts[0]
    for text in texts:
        assert secret not in text
    assert spark.sparkContext._jsc.hadoopConfiguration().get(next(iter(settings))) is None
    relation = qe.analyzed().collectLeaves().head().relation()  # the Parquet scan's own options
    assert relation.options().get(next(iter(settings))).get() == secret


def test_files_of_one_name_in_two_folders(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          branch: str) -> None:
    """Chunks are told apart by as much of their path as it takes (here: folder and name)."""
    import shutil

    url, chunk = _one_chunk(tmp_path)
    twin = "data/twin/" + chunk.path.rsplit("/", 1)[1]
    (tmp_path / "s" / "data" / "twin").mkdir()
    shutil.copy(tmp_path / "s" / chunk.path, tmp_path / "s" / twin)
    views = [chunk, dataclasses.replace(chunk, path=twin, seq=chunk.seq + 10)]
    monkeypatch.setattr(Stream, "plan", lambda self, lo, hi, **kw: views)
    got = _same_as_core(spark, url)
    assert sorted(r[-1] for r in got) == list(range(20))  # _seq: each file numbered as its chunk says


def _damaged(tmp_path: Path) -> tuple[str, Stream, Chunk, Chunk]:
    """A one-segment stream of six two-record chunks (no compaction): its URL, the stream, the
    chunk of one of the last two appends and an earlier one of the same rows and bytes."""
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=1, compaction="off")
    for b in range(6):
        s.append(pa.table({"id": [2 * b, 2 * b + 1], "t": [T0 + b * 1000, T0 + b * 1000 + 1]}), timestamp="t")
    chunks = sorted((c for p in range(1, s.state.pos + 1) for c in s.journal.read_entry(p).chunks),
                    key=lambda c: c.seq)
    # page CRCs are varints: chunk sizes vary by a byte, so the pair is picked, not assumed
    victim, other = next((v, o) for v in chunks[4:] for o in chunks[:4] if (o.rows, o.bytes) == (v.rows, v.bytes))
    return url, s, victim, other


def test_damaged_chunks_fail_the_read_instead_of_returning_other_records(spark: Any, tmp_path: Path) -> None:
    """Spark's Parquet scan reads whatever file is there: the native read checks each planned
    file's footer first (rows, bytes, times), as fsck does, and fails as the Python read does."""
    from pyspark_tstream.errors import CorruptChunkError

    url, s, victim, other = _damaged(tmp_path)
    before = _same(spark, url)
    saved = s.store.read(victim.path)
    s.store.write(victim.path, s.store.read(other.path))  # same rows and bytes, other records
    with pytest.raises(CorruptChunkError, match=r"holds records timed .* outside .*tstream fsck") as e:
        read_native(spark, url)
    assert e.value.path == s.store.uri(victim.path)
    s.store.write(victim.path, saved[: len(saved) // 2])  # cut short
    with pytest.raises(CorruptChunkError, match=f"{victim.path}.*tstream fsck"):
        read_native(spark, url)
    s.store.delete([victim.path])
    with pytest.raises(CorruptChunkError, match=f"{victim.path} missing.*tstream fsck"):
        read_native(spark, url)
    # a read that does not plan the damaged chunk is not stopped by it
    assert len(_sorted_rows(read_native(spark, url, endingTimestamp=iso(T0 + 3_500)))) == 8
    s.store.write(victim.path, saved)
    assert _same(spark, url) == before


def test_damaged_macro_chunk_fails_the_read(spark: Any, tmp_path: Path) -> None:
    """A macro-chunk's views name rows of a larger file: one with too few rows is refused."""
    from pyspark_tstream.errors import CorruptChunkError

    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=1)
    for b in range(4):
        s.append(pa.table({"id": list(range(b * 50, b * 50 + 50)), "t": [T0 + b * 100 + i for i in range(50)]}),
                 timestamp="t")
    s.compact()
    views = Stream.open(url).plan(s.state.head_tso, s.state.tick)
    assert {c.floor for c in views} == {0}, views  # read from the macro-chunk
    before = _same(spark, url)
    macro = views[0].path
    saved = s.store.read(macro)
    small = s.journal.read_entry(2).chunks[0]  # a file the compaction replaced, still there
    s.store.write(macro, s.store.read(small.path))  # a sound Parquet file of 50 of its 200 rows
    with pytest.raises(CorruptChunkError, match=f"{macro} has 50 rows, the journal says 200.*tstream fsck"):
        read_native(spark, url)
    s.store.write(macro, saved[:100])  # cut short
    with pytest.raises(CorruptChunkError, match=f"{macro}.*tstream fsck"):
        read_native(spark, url)
    s.store.write(macro, saved)
    assert _same(spark, url) == before


def test_checking_the_files_costs_one_call_per_chunk_file(spark: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The check reads each planned chunk file's footer at the size the journal recorded (one
    ranged read), a macro-chunk's size first (its views do not know it): O(what the read
    returns), never a file a bounded read does not plan."""
    from conftest import CallLog
    from pyspark_tstream.store.storage import Store

    url, s, _, _ = _damaged(tmp_path)
    log = CallLog()
    init = Store.__init__

    def observed(self: Store, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.observer = log

    def data_calls(**options: Any) -> list[tuple[str, str]]:
        log.reset()
        read_native(spark, url, **options)
        return [(op, rel) for op, rel in log.calls if not rel.startswith("_tstream/")]

    monkeypatch.setattr(Store, "__init__", observed)
    for options, files in (({}, 6), ({"endingTimestamp": iso(T0 + 1_500)}, 2)):
        data = data_calls(**options)
        assert sorted(op for op, _ in data) == ["read_range"] * files, data
        assert len({rel for _, rel in data}) == files
    monkeypatch.undo()
    s.compact()
    (macro,) = {c.path for c in Stream.open(url).plan(s.state.head_tso, s.state.tick)}
    monkeypatch.setattr(Store, "__init__", observed)
    assert sorted(data_calls()) == [("read_range", macro), ("size", macro)]


def test_row_range_slices_of_a_small_shared_file(spark: Any, tmp_path: Path) -> None:
    """An append to many segments writes one row group holding every segment's rows
    (python/write/shared.py): each chunk is a row range inside a row group it shares."""
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=16)
    for batch in range(3):
        s.append(pa.table({"k": [f"k{(batch * 7 + i) % 40}" for i in range(200)],
                           "t": [T0 + batch * 1_000 + i for i in range(200)],
                           "v": [batch * 1000 + i for i in range(200)]}), key="k", timestamp="t")
    chunks = Stream.open(url).plan(0, 1 << 62)
    assert len({c.path for c in chunks}) == 3 and all(c.shared and c.span is None for c in chunks)
    assert len(_same(spark, url)) == 600
    segs = sorted({c.seg for c in chunks})
    assert len(_same(spark, url, startingOffsets={str(segs[0]): 3, str(segs[1]): 5},
                     endingOffsets={str(segs[0]): 20, str(segs[2]): 4})) > 0
    _same(spark, url, startingTimestamp=T0 + 150, endingTimestamp=iso(T0 + 2_050))
