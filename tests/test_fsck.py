"""``Stream.verify``/``tstream fsck`` and ``Stream.repair``/``tstream repair``.

Each derived object (head, anchor, index node of level 1 and 2, epoch record, sealed-shard
version and hint, the newest journal entry with its head copy) is damaged in turn: fsck finds it
(exit 1), repair rebuilds it byte for byte from the journal, and fsck is clean again with the
same records readable. A missing chunk cannot be rebuilt: fsck names its records and the
truncate command that gets past them, and that command works.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pyarrow as pa
import pytest
from helpers import T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import main
from pyspark_tstream.epochs.scaling import EPOCH_CHUNK
from pyspark_tstream.errors import CorruptChunkError
from pyspark_tstream.journal.entries import Entry
from pyspark_tstream.journal.timeindex import FANOUT
from pyspark_tstream.maintain.retention import meta_gc_target
from pyspark_tstream.read.compacted import substitute
from pyspark_tstream.store import layout
from pyspark_tstream.timestamps import physical

#: The logic here sits above the store: its memory:// cases run by default, its file:// cases
#: in the slow set (tests/test_storage.py pins the file store's own primitives by default).
pytestmark = pytest.mark.slow_on_file


def _scaled_stream(url: str, commits: int = 70) -> Stream:
    s = Stream.create(url, segments=2)
    for b in range(commits):
        s.append(pa.table({"k": [f"k{b % 5}", f"k{b % 3}"], "t": [T0 + b * 1000, T0 + b * 1000 + 1]}),
                 key="k", timestamp="t")
        if b == 30:
            s.scale(split=s.state.segments[0].id, parts=2)
    return s


def _records(url: str) -> list[int]:
    col = Stream.open(url).read()["t"]
    return sorted(col.cast(pa.int64()).to_pylist() if not pa.types.is_integer(col.type) else col.to_pylist())


DAMAGES: dict[str, Callable[[Stream], None]] = {
    "head garbage": lambda s: s.store.write(layout.HEAD, b"\x00garbage"),
    "head missing": lambda s: s.store.delete([layout.HEAD]),
    "anchor garbage": lambda s: s.store.write(layout.ANCHOR, b'{"pos": "x"}'),
    "level-1 node missing": lambda s: s.store.delete([layout.index_node(1, 0)]),
    "level-1 node wrong": lambda s: s.store.write(layout.index_node(1, 1), s.store.read(layout.index_node(1, 0))),
    "level-1 node truncated":
        lambda s: s.store.write(layout.index_node(1, 0), s.store.read(layout.index_node(1, 0))[:100]),
    "epoch record missing": lambda s: s.store.delete([layout.epoch_record(1)]),
    "epoch record garbage": lambda s: s.store.write(layout.epoch_record(1), b"[1,2"),
    "shard hint garbage": lambda s: s.store.write("_tstream/sealed/000000/head.json", b"{}"),
    "shard version garbage": lambda s: s.store.write("_tstream/sealed/000000/00000000.json", b"nope"),
    "newest entry garbage": lambda s: s.store.write(layout.entry(s.refresh().pos), b"{\"pos\": 1"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_fsck_finds_and_repair_rebuilds(url: str, damage: str, capsys: pytest.CaptureFixture) -> None:
    s = _scaled_stream(url)
    before = _records(url)
    assert s.verify().ok
    assert main(["fsck", url]) == 0
    DAMAGES[damage](s)
    report = Stream.open(url).verify()
    assert not report.ok and all(p.repairable for p in report.problems), report.summary()
    capsys.readouterr()
    assert main(["fsck", url]) == 1
    out = capsys.readouterr().out
    assert "problem(s)" in out and f"tstream repair {Stream.open(url).url}" in out
    assert main(["repair", url]) == 0
    out = capsys.readouterr().out
    assert "repaired:" in out and "no problems" in out
    assert Stream.open(url).verify().ok
    assert _records(url) == before
    Stream.open(url).append(pa.table({"k": ["k1"], "t": [T0 + 999_000]}), key="k", timestamp="t")
    assert Stream.open(url).verify().ok


def test_level2_index_node_rebuilt() -> None:
    url = "memory://fsck-l2/s"
    s = Stream.create(url, segments=1)
    state = s.state
    for _ in range(FANOUT * FANOUT + 3):
        _, state = s.journal.commit(lambda st, pos: Entry(pos=pos, op="tick", wall=st.wall, state=st), state)
    good = s.store.read(layout.index_node(2, 0))
    s.store.write(layout.index_node(2, 0), b"\x00")
    report = Stream.open(url).verify()
    assert [p.kind for p in report.problems] == ["node"] and report.problems[0].repairable
    Stream.open(url).repair()
    assert s.store.read(layout.index_node(2, 0)) == good


def test_missing_chunk_names_records_and_a_working_remedy(url: str, capsys: pytest.CaptureFixture) -> None:
    s = _scaled_stream(url, 10)
    victim = s.journal.read_entry(4).chunks[0]
    # an append's one data file holds a slice of every segment it reached: each is lost
    lost = [c for c in s.journal.read_entry(4).chunks if c.path == victim.path]
    s.store.delete([victim.path])
    with pytest.raises(Exception, match=r"tstream fsck"):
        Stream.open(url).read()
    report = Stream.open(url).verify()
    assert report.problems and all(p.kind == "chunk" and not p.repairable for p in report.problems)
    named = sorted((p.details["segment"], p.details["first_seq"], p.details["last_seq"]) for p in report.problems)
    assert named == sorted((c.seg, c.seq, c.seq + c.rows - 1) for c in lost)
    assert main(["repair", url]) == 1  # says what it cannot rebuild
    out = capsys.readouterr().out
    assert all(f"segment {c.seg} with _seq {c.seq}" in out for c in lost)
    # each lost slice names its remedy: following them all leaves a sound stream
    commands = [part.split(" (this drops")[0] for part in out.split("truncate the stream past them: ")[1:]]
    assert len(commands) == len(lost)
    for command in commands:
        args = command.split()
        assert args[:2] == ["tstream", "truncate"]
        assert main(args[1:]) == 0
    assert main(["fsck", url]) == 0
    left = _records(url)
    assert left and all(t > physical(max(c.hi for c in lost)) for t in left)  # exactly the records up to it went


def test_chunk_with_wrong_rows_is_found(url: str) -> None:
    s = _scaled_stream(url, 6)
    victim = s.journal.read_entry(3).chunks[0]
    # a file of one record (an append that reaches one segment writes a plain file)
    s.append(pa.table({"k": ["k0"], "t": [T0 + 99_000]}), key="k", timestamp="t")
    (other,) = s.journal.read_entry(s.state.pos).chunks
    assert not victim.shared and not other.shared and other.rows != victim.rows
    s.store.write(victim.path, s.store.read(other.path))
    (problem,) = Stream.open(url).verify().problems
    assert problem.kind == "chunk" and "rows" in problem.message


def test_chunk_overwritten_with_another_of_the_same_size_is_found(url: str) -> None:
    """Another chunk's file of the same rows and bytes passed every check: a read returned its
    records under this chunk's _seq, and fsck found nothing. Their times give it away."""
    s = Stream.create(url, segments=1, compaction="off")
    for b in range(12):
        s.append(pa.table({"k": ["a", "b"], "t": [T0 + b * 1000, T0 + b * 1000 + 1]}), key="k", timestamp="t")
    before = Stream.open(url).read()
    # two of the same size (page CRCs are varints: a chunk's size varies by a byte or two)
    chunks = [s.journal.read_entry(p).chunks[0] for p in range(1, 13)]
    victim, other = next((v, o) for v in reversed(chunks) for o in chunks
                         if o.seq < v.seq and (o.rows, o.bytes) == (v.rows, v.bytes))
    assert (victim.rows, victim.bytes) == (other.rows, other.bytes)  # what the older checks compare
    saved = s.store.read(victim.path)
    s.store.write(victim.path, s.store.read(other.path))
    with pytest.raises(CorruptChunkError, match=r"holds records timed .* outside .*tstream fsck"):
        Stream.open(url).read()
    (problem,) = Stream.open(url).verify().problems
    assert problem.kind == "chunk" and "outside" in problem.message and victim.path in problem.message
    s.store.write(victim.path, saved)
    assert Stream.open(url).verify().ok and Stream.open(url).read().equals(before)


def test_fsck_cost_is_batched(url: str) -> None:
    from conftest import CallLog

    s = _scaled_stream(url, 70)
    log = CallLog()
    s.store.observer = log
    s.verify()
    ops = log.by_op()
    s.store.observer = None
    # entries and nodes in batches, one listing per segment folder, one footer read per file a
    # read opens (compaction, on by default, replaced most small chunks by macro-chunks), then
    # one read of each such file, whose pages are decoded
    st = s.state
    live = [c for d in s.journal.deltas(st, st.head_pos, st.pos) for c in d.chunks]
    files = {c.path for c in substitute(s.store, st, live)}
    assert ops["read_many"] <= 6 + len(files) and ops["read_range"] == len(files), ops
    assert json.dumps(ops)


def test_collected_history_is_not_a_problem(url: str, capsys: pytest.CaptureFixture) -> None:
    """GC deletes chunks, then entries and nodes one run later: neither step is damage, nor is a
    crash between them (entries below gc_pos gone while meta_gc_pos still lags)."""
    s = _scaled_stream(url, 70)
    s.truncate(T0 + 50_000)
    s.vacuum(grace_ms=0)
    assert s.verify().ok
    st = s.refresh()
    upto = meta_gc_target(s.journal, st)  # the next run's work (the entries a rebuild of the state needs stay)
    s.store.delete([layout.entry(p) for p in range(max(st.meta_gc_pos, 1), upto)])
    s.store.delete([layout.index_node(1, n) for n in range(st.meta_gc_pos // FANOUT, upto // FANOUT)])
    assert Stream.open(url).verify().ok
    s.vacuum(grace_ms=0)
    assert main(["fsck", url, "--progress"]) == 0
    captured = capsys.readouterr()
    assert "no problems" in captured.out and "objects" in captured.err  # the progress bar, on stderr


@pytest.mark.parametrize("damage", ["missing", "garbage", "wrong records"])
def test_epoch_history_chunk_checked_and_rebuilt(damage: str) -> None:
    """Epoch history chunks (32 epoch records in one object) are derived data: fsck finds a lost,
    unreadable or inconsistent one and repair rewrites it byte for byte."""
    url = f"memory://fsck-epoch-chunk-{damage.replace(' ', '-')}/s"
    s = Stream.create(url, segments=1, compaction="off")
    for b in range(EPOCH_CHUNK + 1):
        s.append(pa.table({"k": ["a", "b"], "t": [T0 + b * 1000, T0 + b * 1000 + 1]}), key="k", timestamp="t")
        seg = s.refresh().segments[0]
        s.scale(split=seg.id, parts=2) if b % 2 == 0 else s.scale(merge=[g.id for g in s.state.segments])
    assert s.refresh().epoch > EPOCH_CHUNK
    rel = layout.epoch_chunk(0)
    good = s.store.read(rel)
    assert s.verify().ok
    before = _records(url)
    if damage == "missing":
        s.store.delete([rel])
    elif damage == "garbage":
        s.store.write(rel, b'{"records": [')
    else:
        s.store.write(rel, json.dumps({**json.loads(good), "records": json.loads(good)["records"][::-1]}).encode())
    report = Stream.open(url).verify()
    assert [p.kind for p in report.problems] == ["epoch chunk"] and report.problems[0].repairable, report.summary()
    assert rel.rsplit("/", 1)[-1] in report.problems[0].message
    after = Stream.open(url).repair()
    assert after.ok and any("epoch history chunk 0 rebuilt" in d for d in after.repaired)
    assert s.store.read(rel) == good
    assert _records(url) == before


def test_lost_compaction_manifest_is_reported_and_repaired_and_reads_are_unaffected(url: str) -> None:
    s = Stream.create(url, segments=2)
    for i in range(20):
        s.append(pa.table({"k": [f"k{j}" for j in range(5)], "v": [i] * 5}), key="k")
    before = s.read()
    assert s.compact().macros > 0
    assert s.verify().ok
    manifest = next(p["manifest"] for p in s.journal.read_entry(s.refresh().pos).info["parts"])
    s.store.delete([manifest])
    report = Stream.open(url).verify()
    assert [p.kind for p in report.problems] == ["manifest"] and report.problems[0].repairable
    assert manifest.rsplit("/", 1)[-1] in report.problems[0].message and "reads are not affected" in \
        report.problems[0].message and "tstream repair" in report.problems[0].message
    assert Stream.open(url).read().equals(before)
    assert Stream.open(url).repair().ok and s.store.exists(manifest)  # tests/test_macro_repair.py: its content
