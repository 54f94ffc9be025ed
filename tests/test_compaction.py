"""Compaction into macro-chunks: records unchanged, reads by ``_seq`` range, GC, policy, costs,
formats and the CLI (crashes and races: ``test_compaction_races.py``)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from compaction_streams import append_plain, fill_stream, planned_files, same_records, small_chunks_exist
from conftest import CallLog
from helpers import T0
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import app as cli
from pyspark_tstream.compaction import compact as compaction_mod
from pyspark_tstream.compaction.policy import COMPACT_EVERY, NEVER_MERGED, CompactionPolicy, Piece, plan_groups
from pyspark_tstream.errors import ConfigError, CorruptChunkError, CorruptMetadataError
from pyspark_tstream.journal import seal
from pyspark_tstream.journal.entries import FORMAT_VERSION, Chunk, Entry
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.read import reading as reading_mod
from pyspark_tstream.read.compacted import substitute
from pyspark_tstream.read.reading import chunk_records, read_table, read_task
from pyspark_tstream.read.task import ReadTask
from pyspark_tstream.schema import RAW_TSO
from pyspark_tstream.store import layout

#: The logic here sits above the store: its memory:// cases run by default, its file:// cases
#: in the slow set (tests/test_storage.py pins the file store's own primitives by default).
pytestmark = pytest.mark.slow_on_file


def test_compaction_keeps_every_record_bit_for_bit(url: str) -> None:
    s = fill_stream(url)
    before = s.read()
    window = s.read(start=T0 + 1_000, end=T0 + 4_000)
    limited = s.read(limit=37)
    n = s.state.chunks
    assert len(planned_files(s)) == n > 150
    counts = s.compact()
    assert counts.chunks == n and counts.macros == 3 and counts.rows == 300
    assert len(planned_files(s)) == 3
    fresh = Stream.open(url)
    same_records(before, fresh.read())
    same_records(window, fresh.read(start=T0 + 1_000, end=T0 + 4_000))
    assert fresh.read(limit=37)["_tso"].equals(limited["_tso"])
    assert fresh.refresh().rows == s.state.rows and fresh.state.chunks == n  # nothing re-counted
    # replaced chunks stay for readers that planned before, until a vacuum past the grace period
    assert all(small_chunks_exist(s))
    assert s.vacuum().replaced == 0
    assert s.vacuum(grace_ms=0).replaced == n
    assert not any(small_chunks_exist(s))
    assert Stream.open(url).read().equals(before)


def test_reads_after_vacuum_find_records_by_seq(url: str) -> None:
    """Cuts, truncation by cut, tails, consumer groups and seeks work on macro-chunks only."""
    s = fill_stream(url)
    before = s.read()
    cut = s.cut_at(T0 + 3_000)
    tail_bound = s.seek_tail(25)
    cut_bound = s.cut_bound(cut)
    g = Group.create(s, "g", start="0")
    first = g.read("c", count=40)
    s.compact()
    s.vacuum(grace_ms=0)
    assert not any(small_chunks_exist(s))
    s2 = Stream.open(url)
    assert s2.cut_at(T0 + 3_000) == cut
    assert s2.seek_tail(25) == tail_bound
    assert s2.cut_bound(cut) == cut_bound
    g2 = Group.open(s2, "g")
    rest = g2.read("c", count=10_000)
    assert first.num_rows + rest.num_rows == 300
    same_records(before, pa.concat_tables([first, rest]).select(before.column_names))
    s2.truncate(cut)
    after = s2.read()
    keep = before.filter(pa.compute.greater(before["_tso"], s2.state.head_tso))
    same_records(keep, after)
    for seg, q in cut.items():
        part = after.filter(pa.compute.equal(after["_segment"], seg))
        assert part.num_rows == 0 or min(part["_seq"].to_pylist()) >= q


def test_stream_cut_reads_and_limits_on_views(url: str) -> None:
    s = fill_stream(url)
    s.compact()
    s.vacuum(grace_ms=0)
    st = s.refresh()
    chunks = s.plan(st.head_tso, st.tick)
    assert all(c.floor == 0 for c in chunks)
    # a plan starting from journal positions in the middle names small chunks: views of them
    mid = s.plan(st.head_tso, st.tick, first_pos=30, last_pos=40)
    assert mid and all(c.offset > 0 and c.rows < 100 for c in mid)
    got = read_table(s.store, s.schema, mid, st.head_tso, st.tick)
    assert sorted(got["b"].to_pylist()) == sorted(b for b in range(29, 40) for _ in range(5))


def test_unsorted_views_are_filtered_by_mask() -> None:
    """Macro-chunks of overlapping writer lanes are not sorted by _tso: reads filter by mask."""
    tsos = np.array([50, 30, 90, 70, 10, 60], dtype=np.int64)
    table = pa.table({"v": list(range(6)), RAW_TSO: tsos})
    schema = pa.schema([pa.field("v", pa.int64())])
    view = Chunk(seg=7, path="m", rows=4, bytes=1, seq=101, floor=0, lo=10, hi=90, offset=1, sorted=False)
    got = chunk_records(table, view, 20, 70, schema)
    assert got is not None
    assert got["v"].to_pylist() == [1, 3] and got["_seq"].to_pylist() == [101, 103]
    assert got["_tso"].to_pylist() == [30, 70] and set(got["_segment"].to_pylist()) == {7}
    assert chunk_records(table, view, 20, 70, schema, first_seq=102)["v"].to_pylist() == [3]
    assert chunk_records(table, view, 20, 70, schema, end_seq=103)["v"].to_pylist() == [1]
    assert chunk_records(table, view, 90, 100, schema) is None


def test_substitution_marks_merged_overlapping_chunks_unsorted(tmp_path: Path) -> None:
    s = fill_stream(f"file://{tmp_path}/s", appends=40, segments=1)
    s.compact()
    st = s.refresh()
    chunks = [c for d in s.journal.deltas(st, 1, st.pos) for c in d.chunks]
    overlapping = [chunks[0], Chunk(**{**chunks[1].__dict__, "lo": chunks[0].lo})]  # as lanes would
    views = substitute(s.store, st, overlapping)
    assert len(views) == 1 and views[0].rows == chunks[0].rows + chunks[1].rows and not views[0].sorted
    assert substitute(s.store, st, chunks[:2])[0].sorted


def test_substitution_is_free_above_the_compacted_seq(url: str) -> None:
    s = fill_stream(url)
    s.compact()
    fill_stream(url, appends=6, start=60)
    st = s.refresh()
    recent = [c for d in s.journal.deltas(st, st.pos - 5, st.pos) for c in d.chunks]
    everything = [c for d in s.journal.deltas(st, 1, st.pos) for c in d.chunks]
    log = CallLog()
    s.store.observer = log
    assert substitute(s.store, st, recent) == recent
    assert log.count() == 0
    out = substitute(s.store, st, everything)
    assert log.count() == 1  # the map versions the state names, in one batched read
    assert len({c.path for c in out}) == 3 + len(recent)


def test_chunks_left_as_they_are_are_listed_and_read_in_place(url: str) -> None:
    """Chunks too big to merge are passed over and listed in the map as they are: plans keep
    reading them in place, from the map instead of the journal."""
    s = Stream.create(url, segments=2, compaction="off")
    for _ in range(6):  # plain chunks (a slice too big to merge is rewritten alone: test_append_files.py)
        append_plain(s, pa.table({"k": [f"k{i % 7}" for i in range(300)], "v": list(range(300))}), key="k")
    before = s.read()
    counts = s.compact(target="2KB")  # every chunk is above target / 2: none is merged
    assert counts.macros == 0
    st = s.refresh()
    everything = [c for d in s.journal.deltas(st, 1, st.pos) for c in d.chunks]
    log = CallLog()
    s.store.observer = log
    assert substitute(s.store, st, everything) == everything and log.count() == 1
    log.reset()
    plan = s.plan(st.head_tso, st.tick)
    # (a map-listed chunk carries no marks: an unlimited plan has no use for them)
    assert sorted(plan, key=lambda c: c.path) == sorted((replace(c, marks=()) for c in everything),
                                                        key=lambda c: c.path)
    # the map stood in for the journal: its one version, and the newest entry (the compaction)
    assert log.count() <= 2 and not any("/index/" in rel for _, rel in log.calls), log.calls
    s.store.observer = None
    same_records(before, Stream.open(url).read())


def test_plans_over_compacted_commits_read_the_map_not_the_journal(url: str) -> None:
    s = fill_stream(url, appends=100)
    before = s.read()
    s.compact()
    fill_stream(url, appends=3, start=100)
    st = s.refresh()
    log = CallLog()
    s.store.observer = log
    plan = s.plan(st.head_tso, st.tick)
    s.store.observer = None
    assert len({c.path for c in plan}) <= 3 + 9
    # the seek (index descent) with the map versions the state names in its batch, then the
    # entries after the compaction: no deltas of the compacted commits (another read of nodes)
    assert log.count() <= 2 and sum("/index/" in rel for _, rel in log.calls) <= 1, log.calls
    got = Stream.open(url).read()
    assert got.num_rows == 515
    same_records(before, got.filter(pa.compute.less(got["b"], 100)))


def test_replayed_batch_after_compaction_is_a_noop(url: str) -> None:
    s = fill_stream(url, appends=30, writer="w")
    before = s.read()
    s.compact()
    s.vacuum(grace_ms=0)
    ack = s.append(pa.table({"k": ["x"], "b": [3], "i": [0], "t": [T0]}), key="k", writer_id="w", batch_id=3)
    assert ack.duplicate
    same_records(before, Stream.open(url).read())


def test_sealed_segments_compact_and_truncation_collects_macro_chunks(url: str) -> None:
    s = fill_stream(url, appends=40, segments=2)
    s.scale(split=s.state.segments[0].id, parts=2)
    fill_stream(url, appends=40, start=40)
    s.refresh()
    before = s.read()
    counts = s.compact()
    assert counts.macros >= 4  # the sealed segment too
    sealed = s.sealed_info(0)
    assert sealed is not None
    assert len(planned_files(s)) == 4
    s.vacuum(grace_ms=0)
    same_records(before, Stream.open(url).read())
    s.truncate(T0 + 5_000)
    kept = before.filter(pa.compute.greater(before["_tso"], s.state.head_tso))
    same_records(kept, Stream.open(url).read())
    s.compact()  # nothing new, but the macro map drops what truncation made garbage
    s.vacuum(grace_ms=0)
    same_records(kept, Stream.open(url).read())


def test_automatic_compaction_bounds_pieces_and_is_best_effort(url: str, caplog: pytest.LogCaptureFixture) -> None:
    s = Stream.create(url, segments=1, compaction="target=1MB,min=4")
    expected = 0
    for b in range(200):
        s.append([{"k": "a", "b": b}], key="k")
        expected += 1
        st = s.state
        pieces = len(planned_files(s))
        # size-tiered: at most (min - 1) pieces per level plus the pending small chunks
        assert pieces <= 3 * 4 + 4 + COMPACT_EVERY, (b, pieces)
    assert len(planned_files(s)) <= 24
    ops = [d.op for d in s.journal.deltas(st, 1, st.pos)]
    assert ops.count("compact") >= 10
    assert Stream.open(url).read()["b"].to_pylist() == list(range(200))

    def broken(*args: object, **kwargs: object) -> dict:
        raise OSError("injected: the store is down for compaction")

    real = compaction_mod.compact
    try:
        import pyspark_tstream.api.upkeep as upkeep_mod

        upkeep_mod.compact = broken
        with caplog.at_level(logging.WARNING, logger="pyspark_tstream"):
            for b in range(200, 240):
                ack = s.append([{"k": "a", "b": b}], key="k")  # the data commit never fails
                assert ack.rows == 1
        assert "automatic compaction" in caplog.text and "injected" in caplog.text
    finally:
        upkeep_mod.compact = real
    for b in range(240, 400):  # retried after a back-off
        s.append([{"k": "a", "b": b}], key="k")
    assert len(planned_files(s)) < 30
    assert Stream.open(url).read()["b"].to_pylist() == list(range(400))


def test_compaction_off_and_bad_config(url: str) -> None:
    s = Stream.create(url, segments=1, compaction="off")
    for b in range(40):
        s.append([{"k": "a", "b": b}], key="k")
    assert len(planned_files(s)) == 40
    with pytest.raises(ConfigError, match="compaction='target=huge'.*target=<size"):
        Stream.create(url + "x", compaction="target=huge")
    with pytest.raises(ConfigError, match="min=<pieces"):
        Stream.create(url + "y", compaction="min=1")
    assert CompactionPolicy.parse(None) == CompactionPolicy(128 << 20, 16)
    assert CompactionPolicy.parse("target=64MB,min=8") == CompactionPolicy(64 << 20, 8)
    assert CompactionPolicy.parse("min=4") == CompactionPolicy(128 << 20, 4)  # the default target


def test_tiered_groups() -> None:
    policy = CompactionPolicy(target=1 << 20, min=4)
    pieces = [Piece(Chunk(0, f"p{i}", 10, 100, i * 10, 1, i, i), 0) for i in range(22)]
    groups = plan_groups(pieces, policy, full=False, final=False)
    # 16 small chunks made four level-1 macros, which made one level-2; 4 more made a level-1;
    # 2 remain small until more arrive (or, in a sealed segment, merge now)
    assert [len(g) for g in groups] == [16, 4, 1, 1]
    assert [len(g) for g in plan_groups(pieces, policy, full=False, final=True)] == [16, 4, 2]
    assert [len(g) for g in plan_groups(pieces, policy, full=True, final=False)] == [22]
    big = [Piece(Chunk(0, "big", 10, 1 << 20, 0, 1, 0, 0), NEVER_MERGED)] + pieces[:3]
    assert [len(g) for g in plan_groups(big, policy, full=True, final=False)] == [1, 3]



def test_compaction_cost_is_bounded_by_what_it_merges(url: str) -> None:
    """Store calls of a compaction do not grow with the chunks merged (batched reads), and
    it never lists."""
    calls = []
    for appends in (32, 256):
        s = fill_stream(f"{url}-{appends}", appends=appends, segments=2)
        log = CallLog()
        s.store.observer = log
        assert s.compact().chunks == 2 * appends
        assert log.count("list") == 0
        calls.append(log.count())
    assert calls[1] <= calls[0] + 2, calls


def test_v1_entries_read_and_newer_versions_fail(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = fill_stream(url, appends=3, segments=1)
    before = s.read()
    for e in [s.journal.read_entry(pos) for pos in range(s.state.pos + 1)]:  # rewrite as format v1
        e.change = None  # (no v2 fields were used) with the whole state in every entry, as v1 stored it
        d = seal.unseal(e.encode())
        d["v"] = 1
        d["state"].pop("compaction", None)
        d["state"].pop("checkpoint")
        d["state"].pop("features")  # v1 declared no features (nor checksums)
        (tmp_path / "s" / layout.entry(e.pos)).write_text(json.dumps(d))
    (tmp_path / "s" / "_tstream" / "head.json").unlink()
    (tmp_path / "s" / layout.checkpoint(0)).unlink()
    same_records(before, Stream.open(url).read())
    Stream.open(url).compact()
    same_records(before, Stream.open(url).read())
    head = Journal(Stream.open(url).store).head()
    assert json.loads(head.encode())["v"] == FORMAT_VERSION >= 3  # 3: wide writes' slices
    d = seal.unseal(head.encode())
    d["v"] = FORMAT_VERSION + 1
    with pytest.raises(CorruptMetadataError, match=f"format version {FORMAT_VERSION + 1}.*upgrade pyspark-tstream"):
        Entry.decode(seal.seal(d), path="x")  # sealed as the newer build would
    c = Chunk(1, "p", 2, 3, 4, 5, 6, 7)
    assert c.to_json() == [1, "p", 2, 3, 4, 5, 6, 7]  # v1 shape when the new fields are default
    v = Chunk(1, "p", 2, 3, 4, 0, 6, 7, offset=9, sorted=False)
    assert Chunk.from_json(v.to_json()) == v and Chunk.from_json(c.to_json()) == c


def test_cli_compact(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    fill_stream(url, appends=30, segments=2)
    code = cli.main(["compact", url])
    out, _ = capsys.readouterr()
    n = Stream.open(url).state.chunks
    assert code == 0 and out.startswith(f"compacted {n} chunks (150 records) into 2 macro-chunks")
    assert "a full read now opens 2 files" in out
    code = cli.main(["vacuum", url, "--grace-ms", "0"])
    out, _ = capsys.readouterr()
    assert code == 0 and f"{n} replaced" in out


def test_orphan_cleanup_keeps_macro_chunks(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = fill_stream(url, appends=30, segments=2)
    before = s.read()
    s.compact()
    s.vacuum(grace_ms=0)
    counts = s.vacuum(orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    assert counts.orphans == 0
    same_records(before, Stream.open(url).read())


def test_fsck_after_compaction_and_vacuum_reports_nothing_lost(url: str) -> None:
    """Replaced small chunks are gone after vacuum: fsck checks the macro-chunks instead and
    never advises truncating records that are readable."""
    s = Stream.create(url, segments=2)
    for i in range(20):
        s.append(pa.table({"k": [f"k{j}" for j in range(5)], "v": [i] * 5}), key="k")
    before = s.read()
    s.compact()
    s.vacuum(grace_ms=0)
    s.vacuum(grace_ms=0)
    report = Stream.open(url).verify()
    assert report.ok, report.summary()
    same_records(before, Stream.open(url).read())


def test_orphan_cleanup_removes_a_dead_compactors_files_and_keeps_needed_manifests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compactor killed after writing its macro-chunk and manifest but before publishing the
    map leaves both as orphans: orphan cleanup deletes them; the manifests of a committed
    compaction stay until its replaced files are collected."""
    url = f"file://{tmp_path}/s"
    s = fill_stream(url, appends=30, segments=2)
    before = s.read()

    def killed(*_: object, **__: object) -> None:
        raise KeyboardInterrupt("killed before publishing the map")

    monkeypatch.setattr(compaction_mod.MacroMap, "update", killed)
    with pytest.raises(KeyboardInterrupt):
        s.compact()
    monkeypatch.undo()
    root = tmp_path / "s"
    dead_macros = sorted(p.name for p in root.glob("data/*/m-*.parquet"))
    dead_manifests = sorted(p.name for p in root.glob("_tstream/compact/*.json"))
    assert dead_macros and len(dead_manifests) == len(dead_macros)

    merged = s.compact().chunks  # a live compactor: its manifests stay until its commit is collected
    assert merged > 0
    live = {p.name for p in root.glob("_tstream/compact/*.json")} - set(dead_manifests)
    assert live
    counts = s.vacuum(orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    assert counts.orphans == len(dead_macros) + len(dead_manifests)
    assert {p.name for p in root.glob("_tstream/compact/*.json")} == live
    assert not any(p.name in dead_macros for p in root.glob("data/*/m-*.parquet"))
    same_records(before, Stream.open(url).read())
    assert s.vacuum(grace_ms=0).replaced == merged
    assert not list(root.glob("_tstream/compact/*.json"))
    same_records(before, Stream.open(url).read())


def test_a_plan_made_before_compaction_reads_after_its_files_were_vacuumed(url: str) -> None:
    """A micro-batch planned, then stalled past the grace period while a compaction replaced
    its chunks and a vacuum deleted them (an overloaded machine can hold a task longer than the
    grace period, e.g. 85 s against a 30 s grace): the task reads the records
    from the macro-chunks that now hold them, not "named by the journal is missing"."""
    s = fill_stream(url)
    st = s.refresh()
    planned = s.plan(st.head_tso, st.tick)
    assert all(c.floor != 0 for c in planned)  # small chunks, as planned before compaction
    before = read_table(s.store, s.schema, planned, st.head_tso, st.tick)
    s.compact()
    assert s.vacuum(grace_ms=0).replaced == len(planned)
    assert not any(small_chunks_exist(s))
    same_records(before, read_table(s.store, s.schema, planned, st.head_tso, st.tick))
    # an executor's task of part of the old plan: exactly its chunks' records, each once (the
    # views of a macro-chunk cover more records than the task planned)
    task = ReadTask(chunks=tuple(planned[:40]), lo=st.head_tso, hi=st.tick)
    got = pa.Table.from_batches(list(read_task(s.store, s.schema, task)))
    ids = list(zip(got["_segment"].to_pylist(), got["_seq"].to_pylist()))
    assert sorted(ids) == sorted((c.seg, c.seq + i) for c in planned[:40] for i in range(c.rows))


def test_a_task_that_read_some_files_before_one_went_missing_reads_the_rest_once(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vacuum reached some of a stalled task's files, not all: the task yields the files it
    still finds, then, at the first missing one, reads only its unread chunks from the
    macro-chunks (none of the records it already yielded comes twice)."""
    s = fill_stream(url)
    st = s.refresh()
    planned = s.plan(st.head_tso, st.tick)
    kept = {c.path: s.store.read(c.path) for c in planned[:3]}
    s.compact()
    assert s.vacuum(grace_ms=0).replaced == len(planned)
    for path, data in kept.items():  # the vacuum has not reached these yet
        s.store.write(path, data)
    monkeypatch.setattr(reading_mod, "BATCH_FETCH_BYTES", 1)  # one fetch per file: 3 succeed first
    got = pa.Table.from_batches(list(read_task(s.store, s.schema,
                                               ReadTask(chunks=tuple(planned), lo=st.head_tso, hi=st.tick))))
    ids = list(zip(got["_segment"].to_pylist(), got["_seq"].to_pylist()))
    assert sorted(ids) == sorted((c.seg, c.seq + i) for c in planned for i in range(c.rows))


def test_a_missing_file_no_compaction_replaced_still_fails_naming_it(url: str) -> None:
    s = fill_stream(url)
    st = s.refresh()
    planned = s.plan(st.head_tso, st.tick)
    s.store.delete([planned[3].path])
    with pytest.raises(CorruptChunkError, match=planned[3].path.split("/")[-1] + ".*missing"):
        read_table(s.store, s.schema, planned, st.head_tso, st.tick)
