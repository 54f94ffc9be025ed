"""Hints are hints: a damaged ``_tstream/head.json`` or anchor never makes a stream unusable.

Without a readable head, the newest journal entry is found by an exponential then binary search
over positions (O(log n) store calls), and the next commit rewrites the head.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from conftest import CallLog
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal import checkpoint
from pyspark_tstream.journal.entries import Entry
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.journal.scale_records import SealedRecord
from pyspark_tstream.store import layout

HEAD_DAMAGE = {
    "garbage": b"\x00\x9f not json",
    "empty": b"",
    "truncated": None,  # the first half of the real head
    "wrong shape: list": b"[1, 2, 3]",
    "wrong shape: number": b"42",
    "wrong shape: object": b'{"pos": "x", "state": []}',
}


def _stream_of_commits(url: str, commits: int) -> Stream:
    s = Stream.create(url, segments=2)
    for b in range(commits):
        s.append(pa.table({"i": [b]}), writer_id="w", batch_id=b)
    return s


@pytest.mark.parametrize("damage", list(HEAD_DAMAGE) + ["missing"])
def test_damaged_head_falls_back_and_next_commit_rewrites_it(url: str, damage: str) -> None:
    """Before: every read and append failed with 'restore it from a backup or truncate'."""
    s = _stream_of_commits(url, 5)
    if damage == "missing":
        s.store.delete([layout.HEAD])
    else:
        data = HEAD_DAMAGE[damage] if HEAD_DAMAGE[damage] is not None else s.store.read(layout.HEAD)[:40]
        s.store.write(layout.HEAD, data)
    fresh = Stream.open(url)
    assert fresh.state.pos == 5
    assert sorted(fresh.read()["i"].to_pylist()) == [0, 1, 2, 3, 4]
    fresh.append(pa.table({"i": [5]}), writer_id="w", batch_id=5)
    assert Entry.parse(s.store.read(layout.HEAD), path=layout.HEAD)["pos"] == 6  # rewritten
    assert sorted(Stream.open(url).read()["i"].to_pylist()) == list(range(6))


@pytest.mark.parametrize("anchor", [b"garbage", b'{"pos": -3}', b'{"pos": 999999}', b"[]", None])
def test_damaged_anchor_with_missing_head_after_gc(url: str, anchor: bytes | None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # entries go up to a checkpoint below the truncation (format v6): checkpoints every 4 entries
    monkeypatch.setattr(checkpoint, "MAX_ENTRIES", 4)
    s = Stream.create(url, segments=1)
    for b in range(40):
        s.append(pa.table({"t": [1_000_000 + b * 1000]}), timestamp="t")
    s.truncate(1_030_000)
    s.vacuum(grace_ms=0)
    s.append(pa.table({"t": [2_000_000]}), timestamp="t")
    s.vacuum(grace_ms=0)  # a second run deletes the entries (metadata lags one run)
    newest = s.refresh().pos
    assert not s.store.exists("_tstream/journal/000000/000000000001.json")
    s.store.delete([layout.HEAD])
    if anchor is None:
        s.store.delete([layout.ANCHOR])
    else:
        s.store.write(layout.ANCHOR, anchor)
    fresh = Stream.open(url)
    assert fresh.state.pos == newest
    assert fresh.read()["t"].to_pylist()[-1] is not None


def _ticks(url: str, n: int) -> Stream:
    """A stream with ``n`` data-less commits (cheap to make 10,000 of)."""
    s = Stream.create(url, segments=1)
    state = s.state
    for _ in range(n):
        _, state = s.journal.commit(lambda st, pos: Entry(pos=pos, op="tick", wall=st.wall, state=st), state)
    return s


@pytest.mark.parametrize("damage", ["missing", "garbage"])
def test_head_search_costs_log_n_reads(damage: str) -> None:
    costs = {}
    for n in (10, 10_000):
        url = f"memory://hint-{damage}-{n}/s"
        s = _ticks(url, n)
        if damage == "missing":
            s.store.delete([layout.HEAD])
        else:
            s.store.write(layout.HEAD, b"garbage")
        log = CallLog()
        j = Journal(s.store)
        j.store.observer = log
        assert j.head().pos == n
        j.store.observer = None
        costs[n] = log.count()
        # head + anchor + entries 0 and 1 + exponential and binary search + two listings (no
        # entry past a hole the search took for the end) + decode + one probe
        assert costs[n] <= 2 * math.ceil(math.log2(n)) + 10, (n, log.calls)
    assert costs[10_000] < 4 * costs[10]


def _sealed_record(number: int) -> SealedRecord:
    return SealedRecord(id=number, lo=0, hi=1, rows=1, bytes=1, chunks=1, first_seq=0, next_seq=1, last_tso=1,
                        sealed_epoch=1, sealed_pos=1, successors=())


@pytest.mark.parametrize("kind", ["sealed shard", pytest.param("macro-map bucket", marks=pytest.mark.slow)])
def test_lost_version_hint_costs_log_n_reads(kind: str) -> None:
    """Sealed-map shards and macro-map buckets find their newest version without the head hint
    in O(log versions) store calls, not one read per version."""
    from pyspark_tstream.maps.macromap import Macro, MacroMap
    from pyspark_tstream.maps.sealed import SealedMap
    from pyspark_tstream.store.storage import Store

    costs = {}
    large = 250 if kind == "sealed shard" else 1_000  # a shard holds 256 segments
    for n in (8, large):
        store = Store(f"memory://version-hint-{kind.replace(' ', '-')}-{n}/s")
        if kind == "sealed shard":
            smap = SealedMap(store)
            for i in range(n):
                smap.merge([_sealed_record(i)])
            head, newest = "_tstream/sealed/000000/head.json", (lambda: smap.latest(0).v)  # noqa: B023 - called in this iteration only
        else:
            mm = MacroMap(store)
            for i in range(n):
                mm.update(0, 0, lambda b, i=i: b.macros + (Macro(i, 1, f"data/0/m-{i}.parquet", 1, i, i, True, 1),))
            head, newest = "_tstream/macros/0/000000/head.json", (lambda: MacroMap(store).latest(0, 0).v)  # noqa: B023 - called in this iteration only
        assert store.exists(head)
        store.delete([head])
        log = CallLog()
        store.observer = log
        assert newest() == n - 1
        store.observer = None
        costs[n] = log.count()
        assert costs[n] <= 2 * math.ceil(math.log2(n)) + 8, (kind, n, log.calls)
    assert costs[large] < 4 * costs[8], costs


def test_garbage_macro_map_hint_is_only_a_hint(url: str) -> None:
    """A damaged macro-map bucket head is a hint like every other: reads of compacted history
    search the bucket's versions instead of failing."""
    from pyspark_tstream.journal.state import segment_number

    s = Stream.create(url, segments=1)
    for b in range(20):
        s.append(pa.table({"i": [b, b + 100]}), writer_id="w", batch_id=b)
    before = s.read()
    assert s.compact().macros > 0
    seg = s.refresh().segments[0].id
    s.store.write(layout.macro_head(segment_number(seg), 0), b"\x00 not json")
    assert Stream.open(url).read().equals(before)
    assert Stream.open(url).verify().ok
