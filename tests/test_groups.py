"""Consumer groups (groups.py): delivery, acks, pending lists, claims, positions, concurrency."""

from __future__ import annotations

import threading
import time
from dataclasses import FrozenInstanceError

import pyarrow as pa
import pytest
from pyspark_tstream.api.groups import Group, record_ids
from pyspark_tstream.api.results import GroupInfo, PendingEntry
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.epochs.routing import KEY_SPACE, key_hash, route
from pyspark_tstream.errors import ConfigError, EntryIdError, GroupExistsError, GroupNotFoundError, InvalidPathError
from pyspark_tstream.timestamps import pack, parse_id


def _stream(url: str, n: int = 0, segments: int = 3, start_ms: int = 1_000_000) -> Stream:
    s = Stream.create(url, segments=segments)
    if n:
        s.append(_events(n, start_ms), key="key", timestamp="t")
    return s


def _events(n: int, start_ms: int = 1_000_000, first: int = 0) -> pa.Table:
    return pa.table({"key": [f"k{i % 11}" for i in range(first, first + n)], "v": list(range(first, first + n)),
                     "t": [start_ms + i for i in range(first, first + n)]})


def _storage_keys(table: pa.Table) -> list[tuple[int, int]]:
    return list(zip(table["_segment"].to_pylist(), table["_seq"].to_pylist()))


def test_two_consumers_share_a_group_without_overlap(url: str) -> None:
    s = _stream(url, 100)
    a, b = Group.create(s, "billing", start="0"), Group.open(Stream.open(url), "billing")
    got: dict[str, list[int]] = {"alice": [], "bob": []}
    while True:
        ra, rb = a.read("alice", count=7), b.read("bob", count=5)
        got["alice"] += ra["v"].to_pylist()
        got["bob"] += rb["v"].to_pylist()
        if not ra.num_rows and not rb.num_rows:
            break
    assert not set(got["alice"]) & set(got["bob"])
    assert sorted(got["alice"] + got["bob"]) == list(range(100))
    assert len(got["alice"]) > 0 and len(got["bob"]) > 0
    pending = a.pending()
    assert len(pending) == 100
    assert {p.consumer for p in pending} == {"alice", "bob"}
    assert len(a.pending(consumer="bob")) == len(got["bob"])


def test_delivery_follows_tso_order_and_count(url: str) -> None:
    s = _stream(url, 30)
    g = Group.create(s, "g", start="0")
    first = g.read("c", count=10)
    assert first.num_rows == 10
    assert first["v"].to_pylist() == list(range(10))  # t increases with v: _tso order is v order
    assert g.read("c")["v"].to_pylist() == list(range(10, 30))
    assert g.read("c").num_rows == 0


def test_records_sharing_a_tso_in_two_segments_are_each_delivered_once(url: str) -> None:
    s = Stream.create(url, segments=4, timestamping_uncapped=True)
    # every key gets the same client time: the first record of each segment shares one _tso
    s.append(pa.table({"key": [f"k{i}" for i in range(40)], "v": list(range(40)), "t": [5_000_000] * 40}),
             key="key", timestamp="t")
    everything = s.read()
    assert everything.num_rows == 40
    tsos = everything["_tso"].to_pylist()
    assert len(set(tsos)) < len(tsos), "the setup must produce a shared _tso"
    g = Group.create(s, "g", start="0")
    seen = []
    for _ in range(60):
        part = g.read("c", count=1)
        if not part.num_rows:
            break
        seen += _storage_keys(part)
    assert sorted(seen) == sorted(_storage_keys(everything))
    shared = [p.id.split("@")[0] for p in g.pending()]
    ambiguous = next(i for i in shared if shared.count(i) > 1)
    with pytest.raises(EntryIdError, match="several segments"):
        g.ack([ambiguous])
    assert g.ack([p.id for p in g.pending() if p.id.startswith(ambiguous + "@")][:1]) == 1


def test_count_cut_between_segments_sharing_a_tso_skips_nothing(url: str) -> None:
    # Two commits give one _tso to a record of segment 1 and then one of segment 0: commit order
    # lists segment 1 first, read order (_tso, _segment, _seq) segment 0; a count limit falling
    # between them must not move the cursor past the segment-0 record.
    s = Stream.create(url, segments=2)
    keys = [f"k{i}" for i in range(20)]
    segs = route(key_hash(pa.array(keys)), [0, KEY_SPACE // 2]).tolist()
    low, high = keys[segs.index(0)], keys[segs.index(1)]
    holder = Stream.open(url).writer("w")
    holder.heartbeat(pack(10))  # holds the tick low so both commits keep their client time
    s.append(pa.table({"key": [low] * 64, "v": list(range(64)), "t": [2_000_000] * 64}), key="key", timestamp="t")
    s.append(pa.table({"key": [high], "v": [64], "t": [3_000_000]}), key="key", timestamp="t")
    s.append(pa.table({"key": [low], "v": [65], "t": [3_000_000]}), key="key", timestamp="t")
    holder.close()
    tail = s.read().slice(64)
    assert tail["_tso"][0] == tail["_tso"][1] and tail["_segment"].to_pylist() == [0, 1]
    g = Group.create(s, "g", start="0")
    assert g.read("c", count=64).num_rows == 64
    assert g.read("c", count=1)["v"].to_pylist() == [65]  # (tso, segment 0) comes first
    assert g.read("c", count=1)["v"].to_pylist() == [64]
    assert g.read("c").num_rows == 0
    assert len(g.pending()) == 66


def test_ack_removes_from_pending(url: str) -> None:
    s = _stream(url, 20)
    g = Group.create(s, "g", start="0")
    part = g.read("c", count=10)
    ids = record_ids(part)
    assert g.ack(ids[:3]) == 3
    assert g.ack(ids[:3]) == 0  # already acked
    assert g.ack(["999-0@0", (0, 12345)]) == 0  # never delivered
    assert g.ack(i for i in ids[3:4]) == 1  # any iterable of ids
    ids = ids[:3] + ids[4:]
    assert g.ack(part.slice(4, 1)) == 1  # a table of records
    assert g.ack([(part["_segment"][5].as_py(), part["_seq"][5].as_py())]) == 1
    left = g.pending()
    assert [p.id for p in left] == ids[5:]
    reopened = Group.open(Stream.open(url), "g")
    assert [p.id for p in reopened.pending()] == ids[5:]
    info = reopened.info()
    assert isinstance(info, GroupInfo) and all(isinstance(p, PendingEntry) for p in left)
    with pytest.raises(FrozenInstanceError):
        info.lag = 0  # type: ignore[misc]
    assert info.pending == 4 and info.acked == 6 and info.entries_read == 10
    assert info.lag == 10
    assert info.to_dict()["consumers"] == [c.to_dict() for c in info.consumers]


def test_claim_redelivers_idle_entries(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark_tstream.api.groups as groups_mod

    now = [1_700_000_000_000]  # idle times from a clock that moves only when told
    monkeypatch.setattr(groups_mod, "now_ms", lambda: now[0])
    s = _stream(url, 12)
    g = Group.create(s, "g", start="0")
    lost = g.read("crashed", count=5)
    assert g.claim("rescuer", min_idle_ms=60_000).num_rows == 0  # not idle long enough
    now[0] += 60
    claimed = g.claim("rescuer", min_idle_ms=50)
    assert claimed["v"].to_pylist() == lost["v"].to_pylist()
    assert claimed.column_names == lost.column_names
    pending = g.pending()
    assert {p.consumer for p in pending} == {"rescuer"}
    assert {p.deliveries for p in pending} == {2}
    # a claimed entry is fresh again: nobody else can take it at once
    assert g.claim("third", min_idle_ms=50).num_rows == 0
    one = record_ids(claimed)[2]
    took = g.claim("third", min_idle_ms=0, ids=[one])
    assert record_ids(took) == [one]
    assert [p.consumer for p in g.pending() if p.id == one] == ["third"]
    assert g.claim("fourth", min_idle_ms=0, count=2)["v"].to_pylist() == lost["v"].to_pylist()[:2]
    assert g.ack(record_ids(claimed)) == 5
    assert g.claim("fifth", min_idle_ms=0).num_rows == 0


def test_read_never_returns_records_above_the_tick(url: str) -> None:
    s = _stream(url, 0, segments=2)
    producer = Stream.open(url).writer("w")
    producer.append(_events(3, start_ms=2_000_000))  # w is live: the tick waits for it
    s.append(_events(4, start_ms=9_000_000, first=100))  # one-shot: committed above the tick
    g = Group.create(s, "g", start="0")
    first = g.read("c")
    tick = s.refresh().tick
    assert first["v"].to_pylist() == [0, 1, 2]
    assert max(first["_tso"].to_pylist()) <= tick
    assert s.refresh().max_tso > tick  # the one-shot records exist, just not complete yet
    assert g.read("c").num_rows == 0
    producer.close()  # the session ends: the tick moves past the one-shot records
    assert g.read("c")["v"].to_pylist() == [100, 101, 102, 103]


def test_concurrent_reads_never_double_deliver(url: str) -> None:
    s = _stream(url, 0, segments=3)
    for b in range(6):
        s.append(_events(50, start_ms=1_000_000 + b * 100, first=b * 50), key="key", timestamp="t")
    Group.create(s, "g", start="0")
    shared = Group.open(Stream.open(url), "g")
    results: dict[str, list[tuple[int, int]]] = {}
    errors: list[BaseException] = []

    def consume(name: str, group: Group) -> None:
        mine: list[tuple[int, int]] = []
        try:
            while True:
                part = group.read(name, count=7)
                if not part.num_rows:
                    break
                mine += _storage_keys(part)
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(e)
        results[name] = mine

    threads = [threading.Thread(target=consume, args=("t1", Group.open(Stream.open(url), "g"))),
               threading.Thread(target=consume, args=("t2", Group.open(Stream.open(url), "g"))),
               threading.Thread(target=consume, args=("t3", shared)),
               threading.Thread(target=consume, args=("t4", shared))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    delivered = [k for name in results for k in results[name]]
    assert len(delivered) == len(set(delivered)), "a record was delivered twice"
    assert sorted(delivered) == sorted(_storage_keys(s.read()))
    assert len(Group.open(s, "g").pending()) == 300


@pytest.mark.parametrize("name", ["", "a/b", "..", "a..b", ".hidden", "x" * 129, "sp ace", "semi;colon",
                                  "back\\slash", None])
def test_bad_group_names_are_rejected(url: str, name: object) -> None:
    s = _stream(url, 1)
    with pytest.raises(InvalidPathError, match="group name"):
        Group.create(s, name)  # type: ignore[arg-type]
    with pytest.raises(InvalidPathError, match="group name"):
        Group.open(s, name)  # type: ignore[arg-type]
    assert Group.names(s) == []


def test_create_open_exist_ok(url: str) -> None:
    s = _stream(url, 5)
    with pytest.raises(GroupNotFoundError, match="no consumer group 'g'"):
        Group.open(s, "g")
    g = Group.create(s, "g", start="0")
    g.read("c", count=2)
    with pytest.raises(GroupExistsError, match="already exists"):
        Group.create(s, "g")
    again = Group.create(s, "g", start="$", exist_ok=True)
    assert len(again.pending()) == 2  # the existing group, not a new one
    assert Group.names(s) == ["g"]
    with pytest.raises(ConfigError, match="count=0"):
        g.read("c", count=0)
    with pytest.raises(ConfigError, match="consumer name"):
        g.read("", count=1)


def test_start_positions(url: str) -> None:
    s = _stream(url, 10)
    assert Group.create(s, "from-zero", start="0").read("c").num_rows == 10
    latest = Group.create(s, "from-now", start="$")
    assert latest.read("c").num_rows == 0
    s.append(_events(3, start_ms=1_000_100, first=10), key="key", timestamp="t")
    assert latest.read("c")["v"].to_pylist() == [10, 11, 12]
    assert Group.create(s, "from-time", start=1_000_007).read("c")["v"].to_pylist() == [7, 8, 9, 10, 11, 12]
    tso_of_5 = s.read()["_tso"].to_pylist()[5]
    after = Group.create(s, "from-id", start=f"{tso_of_5 >> 18}-{tso_of_5 & ((1 << 18) - 1)}")
    assert after.read("c")["v"].to_pylist() == [6, 7, 8, 9, 10, 11, 12]
    after.set_position("0")
    assert after.read("other").num_rows == 13
    pending = after.pending()  # records 6..12 were pending already: moved, not duplicated
    assert len(pending) == 13 and {p.consumer for p in pending} == {"other"}
    assert sorted(p.deliveries for p in pending) == [1] * 6 + [2] * 7


def test_block_waits_for_new_records(url: str) -> None:
    s = _stream(url, 0)
    g = Group.create(s, "g", start="$")
    began = time.monotonic()
    assert g.read("c", block_ms=150).num_rows == 0
    assert time.monotonic() - began >= 0.15
    timer = threading.Timer(0.1, lambda: Stream.open(url).append([{"key": "a", "v": 1, "t": 5}]))
    timer.start()
    try:
        got = g.read("c", block_ms=10_000)
    finally:
        timer.join()
    assert got["v"].to_pylist() == [1]
    assert time.monotonic() - began < 9  # woke on the record, not at the end of block_ms (10 s)


def test_commit_position_and_low_water_marks(url: str) -> None:
    s = _stream(url, 20)
    tsos = s.read()["_tso"].to_pylist()
    spark = Group.commit_position(s, "spark-query", tsos[9])
    delivered = spark.read("c")
    assert delivered["v"].to_pylist() == list(range(10, 20))
    assert Group.positions(s) == {"spark-query": tsos[10] - 1}  # 10..19 are pending
    spark.ack(delivered)
    Group.commit_position(s, "spark-query", tsos[14])  # moves back, like XGROUP SETID
    workers = Group.create(s, "workers", start="0")
    part = workers.read("w", count=8)
    workers.ack(record_ids(part)[:3])  # records 3..7 stay pending
    positions = Group.positions(s)
    assert positions == {"spark-query": tsos[14], "workers": tsos[3] - 1}
    assert Group.open(s, "spark-query").info().committed_id is not None
    version = Group.open(s, "spark-query").state.pos
    Group.commit_position(s, "spark-query", tsos[14])  # the same position again writes nothing
    assert Group.open(s, "spark-query").state.pos == version


def test_operations_cost_the_same_however_long_the_history(url: str, calllog: object) -> None:
    s = _stream(url, 0, segments=2)
    g = Group.create(s, "g", start="0")
    costs = []
    for history in (5, 60):
        while g.state.pos < history:
            s.append(_events(1, start_ms=3_000_000 + g.state.pos))
            g.ack(record_ids(g.read("c")))
        s.store.observer = calllog
        calllog.reset()  # type: ignore[attr-defined]
        assert g.read("c").num_rows == 0
        poll = calllog.count()  # type: ignore[attr-defined]
        s.append(_events(1, start_ms=4_000_000 + history))
        calllog.reset()  # type: ignore[attr-defined]
        got = g.read("c")
        g.ack(record_ids(got))
        ops = calllog.by_op()  # type: ignore[attr-defined]
        group_calls = sum(1 for _, rel in calllog.calls if rel.startswith("_tstream/groups/"))  # type: ignore[attr-defined]
        s.store.observer = None
        costs.append((poll, group_calls))
        assert "list" not in ops
    assert costs[0] == costs[1]
    assert costs[0][0] <= 2  # a poll with nothing new: group probe + stream probe
    assert costs[0][1] <= 6  # read + ack: probe, create, head write each


def test_pending_survives_reopen_and_ids_parse(url: str) -> None:
    s = _stream(url, 4)
    g = Group.create(s, "g", start="0")
    part = g.read("c")
    ids = record_ids(part)
    for i, tso, seg, seq in zip(ids, part["_tso"].to_pylist(), part["_segment"].to_pylist(),
                                part["_seq"].to_pylist()):
        ms_logical, _, where = i.partition("@")
        segment, _, number = where.partition(":")
        assert parse_id(ms_logical) == tso and int(segment) == seg and int(number) == seq
    assert pack(1_000_000) <= part["_tso"][0].as_py()
    with pytest.raises(EntryIdError, match="not of the form"):
        g.ack(["not-an-id"])
    with pytest.raises(EntryIdError, match="list of ids"):
        g.ack("1000000-0@0")  # type: ignore[arg-type]
