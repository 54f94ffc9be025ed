"""Stream cuts, truncation, retention (age, size, count, consumer groups), garbage collection."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import T0
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import DataLossError
from pyspark_tstream.read.start import check_data_loss
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import Store
from pyspark_tstream.write.writing import write_batches


def _fill(url: str, batches: int = 6, rows: int = 50, segments: int = 3, **config: object) -> Stream:
    s = Stream.create(url, segments=segments, **config)
    for b in range(batches):
        s.append(pa.table({"k": [f"k{i % 7}" for i in range(rows)], "b": [b] * rows,
                           "t": [T0 + b * 1000 + i for i in range(rows)]}), key="k", timestamp="t")
    return s


def _data_files(root: Path) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root / "data") for f in fs)


def test_cut_at_matches_brute_force(url: str) -> None:
    s = _fill(url)
    t = s.read()
    for when in (T0, T0 + 2_010, T0 + 5_049, T0 + 9_000):
        cut = s.cut_at(when)
        for seg, seq in cut.items():
            part = t.filter(pc.equal(t["_segment"], seg))
            expect = part.filter(pc.less(part["t"], when)).num_rows
            assert seq == expect, (when, seg)


def test_truncate_then_vacuum(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    s = _fill(url)
    files_before = _data_files(tmp_path)
    state = s.truncate(T0 + 3_000)
    t = s.read()
    assert sorted(set(t["b"].to_pylist())) == [3, 4, 5] and t.num_rows == 150
    assert state.head_tso >> 18 == T0 + 2_999
    assert s.cut_at(T0 + 3_000) == {g.id: g.first_seq for g in state.segments}
    assert len(_data_files(tmp_path)) == len(files_before)  # files stay during the grace period
    counts = s.vacuum(grace_ms=0)
    assert counts.chunks == len(files_before) - len(_data_files(tmp_path)) > 0
    assert s.read().num_rows == 150
    # the stream survives losing its head hint: readers probe from the GC anchor
    s.store.delete([layout.HEAD])
    reopened = Stream.open(url)
    assert reopened.read().num_rows == 150
    reopened.append(pa.table({"k": ["x"], "b": [9], "t": [T0 + 20_000]}), key="k", timestamp="t")
    assert Stream.open(url).read().num_rows == 151


def test_cut_at_covers_segments_sealed_since(url: str) -> None:
    s = _fill(url, batches=3)
    before = s.state.segments[0].id
    s.scale(split=before, parts=2)
    s.append(pa.table({"k": [f"k{i % 7}" for i in range(50)], "b": [9] * 50, "t": [T0 + 9_000 + i for i in range(50)]}),
             key="k", timestamp="t")
    cut = s.cut_at(T0 + 1_500)
    assert before in cut and cut[before] > 0  # the sealed segment was active at that time
    assert all(cut[c] == 0 for c in s.successors(before))


def test_truncate_by_stream_cut_never_removes_records_at_or_after_it(url: str) -> None:
    s = _fill(url)
    cut = s.cut_at(T0 + 2_500)
    s.truncate(cut)
    t = s.read()
    for seg, seq in cut.items():
        assert t.filter(pc.equal(t["_segment"], seg))["_seq"].to_pylist()[:1] in ([seq], [])


def test_retention_by_count_age_and_size(url: str) -> None:
    s = _fill(url, batches=6)
    s.trim(maxlen=120, gc_grace_ms=0)
    assert s.read().num_rows == 120
    now = Stream.create(url + "-age", segments=1, retention="age=1h")
    now.append(pa.table({"t": [T0], "x": [1]}), timestamp="t")  # 2023: older than an hour
    now.append(pa.table({"x": [2]}))
    now.trim()
    assert now.read()["x"].to_pylist() == [2]
    sized = _fill(url + "-size", batches=8, rows=100, segments=1)
    total = sized.info().bytes
    sized.trim(max_bytes=total // 2, gc_grace_ms=0)
    kept = sized.read().num_rows
    assert 0 < kept < 800


def test_retention_policy_runs_at_commit_and_respects_groups(url: str) -> None:
    s = Stream.create(url, segments=1, retention="count=10,groups=true")
    g = Group.create(s, "billing", start="0")
    for b in range(40):
        s.append(pa.table({"b": [b]}))
    assert s.read().num_rows == 40  # the group has consumed nothing: nothing may go
    got = g.read("w1", count=30)
    g.ack(got)
    for b in range(40, 50):
        s.append(pa.table({"b": [b]}))
    left = sorted(s.read()["b"].to_pylist())
    assert set(range(30, 50)) <= set(left)  # every unconsumed record stays
    assert 0 < left[0] <= 30  # consumed ones beyond the count limit went


def test_orphans_from_failed_attempts_are_cleaned(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    s = _fill(url, batches=2)
    table = pa.table({"k": ["a", "b"], "b": [7, 7], "t": [T0, T0]})
    orphans = write_batches(s.write_spec(table.schema, key="k", timestamp="t"), [table])  # never committed
    files = _data_files(tmp_path)
    assert all(any(f.endswith(o.path) for f in files) for o in orphans)
    assert s.vacuum(orphans=True).orphans == 0  # within the grace period
    counts = s.vacuum(orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True)
    assert counts.orphans == len(orphans)
    assert s.read().num_rows == 100  # committed data untouched


def test_vacuum_skips_orphans_a_concurrent_vacuum_deleted(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two vacuums racing: the other deletes each orphan (data file or manifest) between this
    one's listing and its age check. This one skips them (they are gone, its goal) rather than
    failing with "no such object"; committed data is untouched."""
    s = _fill(url, batches=2)
    table = pa.table({"k": ["a", "b"], "b": [7, 7], "t": [T0, T0]})
    orphans = [o.path for o in write_batches(s.write_spec(table.schema, key="k", timestamp="t"), [table])]
    s.store.write(layout.manifest_file("dead-compactor.json"), b"{}")  # a compactor died before publishing
    gone = orphans[1:] + [layout.manifest_file("dead-compactor.json")]
    real = Store.modified_ms
    raced: list[str] = []

    def racing(store: Store, rel: str) -> int:
        if rel in gone:  # the other vacuum got there first
            store.delete([rel])
            raced.append(rel)
        return real(store, rel)

    monkeypatch.setattr(Store, "modified_ms", racing)
    # the one no one else took
    assert s.vacuum(orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True).orphans == 1
    assert sorted(raced) == sorted(gone)
    monkeypatch.setattr(Store, "modified_ms", real)
    assert s.vacuum(orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True).orphans == 0
    assert s.read().num_rows == 100  # committed data untouched


def test_data_loss_is_reported_exactly(url: str) -> None:
    s = _fill(url)
    position = s.seek(T0 + 1_000)  # a reader stopped here ...
    s.truncate(T0 + 4_000)  # ... and retention passed it
    with pytest.raises(DataLossError) as err:
        check_data_loss(s.state, position, fail=True, journal=s.journal)
    message = str(err.value)
    assert "2023-11-14T22:13:21.000Z" in message and "failOnDataLoss=false" in message
    assert {d["segment"] for d in err.value.lost} == {g.id for g in s.state.segments if g.first_seq}
    # exactly the records after the reader's position and before the head, per segment
    full = _fill(url + "-copy")
    t = full.read()
    for d in err.value.lost:
        part = t.filter(pc.equal(t["_segment"], d["segment"]))
        gone = part.filter(pc.and_(pc.greater_equal(part["t"], T0 + 1_000), pc.less(part["t"], T0 + 4_000)))
        seqs = gone["_seq"].to_pylist()
        assert d["seq_before"] == max(seqs) + 1
        assert d["seq_from"] <= min(seqs)  # chunk-granular start
    assert check_data_loss(s.state, position, fail=False) == s.state.head_tso


def test_truncate_clamps_to_tick_and_is_monotone(url: str) -> None:
    s = _fill(url, batches=2)
    with s.writer("slow") as w:
        w.append(pa.table({"k": ["z"], "b": [0], "t": [T0 + 100]}), key="k", timestamp="t")
        s.truncate(int(time.time() * 1000))  # far in the future of the tick
        assert s.refresh().head_tso <= s.state.tick
        head = s.state.head_tso
        s.truncate(T0)  # backwards: ignored
        assert s.refresh().head_tso == head


def test_an_orphan_grace_too_short_to_be_safe_is_refused(url: str) -> None:
    """A commit in flight: its chunk files are written, its journal commit not yet landed. An
    orphan vacuum with a grace of 0 would take them for orphans and lose the acknowledged batch;
    under the safe minimum (1 hour) it is refused unless the caller says no writer runs."""
    from pyspark_tstream.api.config import ORPHAN_GRACE_MIN_MS
    from pyspark_tstream.errors import ConfigError

    s = Stream.create(url, segments=2)
    table = pa.table({"k": ["a", "b", "c"], "v": [1, 2, 3]})
    s.append(table)
    in_flight = write_batches(s.appending.write_spec(table.schema), [table], ordered=True)
    with pytest.raises(ConfigError, match=r"orphan_grace_ms=0 is under the safe minimum of 3600000 ms.*"
                                          r"unsafe_orphan_grace=True") as e:
        s.vacuum(orphans=True, orphan_grace_ms=0)
    assert e.value.option == "orphan_grace_ms" and ORPHAN_GRACE_MIN_MS == 3_600_000
    assert all(s.store.exists(c.path) for c in in_flight)
    s.vacuum(orphans=True, orphan_grace_ms=ORPHAN_GRACE_MIN_MS)  # the minimum itself is accepted
    ack = s.commit(in_flight, writer_id="w", batch_id=1)
    assert not ack.duplicate and s.read().num_rows == 6 and s.verify().ok
    for bad in ({"grace_ms": -1}, {"orphan_grace_ms": -5, "orphans": True, "unsafe_orphan_grace": True}):
        with pytest.raises(ConfigError, match="must be a non-negative integer"):
            s.vacuum(**bad)
    assert s.read().num_rows == 6


def test_the_cli_refuses_an_unsafe_orphan_grace(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark_tstream.cli import main

    s = Stream.create(url, segments=2)
    s.append(pa.table({"k": ["a"], "v": [1]}))
    assert main(["vacuum", url, "--orphans", "--orphan-grace-ms", "0"]) != 0
    assert "--unsafe-orphan-grace" in capsys.readouterr().err
    assert main(["vacuum", url, "--orphans", "--orphan-grace-ms", "0", "--unsafe-orphan-grace"]) == 0
    assert s.read().num_rows == 1


def test_the_tail_reads_no_chunk_wholly_below_the_head(url: str) -> None:
    """The long run's ``checkpoints`` seed 1,000,653: one append's shared file held a slice
    in each segment; a truncation by time took one slice's records whole, compaction merged the
    other, and vacuum deleted the file (no live slice left in it). ``trim(maxlen=...)`` and
    ``read(tail=...)`` still read every chunk of the entries from the head on, the truncated
    slice too: no such object. Chunks wholly at or below the head are no part of the tail."""
    from pyspark_tstream.epochs.routing import key_hash, route

    s = Stream.create(url, segments=2, compaction="off")
    keys = [f"k{i}" for i in range(40)]
    bounds = [g.lo for g in sorted(s.state.segments, key=lambda g: g.lo)]
    seg = route(key_hash(pa.array(keys)), bounds)
    first = [k for k, g in zip(keys, seg) if g == 0]
    second = [k for k, g in zip(keys, seg) if g == 1]
    old, new = T0, T0 + 60_000
    # one shared file: a slice per segment, the first segment's at old times (the floor raises
    # later appends' old times above the tick, so only the first append can hold them)
    s.append(pa.table({"k": first + second, "b": [0] * len(keys),
                       "t": pa.array([old] * len(first) + [new] * len(second), pa.timestamp("ms", tz="UTC"))}),
             key="k", timestamp="t")
    for b in (1, 2):  # the second segment alone
        times = pa.array([new + b] * len(second), pa.timestamp("ms", tz="UTC"))
        s.append(pa.table({"k": second, "b": [b] * len(second), "t": times}), key="k", timestamp="t")
    s.truncate(before=T0 + 30_000)  # the first segment's slice whole, none of the second's
    assert s.refresh().head_pos == 1  # the shared file's entry is still at the head
    s.compact(full=True, target="64KB")
    for _ in range(2):
        s.vacuum(grace_ms=0)
    shared = s.journal.read_entry(1).chunks[0].path
    assert not s.store.exists(shared)  # no live slice left in it: collected
    tail = Stream.open(url).read(tail=5)
    assert tail.num_rows >= 5 and set(tail["k"].to_pylist()) <= set(second)
    assert set(tail["b"].to_pylist()) == {2}
    Stream.open(url).trim(maxlen=len(second) * 2, gc_grace_ms=0)
    assert sorted(Stream.open(url).read()["b"].to_pylist()) == [1] * len(second) + [2] * len(second)
    assert Stream.open(url).verify().ok
