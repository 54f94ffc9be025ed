"""A damaged macro map: fsck says what the journal can rebuild, repair rebuilds it, nothing is lost.

The map (python/maps/macromap.py) is the only place a read finds compacted records once vacuum has
collected the small chunks; python/compaction/macro_rebuild.py derives it from the journal again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa
import pytest
from compaction_streams import append_plain
from conftest import CallLog
from helpers import ORDER, T0
from histories import clone, drop
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.compaction import macro_rebuild
from pyspark_tstream.errors import TStreamError
from pyspark_tstream.journal import seal
from pyspark_tstream.journal.state import segment_number
from pyspark_tstream.maintain.fsck import verify
from pyspark_tstream.maps.macromap import Macro, MacroMap
from pyspark_tstream.store import layout
from pyspark_tstream.write.writing import write_batches

#: The logic here sits above the store: its memory:// cases run by default, its file:// cases
#: in the slow set (tests/test_storage.py pins the file store's own primitives by default).
pytestmark = pytest.mark.slow_on_file


#: How appends lay out their records: a plain chunk file per segment, ``Stream.append``'s one
#: shared file per append sliced by segment (format v5), or a Spark sink task's shared file.
# a sink task's shared files take the sliced path too: the slow set runs them
CHUNKS = ["plain", "sliced", pytest.param("sink", marks=pytest.mark.slow)]


def _append(s: Stream, first: int, n: int, chunks: str = "plain") -> None:
    for b in range(first, first + n):
        table = pa.table({"k": [f"k{(b * 7 + i) % 11}" for i in range(5)], "b": [b] * 5,
                          "t": [T0 + b * 100 + i for i in range(5)]})
        if chunks == "sliced":
            s.append(table, key="k", timestamp="t")
        elif chunks == "sink":  # what a task of the Spark sink writes and its commit names
            spec = s.write_spec(table.schema, key="k", timestamp="t")
            s.commit(write_batches(spec, [table], task=f"t{b}"), schema=table.schema, fresh=True)
        else:
            append_plain(s, table, key="k", timestamp="t")


def _compacted_twice(url: str, chunks: str = "plain") -> Stream:
    """Three segments whose buckets have two versions: level-1 macro-chunks, then a full
    compaction merging them with newer chunks, the replaced files collected each time."""
    s = Stream.create(url, segments=3, compaction="off")
    _append(s, 0, 60, chunks)
    if chunks != "plain":
        assert all(c.shared for c in s.plan(0, 1 << 62))
    assert s.compact().macros >= 3
    s.vacuum(grace_ms=0)
    _append(s, 60, 30, chunks)
    assert s.compact(full=True).macros >= 3
    assert s.vacuum(grace_ms=0).replaced > 0
    return Stream.open(url)


def _seg(s: Stream) -> int:
    return min(s.refresh().compaction.summaries)


def _versions(s: Stream, seg: int) -> list[str]:
    return sorted(n for n in s.store.list(layout.macro_bucket_folder(segment_number(seg), 0)) if n != "head.json")


def _same(a: pa.Table, b: pa.Table) -> None:
    assert a.num_rows == b.num_rows
    assert a.sort_by(ORDER).equals(b.sort_by(ORDER)), "records differ"


def _damage(s: Stream, seg: int, how: str) -> None:
    newest = layout.macro_version(segment_number(seg), 0, len(_versions(s, seg)) - 1)
    if how == "newest version and head hint lost":
        s.store.delete([newest, layout.macro_head(segment_number(seg), 0)])
    elif how == "whole bucket lost":
        folder = layout.macro_bucket_folder(segment_number(seg), 0)
        s.store.delete([f"{folder}/{n}" for n in s.store.list(folder)])
    elif how == "newest version unreadable":
        s.store.write(newest, b"{not json")
    elif how == "newest version and head hint unreadable":
        s.store.write(newest, b"{not json")
        s.store.write(layout.macro_head(segment_number(seg), 0), b"[]")
    else:
        raise AssertionError(how)


DAMAGE = ["newest version and head hint lost", "whole bucket lost", "newest version unreadable",
          "newest version and head hint unreadable"]


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize("how", DAMAGE)
def test_repair_rebuilds_a_damaged_macro_map_from_the_journal(url: str, how: str, chunks: str) -> None:
    s = _compacted_twice(url, chunks)
    before = s.read()
    window = s.read(start=T0 + 2_000, end=T0 + 7_000)
    assert 0 < window.num_rows < before.num_rows
    seg = _seg(s)
    assert len(_versions(s, seg)) == 2
    _damage(s, seg, how)
    with pytest.raises(TStreamError):  # the compacted records' small chunks are collected
        Stream.open(url).read()

    report = Stream.open(url).verify()
    # one repairable problem naming the bucket; never "records lost, truncate the stream"
    assert [(p.kind, p.repairable, p.details["segment"]) for p in report.problems] == [("macro map", True, seg)]
    assert "tstream repair" in report.problems[0].message and "truncate" not in report.summary()
    assert ("is missing" in report.problems[0].message) == (how == "whole bucket lost")

    after = Stream.open(url).repair()
    assert after.ok, after.summary()
    assert any(f"segment {seg} bucket 0" in line for line in after.repaired)
    _same(before, Stream.open(url).read())
    _same(window, Stream.open(url).read(start=T0 + 2_000, end=T0 + 7_000))
    assert Stream.open(url).verify().ok
    # plans of the compacted history read the map version the state names again, not the journal
    fresh = Stream.open(url)
    st = fresh.refresh()
    log = CallLog()
    fresh.store.observer = log
    fresh.plan(st.head_tso, st.tick)
    fresh.store.observer = None
    # (one call: the search's index node, with the map versions the state names in its batch)
    assert log.count() <= 1 and sum("/index/" in rel for _, rel in log.calls) <= 1, log.calls
    # the rebuilt map is what compactions build on: more data, compaction, collection, same records
    s = Stream.open(url)
    _append(s, 90, 20, chunks)
    more = s.read()
    s.compact(full=True)
    s.vacuum(grace_ms=0)
    _same(more, Stream.open(url).read())
    assert Stream.open(url).verify().ok


def test_rebuilt_entries_carry_the_macro_chunks_recorded_facts(url: str) -> None:
    """``_tso`` range, order and level of each rebuilt entry are what the compaction recorded."""
    s = _compacted_twice(url)
    seg = _seg(s)
    mm = MacroMap(s.store)
    healthy = mm.latest(seg, 0)
    _damage(s, seg, "whole bucket lost")
    assert Stream.open(url).repair().ok
    rebuilt = mm.latest(seg, 0)
    assert rebuilt.macros == healthy.macros


def _one_compaction(url: str, chunks: str = "plain") -> tuple[Stream, pa.Table, Macro, list[str]]:
    """Two segments compacted once, nothing collected: the records, a macro-chunk of the first
    segment and the files its manifest names."""
    s = Stream.create(url, segments=2, compaction="off")
    _append(s, 0, 40, chunks)
    before = s.read()
    assert s.compact().macros == 2
    seg = _seg(s)
    macro = next(m for m in MacroMap(s.store).latest(seg, 0).macros if m.floor == 0)
    replaced = json.loads(s.store.read(layout.manifest(macro.path)))["replaced"]
    return s, before, macro, replaced


@pytest.mark.parametrize("chunks", CHUNKS)
def test_a_lost_macro_chunk_whose_small_chunks_remain_is_listed_by_them_and_kept_from_gc(
        url: str, chunks: str) -> None:
    """Deleted before vacuum collected what it replaced: repair lists the small chunks in its
    place (slices of shared files, which a map entry cannot name, are left to the journal) and
    takes them out of the compaction's manifest, so a later vacuum keeps them."""
    s, before, macro, replaced = _one_compaction(url, chunks)
    s.store.delete([macro.path])

    report = Stream.open(url).verify()
    assert [(p.kind, p.repairable) for p in report.problems] == [("macro map", True)], report.summary()
    assert macro.path in report.problems[0].message and "still there" in report.problems[0].message
    assert Stream.open(url).repair().ok
    assert json.loads(s.store.read(layout.manifest(macro.path)))["replaced"] == []
    # no map entry names a slice: it would read as its whole shared file
    s = Stream.open(url)
    shared = {c.path for d in s.journal.deltas(s.state, 0, s.state.pos) for c in d.chunks if c.shared}
    assert bool(shared) == (chunks != "plain")
    assert not any(m.path in shared for m in MacroMap(s.store).latest(_seg(s), 0).macros)
    assert Stream.open(url).verify().ok
    _same(before, Stream.open(url).read())
    Stream.open(url).vacuum(grace_ms=0)
    assert all(s.store.exists(p) for p in replaced)
    _same(before, Stream.open(url).read())
    # the next compaction merges them again, and then they may go
    Stream.open(url).compact(full=True)
    Stream.open(url).vacuum(grace_ms=0)
    _same(before, Stream.open(url).read())
    assert Stream.open(url).verify().ok


def test_vacuum_before_repair_keeps_the_shared_files_of_a_lost_macro_chunks_slices(url: str) -> None:
    """A macro-chunk that merged slices is lost: the map still names it over their ``_seq``
    ranges, but its file holds no records, so vacuum keeps the shared files (the only copy)."""
    s, before, macro, _ = _one_compaction(url, "sliced")
    s = Stream.open(url)
    shared = {c.path for d in s.journal.deltas(s.state, 0, s.state.pos) for c in d.chunks if c.shared}
    s.store.delete([macro.path])
    Stream.open(url).vacuum(grace_ms=0)
    assert all(s.store.exists(p) for p in shared)
    assert Stream.open(url).repair().ok
    _same(before, Stream.open(url).read())
    assert Stream.open(url).verify().ok


def test_a_lost_macro_chunk_without_its_small_chunks_is_reported_as_lost_records(url: str) -> None:
    """No copy left: fsck names the records and the cut, and no map problem is invented."""
    s = _compacted_twice(url)
    seg = _seg(s)
    macro = next(m for m in MacroMap(s.store).latest(seg, 0).macros if m.floor == 0)
    s.store.delete([macro.path])
    report = Stream.open(url).verify()
    assert [(p.kind, p.repairable) for p in report.problems] == [("chunk", False)], report.summary()
    assert macro.path in report.problems[0].path and "truncate" in report.problems[0].message
    assert report.problems[0].details["first_seq"] == macro.first
    after = Stream.open(url).repair()
    assert [p.kind for p in after.problems] == ["chunk"] and not after.repaired


def test_repair_publishes_after_a_compactor_that_wins_the_next_version(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Repair creates a new map version as compactors do (create-if-absent): a version another
    process published meanwhile is never overwritten, and repair publishes after it. (Buckets
    the state does not name take this path: every bucket but a segment's newest.)"""
    s = _compacted_twice(url)
    seg = _seg(s)
    _damage(s, seg, "newest version and head hint lost")
    _, fixes = verify(s.store)
    want = fixes.macros[(seg, 0)]
    state = s.refresh()
    segs = dict(state.compaction.summaries)
    segs[seg] = replace(segs[seg], bucket=7)  # as if the segment's newest bucket were another
    state.compaction = replace(state.compaction, segs=segs)
    stale = s.store.read(layout.macro_version(segment_number(seg), 0, 0))
    rival = seal.seal({**seal.unseal(stale), "v": 1})
    real = s.store.put_if_absent
    rivals: list[str] = []

    def rival_first(rel: str, data: bytes) -> bool:
        if not rivals and "/macros/" in rel:
            rivals.append(rel)
            assert real(rel, rival)  # a rival's version lacking entries
        return real(rel, data)

    monkeypatch.setattr(s.store, "put_if_absent", rival_first)
    done = macro_rebuild.rewrite(s.store, state, seg, 0, want)
    assert rivals and s.store.read(rivals[0]) == rival
    assert any("version 2" in line for line in done)
    assert not want.differs(seg, 0, MacroMap(s.store).latest(seg, 0))


def test_repair_rebuilds_every_damaged_bucket_of_a_segment(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With buckets of 32 ``_seq`` (instead of 2**22), a segment's map spans several buckets;
    losing all of them (the state names only the newest) is rebuilt bucket by bucket."""
    from pyspark_tstream.compaction import policy
    from pyspark_tstream.maps import macromap

    monkeypatch.setattr(macromap, "SPAN", 32)
    monkeypatch.setattr(policy, "SPAN", 32)
    s = _compacted_twice(url)
    before = s.read()
    seg = _seg(s)
    mm = MacroMap(s.store)
    buckets = sorted(int(n) for n in s.store.list(layout.macro_segment_folder(segment_number(seg))) if n.isdigit())
    assert len(buckets) >= 3
    healthy = {b: mm.latest(seg, b).macros for b in buckets}
    folders = [layout.macro_bucket_folder(segment_number(seg), b) for b in buckets]
    s.store.delete([f"{folder}/{n}" for folder in folders for n in s.store.list(folder)])
    report = Stream.open(url).verify()
    assert {p.details["bucket"] for p in report.problems if p.kind == "macro map"} == set(buckets)
    assert all(p.repairable for p in report.problems), report.summary()
    assert Stream.open(url).repair().ok
    for b in buckets:  # the compaction's entries, and any chunk it left unlisted at a bucket's end
        rebuilt = mm.latest(seg, b).macros
        assert set(healthy[b]) <= set(rebuilt)
        assert all(m.floor != 0 and s.store.exists(m.path) for m in set(rebuilt) - set(healthy[b]))
    _same(before, Stream.open(url).read())


WRITES = ("write", "put_if_absent", "delete")


def test_repair_interrupted_at_any_write_completes_on_the_next_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Repair writes only derived objects: a run that dies before any of its writes (map
    versions, head hint, manifest) leaves a stream the next run repairs, and vacuum never
    deletes the small chunks listed in a lost macro-chunk's place."""
    import uuid

    def damaged() -> tuple[str, pa.Table, list[str]]:
        url = f"memory://ts-{uuid.uuid4().hex}/stream"
        s = Stream.create(url, segments=2, compaction="off")
        _append(s, 0, 30)
        before = s.read()
        s.compact()
        seg = _seg(s)
        macro = next(m for m in MacroMap(s.store).latest(seg, 0).macros if m.floor == 0)
        replaced = json.loads(s.store.read(layout.manifest(macro.path)))["replaced"]
        s.store.delete([macro.path, layout.macro_head(segment_number(seg), 0)])
        return url, before, replaced

    def after(url: str, before: pa.Table, replaced: list[str], at: int) -> None:
        assert Stream.open(url).repair().ok, f"crash at call {at}"
        Stream.open(url).vacuum(grace_ms=0)
        assert all(Stream.open(url).store.exists(p) for p in replaced), f"crash at call {at}"
        _same(before, Stream.open(url).read())

    # the version, the head hint, the manifest
    _crash_at_each_write(damaged, lambda s: s.repair(), after, skip=lambda rel: False)


def _crash_at_each_write(damaged: Callable[[], tuple[str, pa.Table, list[str]]], run: Callable[[Stream], object],
                         after: Callable[[str, pa.Table, list[str], int], None], skip: Callable[[str], bool]) -> None:
    """``run`` on a fresh ``damaged()`` stream killed at each store write it makes but the ones
    ``skip`` names (at least 3), then ``after(url, records, files, at)`` checks the next run."""
    # one damaged stream, copied for each run: building it anew each time cost most of the loop
    template, before, files = damaged()
    s = Stream.open(clone(template))
    log = CallLog()
    s.store.observer = log
    run(s)
    writes = [i + 1 for i, (op, rel) in enumerate(log.calls) if op in WRITES and not skip(rel)]
    assert len(writes) >= 3, log.calls
    for at in writes:
        url = clone(template)
        s = Stream.open(url)
        log = CallLog()
        log.fail_at = at
        s.store.observer = log
        with pytest.raises(RuntimeError, match="injected crash"):
            run(s)
        s.store.observer = None
        after(url, before, files, at)
        drop(url)


# -- lost compaction manifests ----------------------------------------------------------------------

def _compacted_unvacuumed(url: str, chunks: str = "plain") -> tuple[Stream, dict[str, bytes]]:
    """Level-1 macro-chunks, then a full compaction merging them with newer chunks, nothing
    collected yet: every compaction's manifest, by path."""
    s = Stream.create(url, segments=3, compaction="off")
    _append(s, 0, 60, chunks)
    assert s.compact().macros >= 3
    _append(s, 60, 30, chunks)
    assert s.compact(full=True).macros >= 3
    s = Stream.open(url)
    rels = [p["manifest"] for d in s.journal.deltas(s.state, 0, s.state.pos) if d.op == "compact"
            for p in d.info["parts"]]
    return s, {rel: s.store.read(rel) for rel in rels}


def test_the_journal_names_what_every_manifest_named(url: str) -> None:
    """``replaced_by`` (what repair and vacuum rebuild a lost manifest from) equals, byte for
    byte, what each compaction wrote: level-1 merges of small chunks, and the full compaction
    merging macro-chunks with newer small chunks."""
    from pyspark_tstream.compaction.gc import replaced_by
    from pyspark_tstream.compaction.manifest import Manifest

    s, manifests = _compacted_unvacuumed(url)
    written = {json.loads(raw)["macro"]: json.loads(raw) for raw in manifests.values()}
    named = replaced_by(s.journal.deltas(s.state, 0, s.state.pos), set(written))
    # both kinds of merge: small chunks only, and macro-chunks with small chunks
    assert any(not set(m["replaced"]) & set(written) for m in written.values())
    assert any(set(m["replaced"]) & set(written) and set(m["replaced"]) - set(written) for m in written.values())
    for macro, m in written.items():
        assert named[macro] == m["replaced"], macro
        rebuilt = Manifest(m["seg"], macro, m["from"], m["to"], tuple(named[macro]))
        assert rebuilt.encode(sealed=True) == manifests[layout.manifest(macro)]
        assert Manifest.decode(manifests[layout.manifest(macro)]) == rebuilt


@pytest.mark.parametrize("how", ["missing", "unreadable"])
def test_repair_rebuilds_a_lost_manifest_and_vacuum_then_collects(url: str, how: str) -> None:
    s, manifests = _compacted_unvacuumed(url)
    before = s.read()
    for rel in manifests:
        s.store.delete([rel]) if how == "missing" else s.store.write(rel, b"{oops")
    report = Stream.open(url).verify()
    assert {(p.kind, p.repairable) for p in report.problems} == {("manifest", True)}, report.summary()
    assert len(report.problems) == len(manifests) and how in report.problems[0].message
    after = Stream.open(url).repair()
    assert after.ok, after.summary()
    assert sum("compaction manifest" in d for d in after.repaired) == len(manifests)
    assert {rel: s.store.read(rel) for rel in manifests} == manifests
    replaced = [r for raw in manifests.values() for r in json.loads(raw)["replaced"]]
    assert Stream.open(url).vacuum(grace_ms=0).replaced == len(replaced)
    assert not any(s.store.exists(r) for r in replaced)
    _same(before, Stream.open(url).read())
    assert Stream.open(url).verify().ok


@pytest.mark.parametrize("how", ["missing", "unreadable"])
def test_vacuum_collects_what_a_compaction_with_a_lost_manifest_replaced(url: str, how: str) -> None:
    """Vacuum running before anyone repairs: it deletes what the journal says the compaction
    replaced, where the manifest would have told it, and keeps everything a read needs."""
    s, manifests = _compacted_unvacuumed(url)
    before = s.read()
    for rel in sorted(manifests)[:2]:
        s.store.delete([rel]) if how == "missing" else s.store.write(rel, b'{"replaced": 3}')
    replaced = [r for raw in manifests.values() for r in json.loads(raw)["replaced"]]
    assert Stream.open(url).vacuum(grace_ms=0).replaced == len(replaced)
    assert not any(s.store.exists(r) for r in replaced)
    _same(before, Stream.open(url).read())
    assert Stream.open(url).verify().ok


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize("first", ["vacuum", "repair"])
def test_a_lost_manifest_of_a_lost_macro_chunk_deletes_nothing(url: str, first: str, chunks: str) -> None:
    """Macro-chunk and manifest both gone, its small chunks still there: vacuum deletes none of
    them (before or after repair), repair lists them in the map, and no record is lost."""
    s, before, macro, replaced = _one_compaction(url, chunks)
    s.store.delete([macro.path, layout.manifest(macro.path)])
    if first == "vacuum":
        Stream.open(url).vacuum(grace_ms=0)
        assert all(s.store.exists(p) for p in replaced)
    report = Stream.open(url).repair()
    assert report.ok and report.repaired, report.summary()
    if first == "repair":  # rebuilt naming nothing: the small chunks hold the records now
        assert json.loads(s.store.read(layout.manifest(macro.path)))["replaced"] == []
    Stream.open(url).vacuum(grace_ms=0)
    assert all(s.store.exists(p) for p in replaced)
    _same(before, Stream.open(url).read())
    assert Stream.open(url).verify().ok


@pytest.mark.slow
def test_vacuum_with_a_lost_manifest_interrupted_at_any_write_completes_on_the_next_run() -> None:
    """Killed before any of its deletes or its commit, the next vacuum (which finds more
    manifests missing: the ones the dead run deleted) deletes exactly what was replaced."""
    import uuid

    def damaged() -> tuple[str, pa.Table, list[str]]:
        url = f"memory://ts-{uuid.uuid4().hex}/stream"
        s, manifests = _compacted_unvacuumed(url)
        s.store.delete(sorted(manifests)[:1])
        return url, s.read(), [r for raw in manifests.values() for r in json.loads(raw)["replaced"]]

    def after(url: str, before: pa.Table, replaced: list[str], at: int) -> None:
        Stream.open(url).vacuum(grace_ms=0)
        assert not any(Stream.open(url).store.exists(r) for r in replaced), f"crash at call {at}"
        _same(before, Stream.open(url).read())
        assert Stream.open(url).verify().ok, f"crash at call {at}"

    # the head hint's write is best effort (a failure there is logged, not raised)
    _crash_at_each_write(damaged, lambda s: s.vacuum(grace_ms=0), after, skip=lambda rel: rel.endswith("head.json"))


def test_fsck_tells_manifests_a_vacuum_collected_before_dying_from_lost_ones() -> None:
    """A vacuum killed between deleting the compactions' manifests (the last of its deletes)
    and committing its progress leaves manifests missing whose replaced files are gone too:
    nothing is lost and the next vacuum records it, so fsck reports nothing (it reported every
    such manifest missing). A manifest lost while the files it names are still there stays a
    problem."""
    import uuid

    url = f"memory://ts-{uuid.uuid4().hex}/stream"
    s, manifests = _compacted_unvacuumed(url)
    before = s.read()
    replaced = [r for raw in manifests.values() for r in json.loads(raw)["replaced"]]

    def die_at_commit(op: str, rel: str) -> None:
        if op == "put_if_absent" and rel.startswith("_tstream/journal/"):
            raise RuntimeError("the vacuum died before committing its progress")

    dying = Stream.open(url)
    dying.store.observer = die_at_commit
    with pytest.raises(RuntimeError, match="died"):
        dying.vacuum(grace_ms=0)
    assert not any(s.store.exists(r) for r in [*manifests, *replaced])
    report = Stream.open(url).verify()
    assert report.ok, report.summary()
    assert report.checked["compaction manifests"] == len(manifests)
    _same(before, Stream.open(url).read())
    Stream.open(url).vacuum(grace_ms=0)
    assert Stream.open(url).verify().ok

    lost_url = f"memory://ts-{uuid.uuid4().hex}/stream"
    lost, lost_manifests = _compacted_unvacuumed(lost_url)
    rel = sorted(lost_manifests)[0]
    lost.store.delete([rel])
    report = Stream.open(lost_url).verify()
    assert [(p.kind, p.repairable) for p in report.problems] == [("manifest", True)], report.summary()
    assert "missing" in report.problems[0].message


def test_a_manifest_naming_metadata_never_makes_vacuum_delete_it(url: str) -> None:
    """Vacuum deletes what a manifest lists: one listing anything but data files is taken as
    unreadable (fsck says so; vacuum uses the journal's list instead)."""
    s, manifests = _compacted_unvacuumed(url)
    before = s.read()
    rel = sorted(manifests)[0]
    doc = json.loads(manifests[rel])
    entry = layout.entry(s.state.pos)
    assert s.store.exists("_tstream/head.json") and s.store.exists(entry)
    s.store.write(rel, json.dumps({**doc, "replaced": ["_tstream/head.json", f"data/0/../../{entry}"]}).encode())
    report = Stream.open(url).verify()
    assert [(p.kind, p.repairable) for p in report.problems] == [("manifest", True)], report.summary()
    assert "unreadable" in report.problems[0].message
    Stream.open(url).vacuum(grace_ms=0)
    assert s.store.exists("_tstream/head.json") and s.store.exists(entry)
    assert not any(s.store.exists(r) for r in doc["replaced"])
    _same(before, Stream.open(url).read())
    assert Stream.open(url).verify().ok


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize("how", ["cut short", "another file's bytes"])
def test_an_unreadable_macro_chunk_whose_replaced_files_remain_is_read_from_them(
        url: str, how: str, chunks: str) -> None:
    """A macro-chunk that merged macro-chunks and newer small chunks is damaged before vacuum
    collected them: fsck reports one repairable bucket (no truncate advice, which would drop
    readable records), repair lists what it replaced, vacuum keeps those, and the next
    compaction merges them again."""
    s, manifests = _compacted_unvacuumed(url, chunks)
    before = s.read()
    top = next(json.loads(raw) for raw in manifests.values()
               if set(json.loads(raw)["replaced"]) & {json.loads(r)["macro"] for r in manifests.values()})
    # a small chunk it replaced, or a shared file of the slices it merged
    other = next(r for r in top["replaced"] + [p for p, _ in top.get("shared", [])] if "/m-" not in r)
    s.store.write(top["macro"], s.store.read(top["macro"])[:-100] if how == "cut short" else s.store.read(other))
    with pytest.raises(TStreamError, match="tstream repair"):
        Stream.open(url).read()
    report = Stream.open(url).verify()
    assert [(p.kind, p.repairable) for p in report.problems] == [("macro map", True)], report.summary()
    assert "truncate" not in report.summary() and "unreadable" in report.problems[0].message
    after = Stream.open(url).repair()
    assert after.ok, after.summary()
    _same(before, Stream.open(url).read())
    Stream.open(url).vacuum(grace_ms=0)
    assert all(s.store.exists(r) for r in top["replaced"])
    _same(before, Stream.open(url).read())
    Stream.open(url).compact(full=True)
    Stream.open(url).vacuum(grace_ms=0)
    _same(before, Stream.open(url).read())
    assert Stream.open(url).verify().ok


@pytest.mark.parametrize("manifest", ["missing", "not an object"])
@pytest.mark.parametrize("first", ["vacuum", "repair"])
def test_a_damaged_manifest_of_an_unreadable_macro_chunk_deletes_nothing(url: str, manifest: str, first: str) -> None:
    """Macro-chunk corrupt (present, unreadable) and its manifest damaged: neither vacuum nor
    repair takes the journal's list of replaced files for deletion, since those files are the
    only readable copy of the records."""
    s, manifests = _compacted_unvacuumed(url)
    before = s.read()
    top = next(json.loads(raw) for raw in manifests.values()
               if set(json.loads(raw)["replaced"]) & {json.loads(r)["macro"] for r in manifests.values()})
    s.store.write(top["macro"], s.store.read(top["macro"])[:-100])
    rel = layout.manifest(top["macro"])
    s.store.delete([rel]) if manifest == "missing" else s.store.write(rel, b"[1, 2, 3]")
    if first == "vacuum":
        Stream.open(url).vacuum(grace_ms=0)
        assert all(s.store.exists(r) for r in top["replaced"])
    after = Stream.open(url).repair()
    assert after.ok, after.summary()
    Stream.open(url).vacuum(grace_ms=0)
    assert all(s.store.exists(r) for r in top["replaced"])
    _same(before, Stream.open(url).read())
    assert Stream.open(url).verify().ok
