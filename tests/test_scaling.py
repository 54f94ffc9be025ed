"""Epochs and scaling: split/merge, successors, per-key order across scales, auto-scaling."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pyspark_tstream.errors import ConfigError
from pyspark_tstream.scaling import ScalingPolicy
from pyspark_tstream.stream import Stream
from pyspark_tstream.writing import write_batches


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
    assert out["epoch"] == 1 and out["sealed"] == [first[0]] and len(out["created"]) == 3
    assert all(c >> 32 == 1 for c in out["created"])  # ids carry their creation epoch
    s.append(_keys(200, 1), key="k")
    merged = s.scale(merge=out["created"][:2])
    s.append(_keys(200, 2), key="k")
    t = s.read()
    assert t.num_rows == 600
    _per_key_in_order(t)
    assert s.successors(first[0]) == out["created"]
    assert s.predecessors(out["created"][1]) == [first[0]]
    assert s.predecessors(merged["created"][0]) == out["created"][:2]
    info = s.sealed_info(first[0])
    assert info is not None and info["sealed_epoch"] == 1 and info["next_seq"] == info["rows"] > 0
    assert s.successors(merged["created"][0]) == []
    assert len(s.info()["segments"]) == 3 and s.info()["epoch"] == 2


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
    assert [g["key_range"] for g in s.segments_at(after)] == [[0.0, 0.5], [0.5, 1.0]]
    assert len(s.segments_at(before)) == 1
    first = s.segments_at(before)[0]["id"]
    assert s.segments_between(before, after) == sorted([first] + s.successors(first))
    assert s.segments_between(after, after) == sorted(s.successors(first))


def test_auto_scaling_splits_hot_and_merges_cold(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark_tstream.stream as stream_mod

    # rates from a clock that moves only when told: with real sleeps, a loaded machine could
    # stretch a gap past four windows, restarting the window the test meant to judge
    now = [1_700_000_000_000]
    monkeypatch.setattr(stream_mod, "now_ms", lambda: now[0])
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
        s.store.observer = None
        costs.append(log.count())
        s.scale(merge=[g.id for g in s.state.segments[:2]])
    assert max(costs) - min(costs) <= 2, costs
    assert np.mean(costs) <= 16
