"""Epochs and scaling: split/merge, successors, per-key order across scales, auto-scaling."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark_tstream.api.results import SegmentRange
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.epochs.routing import fraction
from pyspark_tstream.epochs.scaling import ScalingPolicy
from pyspark_tstream.errors import ConfigError
from pyspark_tstream.write.writing import write_batches


def _keys(n: int, batch: int) -> pa.Table:
    return pa.table({"k": [f"key-{i % 40}" for i in range(n)], "batch": [batch] * n, "i": list(range(n))})


def _per_key_in_order(t: pa.Table) -> None:
    t = t.sort_by("_tso")
    for k in pc.unique(t["k"]).to_pylist():
        part = t.filter(pc.equal(t["k"], k))
        order = list(zip(part["batch"].to_pylist(), part["i"].to_pylist()))
        assert order == sorted(order), f"key {k} out of order"


def test_split_and_merge_keep_per_key_order(url: str) -> None:
    s = Stream.create(url, segments=2)
    s.append(_keys(200, 0), key="k")
    first = [g.id for g in s.state.segments]
    out = s.scale(split=first[0], parts=3)
    assert out.epoch == 1 and out.sealed == (first[0],) and len(out.created) == 3
    assert all(c >> 32 == 1 for c in out.created)  # ids carry their creation epoch
    s.append(_keys(200, 1), key="k")
    merged = s.scale(merge=out.created[:2])
    s.append(_keys(200, 2), key="k")
    t = s.read()
    assert t.num_rows == 600
    _per_key_in_order(t)
    assert s.successors(first[0]) == list(out.created)
    assert s.predecessors(out.created[1]) == [first[0]]
    assert s.predecessors(merged.created[0]) == list(out.created[:2])
    info = s.sealed_info(first[0])
    assert info is not None and info.sealed_epoch == 1 and info.next_seq == info.rows > 0
    assert s.successors(merged.created[0]) == []
    assert len(s.info().segments) == 3 and s.info().epoch == 2


def test_chunks_routed_before_a_scale_are_rerouted(url: str) -> None:
    s = Stream.create(url, segments=1)
    s.append(_keys(50, 0), key="k")
    table = _keys(120, 1)
    stale = s.write_spec(table.schema, key="k")
    chunks = write_batches(stale, [table])  # routed to segment 0 ...
    Stream.open(url).scale(split=s.state.segments[0].id, parts=2)  # ... which another process seals
    s.commit(chunks, schema=table.schema)
    t = s.read()
    assert t.num_rows == 170
    assert 0 not in set(t.filter(pc.equal(t["batch"], 1))["_segment"].to_pylist())
    _per_key_in_order(t)
    for seg in pc.unique(t["_segment"]).to_pylist():
        seq = t.filter(pc.equal(t["_segment"], seg)).sort_by("_seq")["_seq"].to_numpy()
        assert seq.tolist() == list(range(len(seq)))


def test_bad_scale_requests(url: str) -> None:
    s = Stream.create(url, segments=3)
    ids = [g.id for g in s.state.segments]
    with pytest.raises(ConfigError, match="not active"):
        s.scale(split=12345)
    with pytest.raises(ConfigError, match="not adjacent"):
        s.scale(merge=[ids[0], ids[2]])
    with pytest.raises(ConfigError, match="cover"):
        s.scale(seal=[ids[0]], ranges=[(0.0, 0.1)])
    assert s.refresh().epoch == 0


def test_segments_and_epoch_at_time(url: str) -> None:
    s = Stream.create(url, segments=1)
    s.append([{"k": "a"}], key="k")
    before = int(time.time() * 1000)
    time.sleep(0.01)
    s.scale(split=s.state.segments[0].id, parts=2)
    time.sleep(0.01)
    after = int(time.time() * 1000)
    s.append([{"k": "b"}], key="k")
    assert s.epoch_at(before) == 0 and s.epoch_at(after) == 1
    assert [g.key_range for g in s.segments_at(after)] == [(0.0, 0.5), (0.5, 1.0)]
    assert len(s.segments_at(before)) == 1
    first = s.segments_at(before)[0].id
    assert s.segments_between(before, after) == sorted([first] + s.successors(first))
    assert s.segments_between(after, after) == sorted(s.successors(first))


def test_auto_scaling_splits_hot_and_merges_cold(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark_tstream.api.append as append_mod
    import pyspark_tstream.api.upkeep as upkeep_mod

    # rates from a clock that moves only when told: with real sleeps, a loaded machine could
    # stretch a gap past four windows, restarting the window the test meant to judge
    now = [1_700_000_000_000]
    monkeypatch.setattr(append_mod, "now_ms", lambda: now[0])
    monkeypatch.setattr(upkeep_mod, "now_ms", lambda: now[0])
    policy = ScalingPolicy.parse("records=100/s,factor=2,min=1,max=4,window=0.05")
    assert policy is not None and policy.records == 100
    s = Stream.create(url, segments=1, scaling="records=100/s,factor=2,min=1,max=4,window=0.05")
    s.append(_keys(10, 0), key="k")  # starts the rate window
    now[0] += 60
    s.append(_keys(2000, 1), key="k")  # ~30k records/s: hot
    assert len(s.refresh().segments) == 2 and s.state.epoch == 1
    now[0] += 250
    s.append(_keys(1, 2), key="k")  # starts new windows
    now[0] += 60
    s.append(_keys(1, 3), key="k")  # well under a quarter of the target: merge
    assert len(s.refresh().segments) == 1 and s.state.epoch == 2
    _per_key_in_order(s.read())
    with pytest.raises(ConfigError, match="scaling='fast'"):
        Stream.create(url + "-bad", scaling="fast")


def test_scale_costs_are_independent_of_history(url: str) -> None:
    from conftest import CallLog

    s = Stream.create(url, segments=2)
    costs = []
    for round_ in range(6):
        log = CallLog()
        s.store.observer = log
        seg = s.refresh().segments[0].id
        s.scale(split=seg, parts=2)
        s.append([{"k": f"x{round_}"}], key="k")  # the next commit files the sealed records
        s.scale(merge=[g.id for g in s.state.segments[:2]])
        s.store.observer = None
        costs.append(log.count())
    # a whole split + append + merge cycle (a scale's records are filed by the next commit, so
    # each window pays for the one before it): the same cost at every history length
    assert max(costs[1:]) - min(costs[1:]) <= 2, costs
    assert np.mean(costs) <= 30, costs


def test_losing_scale_writes_no_sealed_or_epoch_record(url: str) -> None:
    """Two scales race for one journal slot: the loser's sealed-map and epoch records must not
    land (they were written before its conditional create, and shadowed the winner's)."""
    a = Stream.create(url, segments=2)
    a.append(pa.table({"k": ["x"] * 10, "n": list(range(10))}), key="k")
    b = Stream.open(url)
    seg = a.state.segments[0].id
    fired: list[int] = []

    def rival(op: str, rel: str) -> None:
        if op == "put_if_absent" and "journal/" in rel and not fired:
            fired.append(1)
            b.refresh()
            b.scale(split=seg, parts=2)

    a.store.observer = rival
    with pytest.raises(ConfigError, match="not active"):
        a.scale(split=seg, parts=4)  # retried on the winner's state: segment 0 is sealed now
    a.store.observer = None
    fresh = Stream.open(url)
    created = [g.id for g in fresh.state.segments if g.epoch == 1]
    assert len(created) == 2 and fresh.successors(seg) == created
    fresh.append(pa.table({"k": ["y"]}), key="k")  # a later commit flushes the committed records
    assert Stream.open(url).successors(seg) == created
    assert sorted(Stream.open(url).segments_at("2999-01-01T00:00:00Z"), key=lambda d: d.id) == \
        sorted((SegmentRange(g.id, (fraction(g.lo), fraction(g.hi))) for g in fresh.state.segments),
               key=lambda d: d.id)


def test_segments_between_reads_epoch_history_in_chunks() -> None:
    import math

    from conftest import CallLog
    from histories import epoch_history
    from pyspark_tstream.epochs.scaling import EPOCH_CHUNK
    from pyspark_tstream.journal.journal import Journal
    from pyspark_tstream.store import layout
    from pyspark_tstream.store.storage import Store

    s = epoch_history(3 * EPOCH_CHUNK + 5)
    url = f"memory://{s.store.root}"
    expected = s.segments_between(0, int(time.time() * 1000) + 1000)
    assert len(expected) > 3 * EPOCH_CHUNK  # every epoch's segments
    log = CallLog()
    store = Store(url)
    store.observer = log
    reader = Stream(store, Journal(store).head())
    log.reset()
    reader.epoch_at(0)
    reader.epoch_at(int(time.time() * 1000) + 1000)
    at = log.count()
    log.reset()
    assert reader.segments_between(0, int(time.time() * 1000) + 1000) == expected
    epochs = reader.state.epoch
    assert log.count() <= at + 1 + math.ceil(epochs / EPOCH_CHUNK) + 1, log.calls
    # a stream written before history chunks existed: the records alone still answer
    s.store.delete([layout.epoch_chunk(k) for k in range(epochs // EPOCH_CHUNK)])
    assert Stream.open(url).segments_between(0, int(time.time() * 1000) + 1000) == expected


def test_a_scale_waits_while_the_previous_scales_epoch_record_is_unwritten(url: str) -> None:
    """The state holds one pending epoch record, written by the commits after its scale. While
    its write fails, a second scale is refused (a retriable StorageError naming the record):
    committing it replaced the pending record, and the earlier epoch's was never written (fsck
    found it missing; once the journal entries around it are collected, sources that start
    before it cannot follow it). Found by the simulation's long run, `autoscale` seed 802,751."""
    from pyspark_tstream.errors import StorageError
    from pyspark_tstream.store import layout

    s = Stream.create(url, segments=2)
    s.append(_keys(40, 0), key="k")
    first, second = (g.id for g in s.state.segments)
    s.scale(split=first, parts=2)  # epoch 1: its record waits for the next commit to write it
    one = layout.epoch_record(1)

    def failing(op: str, rel: str) -> None:
        if rel == one and op == "write":
            raise StorageError(f"injected: {rel}", path=rel)

    s.store.observer = failing
    with pytest.raises(StorageError, match="epoch 1") as raised:
        s.scale(split=second, parts=2)
    assert raised.value.retriable and one in raised.value.path
    assert Stream.open(url).state.epoch == 1  # nothing committed
    s.store.observer = None
    s.refresh()
    s.scale(split=second, parts=2)  # its attempt writes epoch 1's record first
    s.append(_keys(40, 1), key="k")  # and this commit epoch 2's
    fresh = Stream.open(url)
    assert fresh.state.epoch == 2 and all(fresh.store.exists(layout.epoch_record(e)) for e in (1, 2))
    assert len(fresh.successors(first)) == 2 and len(fresh.successors(second)) == 2
    report = fresh.verify()
    assert report.ok, report.summary()
