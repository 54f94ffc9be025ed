"""``Stream.append`` and ``tstream append`` write one data file per commit, sliced by segment.

The file is the Spark sink's format-v5 shared file (python/write/shared.py): each segment's
records are a slice of it, a Parquet file of their own inside it, and the commit names each
slice. Every path that reads, merges, truncates, checks or deletes data files handles these
files as it handles the sink's; each test here fails if the slicing of an append broke one.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import CallLog
from helpers import T0, check_segments, orphans, run_cli
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.epochs.routing import key_hash, route
from pyspark_tstream.read.reading import read_table
from pyspark_tstream.store import layout

SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("val", pa.int64())])
SEGMENTS = 64


def _records(rows: int, first: int = 0, *, keys: int = 1000, t0: int = T0) -> pa.Table:
    """``rows`` records over ``keys`` keys, ``val`` numbering them in input order from ``first``."""
    return pa.table({"key": [f"k{(first + i) * 7919 % keys}" for i in range(rows)],
                     "ts": [t0 + (first + i) * 10 for i in range(rows)],
                     "val": list(range(first, first + rows))}, schema=SCHEMA)


def _data_files(s: Stream) -> set[str]:
    out = set()
    for folder in s.store.list(layout.DATA):
        out |= {layout.data_file(folder, n) for n in s.store.list(layout.data_folder(folder))}
    return out


def _per_segment(t: pa.Table) -> dict[int, list[int]]:
    """Each segment's ``val`` in ``_seq`` order."""
    out: dict[int, list[int]] = {}
    for seg in pc.unique(t["_segment"]).to_pylist():
        part = t.filter(pc.equal(t["_segment"], seg)).sort_by("_seq")
        out[seg] = part["val"].to_pylist()
    return out


def _expected(s: Stream, tables: list[pa.Table]) -> dict[int, list[int]]:
    """Each segment's ``val`` in input order, routed by the stream's own hash."""
    segs = sorted(s.refresh().segments, key=lambda g: g.lo)
    out: dict[int, list[int]] = {}
    for t in tables:
        idx = route(key_hash(t.column("key"), name="key"), [g.lo for g in segs])
        for i, v in zip(idx, t["val"].to_pylist()):
            out.setdefault(segs[int(i)].id, []).append(v)
    return out


def test_an_append_to_64_segments_writes_one_data_file(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=SEGMENTS)
    log = CallLog()
    s.store.observer = log
    ack = s.append(_records(256), key="key", timestamp="ts")
    s.store.observer = None
    written = [rel for op, rel in log.calls if op == "open_output"]
    assert len(ack.segments) > 32  # the records went to most segments...
    assert len(written) == 1, written  # ...in one data file
    chunks = Stream.open(url).plan(0, 1 << 62)
    assert {c.path for c in chunks} == set(written) and len(chunks) == len(ack.segments)
    # a small file: one row group, each slice a row range of it (no span)
    assert all(c.shared and c.span is None for c in chunks)
    assert pq.ParquetFile(io.BytesIO(s.store.read(written[0]))).metadata.num_row_groups == 1


def test_the_cli_append_writes_one_data_file_per_batch(url: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(url, schema=SCHEMA, segments=SEGMENTS)
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _records(600).to_pylist()))
    code, out, err = run_cli(capsys, "append", url, str(path), "--key", "key", "--timestamp", "ts",
                             "--batch-rows", "200")
    assert code == 0, err
    assert "appended 600 records in 3 commits" in out
    s = Stream.open(url)
    chunks = s.plan(0, 1 << 62)
    assert len(_data_files(s)) == 3 == len({c.path for c in chunks})  # one file per commit
    assert len(chunks) > 3 * 32  # each sliced by segment
    assert _per_segment(s.read()) == _expected(s, [_records(600)])


def test_each_segment_reads_exactly_its_records_in_input_order(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=SEGMENTS)
    tables = [_records(300, first=i * 300) for i in range(3)]
    with s.writer("producer") as w:
        for b, t in enumerate(tables):
            w.append(t, key="key", timestamp="ts", batch_id=b)
    # a late batch: its client times are below the lane, so the floor raises every record and
    # each segment's slice must still follow the earlier ones
    late = _records(300, first=900, t0=T0 - 1_000_000)
    s.append(late, key="key", timestamp="ts", writer_id="producer", batch_id=3)
    fresh = Stream.open(url)
    assert len(_data_files(fresh)) == 4
    got = fresh.read()
    check_segments(got)  # dense _seq, _tso increasing along each segment
    want = _expected(fresh, [*tables, late])
    assert _per_segment(got) == want
    # one segment at a time (a ranged read of its slices), and through to_reader: the same records
    chunks = fresh.plan(0, 1 << 62)
    for seg in list(want)[:5]:
        one = read_table(fresh.store, SCHEMA, [c for c in chunks if c.seg == seg], 0, 1 << 62)
        assert one["val"].to_pylist() == want[seg] and set(one["_segment"].to_pylist()) == {seg}
    streamed = fresh.to_reader(system_columns=True).read_all()
    assert _per_segment(streamed) == want
    assert not fresh.verify().problems


def test_compaction_merges_sliced_append_files_and_vacuum_deletes_them(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=8, compaction="off")
    tables = [_records(200, first=i * 200, keys=40) for i in range(6)]
    for t in tables:
        s.append(t, key="key", timestamp="ts")
    appended = _data_files(s)
    assert len(appended) == 6
    want = _expected(s, tables)
    tiered = s.compact(full=False, min_pieces=4)  # tiered: runs of 4 pieces, the oldest first
    assert tiered.macros > 0 and tiered.rows < sum(t.num_rows for t in tables)
    s.vacuum(grace_ms=0)
    fresh = Stream.open(url)
    planned = {c.path for c in fresh.plan(0, 1 << 62)}
    assert planned & appended and planned <= _data_files(fresh)  # a file a slice still needs stays
    assert _per_segment(fresh.read()) == want
    s.compact(full=True)
    fresh = Stream.open(url)
    assert not {c.path for c in fresh.plan(0, 1 << 62)} & appended  # every slice merged
    assert _per_segment(fresh.read()) == want
    s.vacuum(grace_ms=0)
    assert not appended & _data_files(s)  # the sliced files go once no live slice names them
    assert _per_segment(Stream.open(url).read()) == want
    assert not Stream.open(url).verify().problems


def test_retention_truncating_some_segments_slices_keeps_the_file(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=8)
    early = _records(200, keys=50)
    # late records of a few keys only: after the truncation only their segments keep a slice
    late = pa.table({"key": ["k3", "k5"] * 25, "ts": [T0 + 3_600_000 + i for i in range(50)],
                     "val": list(range(-50, 0))}, schema=SCHEMA)
    s.append(pa.concat_tables([early, late]), key="key", timestamp="ts")
    (path,) = _data_files(s)
    s.append(_records(10, first=10_000, t0=T0 + 7_200_000), key="key", timestamp="ts")
    s.truncate(T0 + 2_000_000)
    s.vacuum(grace_ms=0)
    s.vacuum(grace_ms=0)
    fresh = Stream.open(url)
    assert path in _data_files(fresh)  # two segments' slices still hold records
    got = fresh.read()
    assert sorted(got["val"].to_pylist()) == list(range(-50, 0)) + list(range(10_000, 10_010))
    kept = set(got.filter(pc.less(got["val"], 0))["_segment"].to_pylist())
    assert 0 < len(kept) < 8
    assert not fresh.verify().problems
    s.truncate(T0 + 7_200_000)  # past every slice of the file: it goes
    s.vacuum(grace_ms=0)
    s.vacuum(grace_ms=0)
    assert path not in _data_files(s)
    assert Stream.open(url).read()["val"].to_pylist() == list(range(10_000, 10_010))


def test_a_crash_between_the_data_file_and_the_commit_leaves_one_orphan(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=SEGMENTS)
    s.append(_records(100), key="key", timestamp="ts", writer_id="w", batch_id=0)
    before = _data_files(s)
    calls: list[tuple[str, str]] = []

    def observe(op: str, rel: str) -> None:  # crash at the first store call after the data file
        if calls and calls[-1][0] == "open_output":
            raise RuntimeError("injected crash after the data file")
        calls.append((op, rel))

    s.store.observer = observe
    with pytest.raises(RuntimeError, match="injected crash"):
        s.append(_records(256, first=100), key="key", timestamp="ts", writer_id="w", batch_id=1)
    s.store.observer = None
    written = _data_files(s) - before
    assert len(written) == 1 and orphans(s) == written  # one file, named by no commit
    assert sorted(Stream.open(url).read()["val"].to_pylist()) == list(range(100))
    s.vacuum(orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    assert _data_files(s) == before
    # the retry lands once, in one file
    ack = Stream.open(url).append(_records(256, first=100), key="key", timestamp="ts", writer_id="w", batch_id=1)
    assert not ack.duplicate
    fresh = Stream.open(url)
    assert len(_data_files(fresh) - before) == 1
    assert _per_segment(fresh.read()) == _expected(fresh, [_records(100), _records(256, first=100)])


def test_a_duplicate_found_at_commit_deletes_its_one_file(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=SEGMENTS)
    stale = Stream.open(url)  # has not seen the first commit: it writes its file before it finds out
    s.append(_records(256), key="key", timestamp="ts", writer_id="w", batch_id=0)
    files = _data_files(s)
    ack = stale.append(_records(256), key="key", timestamp="ts", writer_id="w", batch_id=0)
    assert ack.duplicate
    assert _data_files(s) == files and not orphans(s)
    assert _per_segment(Stream.open(url).read()) == _expected(s, [_records(256)])


def test_a_folded_request_keeps_its_one_sliced_file(url: str) -> None:
    from pyspark_tstream.timestamps import now_ms
    from pyspark_tstream.write.commit import CommitIntent, CommitRequest
    from pyspark_tstream.write.group import Published, new_id
    from pyspark_tstream.write.writing import write_batches

    s = Stream.create(url, schema=SCHEMA, segments=SEGMENTS)
    s.append(_records(50), key="key", timestamp="ts", writer_id="a", batch_id=0)
    b = Stream.open(url)
    table = _records(256, first=50)
    chunks = write_batches(b.appending.write_spec(SCHEMA, key="key", timestamp="ts"), [table], ordered=True)
    assert len({c.path for c in chunks}) == 1 and len(chunks) > 32
    req = CommitRequest(chunks=chunks, intent=CommitIntent(writer_id="b", batch_id=0, schema=SCHEMA), now=now_ms())
    item = Published.of(new_id(), b.state.pos, req)
    s.store.write(item.path, item.encode())
    s.appending.group.contended = 1  # lists, and folds b's request into its own entry
    s.append(_records(256, first=306), key="key", timestamp="ts", writer_id="a", batch_id=1)
    entry = s.journal.read_entry(s.state.pos)
    assert [(f.writer, f.batch) for f in entry.folds] == [("a", 1), ("b", 0)]
    mine = entry.chunks[entry.folds[0].chunks:]
    assert {c.path for c in mine} == {chunks[0].path} and len(mine) == len(chunks)
    fresh = Stream.open(url)
    # per segment: a's first batch, then the folded entry's parts in order (a's, then b's)
    assert _per_segment(fresh.read()) == _expected(fresh, [_records(50), _records(256, first=306), table])


def test_slices_of_a_segment_scaled_away_before_the_commit_are_rerouted(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=4)
    stale = Stream.open(url)
    for seg in list(s.refresh().segments):
        s.scale(split=seg.id, parts=2)
    table = _records(400, keys=100)
    stale.append(table, key="key", timestamp="ts")  # routed to the 4 sealed segments
    fresh = Stream.open(url)
    got = fresh.read()
    assert set(got["_segment"].to_pylist()) <= {g.id for g in fresh.state.segments}
    assert _per_segment(got) == _expected(fresh, [table])
    check_segments(got)
    assert not fresh.verify().problems


def test_an_append_to_one_segment_writes_a_plain_file(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=SEGMENTS)
    s.append(pa.table({"key": ["k1"] * 20, "ts": [T0 + i for i in range(20)], "val": list(range(20))},
                      schema=SCHEMA), key="key", timestamp="ts")
    (chunk,) = Stream.open(url).plan(0, 1 << 62)
    assert not chunk.shared and chunk.bytes == s.store.size(chunk.path)


def test_segments_that_fill_a_row_group_get_files_of_their_own(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The split is by size only: a segment's records that fill a row group stream into a file
    of their own (as a sink task's do), the rest share one file, and that file is split at
    ``SHARED_FILE_BYTES``."""
    from pyspark_tstream.write import shared, writing

    monkeypatch.setattr(writing, "ROW_GROUP_ROWS", 128)
    s = Stream.create(url, schema=SCHEMA, segments=8)
    # one key of many records, 40 keys of a few each
    big = pa.table({"key": ["k0"] * 600, "ts": [T0 + i for i in range(600)], "val": list(range(600))}, schema=SCHEMA)
    table = pa.concat_tables([big, _records(160, first=600, keys=40)])
    ack = s.append(table, key="key", timestamp="ts")
    chunks = Stream.open(url).plan(0, 1 << 62)
    own = [c for c in chunks if not c.shared]
    assert len(own) == 1 and own[0].rows >= 600  # k0's segment: its own file
    assert len({c.path for c in chunks if c.shared}) == 1  # every other segment: one file
    assert len(_data_files(s)) == 2 and len(ack.segments) == 8
    monkeypatch.setattr(shared, "SHARED_FILE_BYTES", 1)  # every slice fills a file: one each
    monkeypatch.setattr(shared, "ROW_RANGE_ROWS", 0)  # (a small file is written whole, never split)
    second = _records(160, first=10_000, keys=40)
    s.append(second, key="key", timestamp="ts")
    fresh = Stream.open(url)
    files = [c.path for c in fresh.plan(0, 1 << 62) if c.path not in {x.path for x in chunks}]
    assert len(files) == len(set(files)) > 1
    assert _per_segment(fresh.read()) == _expected(fresh, [table, second])
    assert not fresh.verify().problems


def test_fsck_and_repair_of_a_stream_of_sliced_appends(url: str) -> None:
    s = Stream.create(url, schema=SCHEMA, segments=16)
    for i in range(4):
        s.append(_records(128, first=i * 128), key="key", timestamp="ts")
    assert not Stream.open(url).verify().problems
    victim = Stream.open(url).plan(0, 1 << 62)[-1]
    lost = [c for c in Stream.open(url).plan(0, 1 << 62) if c.path == victim.path]
    s.store.delete([victim.path])
    report = Stream.open(url).verify()
    assert sorted(p.details["segment"] for p in report.problems) == sorted(c.seg for c in lost)
    assert Counter(p.kind for p in report.problems) == {"chunk": len(lost)}
    assert np.all([not p.repairable for p in report.problems])


def test_a_slice_too_big_to_merge_is_rewritten_alone_and_reads_as_itself(url: str) -> None:
    """A chunk too big to merge is listed in the macro map as it is, but a map entry names a
    whole file: a slice listed so would read as its whole shared file. Compaction rewrites such
    a slice as a macro-chunk of its own."""
    s = Stream.create(url, schema=SCHEMA, segments=2, compaction="off")
    tables = [_records(300, first=i * 300, keys=7) for i in range(4)]
    for t in tables:
        s.append(t, key="key", timestamp="ts")
    assert all(c.shared for c in s.plan(0, 1 << 62))
    want = _expected(s, tables)
    counts = s.compact(target="2KB")  # every slice is above target / 2
    assert counts.macros == 8 and counts.chunks == 8
    fresh = Stream.open(url)
    assert not any(c.shared for c in fresh.plan(0, 1 << 62))
    assert _per_segment(fresh.read()) == want
    s.vacuum(grace_ms=0)
    assert _per_segment(Stream.open(url).read()) == want and not Stream.open(url).verify().problems
