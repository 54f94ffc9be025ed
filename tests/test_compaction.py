"""Compaction into macro-chunks: records unchanged, reads by ``_seq`` range, GC, crashes, races."""

from __future__ import annotations

from dataclasses import replace

import json
import logging
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import CallLog

from pyspark_tstream import cli
from pyspark_tstream import compaction as compaction_mod
from pyspark_tstream.compacted import substitute
from pyspark_tstream.compaction import CompactionPolicy, plan_groups
from pyspark_tstream.errors import ConfigError, CorruptMetadataError
from pyspark_tstream.groups import Group
from pyspark_tstream.entries import FORMAT_VERSION, Chunk, Entry, entry_path
from pyspark_tstream.journal import Journal
from pyspark_tstream.reading import chunk_records
from pyspark_tstream.schema import RAW_TSO
from pyspark_tstream.storage import Store
from pyspark_tstream.stream import Stream

T0 = 1_700_000_000_000
ORDER = [("_segment", "ascending"), ("_seq", "ascending")]


def _fill(url: str, appends: int = 60, rows: int = 5, segments: int = 3, writer: str | None = None,
          start: int = 0, **config: object) -> Stream:
    s = Stream.open(url) if start else Stream.create(url, segments=segments, compaction="off", **config)
    for b in range(start, start + appends):
        s.append(pa.table({"k": [f"k{(b * 7 + i) % 11}" for i in range(rows)], "b": [b] * rows,
                           "i": list(range(rows)), "t": [T0 + b * 100 + i for i in range(rows)]}),
                 key="k", timestamp="t", writer_id=writer, batch_id=b if writer else None)
    return s


def _files(s: Stream) -> set[str]:
    st = s.refresh()
    return {c.path for c in s.plan(st.head_tso, st.tick)}


def _same(a: pa.Table, b: pa.Table) -> None:
    assert a.num_rows == b.num_rows
    assert a.sort_by(ORDER).equals(b.sort_by(ORDER)), "records differ"
    assert np.all(np.diff(b["_tso"].to_numpy()) >= 0), "read not ordered by _tso"


def _small_chunks_exist(s: Stream) -> list[bool]:
    st = s.refresh()
    return [s.store.exists(c.path) for d in s.journal.deltas(st, 1, st.pos) for c in d.chunks]


def test_compaction_keeps_every_record_bit_for_bit(url: str) -> None:
    s = _fill(url)
    before = s.read()
    window = s.read(start=T0 + 1_000, end=T0 + 4_000)
    limited = s.read(limit=37)
    n = s.state.chunks
    assert len(_files(s)) == n > 150
    counts = s.compact()
    assert counts["chunks"] == n and counts["macros"] == 3 and counts["rows"] == 300
    assert len(_files(s)) == 3
    fresh = Stream.open(url)
    _same(before, fresh.read())
    _same(window, fresh.read(start=T0 + 1_000, end=T0 + 4_000))
    assert fresh.read(limit=37)["_tso"].equals(limited["_tso"])
    assert fresh.refresh().rows == s.state.rows and fresh.state.chunks == n  # nothing re-counted
    # replaced chunks stay for readers that planned before, until a vacuum past the grace period
    assert all(_small_chunks_exist(s))
    assert s.vacuum()["replaced"] == 0
    assert s.vacuum(grace_ms=0)["replaced"] == n
    assert not any(_small_chunks_exist(s))
    assert Stream.open(url).read().equals(before)


def test_reads_after_vacuum_find_records_by_seq(url: str) -> None:
    """Cuts, truncation by cut, tails, consumer groups and seeks work on macro-chunks only."""
    s = _fill(url)
    before = s.read()
    cut = s.cut_at(T0 + 3_000)
    tail_bound = s.seek_tail(25)
    cut_bound = s.cut_bound(cut)
    g = Group.create(s, "g", start="0")
    first = g.read("c", count=40)
    s.compact()
    s.vacuum(grace_ms=0)
    assert not any(_small_chunks_exist(s))
    s2 = Stream.open(url)
    assert s2.cut_at(T0 + 3_000) == cut
    assert s2.seek_tail(25) == tail_bound
    assert s2.cut_bound(cut) == cut_bound
    g2 = Group.open(s2, "g")
    rest = g2.read("c", count=10_000)
    assert first.num_rows + rest.num_rows == 300
    _same(before, pa.concat_tables([first, rest]).select(before.column_names))
    s2.truncate(cut)
    after = s2.read()
    keep = before.filter(pa.compute.greater(before["_tso"], s2.state.head_tso))
    _same(keep, after)
    for seg, q in cut.items():
        part = after.filter(pa.compute.equal(after["_segment"], seg))
        assert part.num_rows == 0 or min(part["_seq"].to_pylist()) >= q


def test_stream_cut_reads_and_limits_on_views(url: str) -> None:
    s = _fill(url)
    s.compact()
    s.vacuum(grace_ms=0)
    st = s.refresh()
    chunks = s.plan(st.head_tso, st.tick)
    assert all(c.floor == 0 for c in chunks)
    # a plan starting from journal positions in the middle names small chunks: views of them
    mid = s.plan(st.head_tso, st.tick, first_pos=30, last_pos=40)
    assert mid and all(c.offset > 0 and c.rows < 100 for c in mid)
    from pyspark_tstream.reading import read_table

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
    s = _fill(f"file://{tmp_path}/s", appends=40, segments=1)
    s.compact()
    st = s.refresh()
    chunks = [c for d in s.journal.deltas(st, 1, st.pos) for c in d.chunks]
    overlapping = [chunks[0], Chunk(**{**chunks[1].__dict__, "lo": chunks[0].lo})]  # as lanes would
    views = substitute(s.store, st, overlapping)
    assert len(views) == 1 and views[0].rows == chunks[0].rows + chunks[1].rows and not views[0].sorted
    assert substitute(s.store, st, chunks[:2])[0].sorted


def test_substitution_is_free_above_the_compacted_seq(url: str) -> None:
    s = _fill(url)
    s.compact()
    _fill(url, appends=6, start=60)
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
    for b in range(6):
        s.append(pa.table({"k": [f"k{i % 7}" for i in range(300)], "v": list(range(300))}), key="k")
    before = s.read()
    counts = s.compact(target="2KB")  # every chunk is above target / 2: none is merged
    assert counts["macros"] == 0
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
    _same(before, Stream.open(url).read())


def test_plans_over_compacted_commits_read_the_map_not_the_journal(url: str) -> None:
    s = _fill(url, appends=100)
    before = s.read()
    s.compact()
    _fill(url, appends=3, start=100)
    st = s.refresh()
    log = CallLog()
    s.store.observer = log
    plan = s.plan(st.head_tso, st.tick)
    s.store.observer = None
    assert len({c.path for c in plan}) <= 3 + 9
    # the seek (index descent), the map version, the entries after the compaction: no deltas of
    # the compacted commits (a batched read of index nodes)
    assert log.count() <= 5 and not any(op == "read_many" and "/index/" in rel for op, rel in log.calls), log.calls
    got = Stream.open(url).read()
    assert got.num_rows == 515
    _same(before, got.filter(pa.compute.less(got["b"], 100)))


def test_replayed_batch_after_compaction_is_a_noop(url: str) -> None:
    s = _fill(url, appends=30, writer="w")
    before = s.read()
    s.compact()
    s.vacuum(grace_ms=0)
    ack = s.append(pa.table({"k": ["x"], "b": [3], "i": [0], "t": [T0]}), key="k", writer_id="w", batch_id=3)
    assert ack.duplicate
    _same(before, Stream.open(url).read())


def test_sealed_segments_compact_and_truncation_collects_macro_chunks(url: str) -> None:
    s = _fill(url, appends=40, segments=2)
    s.scale(split=s.state.segments[0].id, parts=2)
    _fill(url, appends=40, start=40)
    s.refresh()
    before = s.read()
    counts = s.compact()
    assert counts["macros"] >= 4  # the sealed segment too
    sealed = s.sealed_info(0)
    assert sealed is not None
    assert len(_files(s)) == 4
    s.vacuum(grace_ms=0)
    _same(before, Stream.open(url).read())
    s.truncate(T0 + 5_000)
    kept = before.filter(pa.compute.greater(before["_tso"], s.state.head_tso))
    _same(kept, Stream.open(url).read())
    s.compact()  # nothing new, but the macro map drops what truncation made garbage
    s.vacuum(grace_ms=0)
    _same(kept, Stream.open(url).read())


def test_automatic_compaction_bounds_pieces_and_is_best_effort(url: str, caplog: pytest.LogCaptureFixture) -> None:
    s = Stream.create(url, segments=1, compaction="target=1MB,min=4")
    expected = 0
    for b in range(200):
        s.append([{"k": "a", "b": b}], key="k")
        expected += 1
        st = s.state
        pieces = len(_files(s))
        # size-tiered: at most (min - 1) pieces per level plus the pending small chunks
        assert pieces <= 3 * 4 + 4 + compaction_mod.COMPACT_EVERY, (b, pieces)
    assert len(_files(s)) <= 24
    ops = [d.op for d in s.journal.deltas(st, 1, st.pos)]
    assert ops.count("compact") >= 10
    assert Stream.open(url).read()["b"].to_pylist() == list(range(200))

    def broken(*args: object, **kwargs: object) -> dict:
        raise OSError("injected: the store is down for compaction")

    real = compaction_mod.compact
    try:
        import pyspark_tstream.stream_upkeep as upkeep_mod

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
    assert len(_files(s)) < 30
    assert Stream.open(url).read()["b"].to_pylist() == list(range(400))


def test_compaction_off_and_bad_config(url: str) -> None:
    s = Stream.create(url, segments=1, compaction="off")
    for b in range(40):
        s.append([{"k": "a", "b": b}], key="k")
    assert len(_files(s)) == 40
    with pytest.raises(ConfigError, match="compaction='target=huge'.*target=<size"):
        Stream.create(url + "x", compaction="target=huge")
    with pytest.raises(ConfigError, match="min=<pieces"):
        Stream.create(url + "y", compaction="min=1")
    assert CompactionPolicy.parse(None) == CompactionPolicy(128 << 20, 16)
    assert CompactionPolicy.parse("target=64MB,min=8") == CompactionPolicy(64 << 20, 8)


def test_tiered_groups() -> None:
    policy = CompactionPolicy(target=1 << 20, min=4)
    pieces = [compaction_mod.Piece(Chunk(0, f"p{i}", 10, 100, i * 10, 1, i, i), 0) for i in range(22)]
    groups = plan_groups(pieces, policy, full=False, final=False)
    # 16 small chunks made four level-1 macros, which made one level-2; 4 more made a level-1;
    # 2 remain small until more arrive (or, in a sealed segment, merge now)
    assert [len(g) for g in groups] == [16, 4, 1, 1]
    assert [len(g) for g in plan_groups(pieces, policy, full=False, final=True)] == [16, 4, 2]
    assert [len(g) for g in plan_groups(pieces, policy, full=True, final=False)] == [22]
    big = [compaction_mod.Piece(Chunk(0, "big", 10, 1 << 20, 0, 1, 0, 0), compaction_mod._BIG)] + pieces[:3]
    assert [len(g) for g in plan_groups(big, policy, full=True, final=False)] == [1, 3]


def _crash_stream(name: str, again: bool) -> Stream:
    s = _fill(name, appends=12, segments=2, writer="w")
    if again:  # the crash then hits a compaction that also rewrites a macro-chunk
        s.compact()
        _fill(name, appends=6, start=12, writer="w")
    return s


@pytest.mark.parametrize("again", [False, True], ids=["first", "again"])
def test_crash_at_every_store_call_of_a_compaction(url: str, again: bool) -> None:
    """A failure at any store call of a compaction (and of the vacuum after it) loses or
    duplicates no record, and the next compaction completes the work."""
    def act(s: Stream) -> None:
        s.compact()
        s.vacuum(grace_ms=0)

    probe = _crash_stream(url + "-probe", again)
    expected = probe.read()
    log = CallLog()
    probe.store.observer = log
    act(probe)
    total = log.count()
    assert total > 10
    for k in range(1, total + 1):
        name = f"{url}-{k}"
        s = _crash_stream(name, again)
        crash = CallLog()
        crash.fail_at = k
        s.store.observer = crash
        try:
            act(s)
        except RuntimeError:
            pass
        s.store.observer = None
        fresh = Stream.open(name)
        _same(expected, fresh.read())
        act(fresh)  # the compaction (or its retry) completes after the crash
        done = Stream.open(name)
        _same(expected, done.read())
        assert len(_files(done)) == 2, f"crash at call {k} ({crash.calls[-1]}) left small chunks in plans"
        assert not any(_small_chunks_exist(done)), f"crash at call {k} ({crash.calls[-1]}) leaked chunks"
        done.append(pa.table({"k": ["z"], "b": [99], "i": [0], "t": [T0]}), key="k", writer_id="w", batch_id=99)
        assert done.read().num_rows == expected.num_rows + 1


def test_two_compactors_at_once(url: str) -> None:
    """One compactor runs whole inside another's first map update: one wins each run, the
    other discards its files; then the reverse order at the journal commit (adoption)."""
    s = _fill(url, appends=40, segments=2)
    expected = s.read()
    a, b = Stream.open(url), Stream.open(url)
    fired = []

    def interleave(op: str, rel: str) -> None:
        if op == "put_if_absent" and "/macros/" in rel and not fired:
            fired.append(rel)
            b.compact()
    a.store.observer = interleave
    counts = a.compact()
    a.store.observer = None
    assert fired and counts["lost"] >= 1
    _same(expected, Stream.open(url).read())
    assert len(_files(Stream.open(url))) == 2
    a.vacuum(grace_ms=0)
    _same(expected, Stream.open(url).read())
    assert not any(_small_chunks_exist(a))

    # reverse: the other compactor runs just before the first one's journal commit, sees the
    # published macro-chunks beyond the compacted seq and adopts them
    _fill(url, appends=40, start=40)
    expected = Stream.open(url).read()
    c, d = Stream.open(url), Stream.open(url)
    fired.clear()

    def at_commit(op: str, rel: str) -> None:
        if op == "put_if_absent" and "/journal/" in rel and not fired:
            fired.append(rel)
            assert d.compact()["adopted"] >= 1
    c.store.observer = at_commit
    c.compact()
    c.store.observer = None
    _same(expected, Stream.open(url).read())
    c.vacuum(grace_ms=0)
    _same(expected, Stream.open(url).read())
    assert not any(_small_chunks_exist(c))


def test_a_compaction_committed_after_another_adopted_its_macro_chunks_names_them_once(url: str) -> None:
    """A compactor's journal commit lands after another compactor adopted the macro-chunks it
    published (and a vacuum collected that adoption): its rebuilt entry must not name them
    again. It did, so the journal named each twice; once the vacuum had deleted their manifests
    (collecting the adoption), ``fsck`` reported every one missing, until the next vacuum (seen
    under random store faults, where one producer's commit walked a dozen slots behind)."""
    s = _fill(url, appends=40, segments=2)
    expected = s.read()
    c, d = Stream.open(url), Stream.open(url)
    fired: list[str] = []

    def at_commit(op: str, rel: str) -> None:
        if op == "put_if_absent" and "/journal/" in rel and not fired:
            fired.append(rel)
            assert d.compact()["adopted"] >= 1
            d.vacuum(grace_ms=0)  # collects the adoption: the adopted macro-chunks' manifests go
    c.store.observer = at_commit
    c.compact()
    c.store.observer = None
    assert fired
    final = Stream.open(url)
    _same(expected, final.read())
    st = final.refresh()
    named = [p["macro"] for e in (final.journal.read_entry(p) for p in range(1, st.pos + 1))
             if e.op == "compact" for p in e.info.get("parts", [])]
    assert named and len(named) == len(set(named)), f"a macro-chunk named by two compactions: {named}"
    report = final.verify()
    assert report.ok, report.problems
    final.vacuum(grace_ms=0)
    _same(expected, Stream.open(url).read())
    assert final.verify().ok


def test_compactors_racing_writers_and_a_scale(url: str) -> None:
    s = _fill(url, appends=20, segments=2, writer="w")
    errors: list[BaseException] = []
    stop = threading.Event()

    def compactor() -> None:
        h = Stream.open(url)
        try:
            while not stop.is_set():
                h.compact(full=False, target="1MB", min_pieces=4)
        except BaseException as e:  # surfaced below
            errors.append(e)

    def writer(w: str) -> None:
        try:
            _fill(url, appends=25, start=100 if w == "x" else 200, writer=w)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=compactor) for _ in range(2)]
    threads += [threading.Thread(target=writer, args=(w,)) for w in ("x", "y")]
    for t in threads:
        t.start()
    Stream.open(url).scale(split=s.state.segments[0].id, parts=2)
    for t in threads[2:]:
        t.join()
    stop.set()
    for t in threads[:2]:
        t.join()
    assert not errors, errors
    Stream.open(url).compact()
    Stream.open(url).vacuum(grace_ms=0)
    t = Stream.open(url).read()
    assert t.num_rows == (20 + 25 + 25) * 5
    assert t.group_by(["b", "i"]).aggregate([("k", "count")])["k_count"].to_pylist() == [1] * t.num_rows
    assert len(_files(Stream.open(url))) <= 5


def test_compaction_cost_is_bounded_by_what_it_merges(url: str) -> None:
    """Store calls of a compaction do not grow with the chunks merged (batched reads), and
    it never lists."""
    calls = []
    for appends in (32, 256):
        s = _fill(f"{url}-{appends}", appends=appends, segments=2)
        log = CallLog()
        s.store.observer = log
        assert s.compact()["chunks"] == 2 * appends
        assert log.count("list") == 0
        calls.append(log.count())
    assert calls[1] <= calls[0] + 2, calls


def test_v1_entries_read_and_newer_versions_fail(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = _fill(url, appends=3, segments=1)
    before = s.read()
    for pos in range(s.state.pos + 1):  # rewrite as format v1 (no v2 fields were used)
        p = tmp_path / "s" / entry_path(pos)
        d = json.loads(p.read_text())
        d["v"] = 1
        d["state"].pop("compaction", None)
        p.write_text(json.dumps(d))
    (tmp_path / "s" / "_tstream" / "head.json").unlink()
    _same(before, Stream.open(url).read())
    Stream.open(url).compact()
    _same(before, Stream.open(url).read())
    head = Journal(Stream.open(url).store).head()
    assert json.loads(head.encode())["v"] == FORMAT_VERSION == 2
    d = json.loads(head.encode())
    d["v"] = FORMAT_VERSION + 1
    with pytest.raises(CorruptMetadataError, match="format version 3.*upgrade pyspark-tstream"):
        Entry.decode(json.dumps(d).encode(), path="x")
    c = Chunk(1, "p", 2, 3, 4, 5, 6, 7)
    assert c.to_json() == [1, "p", 2, 3, 4, 5, 6, 7]  # v1 shape when the new fields are default
    v = Chunk(1, "p", 2, 3, 4, 0, 6, 7, offset=9, sorted=False)
    assert Chunk.from_json(v.to_json()) == v and Chunk.from_json(c.to_json()) == c


def test_cli_compact(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(url, appends=30, segments=2)
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
    s = _fill(url, appends=30, segments=2)
    before = s.read()
    s.compact()
    s.vacuum(grace_ms=0)
    counts = s.vacuum(orphans=True, orphan_grace_ms=0)
    assert counts["orphans"] == 0
    _same(before, Stream.open(url).read())


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
    _same(before, Stream.open(url).read())


def test_orphan_cleanup_removes_a_dead_compactors_files_and_keeps_needed_manifests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compactor killed after writing its macro-chunk and manifest but before publishing the
    map leaves both as orphans: orphan cleanup deletes them; the manifests of a committed
    compaction stay until its replaced files are collected."""
    url = f"file://{tmp_path}/s"
    s = _fill(url, appends=30, segments=2)
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

    merged = s.compact()["chunks"]  # a live compactor: its manifests stay until its commit is collected
    assert merged > 0
    live = {p.name for p in root.glob("_tstream/compact/*.json")} - set(dead_manifests)
    assert live
    counts = s.vacuum(orphans=True, orphan_grace_ms=0)
    assert counts["orphans"] == len(dead_macros) + len(dead_manifests)
    assert {p.name for p in root.glob("_tstream/compact/*.json")} == live
    assert not any(p.name in dead_macros for p in root.glob("data/*/m-*.parquet"))
    _same(before, Stream.open(url).read())
    assert s.vacuum(grace_ms=0)["replaced"] == merged
    assert not list(root.glob("_tstream/compact/*.json"))
    _same(before, Stream.open(url).read())


def test_macro_map_update_rebuilds_on_the_winner_after_a_lost_race() -> None:
    """A compactor that loses a bucket version to a rival re-checks its change on the winner's
    version (both macro-chunks end up listed), and one that keeps losing gives up with a
    retriable CommitConflictError naming the bucket's segment."""
    from pyspark_tstream.errors import CommitConflictError
    from pyspark_tstream.macromap import Macro, MacroMap

    def macro(i: int) -> Macro:
        return Macro(i, 1, f"data/0/m-{i}.parquet", 1, i, i, True, 1)

    store = Store("memory://macro-map-race/s")
    mm, rival = MacroMap(store), MacroMap(store)
    seen: list[int] = []

    def change(b):  # the rival publishes version 0 between our read and our create
        seen.append(b.v)
        if len(seen) == 1:
            rival.update(0, 0, lambda rb: rb.macros + (macro(1),))
        return b.macros + (macro(2),)

    won = mm.update(0, 0, change)
    assert seen == [-1, 0] and won is not None and won.v == 1
    assert [m.first for m in mm.latest(0, 0).macros] == [1, 2]

    def always_lose(b):  # a rival version with other content each time (same bytes would be ours)
        rival.update(0, 0, lambda rb: rb.macros + (macro(rb.v + 10),))
        return b.macros
    with pytest.raises(CommitConflictError, match="lost races on the macro map of segment 0") as info:
        mm.update(0, 0, always_lose)
    assert info.value.retriable

