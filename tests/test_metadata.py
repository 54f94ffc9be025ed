"""``Stream.metadata(kind)``: the history, segments, epochs, groups and files tables of a stream
with appends from two writers, a split, a merge, a compaction, a truncation and a consumer group
that read part of it (tests/metadata_history.py); what each table reads (store calls)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import CallLog
from group_requests import publish, rows
from histories import three_writer_history
from metadata_history import Built, build
from pyspark_tstream.api.metadata import HISTORY_LIMIT, KINDS, SCHEMAS
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import ConfigError
from pyspark_tstream.journal.timeindex import FANOUT


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(f"file://{tmp_path_factory.mktemp('meta')}/s")


def expected_history(b: Built) -> list[tuple[str, str | None]]:
    return [("create", None), *b.ops]


def test_history_has_one_row_per_commit_with_its_operation(built: Built) -> None:
    t = built.stream.metadata("history")
    assert t.schema == SCHEMAS["history"]
    rows = t.to_pylist()
    assert [(r["operation"], r["writer_id"]) for r in rows] == expected_history(built)
    assert [r["position"] for r in rows] == list(range(len(rows)))
    appends = [r for r in rows if r["operation"] == "append"]
    assert {r["writer_id"] for r in appends} == {"alpha", "beta"}
    assert [r["batch_id"] for r in appends] == [str(i) for i in range(10)]
    assert sum(r["records"] for r in rows) == built.appended
    assert all(r["records"] == 0 for r in rows if r["operation"] != "append")
    assert all(r["files"] >= 1 and r["bytes"] > 0 for r in appends)
    compact = next(r for r in rows if r["operation"] == "compact")
    assert compact["files"] == len(built.stream.metadata("files")) and compact["bytes"] > 0
    scales = [json.loads(r["details"]) for r in rows if r["operation"] == "scale"]
    assert scales[0]["sealed"] == list(built.split.sealed) and scales[1]["created"] == list(built.merge.created)
    assert rows[-1]["committed_at"] >= rows[0]["committed_at"]


def test_history_position_range(built: Built) -> None:
    t = built.stream.metadata("history", starting_position=3, ending_position=5)
    assert t["position"].to_pylist() == [3, 4, 5]
    assert built.stream.metadata("history", starting_position=13)["position"].to_pylist() == [13, 14]
    with pytest.raises(ConfigError, match="endingPosition=2 is below startingPosition=3"):
        built.stream.metadata("history", starting_position=3, ending_position=2)
    with pytest.raises(ConfigError, match="startingPosition bounds the history table only"):
        built.stream.metadata("files", starting_position=3)


def test_folded_commits_share_their_entry_position(tmp_path: Path) -> None:
    """A group-commit entry's commits are a row each, at the entry's position."""
    url = f"file://{tmp_path}/g"
    s = Stream.create(url, segments=2)
    s.append(rows("a", 0), writer_id="a", batch_id=0)
    publish(Stream.open(url), "b", 0)
    s.appending.group.contended = 1  # a writer that lost lately lists before its attempt
    s.append(rows("a", 1), writer_id="a", batch_id=1)
    history = s.metadata("history").to_pylist()
    assert [(r["position"], r["writer_id"], r["batch_id"], r["records"]) for r in history[1:]] == [
        (1, "a", "0", 10), (2, "a", "1", 10), (2, "b", "0", 10)]


def test_segments_show_the_split_children_and_the_merge(built: Built) -> None:
    t = built.stream.metadata("segments")
    assert t.schema == SCHEMAS["segments"]
    rows = {r["segment"]: r for r in t.to_pylist()}
    split_epoch = built.split.epoch
    (parent,) = built.split.sealed
    children = [rows[c] for c in built.split.created]
    assert [c["epoch_start"] for c in children] == [split_epoch, split_epoch]
    assert rows[parent]["epoch_end"] == split_epoch and not rows[parent]["active"]
    assert (children[0]["key_lo"], children[1]["key_hi"]) == (rows[parent]["key_lo"], rows[parent]["key_hi"])
    assert children[0]["key_hi"] == children[1]["key_lo"]
    (merged,) = built.merge.created
    assert rows[merged]["epoch_start"] == built.merge.epoch and rows[merged]["active"]
    assert all(rows[s]["epoch_end"] == built.merge.epoch for s in built.merge.sealed)
    assert sum(r["records"] for r in rows.values()) == built.appended
    active = [r for r in rows.values() if r["active"]]
    assert sorted(r["segment"] for r in active) == sorted(g.id for g in built.stream.state.segments)
    assert all(r["epoch_end"] is None for r in active)
    assert sum(r["key_hi"] - r["key_lo"] for r in active) == pytest.approx(1.0)


def test_epochs_list_each_epochs_segments(built: Built) -> None:
    t = built.stream.metadata("epochs")
    assert t.schema == SCHEMAS["epochs"]
    rows = t.to_pylist()
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    assert sorted(rows[0]["segments"]) == [0, 1, 2, 3]
    assert set(rows[1]["segments"]) == {1, 2, 3, *built.split.created}
    assert sorted(rows[2]["segments"]) == sorted(g.id for g in built.stream.state.segments)
    assert rows[0]["started_at"] <= rows[1]["started_at"] <= rows[2]["started_at"]


def test_groups_lag_is_the_records_not_delivered(built: Built) -> None:
    t = built.stream.metadata("groups")
    assert t.schema == SCHEMAS["groups"]
    rows = t.to_pylist()
    own = rows[0]
    readable = built.stream.read().num_rows
    assert (own["group"], own["consumer"], own["pending"]) == (built.group, None, built.delivered)
    assert own["lag_records"] == readable - built.delivered
    assert {(r["consumer"], r["pending"]) for r in rows[1:]} == {("c1", 30), ("c2", 20)}


def test_files_after_compaction_are_macro_chunks(built: Built) -> None:
    t = built.stream.metadata("files")
    assert t.schema == SCHEMAS["files"]
    rows = t.to_pylist()
    assert {r["kind"] for r in rows} == {"macro"}
    assert {r["segment"] for r in rows} == {r["segment"] for r in built.stream.metadata("segments").to_pylist()}
    assert sum(r["records"] for r in rows) == built.appended


def test_files_before_compaction_list_shared_files_once_more(tmp_path: Path) -> None:
    s = Stream.create(f"file://{tmp_path}/f", segments=2)
    s.append(pa.table({"k": ["a", "b", "c", "d"], "v": [1, 2, 3, 4]}), key="k")
    rows = s.metadata("files").to_pylist()
    slices = [r for r in rows if r["segment"] is not None]
    assert {r["kind"] for r in slices} == {"chunk"} and sum(r["records"] for r in slices) == 4
    assert [r["kind"] for r in rows if r["segment"] is None] == ["shared"]  # one file for both segments
    for r in rows:
        if r["segment"] is None:
            assert r["kind"] == "shared"
            assert r["records"] == sum(x["records"] for x in slices if x["path"] == r["path"])


def test_a_bad_kind_names_the_valid_ones(built: Built) -> None:
    with pytest.raises(ConfigError, match="metadata='snapshots' is not a metadata table; valid kinds: "
                                          + ", ".join(KINDS)):
        built.stream.metadata("snapshots")




def _objects(log: CallLog) -> int:
    """Objects the logged calls read: a batched read is labelled ``"<first> (+n)"``."""
    out = 0
    for op, rel in log.calls:
        more = rel.rsplit(" (+", 1)
        out += 1 + (int(more[1].rstrip(")")) if len(more) == 2 and op == "read_many" else 0)
    return out


def test_history_reads_one_node_per_32_positions_and_stops_at_1000() -> None:
    """Cost: the newest 1,000 positions of a 1,500-commit history are a refresh and two batched
    reads of ~1,000/32 index nodes plus the open entries, never an entry per flushed position,
    nor the older positions' nodes."""
    s = three_writer_history(1_500, "meta")
    fresh = Stream.open(f"memory://{s.store.root}")
    log = CallLog()
    fresh.store.observer = log
    t = fresh.metadata("history")
    assert t.num_rows == HISTORY_LIMIT
    assert t["position"].to_pylist() == list(range(s.state.pos - HISTORY_LIMIT + 1, s.state.pos + 1))
    assert len(log.calls) <= 3, log.calls
    assert _objects(log) <= HISTORY_LIMIT // FANOUT + 2 + 2 * FANOUT, log.calls
    log.reset()
    assert fresh.metadata("history", starting_position=10, ending_position=20).num_rows == 11
    # the poll (the next slot and the one after it, so a lost entry is named: journal/holes.py)
    # and the one index node
    assert len(log.calls) <= 2 and _objects(log) <= 3, log.calls


def test_segments_and_epochs_read_no_data_and_no_journal(built: Built) -> None:
    fresh = Stream.open(built.stream.url)
    log = CallLog()
    fresh.store.observer = log
    fresh.metadata("segments")
    fresh.metadata("epochs")
    touched = [rel for _, rel in log.calls]
    assert not any(rel.startswith("data/") for rel in touched), touched
    assert len(touched) <= 12, touched
