"""Damaged metadata is found before it is used, and repair never makes it worse (#58).

The stream of the issue's measurements, smaller: 2 segments, a few hundred records in many
commits (each reaching both segments: their data files are shared), a scale (an epoch record),
checkpoints, and entries after the newest one. Each test damages one metadata object as an
operator, a disk or a stray script might, and checks what reads, appends, fsck and repair do:
reads give the full answer or an error naming the object, an append never takes a ``_seq``
twice or leaves one out, and after ``tstream repair`` every committed record reads.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import CorruptChunkError, CorruptMetadataError
from pyspark_tstream.journal.compaction_state import segment_summaries
from pyspark_tstream.journal.state import segment_number
from pyspark_tstream.maintain.repair import drop_torn_newest
from pyspark_tstream.read.file_checks import check_files
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import Store

COMMITS = 157
SCALE_AT = 40


def _batch(b: int) -> pa.Table:
    return pa.table({"k": [f"k{b % 7}", f"j{b % 5}", "x"], "v": [3 * b, 3 * b + 1, 3 * b + 2]})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The undamaged stream, built once (copied by each test)."""
    root = tmp_path_factory.mktemp("damage") / "s"
    s = Stream.create(f"file://{root}", segments=2, compaction="off")
    for b in range(COMMITS):
        s.append(_batch(b), writer_id="w", batch_id=b, key="k")
        if b == SCALE_AT:
            s.scale(split=s.state.segments[0].id, parts=2)
    m = s.state.checkpoint
    assert m is not None and 0 < m.prev < m.pos < s.state.pos - 5  # entries after the newest checkpoint
    return root


@pytest.fixture()
def stream(built: Path, tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "s"
    shutil.copytree(built, root)
    return root, f"file://{root}"


def _values(url: str) -> list[int]:
    return sorted(Stream.open(url).read()["v"].to_pylist())


ALL = list(range(3 * COMMITS))


def _seqs_sound(url: str) -> None:
    """Every segment's ``_seq`` runs 0, 1, 2, ... with no value twice and none left out."""
    t = Stream.open(url).read()
    for seg in pc.unique(t["_segment"]).to_pylist():
        seqs = sorted(t.filter(pc.equal(t["_segment"], seg))["_seq"].to_pylist())
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), (seg, seqs)


def _newest(root: Path) -> int:
    return int(json.loads((root / layout.HEAD).read_bytes())["pos"])


def _between(root: Path) -> int:
    """An entry between the newest checkpoint and the head."""
    url = f"file://{root}"
    m = Stream.open(url).state.checkpoint
    assert m is not None
    return (m.pos + _newest(root)) // 2


def _tear(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


# -- loss 2: an entry between the newest checkpoint and the head is lost -------------------------
@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_a_lost_entry_below_the_head_is_named_everywhere(stream: tuple[Path, str], damage: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Before: a bare FileNotFoundError from every read, append, fsck and repair (deleted), or an
    error blaming the intact head hint and a repair naming a sound newer entry as torn."""
    root, url = stream
    pos = _between(root)
    entry = root / layout.entry(pos)
    (entry.unlink if damage == "delete" else lambda: _tear(entry))()
    named = rf"journal entry {url}/{layout.entry(pos)} .*tstream repair"
    with caplog.at_level(logging.WARNING), pytest.raises(CorruptMetadataError, match=named):
        Stream.open(url)
    assert "head hint" not in caplog.text  # the hint is sound: it is not blamed
    report = Stream.repair_url(url)  # fsck's report: repair has nothing to rebuild it from
    (problem,) = report.problems
    assert problem.kind == "entry" and problem.path == f"{url}/{layout.entry(pos)}" and not problem.repairable
    assert "backup" in problem.message and not report.repaired
    # --drop-torn-entry sets nothing aside: the newest entry is sound
    report = Stream.repair_url(url, drop_torn_entry=True)
    assert not report.repaired and not (root / layout.DAMAGED).exists()
    assert (root / layout.entry(_newest(root))).exists()


def test_drop_torn_entry_refuses_an_entry_that_parses(stream: tuple[Path, str]) -> None:
    root, url = stream
    pos = _newest(root)
    with pytest.raises(CorruptMetadataError, match="is not torn"):
        drop_torn_newest(Stream.open(url).store, pos)
    assert (root / layout.entry(pos)).exists() and _values(url) == ALL


# -- losses 4 and 5: the newest entry torn or lost, then an append ------------------------------
@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_an_append_past_a_lost_newest_entry_refuses_and_repair_restores_it(stream: tuple[Path, str],
                                                                            damage: str) -> None:
    """Before: the append was acknowledged at the next position (leaving a hole where the lost
    commit was) and overwrote the head hint, the only copy; repair then dropped commits."""
    root, url = stream
    pos = _newest(root)
    hint = (root / layout.HEAD).read_bytes()
    entry = root / layout.entry(pos)
    (entry.unlink if damage == "delete" else lambda: _tear(entry))()
    assert _values(url) == ALL  # the head hint holds the whole of it
    with pytest.raises(CorruptMetadataError, match=rf"journal entry .*{pos:012d}.json .*head hint .*tstream repair"):
        Stream.open(url).append(_batch(COMMITS), writer_id="w", batch_id=COMMITS, key="k")
    assert (root / layout.HEAD).read_bytes() == hint  # the only copy is untouched
    assert not (root / layout.entry(pos + 1)).exists()
    (problem,) = Stream.open(url).verify().problems
    assert problem.kind == "entry" and problem.repairable
    report = Stream.repair_url(url)
    assert report.ok, report.summary()
    assert entry.read_bytes() == hint
    Stream.open(url).append(_batch(COMMITS), writer_id="w", batch_id=COMMITS, key="k")
    assert _values(url) == list(range(3 * COMMITS + 3))
    _seqs_sound(url)
    assert Stream.open(url).verify().ok


# -- loss 1: a number changed inside the newest checkpoint --------------------------------------
def _edit_checkpoint(root: Path, edit: Callable[[dict[str, object]], None]) -> Path:
    m = Stream.open(f"file://{root}").state.checkpoint
    assert m is not None
    path = root / layout.checkpoint(m.pos)
    d = json.loads(path.read_bytes())
    edit(d["state"])
    path.write_bytes(json.dumps(d, separators=(",", ":")).encode())
    return path


def _lower_next_seq(state: dict[str, object]) -> None:
    segments = state["segments"]
    assert isinstance(segments, list)
    segments[0][3] -= 5  # its next _seq: e.g. 245 -> 240, the same size


def test_a_checkpoint_whose_next_seq_was_lowered_is_not_used(stream: tuple[Path, str],
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """Before: reads and appends used it; the append reused 5 _seq values; fsck said readers
    rebuild from the one before it (they did not); after repair fsck said no problems."""
    root, url = stream
    size = (root / layout.checkpoint(Stream.open(url).state.checkpoint.pos)).stat().st_size  # type: ignore[union-attr]
    path = _edit_checkpoint(root, _lower_next_seq)
    with caplog.at_level(logging.WARNING):
        assert _values(url) == ALL
    assert f"checkpoint {url}/{path.relative_to(root)} cannot be used" in caplog.text
    assert "its checksum does not match its content" in caplog.text  # found before the cross-check
    report = Stream.open(url).verify()
    assert [p.kind for p in report.problems] == ["checkpoint"]
    Stream.open(url).append(_batch(COMMITS), writer_id="w", batch_id=COMMITS, key="k")
    _seqs_sound(url)
    assert Stream.repair_url(url).ok
    assert _values(url) == list(range(3 * COMMITS + 3)) and Stream.open(url).verify().ok
    assert size > 0


def test_a_checkpoint_edited_to_claim_a_truncation_is_not_used(stream: tuple[Path, str]) -> None:
    """Before: Stream.read returned the records after the claimed head with no warning."""
    root, url = stream

    def truncated(state: dict[str, object]) -> None:
        state["head_pos"], state["head_tso"] = 9, 9  # one digit each: the checkpoint keeps its size

    _edit_checkpoint(root, truncated)
    assert _values(url) == ALL
    assert [p.kind for p in Stream.open(url).verify().problems] == ["checkpoint"]
    assert Stream.repair_url(url).ok and _values(url) == ALL


# -- loss 6: a shared data file replaced by another append's of the same size and layout ----------
def test_a_shared_file_swapped_for_another_of_the_same_layout_is_found(stream: tuple[Path, str]) -> None:
    """Before: a read raised CorruptChunkError, but fsck, fsck --footers-only and repair said
    sound, and read_native (which checks files as check_files does) returned wrong records."""
    root, url = stream
    s = Stream.open(url)
    chunks = s.plan(0, 1 << 62)
    files: dict[str, list[object]] = {}
    for c in chunks:
        if c.shared:
            files.setdefault(c.path, []).append((c.file_bytes, c.rows, c.offset, c.span_start, c.span_bytes))
    layouts: dict[tuple[object, ...], list[str]] = {}
    for path, slices in files.items():
        layouts.setdefault(tuple(sorted(slices, key=str)), []).append(path)
    other, victim = next(paths for paths in layouts.values() if len(paths) > 1)[:2]
    (root / victim).write_bytes((root / other).read_bytes())
    for footers_only in (False, True):
        problems = Stream.open(url).verify(footers_only=footers_only).problems
        assert problems and all(p.kind == "chunk" and victim in p.path for p in problems), problems
    with pytest.raises(CorruptChunkError, match=victim):
        check_files(s.store, chunks)  # what read_native runs before Spark opens the files
    assert not Stream.repair_url(url).ok


# -- every metadata object kind x damage ---------------------------------------------------------
@pytest.fixture(scope="module")
def built_more(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same stream with a consumer group and a compaction whose manifests vacuum has not
    collected yet: every kind of metadata object a stream holds (requests and first-write
    markers are transient: they are checked where they are read, tests/test_group_commit.py and
    tests/test_first_write.py)."""
    root = tmp_path_factory.mktemp("damage-more") / "s"
    shutil.copytree(built, root)
    s = Stream.open(f"file://{root}")
    group = Group.create(s, "readers", start=0)
    group.ack(group.read("c1", count=5))
    s.compact(full=True)
    for b in range(COMMITS, COMMITS + 3):  # entries after the compaction, so the newest is an append
        s.append(_batch(b), writer_id="w", batch_id=b, key="k")
    return root


def _object(root: Path, kind: str) -> str:
    """The relative path of the object of ``kind`` the matrix damages."""
    state = Stream.open(f"file://{root}").state
    assert state.checkpoint is not None
    named = {"newest entry": layout.entry(_newest(root)), "older entry": layout.entry(_between(root)),
             "checkpoint": layout.checkpoint(state.checkpoint.pos),
             "older checkpoint": layout.checkpoint(state.checkpoint.prev), "head": layout.HEAD,
             "index node": layout.index_node(1, 2), "epoch record": layout.epoch_record(1),
             "sealed shard version": layout.sealed_version(0, 0), "sealed shard head": layout.sealed_head(0),
             "group version": layout.group_version("readers", 2), "group head": layout.group_head("readers")}
    if kind in named:
        return named[kind]
    seg, summary = next((seg, e) for seg, e in sorted(segment_summaries(state).items()) if e.map_version)
    if kind == "macro bucket version":
        bucket, v = summary.map_version  # type: ignore[misc]
        return layout.macro_version(segment_number(seg), bucket, v)
    assert kind == "manifest"
    return next(p.relative_to(root).as_posix() for p in sorted((root / layout.MANIFESTS).glob("*.json")))


def _digit(path: Path, kind: str) -> None:
    """Change one digit of a number inside the object, keeping it valid JSON and its size (the
    checksum, the object's last key, unchanged: it no longer matches)."""
    data = path.read_bytes()
    if kind not in ("checkpoint", "head", "newest entry", "older entry", "index node"):
        at = max(i for i in range(data.rindex(b'"crc"')) if chr(data[i]).isdigit())
        path.write_bytes(data[:at] + str((int(chr(data[at])) + 1) % 10).encode() + data[at + 1:])
        return
    d = json.loads(data)
    if kind == "checkpoint":
        d["state"]["segments"][0][3] -= 5
    elif kind == "head":
        d["wall"] += 1  # the commit's wall time, in the copy only
    elif kind.endswith("entry"):
        row = d["change"]["segs"][0]
        at = next(i for i in range(1, len(row), 2) if row[i] == 3)  # [index, field, difference, ...]
        row[at + 1] += 1  # its next _seq moved by one more than it commits: the next append skips one
    elif kind == "index node":
        d["items"][3][1] += 1  # a summary's max _tso
    path.write_bytes(json.dumps(d, separators=(",", ":")).encode())


#: Damage that nothing in the stream holds a copy of: reads and appends fail naming the object,
#: fsck reports it, and repair cannot rebuild it (a backup can).
LOST_FOR_GOOD = {("older entry", "delete"), ("older entry", "truncate"), ("older entry", "digit")}
#: Damage nothing needs to report: a lost hint (readers search past it; the next write rewrites it).
UNREPORTED = {("group head", "delete"), ("sealed shard head", "delete")}
#: The kinds of the stream ``built`` holds; the others need ``built_more``.
KINDS = ("newest entry", "older entry", "checkpoint", "head", "index node", "epoch record")
MORE_KINDS = ("older checkpoint", "sealed shard version", "sealed shard head", "group version", "group head",
              "macro bucket version", "manifest")
#: A small representative set runs by default; the whole matrix in the slow set.
DEFAULT = {("checkpoint", "digit"), ("newest entry", "digit"), ("older entry", "truncate"), ("index node", "digit"),
           ("group version", "digit"), ("macro bucket version", "truncate"), ("head", "delete")}
CASES = [pytest.param(k, d, id=f"{k}-{d}".replace(" ", "_"),
                      marks=() if (k, d) in DEFAULT else pytest.mark.slow)
         for k in KINDS + MORE_KINDS for d in ("digit", "truncate", "delete")]


@pytest.mark.parametrize(("kind", "damage"), CASES)
def test_damage_to_any_metadata_object(built: Path, built_more: Path, tmp_path: Path, kind: str, damage: str) -> None:
    """fsck reports it, naming the object (or the map it belongs to); a read gives the full answer
    or an error naming the object; an append takes no _seq twice and leaves none out; after repair
    every committed record reads and fsck is clean (or, for what nothing holds a copy of, repair
    says so and nothing changes)."""
    from pyspark_tstream.maintain.fsck import verify

    root = tmp_path / "s"
    shutil.copytree(built if kind in KINDS else built_more, root)
    url = f"file://{root}"
    before = _values(url)
    rel = _object(root, kind)
    path = root / rel
    assert path.exists()
    {"truncate": lambda: _tear(path), "delete": path.unlink, "digit": lambda: _digit(path, kind)}[damage]()
    problems = verify(Store(url, None))[0].problems
    if (kind, damage) not in UNREPORTED:
        assert problems and any(p.path.endswith(rel) or p.path.endswith(rel.rsplit("/", 1)[0]) for p in problems), \
            problems
    try:
        assert _values(url) == before
    except CorruptMetadataError as e:
        assert rel in str(e) and "tstream repair" in str(e)
    want = before
    try:
        Stream.open(url).append(_batch(COMMITS + 9), writer_id="w", batch_id=COMMITS + 9, key="k")
        want = sorted(before + [3 * (COMMITS + 9) + i for i in range(3)])
    except CorruptMetadataError as e:
        assert rel in str(e) and "tstream repair" in str(e)
    report = Stream.repair_url(url)
    if (kind, damage) in LOST_FOR_GOOD:
        assert not report.ok and all(not p.repairable and p.path.endswith(rel) for p in report.problems)
        return
    assert report.ok, report.summary()
    assert _values(url) == want
    _seqs_sound(url)
    assert verify(Store(url, None))[0].ok


def test_only_a_handles_first_commit_after_a_hint_reads_the_newest_entry(stream: tuple[Path, str]) -> None:
    """The check that refuses to commit past a lost newest entry costs no round trip of its own:
    the open reads the newest entry's slot in its batched probe of the slot after it, and a
    handle that committed (or read) the newest entry itself never reads it again."""
    from conftest import CallLog

    _, url = stream
    log = CallLog()
    store = Store(url, None)
    store.observer = log
    s = Stream.at(store)
    first = s.state.pos
    assert [op for op, _ in log.calls] == ["read", "read_many"], log.calls  # the head, then one batch
    log.reset()
    s.append(_batch(COMMITS), writer_id="w", batch_id=COMMITS, key="k")
    # one batched read of what lies around the commit's slot (journal/holes.py: no create into a
    # lost entry's slot; beside the data upload on object stores), no other read
    assert [c for c in log.calls if c[0] in ("read", "read_many")] == [
        ("read_many", f"{layout.entry(first)} (+3)")], log.calls
    log.reset()
    s.refresh()  # reads the head hint: a copy of the entry this handle committed
    s.append(_batch(COMMITS + 1), writer_id="w", batch_id=COMMITS + 1, key="k")
    assert ("read", layout.entry(first + 1)) not in log.calls, log.calls
    s.store.observer = None


@pytest.mark.parametrize("which", ["older entry", "first entry", "open index node"])
def test_an_entry_naming_another_position_is_named_not_skipped(stream: tuple[Path, str], which: str) -> None:
    """An entry whose stored position had one digit changed (found by the simulation's ``damage``
    profile: a reader's later read lost records an earlier read had returned, with no error):
    a read on a fresh handle and on one opened before the damage gives the whole answer or fails
    naming the entry, as for any other damage of an older entry."""
    root, url = stream
    pos = {"older entry": _between(root), "first entry": 1, "open index node": _newest(root) - 2}[which]
    rel = layout.entry(pos)
    data = (root / rel).read_bytes()
    before = f'"pos":{pos},'.encode()
    assert data.startswith(b"{" + before)  # the entry's own position, first
    opened = Stream.open(url)
    (root / rel).write_bytes(data.replace(before, f'"pos":{pos + 3},'.encode(), 1))
    want = ALL
    if which == "open index node":  # commits past the node's end copy its entries into the node
        try:
            for b in range(COMMITS, COMMITS + 40):
                Stream.open(url).append(_batch(b), writer_id="w", batch_id=b, key="k")
                want = list(range(3 * b + 3))
        except CorruptMetadataError as e:
            assert rel in str(e) and "tstream repair" in str(e)
    for read in (lambda: _values(url), lambda: sorted(opened.read()["v"].to_pylist())):
        try:
            assert read() == want
        except CorruptMetadataError as e:
            assert rel in str(e) and "tstream repair" in str(e)


def test_the_deltas_of_an_entry_naming_another_position_are_refused(stream: tuple[Path, str]) -> None:
    """What the simulation's reader met (``damage`` seed 1,500,076): a fresh handle's state came
    from a checkpoint past the entry, and the deltas of the journal's open index node (a read's
    plan, an index flush) came from that entry, which named another position: taken as that
    position's, its chunks dropped out of the answer without an error."""
    root, url = stream
    s = Stream.open(url)
    assert s.state.checkpoint is not None
    pos = s.state.checkpoint.pos - 5  # below the checkpoint, in the open index node
    assert pos // 32 == s.state.pos // 32
    rel = layout.entry(pos)
    data = (root / rel).read_bytes()
    (root / rel).write_bytes(data.replace(f'"pos":{pos},'.encode(), f'"pos":{pos - 7},'.encode(), 1))
    fresh = Stream.open(url)  # from the checkpoint: the entry is not read
    with pytest.raises(CorruptMetadataError, match=rf"journal entry {url}/{rel} .*tstream repair"):
        fresh.journal.deltas(fresh.state, pos - 1, fresh.state.pos)
    try:
        assert _values(url) == ALL
    except CorruptMetadataError as e:
        assert rel in str(e)


def test_the_first_entry_whose_state_names_another_position_is_named(stream: tuple[Path, str]) -> None:
    """Entry 0 holds the whole state; one changed digit of the position that state names
    (found by the simulation's ``damage`` profile) made fsck build every later entry on a state
    of another position and blame entry 1, with a message for a caller's mistake."""
    from pyspark_tstream.maintain.fsck import verify
    from pyspark_tstream.store.storage import Store

    root, url = stream
    rel = layout.entry(0)
    d = json.loads((root / rel).read_bytes())
    assert d["pos"] == 0 and d["state"]["pos"] == 0
    d["state"]["pos"] = 9
    (root / rel).write_bytes(json.dumps(d, separators=(",", ":")).encode())
    report = verify(Store(url, None))[0]
    assert [p.path for p in report.problems] == [f"{url}/{rel}"], report.summary()


def test_a_lost_entry_below_a_lost_head_is_named_not_taken_for_the_end(stream: tuple[Path, str]) -> None:
    """The head hint lost, then an older entry (found by the simulation's ``damage`` profile):
    the search for the newest entry stopped at the hole, so the stream seemed to end before it,
    repair rewrote the head there and every later commit (acknowledged) was gone without an
    error, the next commit taking the lost one's position. Now the search's end is checked
    against a listing: the lost entry is named."""
    root, url = stream
    newest = _newest(root)
    pos = 127  # a probe of the search for the newest entry (1, 3, 7, ..., 127 from entry 0)
    assert pos < newest - 1
    (root / layout.HEAD).unlink()
    (root / layout.entry(pos)).unlink()
    named = rf"journal entry {url}/{layout.entry(pos)} .*tstream repair"
    with pytest.raises(CorruptMetadataError, match=named):
        Stream.open(url)
    try:
        Stream.repair_url(url)
    except CorruptMetadataError as e:
        assert layout.entry(pos) in str(e)
    assert not (root / layout.HEAD).exists() or _newest(root) == newest  # never rewritten to the hole
