"""Compaction under failures and rivals: a crash at every store call, two compactors at once,
a commit that lands after another compactor adopted its macro-chunks, compactors racing
writers and a scale, and the macro map's lost races."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from compaction_streams import fill_stream, planned_files, same_records, small_chunks_exist
from conftest import CallLog, crash_at
from helpers import T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.store.storage import Store


def _crash_stream(name: str, again: bool) -> Stream:
    s = fill_stream(name, appends=12, segments=2, writer="w")
    if again:  # the crash then hits a compaction that also rewrites a macro-chunk
        s.compact()
        fill_stream(name, appends=6, start=12, writer="w")
    return s


@pytest.mark.slow_on_file
@pytest.mark.parametrize("again", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["first", "again"])
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
        crash = crash_at(s, k, act)
        fresh = Stream.open(name)
        same_records(expected, fresh.read())
        act(fresh)  # the compaction (or its retry) completes after the crash
        done = Stream.open(name)
        same_records(expected, done.read())
        assert len(planned_files(done)) == 2, f"crash at call {k} ({crash.calls[-1]}) left small chunks in plans"
        assert not any(small_chunks_exist(done)), f"crash at call {k} ({crash.calls[-1]}) leaked chunks"
        done.append(pa.table({"k": ["z"], "b": [99], "i": [0], "t": [T0]}), key="k", writer_id="w", batch_id=99)
        assert done.read().num_rows == expected.num_rows + 1


def test_two_compactors_at_once(url: str) -> None:
    """One compactor runs whole inside another's first map update: one wins each run, the
    other discards its files; then the reverse order at the journal commit (adoption)."""
    s = fill_stream(url, appends=40, segments=2)
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
    assert fired and counts.lost >= 1
    same_records(expected, Stream.open(url).read())
    assert len(planned_files(Stream.open(url))) == 2
    a.vacuum(grace_ms=0)
    same_records(expected, Stream.open(url).read())
    assert not any(small_chunks_exist(a))

    # reverse: the other compactor runs just before the first one's journal commit, sees the
    # published macro-chunks beyond the compacted seq and adopts them
    fill_stream(url, appends=40, start=40)
    expected = Stream.open(url).read()
    c, d = Stream.open(url), Stream.open(url)
    fired.clear()

    def at_commit(op: str, rel: str) -> None:
        if op == "put_if_absent" and "/journal/" in rel and not fired:
            fired.append(rel)
            assert d.compact().adopted >= 1
    c.store.observer = at_commit
    c.compact()
    c.store.observer = None
    same_records(expected, Stream.open(url).read())
    c.vacuum(grace_ms=0)
    same_records(expected, Stream.open(url).read())
    assert not any(small_chunks_exist(c))


def test_a_compaction_committed_after_another_adopted_its_macro_chunks_names_them_once(url: str) -> None:
    """A compactor's journal commit lands after another compactor adopted the macro-chunks it
    published (and a vacuum collected that adoption): its rebuilt entry must not name them
    again. It did, so the journal named each twice; once the vacuum had deleted their manifests
    (collecting the adoption), ``fsck`` reported every one missing, until the next vacuum (seen
    under random store faults, where one producer's commit walked a dozen slots behind)."""
    s = fill_stream(url, appends=40, segments=2)
    expected = s.read()
    c, d = Stream.open(url), Stream.open(url)
    fired: list[str] = []

    def at_commit(op: str, rel: str) -> None:
        if op == "put_if_absent" and "/journal/" in rel and not fired:
            fired.append(rel)
            assert d.compact().adopted >= 1
            d.vacuum(grace_ms=0)  # collects the adoption: the adopted macro-chunks' manifests go
    c.store.observer = at_commit
    c.compact()
    c.store.observer = None
    assert fired
    final = Stream.open(url)
    same_records(expected, final.read())
    st = final.refresh()
    named = [p["macro"] for e in (final.journal.read_entry(p) for p in range(1, st.pos + 1))
             if e.op == "compact" for p in e.info.get("parts", [])]
    assert named and len(named) == len(set(named)), f"a macro-chunk named by two compactions: {named}"
    report = final.verify()
    assert report.ok, report.problems
    final.vacuum(grace_ms=0)
    same_records(expected, Stream.open(url).read())
    assert final.verify().ok


def test_chunks_a_crashed_compaction_listed_as_they_are_survive_its_adoption_and_vacuum(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction publishes its map version, listing chunks too big to merge as they are,
    then crashes before its journal commit; the next compaction adopts what that version holds.
    A listed chunk is not a macro-chunk: adopting it as a compaction part gave it a manifest
    that never existed, and vacuum deleted "the files its compaction replaced", the chunk itself
    (so records named by the journal went missing)."""
    import pyspark_tstream.compaction.compact as compact_mod
    from pyspark_tstream.maps.macromap import MacroMap

    s = fill_stream(url, appends=12, segments=1)
    want = s.read()

    def crash(self: object, state: object, pos: int) -> None:
        raise RuntimeError("crash between the map's publication and the journal commit")

    with monkeypatch.context() as m:
        m.setattr(compact_mod.CompactRequest, "__call__", crash)
        with pytest.raises(RuntimeError, match="crash between"):
            Stream.open(url).compact(full=False, target="2KB", min_pieces=4)
    listed = MacroMap(s.store).latest(0, 0).macros
    assert listed and all(m.level == 0 for m in listed)  # chunks listed as they are, no merge
    h = Stream.open(url)
    h.compact(full=False, target="2KB", min_pieces=4)
    parts = [p for pos in range(1, h.state.pos + 1) for p in h.journal.read_entry(pos).info.get("parts", [])]
    assert not [p for p in parts if p["macro"] in {m.path for m in listed}], parts
    Stream.open(url).vacuum(grace_ms=0)
    same_records(want, Stream.open(url).read())
    assert not Stream.open(url).verify().problems


def test_vacuum_keeps_a_listed_chunk_an_older_compaction_committed_as_a_part(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams whose journal already holds such a part (committed by an older version) keep
    the chunk: garbage collection never deletes a part's own file as "what it replaced"."""
    import pyspark_tstream.compaction.compact as compact_mod
    from pyspark_tstream.maps.macromap import MacroMap

    s = fill_stream(url, appends=12, segments=1)
    want = s.read()

    def crash(self: object, state: object, pos: int) -> None:
        raise RuntimeError("crash between the map's publication and the journal commit")

    def old_adopt(job: object, seg: int, live: list, upto: int) -> list:  # what older versions did
        adopted = [m for m in live if m.end > upto]
        for m in adopted:
            job.parts.append(compact_mod._part(seg, m, adopted=True))  # type: ignore[attr-defined]
        return adopted

    with monkeypatch.context() as m:
        m.setattr(compact_mod.CompactRequest, "__call__", crash)
        with pytest.raises(RuntimeError, match="crash between"):
            Stream.open(url).compact(full=False, target="2KB", min_pieces=4)
    listed = {m.path for m in MacroMap(s.store).latest(0, 0).macros}
    with monkeypatch.context() as m:
        m.setattr(compact_mod, "adopt", old_adopt)
        h = Stream.open(url)
        h.compact(full=False, target="2KB", min_pieces=4)
    parts = [p for pos in range(1, h.state.pos + 1) for p in h.journal.read_entry(pos).info.get("parts", [])]
    assert {p["macro"] for p in parts} & listed  # the journal holds the bad parts
    Stream.open(url).vacuum(grace_ms=0)
    same_records(want, Stream.open(url).read())


def test_compactors_racing_writers_and_a_scale(url: str) -> None:
    s = fill_stream(url, appends=20, segments=2, writer="w")
    errors: list[BaseException] = []
    stop = threading.Event()

    def compactor() -> None:
        h = Stream.open(url)
        try:
            while not stop.is_set():
                h.compact(full=False, target="1MB", min_pieces=4)
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    def writer(w: str) -> None:
        try:
            fill_stream(url, appends=25, start=100 if w == "x" else 200, writer=w)
        except BaseException as e:  # noqa: BLE001 - surfaced below
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
    assert len(planned_files(Stream.open(url))) <= 5


def test_macro_map_update_rebuilds_on_the_winner_after_a_lost_race(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compactor that loses a bucket version to a rival re-checks its change on the winner's
    version (both macro-chunks end up listed), and one that keeps losing gives up with a
    retriable CommitConflictError naming the bucket's segment."""
    from pyspark_tstream.errors import CommitConflictError
    from pyspark_tstream.maps.macromap import Macro, MacroMap

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
    # 1,000 lost races each rewrite a growing bucket (16 s on 2 cores); 20 show the same
    from pyspark_tstream.store import races
    monkeypatch.setattr(races, "MAX_ATTEMPTS", 20)
    with pytest.raises(CommitConflictError, match="gave up after 20 lost races on the macro map of segment 0") as info:
        mm.update(0, 0, always_lose)
    assert info.value.retriable


def test_a_compaction_that_loses_a_bucket_commits_nothing_it_adopted_there(url: str) -> None:
    """The long run's ``expiry`` seed 1,005,489: compaction A published macro-chunks and died
    before its journal commit; B adopted them, then lost the bucket's next map version to C,
    which died too. B committed the adopted macro-chunk as a part but no summary for its
    segment (it settled nothing there), so readers kept reading the chunks while vacuum deleted
    them as replaced: a read failed on a chunk named by the journal. A compaction that loses a
    bucket now leaves what it adopted there to the next one."""
    fill_stream(url, appends=40, segments=2)

    def dies_at_its_commit(op: str, rel: str) -> None:
        if op == "put_if_absent" and "/journal/" in rel:
            raise RuntimeError("killed before its journal commit")

    a = Stream.open(url)
    a.store.observer = dies_at_its_commit
    with pytest.raises(RuntimeError):
        a.compact()  # its macro-chunks are in the map, no entry names them
    fill_stream(url, appends=8, start=40)  # small chunks after them, in the same buckets
    expected = Stream.open(url).read()
    b, c = Stream.open(url), Stream.open(url)
    c.store.observer = dies_at_its_commit
    fired: list[str] = []

    def rival(op: str, rel: str) -> None:
        if op == "put_if_absent" and "/macros/" in rel and not fired:
            fired.append(rel)
            with pytest.raises(RuntimeError):
                c.compact()  # takes the version b is about to create, then dies
    b.store.observer = rival
    counts = b.compact()
    b.store.observer = None
    assert fired and counts.lost >= 1
    for _ in range(2):
        Stream.open(url).vacuum(grace_ms=0)
        final = Stream.open(url)
        same_records(expected, final.read())
        report = final.verify()
        assert report.ok, report.summary()
    Stream.open(url).compact()  # the next compaction settles what b left
    same_records(expected, Stream.open(url).read())
