"""Metadata records decode into typed records at the boundary and encode back to the same bytes.

The stored forms stay positional JSON lists (the per-segment compaction summary, chunk
references, macro-map entries); each record names its positions once and round-trips every form
ever written, including the first compaction summary's 5 fields. fsck's :class:`Fixes` carries
what repair rewrites as typed fields.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import pyarrow as pa
import pytest
from compaction_streams import T0, fill_stream
from pyspark_tstream import keys as K
from pyspark_tstream.api.config import StreamConfig
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.compaction.manifest import Manifest
from pyspark_tstream.epochs.scaling import EPOCH_CHUNK, epoch_chunk_bytes, epoch_record_bytes, read_epochs
from pyspark_tstream.journal import seal
from pyspark_tstream.journal.compaction_state import (
    CompactInfo,
    CompactionProgress,
    CompactPart,
    SegmentSummary,
    compact_parts,
    compacted_upto,
    segment_summaries,
)
from pyspark_tstream.journal.config import ConfigRecord
from pyspark_tstream.journal.entries import FORMAT_VERSION, Chunk
from pyspark_tstream.journal.op_info import GcInfo, ScaleInfo, TruncateInfo
from pyspark_tstream.journal.packing import expand
from pyspark_tstream.journal.scale_records import EpochRecord, SealedRecord
from pyspark_tstream.journal.state import FoldedAt, SchemaChange, StreamState, Truncation, segment_number
from pyspark_tstream.journal.summary import Summary
from pyspark_tstream.journal.timeindex import (
    COL_BYTES,
    COL_EPOCH,
    COL_ID,
    COL_MAX_TSO,
    COL_ROWS,
    COL_TICK,
    COL_WALL,
    FANOUT,
)
from pyspark_tstream.maintain.fixes import Fixes, ShardFix
from pyspark_tstream.maintain.fsck import verify
from pyspark_tstream.maps.macromap import Macro, MacroMap
from pyspark_tstream.maps.sealed import ShardVersion
from pyspark_tstream.read.compacted import plan_from_map, substitute
from pyspark_tstream.store import layout
from pyspark_tstream.write.commit import SegmentAck


@pytest.mark.parametrize("stored", [
    [120, 7, 12, 0, 3, 100],  # format v2: end of the last macro-chunk
    [120, 7, 12, 0, 3],  # the first form: no macro_end
    [120, 7, 12],  # no map version
    [0, -1, 0, 0, -1, 0],  # nothing settled yet, no map version published
])
def test_segment_summary_round_trips_every_stored_form(stored: list[int]) -> None:
    e = SegmentSummary.decode(stored)
    assert e.encode() == stored
    assert json.dumps(e.encode()) == json.dumps(stored)
    assert e.settled_to == stored[0] and e.last_pos == stored[1] and e.chunks == stored[2]


def test_an_old_summary_looks_up_up_to_its_compacted_seq_and_is_not_planned_from_the_map() -> None:
    old, new = SegmentSummary.decode([120, 7, 12, 0, 3]), SegmentSummary.decode([120, 7, 12, 0, 3, 100])
    assert old.lookup_end == 120 and new.lookup_end == 100  # no chunk above 100 is in a macro-chunk
    assert not old.map_lists_all and new.map_lists_all
    assert old.map_version == new.map_version == (0, 3)
    assert SegmentSummary.decode([120, 7, 12]).map_version is None
    assert SegmentSummary.decode([120, 7, 12, 0, -1, 0]).map_version is None


def test_merging_a_run_into_an_old_summary_writes_the_current_form() -> None:
    old = SegmentSummary.decode([120, 7, 12, 0, 3])
    got = old.merged(SegmentSummary(100, 9, 11, 0, 2, 90))
    assert got.encode() == [120, 9, 12, 0, 3, 120]  # each the larger; an old summary's end is its _seq
    assert SegmentSummary(0).merged(SegmentSummary(50, 4, 5, 0, 1, 40)).encode() == [50, 4, 5, 0, 1, 40]


@pytest.mark.parametrize("stored", [
    {"segs": {"4294967296": [120, 7, 12, 0, 3, 100], "2": [40, 3, 5, 0, 1]}, "pos": 9},
    {"segs": {"2": [40, 3, 5]}, "pos": 9, "gc": 6},
    {"gc": 6},  # a vacuum before the first compaction
    {"gc": 6, "segs": {"2": [40, 3, 5, 0, 1, 40]}, "pos": 9},  # ... and the compaction after it
    {"segs": {}, "pos": 9},  # every summary dropped (sealed and truncated past)
])
def test_compaction_progress_round_trips_every_stored_form(stored: dict) -> None:
    p = CompactionProgress.decode(stored)
    assert json.dumps(p.encode()) == json.dumps(stored)
    assert p.replaced_gc == stored.get("gc", 0) and p.scan_pos == stored.get("pos", 0)
    assert {str(k): e.encode() for k, e in p.summaries.items()} == stored.get("segs", {})


def test_compaction_progress_adds_keys_where_they_always_went() -> None:
    segs = {2: SegmentSummary(40, 3, 5, 0, 1, 40)}
    first = CompactionProgress().advanced(segs, 9)
    assert list(first.encode()) == ["segs", "pos"]
    assert list(first.collected(6).encode()) == ["segs", "pos", "gc"]
    vacuumed = CompactionProgress().collected(6)
    assert vacuumed.encode() == {"gc": 6}
    assert list(vacuumed.advanced(segs, 9).encode()) == ["gc", "segs", "pos"]
    assert list(CompactionProgress.decode({"gc": 6}).advanced(segs, 9).encode()) == ["gc", "segs", "pos"]
    assert CompactionProgress().encode() == {}


@pytest.mark.parametrize("stored", [
    {"seg": 2, "from": 0, "to": 40, "macro": "data/2/m-a.parquet", "manifest": "_tstream/compact/m-a.json",
     "rows": 40, "bytes": 5000, "replaced": 12},
    {"seg": 4294967296, "from": 40, "to": 90, "macro": "data/0/m-b.parquet", "manifest": "_tstream/compact/m-b.json",
     "rows": 50, "bytes": 7000, "adopted": True},
])
def test_compaction_parts_round_trip(stored: dict) -> None:
    p = CompactPart.from_json(stored)
    assert json.dumps(p.to_json()) == json.dumps(stored)
    assert (p.seg, p.first, p.end, p.macro, p.manifest) == tuple(stored[k] for k in ("seg", "from", "to", "macro",
                                                                                      "manifest"))
    assert compact_parts({"rows": 0, "parts": [stored]}) == [p] and compact_parts({"rows": 3}) == []


@pytest.mark.parametrize("stored", [
    [3, "data/1/a.parquet", 10, 900, 40, 7, 100, 200],
    [3, "data/1/a.parquet", 10, 900, 40, 0, 100, 200, 64],
    [3, "data/1/a.parquet", 10, 900, 40, 0, 100, 200, 0, False],
    [3, "data/1/a.parquet", 10, 900, 40, 7, 100, 200, 0, True, [5, 20, 1]],
])
def test_chunk_references_round_trip(stored: list) -> None:
    c = Chunk.from_json(stored)
    assert c.to_json() == stored
    assert (c.seg, c.path, c.rows, c.bytes, c.seq, c.floor, c.lo, c.hi) == tuple(stored[:8])
    if len(stored) > 10:
        assert c.marks == (105, 125, 126)  # differences from lo, then from the previous mark


@pytest.mark.parametrize("stored", [
    [0, 40, "data/1/m-1.parquet", 5000, 10, 90, 1, 2],
    [40, 5, "data/1/c.parquet", 300, 91, 99, 0, 0, 77],  # a chunk listed as it is keeps its floor
])
def test_macro_map_entries_round_trip(stored: list) -> None:
    m = Macro.from_json(stored)
    assert m.to_json() == stored
    assert m.end == stored[0] + stored[1] and m.sorted is bool(stored[6])


def _compacted(url: str) -> Stream:
    s = fill_stream(url, appends=40)
    s.compact()
    fill_stream(url, appends=10, start=40)
    return Stream.open(url)


def test_stored_metadata_of_a_compacted_stream_reencodes_byte_for_byte(url: str) -> None:
    s = _compacted(url)
    st = s.refresh()
    for pos in range(1, st.pos + 1):
        raw = s.store.read(layout.entry(pos))
        assert s.journal.read_entry(pos).encode() == raw, pos
    segs = segment_summaries(st)
    assert segs and all(len(e.encode()) == 6 for e in segs.values())
    assert {str(k): e.encode() for k, e in segs.items()} == st.to_json()["compaction"]["segs"]
    mm = MacroMap(s.store)
    for seg, e in segs.items():
        rel = layout.macro_version(segment_number(seg), int(e.bucket or 0), int(e.version or 0))
        raw = s.store.read(rel)
        assert mm.decode(raw, rel).to_bytes(sealed=True) == raw  # a new stream seals its metadata


def test_a_stream_whose_state_holds_old_summaries_reads_the_same_records(url: str) -> None:
    s = _compacted(url)
    st = s.refresh()
    chunks = [c for d in s.journal.deltas(st, st.head_pos, st.pos) for c in d.chunks]
    old = s.journal.read_entry(st.pos).state
    old.compaction = replace(old.compaction,
                             segs={k: replace(e, macro_end=None) for k, e in segment_summaries(st).items()})
    assert all(compacted_upto(old, seg) == compacted_upto(st, seg) for seg in segment_summaries(st))
    # the first form's map need not list passed chunks: never planned from the map alone
    assert plan_from_map(s.store, st, 1, st.head_tso, st.tick) is not None
    assert plan_from_map(s.store, old, 1, st.head_tso, st.tick) is None
    assert substitute(s.store, old, chunks) == substitute(s.store, st, chunks)


def test_fsck_hands_repair_typed_fixes_that_it_writes(url: str) -> None:
    s = Stream.create(url, segments=2)
    for b in range(70):
        s.append(pa.table({"k": [f"k{b % 5}"], "t": [1_700_000_000_000 + b]}), key="k", timestamp="t")
        if b == 30:
            s.scale(split=s.state.segments[0].id, parts=2)
    node, epoch = s.store.read(layout.index_node(1, 0)), s.store.read(layout.epoch_record(1))
    s.store.delete([layout.index_node(1, 0), layout.epoch_record(1)])
    s.store.write(layout.sealed_version(0, 0), b"nope")
    report, fixes = verify(s.store)
    assert isinstance(fixes, Fixes) and not report.ok
    assert fixes.nodes == {(1, 0): node} and fixes.epochs == {1: epoch}
    assert set(fixes.shards) == {0} and isinstance(fixes.shards[0], ShardFix) and list(fixes.shards[0].versions) == [0]
    assert fixes.newest.pos == s.refresh().pos and not fixes.macros and not fixes.manifests
    after = Stream.open(url).repair()
    assert after.ok, after.summary()
    assert s.store.read(layout.index_node(1, 0)) == node and s.store.read(layout.epoch_record(1)) == epoch


def test_a_summary_that_is_not_integers_is_refused() -> None:
    with pytest.raises(TypeError, match="summary's last_pos"):
        SegmentSummary.decode([1, "x", 2])


def _every_state_field() -> dict:
    """A stored state with every optional field present, each list field holding two items."""
    return {
        "pos": 40, "epoch": 2, "tick": 7_000, "max_tso": 7_100, "wall": 1_700_000_009_000, "created": 1_700_000_000_000,
        "schema": "", "config": {"segments": 2, "compaction": "target=128MB,min=16"},
        "segments": [[8589934594, 0, 9223372036854775808, 12, 7_100, 12, 900, 3, 0, 0, 0, 0]],
        "writers": {"w": {"tso": 7_100, "wall": 1_700_000_009_000, "live": True, "seen": True,
                          "batches": [[3, 38], ["a", 39]], "commits": 2, "rows": 12}},
        "index": [[[39, 7_000, 6_900, 1_700_000_008_000, 30, 2, 800],
                   [40, 7_100, 7_000, 1_700_000_009_000, 36, 2, 900]]],
        "rows": 36, "bytes": 900, "chunks": 9, "next_number": 3, "head_pos": 5, "head_tso": 2_000, "sealed": 1,
        "first_tso": 2_100, "gc_pos": 4, "meta_gc_pos": 3,
        "pending_sealed": [{"id": 1, "lo": 0, "hi": 9223372036854775808, "rows": 10, "bytes": 300, "chunks": 2,
                            "first_seq": 0, "next_seq": 10, "last_tso": 3_000, "sealed_epoch": 2, "sealed_pos": 40,
                            "successors": [8589934594]}],
        "pending_epoch": {"epoch": 2, "pos": 40, "wall": 1_700_000_009_000, "tick": 7_000, "sealed": [1],
                          "created": [8589934594], "predecessors": {"8589934594": [1]},
                          "segments": [[8589934594, 0, 9223372036854775808]]},
        "truncations": [[1_700_000_001_000, 3], [1_700_000_002_000, 5]],
        "compaction": {"gc": 4, "segs": {"8589934594": [6, 38, 2, 0, 1, 6], "0": [4, 20, 1, 0, 0]}, "pos": 39},
        "schema_changes": [[30, 1_700_000_007_000, 6_500, ["x"]], [35, 1_700_000_008_000, 6_800, ["y", "z"]]],
        "folded": [[38, ["r1", "r2"]], [40, ["r3"]]],
    }


def test_a_state_with_every_field_reencodes_byte_for_byte() -> None:
    stored = _every_state_field()
    st = StreamState.from_json(stored)
    assert json.dumps(st.to_json(), separators=(",", ":")) == json.dumps(stored, separators=(",", ":"))
    assert st.truncations[-1] == Truncation(1_700_000_002_000, 5)
    assert st.schema_changes[1] == SchemaChange(35, 1_700_000_008_000, 6_800, ("y", "z"))
    assert st.folded[0] == FoldedAt(38, ("r1", "r2")) and st.was_folded("r3") == 40
    assert st.compaction.replaced_gc == 4 and st.compaction.scan_pos == 39
    # the optional fields are left out when empty, as a state that never needed them was written
    bare = {k: v for k, v in stored.items() if k not in ("compaction", "schema_changes", "folded")}
    assert json.dumps(StreamState.from_json(bare).to_json()) == json.dumps(bare)


def test_every_entry_of_a_scaled_truncated_vacuumed_and_compacted_stream_reencodes_byte_for_byte(url: str) -> None:
    s = Stream.create(url, segments=2, compaction="off")
    for b in range(30):
        s.append(pa.table({"k": [f"k{b % 5}"], "t": [T0 + b * 1000]}), key="k", timestamp="t")
        if b == 10:
            s.scale(split=s.state.segments[0].id, parts=2)
        if b == 15:
            s.append(pa.table({"k": ["k1"], "t": [T0 + b * 1000 + 1], "x": [1]}), key="k", timestamp="t",
                     merge_schema=True)
    s.truncate(T0 + 2_500)
    s.vacuum(grace_ms=0)  # before the first compaction: state.compaction holds only "gc"
    assert list(s.refresh().to_json()["compaction"]) == ["gc"]
    s.compact(full=True)
    s.vacuum(grace_ms=0)
    st = s.refresh()
    assert list(st.to_json()["compaction"]) == ["gc", "segs", "pos"] and st.truncations and st.schema_changes
    ops = set()
    for pos in range(st.head_pos, st.pos + 1):
        raw = s.store.read(layout.entry(pos))
        e = s.journal.read_entry(pos)
        ops.add(e.op)
        assert e.encode() == raw, pos
    assert {"append", "scale", "truncate", "gc", "compact"} <= ops


def test_sealed_records_name_each_key_once_and_round_trip() -> None:
    stored = _every_state_field()["pending_sealed"][0]
    rec = SealedRecord.from_json(stored)
    assert json.dumps(rec.to_json()) == json.dumps(stored)
    assert rec.successors == (8589934594,) and rec.sealed_pos == 40
    assert SealedRecord.STORED == tuple(f.name for f in fields(SealedRecord))


@pytest.mark.parametrize("stored", [
    _every_state_field()["pending_epoch"],
    {"epoch": 0, "pos": 0, "sealed": [], "created": [], "segments": None},  # epoch 0 of a stream never scaled
])
def test_epoch_records_round_trip_every_stored_form(stored: dict) -> None:
    rec = EpochRecord.from_json(stored)
    assert json.dumps(rec.to_json()) == json.dumps(stored)
    assert rec.sealed == tuple(stored["sealed"]) and rec.created == tuple(stored["created"])
    assert EpochRecord.initial().to_json() == {"epoch": 0, "pos": 0, "sealed": [], "created": [], "segments": None}


def test_epoch_records_and_history_chunks_of_many_scales_reencode_byte_for_byte(url: str) -> None:
    s = Stream.create(url, segments=1, compaction="off")
    for b in range(EPOCH_CHUNK + 1):  # one full history chunk, whose epoch 0 has no record of its own
        s.append(pa.table({"k": [f"k{b}"], "t": [T0 + b]}), key="k", timestamp="t")
        if b % 2 == 0:
            s.scale(split=s.state.segments[0].id, parts=2)
        else:
            s.scale(merge=[g.id for g in s.state.segments])
    st = s.refresh()
    for ep in range(1, st.epoch + 1):
        raw = s.store.read(layout.epoch_record(ep))
        assert epoch_record_bytes(EpochRecord.from_json(seal.unseal(raw)), sealed=True) == raw
    raw = s.store.read(layout.epoch_chunk(0))
    assert epoch_chunk_bytes(0, [EpochRecord.from_json(r) for r in seal.unseal(raw)["records"]], sealed=True) == raw
    assert read_epochs(s.store, st, 0, EPOCH_CHUNK)[0] == EpochRecord.initial()


#: The info record of each op that commits no data.
OP_INFOS: dict[str, type[ScaleInfo] | type[TruncateInfo] | type[GcInfo] | type[CompactInfo]] = {
    "scale": ScaleInfo, "truncate": TruncateInfo, "gc": GcInfo, "compact": CompactInfo}


@pytest.mark.parametrize(("op", "stored"), [
    ("scale", {"sealed": [0], "created": [4294967298, 4294967299], "reason": "manual"}),
    ("truncate", {"head_tso": 463267587948543999, "cut": {"4294967298": 0, "1": 3}, "reason": "retention"}),
    ("gc", {"chunks": 2, "entries": 0, "nodes": 0}),  # the first release counted these three
    ("gc", {"chunks": 0, "entries": 0, "nodes": 0, "replaced": 8}),
    ("gc", {"chunks": 1, "entries": 2, "nodes": 0, "replaced": 0, "requests": 1, "orphans": 3}),
    ("compact", {"rows": 0, "parts": [{"seg": 2, "from": 0, "to": 40, "macro": "data/2/m-a.parquet",
                                       "manifest": "_tstream/compact/m-a.json", "rows": 40, "bytes": 5000,
                                       "replaced": 12}]}),
])
def test_the_info_of_entries_that_commit_no_data_round_trips_every_stored_form(op: str, stored: dict) -> None:
    info = OP_INFOS[op].decode(stored)
    assert json.dumps(info.encode()) == json.dumps(stored)
    if isinstance(info, TruncateInfo):
        assert info.cut == {4294967298: 0, 1: 3} and info.reason == "retention"
    if isinstance(info, GcInfo):
        assert (info.replaced is None) == ("replaced" not in stored) and info.chunks == stored["chunks"]
    if isinstance(info, CompactInfo):
        assert info.parts == (CompactPart.from_json(stored["parts"][0]),)
    assert GcInfo.STORED == tuple(f.name for f in fields(GcInfo))


def test_scale_truncate_and_vacuum_commit_their_typed_info(url: str) -> None:
    s = Stream.create(url, segments=1, compaction="off")
    s.append(pa.table({"k": ["a", "b"], "t": [T0, T0 + 1]}), key="k", timestamp="t")
    first = s.state.segments[0].id
    done = s.scale(split=first, parts=2)
    info = ScaleInfo.decode(s.journal.read_entry(s.refresh().pos).info)
    assert info.sealed == (first,) and info.created == tuple(done.created) and info.reason == "manual"
    s.append(pa.table({"k": ["a"], "t": [T0 + 5]}), key="k", timestamp="t")
    s.truncate(T0 + 2)
    cut = TruncateInfo.decode(s.journal.read_entry(s.refresh().pos).info)
    assert cut.reason == "manual" and cut.head_tso == s.state.head_tso
    assert cut.cut and set(cut.cut) <= {g.id for g in s.state.segments}
    counts = s.vacuum(grace_ms=0)
    gc = GcInfo.decode(s.journal.read_entry(s.refresh().pos).info)
    assert gc == counts and gc.chunks >= 1 and gc.replaced == 0 and gc.orphans is None


GOLDEN = Path(__file__).resolve().parent / "golden"
#: The state fields these records hold (the others have their own tests).
RECORD_FIELDS = ("pending_sealed", "pending_epoch", "truncations", "compaction", "schema_changes", "folded")


@pytest.mark.parametrize("name", sorted(p.parent.name for p in GOLDEN.glob("*/stream")))
def test_golden_streams_metadata_reencodes_byte_for_byte_through_the_records(name: str) -> None:
    """What older versions wrote (tests/golden) decodes into these records and encodes back to
    the same JSON: state fields, compaction parts, epoch records and history chunks, sealed shards."""
    meta = GOLDEN / name / "stream" / "_tstream"
    entries = sorted(meta.glob("journal/*/*.json"))
    assert entries
    ops: set[str] = set()
    # format 6: an entry holds its change (the same stored forms of the fields it changed), and
    # checkpoints the whole state
    for path in entries + sorted(meta.glob("checkpoints/*/*.json")):
        stored = expand(json.loads(path.read_bytes()))
        if "state" not in stored:
            continue
        got = StreamState.from_json(stored["state"]).to_json()
        for key in RECORD_FIELDS:  # (a first-release state without one is written with its default)
            if key in stored["state"]:
                assert json.dumps(got.get(key)) == json.dumps(stored["state"][key]), (path, key)
        parts = stored.get("info", {}).get("parts", [])
        assert [p.to_json() for p in compact_parts(stored.get("info", {}))] == parts, path
        if stored.get("op") in OP_INFOS:
            ops.add(stored["op"])
            info = OP_INFOS[stored["op"]].decode(stored["info"])
            assert json.dumps(info.encode()) == json.dumps(stored["info"]), path
    if name == "v1":  # the fixture that scaled, truncated and vacuumed
        assert {"scale", "truncate", "gc"} <= ops
    sealed = name == "v6-checksums"  # every object of a stream declaring checksums is sealed
    for path in meta.glob("epochs/[0-9]*/*.json"):
        again = epoch_record_bytes(EpochRecord.from_json(seal.unseal(path.read_bytes())), sealed)
        assert again == path.read_bytes(), path
    for path in meta.glob("epochs/chunks/*.json"):
        chunk = seal.unseal(path.read_bytes())  # (its "v" is the format version that wrote it)
        again = epoch_chunk_bytes(chunk["chunk"], [EpochRecord.from_json(r) for r in chunk["records"]], sealed)
        assert again.replace(b'"v":%d' % FORMAT_VERSION, b'"v":%d' % chunk["v"], 1) == path.read_bytes(), path
    for path in meta.glob("sealed/*/*.json"):
        for rec in seal.unseal(path.read_bytes())["segments"].values():
            assert json.dumps(SealedRecord.from_json(rec).to_json()) == json.dumps(rec), path
        assert ShardVersion.decode(path.read_bytes(), str(path)).encode(sealed) == path.read_bytes(), path
    for path in meta.glob("compact/*.json"):
        manifest = Manifest.decode(path.read_bytes())
        assert manifest.encode(sealed) == path.read_bytes() and (manifest.replaced or manifest.shared), path
        assert Manifest.read(path.read_bytes(), manifest.macro) == manifest
        assert Manifest.read(path.read_bytes(), "data/0/other.parquet") is None


@pytest.mark.parametrize("stored", [
    {"segments": 2, "timestamping": "client-prefer", "timestamping_uncapped": False, "writers": ["a"],
     "writer_lease_ms": 60000, "retention": None, "scaling": "records=5000/s,max=8", "compression": "snappy",
     "compaction": "off"},
    # a stream created before compaction existed: no key, read as the default, written without it
    {"segments": 2, "timestamping": "client-prefer", "timestamping_uncapped": False, "writers": [],
     "writer_lease_ms": 60000, "retention": None, "scaling": None, "compression": "snappy"},
    {"segments": 2, "compaction": "target=128MB,min=16"},
    {"later_setting": [1, 2], "segments": 3},  # a key a later version added is kept where it stood
])
def test_stream_configs_round_trip_every_stored_form(stored: dict) -> None:
    rec = ConfigRecord.from_json(stored)
    assert json.dumps(rec.to_json()) == json.dumps(stored)
    assert rec.segments == stored["segments"] and rec.compaction == stored.get("compaction", "target=128MB,min=16")
    assert rec.writers == tuple(stored.get("writers", ()))
    assert rec == ConfigRecord(**{k: v for k, v in stored.items() if k in ConfigRecord.FIELDS and k != "writers"},
                               writers=rec.writers)  # the stored form is not a setting
    # a changed copy, and the checked config of a stored one, store every setting
    assert list(replace(rec, segments=5).to_json()) == list(ConfigRecord.FIELDS)
    assert StreamConfig.from_record(rec).to_json() == {**StreamConfig().to_dict(), **{
        k: v for k, v in stored.items() if k in ConfigRecord.FIELDS}}


def test_the_config_record_names_each_setting_once() -> None:
    assert ConfigRecord.FIELDS == tuple(f.name for f in fields(ConfigRecord) if f.init)
    assert set(ConfigRecord.FIELDS) == set(K.STREAM_CONFIG_FIELDS.values())
    assert set(StreamConfig.FIELDS) == set(ConfigRecord.FIELDS)


@pytest.mark.parametrize("stored", [{"segments": "2"}, {"writers": "a,b"}, {"timestamping_uncapped": 1},
                                    {"retention": 7}, {"compaction": None}])
def test_a_wrong_typed_stored_config_is_refused(stored: dict) -> None:
    with pytest.raises(TypeError, match=f"state.config.{next(iter(stored))}"):
        ConfigRecord.from_json(stored)


def test_a_created_stream_stores_every_setting_and_reads_them_typed(url: str) -> None:
    s = Stream.create(url, segments=3, writers=["w1"], compaction="off")
    st = Stream.open(url).state
    assert isinstance(st.config, ConfigRecord)
    assert (st.config.segments, st.config.writers, st.config.compaction) == (3, ("w1",), "off")
    assert st.to_json()["config"] == s.config.to_dict() and list(st.to_json()["config"]) == list(ConfigRecord.FIELDS)
    assert Stream.open(url).config == s.config


@pytest.mark.parametrize("stored", [
    [39, 7_000, 6_900, 1_700_000_008_000, 30, 2, 800],
    [0, 0, 0, 1_795_837_163_522, 0],  # the first release: no epoch, no bytes
])
def test_summaries_read_by_name_and_encode_as_stored(stored: list) -> None:
    s = Summary.decode(stored)
    assert json.dumps(s.encode()) == json.dumps([*stored, *[0] * (7 - len(stored))])
    assert json.dumps(s) == json.dumps(s.encode())  # a summary inside a node dumps as its list
    assert (s.id, s.max_tso, s.tick, s.wall, s.rows) == tuple(stored[:5])
    assert (s.epoch, s.bytes) == ((stored[5], stored[6]) if len(stored) == 7 else (0, 0))
    assert [s[c] for c in (COL_ID, COL_MAX_TSO, COL_TICK, COL_WALL, COL_ROWS, COL_EPOCH, COL_BYTES)] == list(s)
    st = StreamState.from_json({**_every_state_field(), "index": [[stored]]})
    assert st.index == [[s]] and st.to_json()["index"] == [[s.encode()]]


def test_flushed_index_nodes_hold_typed_summaries_and_the_bytes_they_always_had(url: str) -> None:
    s = Stream.create(url, segments=1, compaction="off")
    for b in range(FANOUT + 2):
        s.append(pa.table({"k": ["a"], "t": [T0 + b]}), key="k", timestamp="t")
    st = s.refresh()
    node = s.journal.read_node(1, 0)
    assert all(isinstance(i, Summary) for i in node["items"]) and [i.id for i in node["items"]] == list(range(FANOUT))
    raw = json.loads(s.store.read(layout.index_node(1, 0)))
    assert raw["items"] == [i.encode() for i in node["items"]]
    assert st.index[1] == [node["items"][-1]._replace(id=0)]
    assert [i.id for i in st.index[0]] == [FANOUT, FANOUT + 1, FANOUT + 2]  # position 0 is the creation
    assert st.index[0][-1].rows == FANOUT + 2 and st.index[0][-1] == Summary.decode(st.to_json()["index"][0][-1])


@pytest.mark.parametrize("doc", [
    b'{"seg":1,"macro":"data/1/m-a.parquet","from":0,"to":15,"replaced":["data/1/w-1.parquet"],'
    b'"shared":[["data/s-1.parquet",4]]}',
    b'{"seg":1,"macro":"data/1/m-a.parquet","from":0,"to":15,"replaced":[]}',
])
def test_manifests_round_trip(doc: bytes) -> None:
    m = Manifest.decode(doc)
    assert m.encode() == doc and m.macro == "data/1/m-a.parquet" and (m.first, m.end) == (0, 15)
    assert dict(m.shared) == ({"data/s-1.parquet": 4} if b"shared" in doc else {})


@pytest.mark.parametrize("doc", [
    b'{"seg":1,"macro":"data/1/m-a.parquet","from":0,"to":15,"replaced":["_tstream/head.json"]}',  # metadata
    b'{"seg":1,"macro":"data/1/m-a.parquet","from":0,"replaced":["data/1/w-1.parquet"]}',  # no end
    b'["data/1/w-1.parquet"]', b"{not json",
])
def test_a_manifest_vacuum_must_not_trust_reads_as_none(doc: bytes) -> None:
    assert Manifest.read(doc, "data/1/m-a.parquet") is None


def test_a_shard_version_adds_records_after_the_ones_it_holds() -> None:
    stored = _every_state_field()["pending_sealed"][0]
    rec = SealedRecord.from_json(stored)
    first = ShardVersion(0, -1).next([rec])
    assert first.v == 0 and first.holds(1) and first.get(1) == rec and not first.holds(2)
    assert first.encode() == json.dumps({"shard": 0, "v": 0, "segments": {"1": stored}}, separators=(",", ":")).encode()
    assert ShardVersion.decode(first.encode(), "x") == first


def test_an_ack_names_what_each_segment_got_and_still_reads_by_key(url: str) -> None:
    s = Stream.create(url, segments=1, compaction="off")
    s.append(pa.table({"k": ["a"], "t": [T0]}), key="k", timestamp="t")
    ack = s.append(pa.table({"k": ["a", "b", "c"], "t": [T0 + 9, T0 + 3, T0 + 5]}), key="k", timestamp="t")
    (seg, got), = ack.segments.items()
    assert isinstance(got, SegmentAck) and seg == s.state.segments[0].id
    assert (got.first_seq, got.last_seq, got.rows) == (1, 3, 3) and got.first_tso <= got.last_tso
    assert (ack.first_tso, ack.last_tso, ack.first_id) == (got.first_tso, got.last_tso, got.first_id)
    assert dict(got) == {"first_seq": 1, "last_seq": 3, "first_tso": got.first_tso, "last_tso": got.last_tso,
                         "rows": 3}  # the mapping it used to be
    assert got["rows"] == 3 and sum(a["rows"] for a in ack.segments.values()) == 3
    with pytest.raises(KeyError, match="first_seq, last_seq"):
        got["count"]
    two = SegmentAck.of(Chunk(seg, "p", 2, 10, 4, 4, 50, 60)).with_chunk(Chunk(seg, "q", 3, 10, 6, 6, 40, 55))
    assert two == SegmentAck(first_seq=4, last_seq=8, first_tso=40, last_tso=60, rows=5)
