"""Golden on-store fixtures: streams older versions of tstream wrote, read and appended today.

Each folder under ``tests/golden/`` holds a stream written once by the commit that introduced
an on-store format (``tests/golden/README.md`` names the commit and its generator script) and
the records that commit's own read returned (``expected.json``). Today's code must read the
same records, find nothing wrong in them (fsck), append to them, and run on them what their
format introduced. The fixtures are never regenerated: a change that alters both the writer
and "the old format" would pass a test that writes the old format with today's code, not this.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal import seal
from pyspark_tstream.journal.entries import FORMAT_VERSION, Chunk
from pyspark_tstream.journal.timeindex import FANOUT, decode_node, first_open
from pyspark_tstream.maps.grouplog import GROUP_FORMAT_VERSION
from pyspark_tstream.read.reading import read_table
from pyspark_tstream.store import layout

GOLDEN = Path(__file__).resolve().parent / "golden"

#: fixture folder -> (the format version it pins, the ``"v"`` its journal entries carry).
#: Format 3 (wide writes' slices, packed entries) never had entries of its own: group commit
#: raised the constant from 2 to 4 before wide writes landed, so its first writer wrote ``"v": 4``.
FIXTURES: dict[str, tuple[int, int]] = {
    "v1-first": (1, 1),
    "v1": (1, 1),
    "epochs": (2, 2),
    "v2-summary3": (2, 2),
    "v2-summary5": (2, 2),
    "v2": (2, 2),
    "v3": (3, 4),
    "v4": (4, 4),
    "v5": (5, 5),
    "v6": (6, 6),
    "v6-checksums": (6, 6),
}
#: fixture folder -> consumer groups it holds, by group format version.
GROUPS: dict[str, tuple[str, int]] = {"v1": ("g1", 1), "v2": ("g2", 2), "v6-checksums": ("g3", 2)}


def _expected(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / name / "expected.json").read_text())


def _cell(v: Any) -> Any:
    """A timestamp as epoch ms (naive ones are UTC), as the generators stored it."""
    if isinstance(v, dt.datetime):
        return int((v if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)).timestamp() * 1000)
    return v


def _rows(table: pa.Table, columns: list[str]) -> list[dict[str, Any]]:
    return [{c: _cell(r[c]) for c in columns} for r in table.select(columns).to_pylist()]


def _open_copy(name: str, tmp_path: Path) -> Stream:
    shutil.copytree(GOLDEN / name / "stream", tmp_path / "stream")
    return Stream.open(f"file://{tmp_path}/stream")


def _new_batch(rows: int = 5) -> pa.Table:
    """A batch today's code appends, read after every old record: its client times are later than
    any fixture's, and records below the tick move up to it. Keys reach every segment."""
    base = 1767229200000  # 2026-01-01T01:00:00Z
    return pa.table({
        "key": [f"k{i % 5}" for i in range(rows)],
        "value": [900.0 + i for i in range(rows)],
        "n": [9000 + i for i in range(rows)],
        "ts": pa.array([base + i for i in range(rows)], pa.timestamp("ms", tz="UTC")),
    })


def _journal_versions(root: Path) -> set[int]:
    entries = (root / "stream" / "_tstream" / "journal").rglob("*.json")
    return {json.loads(p.read_text()).get("v", 1) for p in entries}


def test_every_format_version_has_a_golden_fixture() -> None:
    pinned = {fmt for fmt, _ in FIXTURES.values()}
    missing = sorted(set(range(1, FORMAT_VERSION + 1)) - pinned)
    assert not missing, (
        f"format version(s) {missing} have no golden fixture: write one with the commit that "
        "introduced the version (tests/golden/README.md) and list it in FIXTURES")
    groups = {v for _, v in GROUPS.values()}
    assert groups == set(range(1, GROUP_FORMAT_VERSION + 1)), "a consumer-group format lacks a fixture"
    assert {p.name for p in GOLDEN.iterdir() if (p / "stream").is_dir()} == set(FIXTURES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_was_written_in_its_format(name: str) -> None:
    _, written_as = FIXTURES[name]
    assert max(_journal_versions(GOLDEN / name)) == written_as
    assert _expected(name)["format"] == FIXTURES[name][0]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_reads_the_records_the_old_version_read_and_appends(name: str, tmp_path: Path) -> None:
    want = _expected(name)
    s = _open_copy(name, tmp_path)
    assert s.state.pos == want["state"]["pos"] and s.state.epoch == want["state"]["epoch"]
    columns = list(want["rows"][0])
    old = _rows(s.read(), columns)
    assert old == want["rows"]
    assert not s.verify().problems

    ack = s.append(_new_batch(), key="key", timestamp="ts", writer_id="today", batch_id=0)
    assert ack.rows == 5
    assert s.append(_new_batch(), key="key", timestamp="ts", writer_id="today", batch_id=0).duplicate
    again = Stream.open(s.url)
    both = again.read()
    assert both.num_rows == len(old) + 5
    assert _rows(both, columns)[:len(old)] == old  # the new records come after every old one
    assert sorted(both.column("n").to_pylist()[len(old):]) == list(range(9000, 9005))
    assert json.loads((tmp_path / "stream" / "_tstream" / "head.json").read_text())["v"] == FORMAT_VERSION
    assert not again.verify().problems


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_compaction_and_vacuum_keep_every_old_record(name: str, tmp_path: Path) -> None:
    """Compaction over old chunks, views and macro-chunks (whatever the fixture's summaries), then
    the garbage collection of what it replaced and of orphans: the records stay."""
    want = _expected(name)
    s = _open_copy(name, tmp_path)
    s.append(_new_batch(), key="key", timestamp="ts", writer_id="today", batch_id=0)
    columns = list(want["rows"][0])
    before = _rows(s.read(), columns)
    s.compact(full=True)
    s.vacuum(grace_ms=0, orphans=True)
    s.vacuum(grace_ms=0, orphans=True)
    after = Stream.open(s.url)
    assert _rows(after.read(), columns) == before
    assert not after.verify().problems
    assert after.state.compaction is not None, "the compaction committed nothing"


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_consumer_group_reads_on_from_its_old_cursor(name: str, tmp_path: Path) -> None:
    group, version = GROUPS[name]
    want = _expected(name)
    head = GOLDEN / name / "stream" / layout.group_head(group)
    assert json.loads(head.read_text())["v"] == version
    s = _open_copy(name, tmp_path)
    g = Group.open(s, group)
    columns = list(want["group"]["delivered"][0])
    pending = g.pending()
    assert len(pending) == want["group"]["pending"]
    # the two records delivered and not acked are still owed, and can be claimed
    claimed = g.claim("c2", 0)
    unacked = want["group"]["delivered"][len(want["group"]["acked"]):]
    assert _rows(claimed, columns) == unacked
    assert g.ack(claimed) == len(unacked)
    # reading on starts after the old cursor: the rest of the old records, then today's, each once
    s.append(_new_batch(), key="key", timestamp="ts", writer_id="today", batch_id=0)
    rest: list[dict[str, Any]] = []
    while (page := g.read("c1", count=7)).num_rows:
        rest += _rows(page, columns)
        g.ack(page)
    old = want["group"]["delivered"]
    assert rest == [r for r in _rows(s.read(), columns) if r not in old]
    assert not g.pending()
    assert json.loads((tmp_path / "stream" / layout.group_head(group)).read_text())["v"] == GROUP_FORMAT_VERSION


def test_v1_scale_and_truncation_read_back(tmp_path: Path) -> None:
    """Format 1's sealed map and epoch record: lineage and a later scale and truncation work."""
    s = _open_copy("v1", tmp_path)
    sealed = [g for g in (0, 1) if s.sealed_info(g) is not None]
    assert sealed == [0] and s.successors(0)
    s.scale(split=1)
    assert s.state.epoch == 2
    s.append(_new_batch(), key="key", timestamp="ts", writer_id="today", batch_id=0)
    table = s.read()
    cut = s.cut_at(int(table.column("_timestamp")[3].value))
    s.truncate(cut)
    assert Stream.open(s.url).read().num_rows == table.num_rows - 3
    s.vacuum(grace_ms=0, orphans=True)
    assert not Stream.open(s.url).verify().problems


def test_epoch_history_chunk_and_records(tmp_path: Path) -> None:
    """33 scales: epochs 0..31 from the history chunk (its own ``"v"``), the rest as records;
    lineage walks back through every sealed segment, and a later scale extends the history."""
    chunk = GOLDEN / "epochs" / "stream" / "_tstream" / "epochs" / "chunks" / "000000000000.json"
    assert json.loads(chunk.read_text())["v"] == 2
    s = _open_copy("epochs", tmp_path)
    assert s.read().num_rows == len(_expected("epochs")["rows"])
    first = s.state.created  # epochs are found by the commits' wall clock, not by record times
    segments = s.segments_between(first, s.state.wall + 1)
    assert len(segments) == 34
    seg, walked = s.state.segments[0].id, 0
    while preds := s.predecessors(seg):
        seg, walked = preds[0], walked + 1
    assert walked == 33 and seg == segments[0]
    s.scale(split=s.state.segments[0].id)
    assert s.state.epoch == 34 and len(s.segments_between(first, s.state.wall + 1)) == 36


@pytest.mark.parametrize("name", ["v3", "v5"])
def test_slices_of_shared_files_read_one_by_one(name: str, tmp_path: Path) -> None:
    """Wide writes' slices (v3: without a span, read through the file's footer; v5: a span each)
    read alone, as a one-segment read plans them, with the rows the whole read has."""
    s = _open_copy(name, tmp_path)
    chunks: list[Chunk] = s.plan(0, 1 << 62)
    slices = [c for c in chunks if c.file_bytes]
    assert len({c.path for c in slices}) == 6 and len(slices) > len({c.path for c in slices})
    assert all(bool(c.span_bytes) == (name == "v5") for c in slices)
    packed = json.loads((GOLDEN / name / "stream" / layout.entry(1)).read_text())
    assert "packed" in packed and not packed["chunks"]
    whole = _rows(s.read(), list(_expected(name)["rows"][0]))
    columns = list(whole[0])
    for c in slices:  # each slice alone: exactly its records, as the whole read has them
        alone = _rows(read_table(s.store, s.schema, [c], 0, 1 << 62), columns)
        assert sorted(r["_seq"] for r in alone) == list(range(c.seq, c.seq + c.rows))
        assert alone == [r for r in whole if r["_segment"] == c.seg and c.seq <= r["_seq"] < c.seq + c.rows]


def test_v4_folds_and_requests(tmp_path: Path) -> None:
    """Group commit's folded entry reads (each fold's writer deduped), the published requests it
    folded are collected by vacuum, and the schema change it recorded is still known."""
    s = _open_copy("v4", tmp_path)
    entry = s.journal.read_entry(2)
    assert [(f.writer, f.batch) for f in entry.folds] == [("a", 1), (None, None), ("b", 0)]
    assert s.append(_new_batch(), key="key", timestamp="ts", writer_id="b", batch_id=0).duplicate
    assert [(c.position, c.columns) for c in s.schema_history()[1:]] == [(3, ("note string",))]
    requests = tmp_path / "stream" / "_tstream" / "requests"
    assert len(list(requests.iterdir())) == 2
    for _ in range(20):  # past the fold window, so no slot can fold them any more
        s.tick()
    s.vacuum(grace_ms=0)
    assert not list(requests.iterdir())
    assert s.read().num_rows == len(_expected("v4")["rows"])


def test_a_checksummed_stream_keeps_its_seals(tmp_path: Path) -> None:
    """``v6-checksums`` (the writer feature ``checksums``): every metadata object is sealed and
    verifies; today's code re-encodes its entries byte for byte, seals what it appends, and
    finds a digit changed in any of its objects."""
    meta = GOLDEN / "v6-checksums" / "stream" / "_tstream"
    objects = sorted(meta.rglob("*.json"))
    assert {p.relative_to(meta).parts[0] for p in objects} >= {
        "head.json", "journal", "checkpoints", "epochs", "sealed", "groups", "macros", "compact"}
    for path in objects:
        seal.unseal(path.read_bytes(), required=True)
    s = _open_copy("v6-checksums", tmp_path)
    assert s.state.features == {"writer": {"checksums": "0.1.0"}} == _expected("v6-checksums")["features"]
    for path in sorted(meta.glob("journal/*/*.json")):
        assert s.journal.read_entry(int(path.stem)).encode() == path.read_bytes(), path
    s.append(_new_batch(), key="key", timestamp="ts", writer_id="today", batch_id=0)
    assert seal.is_sealed((tmp_path / "stream" / layout.entry(s.state.pos)).read_bytes())
    rel = layout.epoch_record(1)
    data = (tmp_path / "stream" / rel).read_bytes()
    at = data.index(b'"pos":') + len(b'"pos":')
    (tmp_path / "stream" / rel).write_bytes(data[:at] + str((int(chr(data[at])) + 1) % 10).encode() + data[at + 1:])
    assert any(p.path.endswith(rel) for p in Stream.open(s.url).verify().problems)


def test_v6_appends_past_the_index_flush_over_collected_entries(tmp_path: Path) -> None:
    """``v6`` was written by a garbage collection that still deleted entries of the open level-0
    index node (entries 1-3; today's keeps them until the node is flushed). The commit that fills
    that node copies its entries' deltas into it: it must copy those kept (entry 0 and
    ``meta_gc_pos`` on) and commit, not fail on the collected ones, and fsck must find the node
    sound."""
    want = _expected("v6")
    s = _open_copy("v6", tmp_path)
    journal = tmp_path / "stream" / "_tstream" / "journal" / "000000"
    collected = [p for p in range(1, s.state.meta_gc_pos) if not (journal / f"{p:012d}.json").exists()]
    assert collected, "the fixture no longer has collected entries in its open index node"
    assert s.state.index[0][0].id == 0  # they are in the open level-0 node
    appends = 0
    while first_open(s.state) < FANOUT:  # until a commit flushed node 0
        assert appends < FANOUT, "no commit flushed the index node"
        s.append(_new_batch(), key="key", timestamp="ts", writer_id="today", batch_id=appends)
        appends += 1
    node = decode_node((tmp_path / "stream" / layout.index_node(1, 0)).read_bytes(), "node 0", 1, deltas=True)
    held = [d.pos for d in node["deltas"]]
    assert held == [0, *range(s.state.meta_gc_pos, FANOUT)], "the node must hold every kept entry's delta"
    again = Stream.open(s.url)
    columns = list(want["rows"][0])
    table = again.read()  # plans from the flushed node
    assert _rows(table, columns)[:len(want["rows"])] == want["rows"]
    assert table.num_rows == len(want["rows"]) + 5 * appends
    assert not again.verify().problems
    # fsck matches the node's deltas by position, but still wants one for every entry kept
    rel = tmp_path / "stream" / layout.index_node(1, 0)
    content = json.loads(rel.read_bytes())
    content["entries"] = [d for d in content["entries"] if d["pos"] != FANOUT - 1]
    rel.write_text(json.dumps(content, separators=(",", ":")))
    assert [p.details for p in Stream.open(s.url).verify().problems] == [{"level": 1, "node": 0}]
