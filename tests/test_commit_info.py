"""A data commit's ``info`` (``CommitInfo``) and the bytes of its journal entry, pinned.

The expected deltas below are what the entry format stores for a small history built through the
commit path (plain commits, a tick, a lease expiry, a group-commit fold); any change to how
``info`` is built shows up here as a byte difference.
"""

from __future__ import annotations

import itertools
import json
import uuid
from typing import Any

import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal.entries import FORMAT_VERSION, Entry
from pyspark_tstream.journal.state import StreamState
from pyspark_tstream.timestamps import pack
from pyspark_tstream.write.commit import MOVE_RULES, Ack, CommitInfo, CommitIntent, CommitRequest, Moved
from pyspark_tstream.write.group import Part, fold, part_of
from pyspark_tstream.write.spec import ChunkInfo

T = 1_700_000_000_000

#: The deltas (an entry without its ``v`` and ``state``) of :func:`_history`, as stored.
EXPECTED = [
    ('{"pos":1,"op":"append","wall":1700000000000,"nonce":"n1","chunks":[[0,"data/0/a1.parquet",10,1000,0,1,'
     '445644800000000000,445644800000000009]],"writer":"a","batch":1,"info":{"rows":10}}'),
    ('{"pos":2,"op":"append","wall":1700000070000,"nonce":"n2","chunks":[[1,"data/1/z1.parquet",10,1000,0,'
     '445644800000262144,445644800000262144,445644800000262153]],"writer":"z","batch":7,"info":{"rows":10,'
     '"raised":12,"moved":{"lane":2,"tick":10,"cap":3},"expired":["a"]}}'),
    ('{"pos":3,"op":"append","wall":1700000070001,"nonce":"n3","chunks":[[0,"data/0/b1.parquet",10,1000,10,'
     '445644800000524288,445644818350080000,445644818350080009]],"writer":"b","batch":0,"info":{"rows":10}}'),
    '{"pos":4,"op":"tick","wall":1700000070002,"nonce":"n4","chunks":[],"info":{"rows":0}}',
    ('{"pos":5,"op":"append","wall":1700000140011,"nonce":"n5","chunks":[[0,"data/0/c1.parquet",10,1000,20,'
     '445644800000524288,445644800000524288,445644800000524297],[1,"data/1/d1.parquet",10,1000,10,'
     '445644818350342144,445644839321600000,445644839321600009],[0,"data/0/d2.parquet",10,1000,30,'
     '445644818350342144,445644818350342144,445644818350342153]],"writer":"c","batch":0,"info":{"rows":30,'
     '"folded":2,"moved":{"tick":20,"cap":1},"raised":20,"expired":["b","z"]},"folds":[["own0000000000000",'
     '"c",0,1,{"rows":10,"raised":10,"moved":{"tick":10,"cap":1},"expired":["z","b"]}],["pub0000000000000",'
     '"d","x",2,{"rows":20,"raised":10,"moved":{"tick":10}}]]}'),
    ('{"pos":6,"op":"append","wall":1700000200000,"nonce":"n6","chunks":[[1,"data/1/e1.parquet",10,1000,20,'
     '445644839321862144,445644852428800000,445644852428800009]],"writer":"e","batch":8,"info":{"rows":10}}'),
]


def _request(chunks: list[ChunkInfo], now: int, **intent: Any) -> CommitRequest:
    return CommitRequest(chunks=chunks, intent=CommitIntent(**intent), now=now)


def _chunk(seg: int, name: str, ms: int, lane_raised: int = 0, capped: int = 0) -> ChunkInfo:
    return ChunkInfo(seg=seg, path=f"data/{seg}/{name}.parquet", rows=10, bytes=1000, raw_lo=pack(ms),
                     raw_hi=pack(ms) + 9, lane_raised=lane_raised, capped=capped)


def _history() -> list[Entry]:
    """Six entries built on a fresh 2-segment stream's state: sessions of writers a, z and b
    (z's commit expires a, and its records are moved by every rule), a tick, a fold of c's
    commit (which expires z and b) with d's published request, and a plain commit."""
    state = Stream.create(f"memory://entry-bytes-{uuid.uuid4().hex}/s", segments=2).state
    built: list[Entry] = []

    def fold_c_and_d(st: StreamState, pos: int) -> Entry | None:
        own = Part("own0000000000000", _request([_chunk(0, "c1", T - 9, capped=1)], T + 140_010,
                                                writer_id="c", batch_id=0))
        published = Part("pub0000000000000", _request([_chunk(1, "d1", T + 150_000), _chunk(0, "d2", T - 20)],
                                                      T + 140_011, writer_id="d", batch_id="x"), base=pos - 1)
        return fold([own, published], st, pos)

    for build in (_request([_chunk(0, "a1", T)], T, writer_id="a", batch_id=1, session=True),
                  _request([_chunk(1, "z1", T - 5, lane_raised=2, capped=3)], T + 70_000, writer_id="z",
                           batch_id=7, session=True),
                  _request([_chunk(0, "b1", T + 70_000)], T + 70_001, writer_id="b", batch_id=0, session=True),
                  _request([], T + 70_002, op="tick"),
                  fold_c_and_d,
                  _request([_chunk(1, "e1", T + 200_000)], T + 200_000, writer_id="e", batch_id=8)):
        entry = build(StreamState.from_json(json.loads(json.dumps(state.to_json()))), state.pos + 1)
        assert entry is not None
        entry.nonce = f"n{entry.pos}"
        entry.state.pos = entry.pos
        built.append(entry)
        state = entry.state
    return built


def test_commit_entries_keep_their_bytes() -> None:
    entries = _history()
    assert [json.dumps(e.delta_json(), separators=(",", ":")) for e in entries] == EXPECTED
    for entry, delta in zip(entries, EXPECTED):
        assert entry.encode().decode().startswith(f'{delta[:-1]},"v":{FORMAT_VERSION},"state":{{')


def test_acks_read_the_info_back() -> None:
    entries = _history()
    moved = Ack.from_entry(entries[1])
    assert (moved.raised, moved.moved) == (12, {"lane": 2, "tick": 10, "cap": 3})
    folded = entries[4]
    assert CommitInfo.decode(folded.info) == CommitInfo(rows=30, moved=Moved(tick=20, cap=1), raised=20,
                                                        expired=("b", "z"), folded=2)
    view = part_of(folded, "pub0000000000000")
    assert view is not None
    ack = Ack.from_entry(view)
    assert (ack.rows, ack.raised, ack.moved, ack.writer_id) == (20, 10, {"lane": 0, "tick": 10, "cap": 0}, "d")


def _old_single(rows: int, moved: dict[str, int], expired: list[str]) -> dict[str, Any]:
    """How a single commit's info was built before ``CommitInfo``."""
    info: dict[str, Any] = {"rows": rows}
    if moved["lane"] + moved["tick"]:
        info["raised"] = moved["lane"] + moved["tick"]
    if any(moved.values()):
        info["moved"] = {rule: n for rule, n in moved.items() if n}
    if expired:
        info["expired"] = expired
    return info


def _old_fold(infos: list[dict[str, Any]]) -> dict[str, Any]:
    """How a fold's info was built before ``CommitInfo``."""
    info: dict[str, Any] = {"rows": sum(int(i.get("rows", 0)) for i in infos), "folded": len(infos)}
    moved = {rule: sum(int(i.get("moved", {}).get(rule, 0)) for i in infos) for rule in MOVE_RULES}
    if any(moved.values()):
        info["moved"] = {rule: n for rule, n in moved.items() if n}
    raised = sum(int(i.get("raised", 0)) for i in infos)
    if raised:
        info["raised"] = raised
    expired = sorted({w for i in infos for w in i.get("expired", [])})
    if expired:
        info["expired"] = expired
    return info


CASES = [(rows, dict(zip(MOVE_RULES, counts)), expired)
         for rows, counts, expired in itertools.product((0, 7), itertools.product((0, 3), repeat=3),
                                                        ([], ["w2", "w1"]))]


@pytest.mark.parametrize("rows, moved, expired", CASES)
def test_commit_info_encodes_as_before(rows: int, moved: dict[str, int], expired: list[str]) -> None:
    info = CommitInfo.of(rows, Moved(**moved), expired)
    stored = json.dumps(info.encode(), separators=(",", ":"))
    assert stored == json.dumps(_old_single(rows, moved, expired), separators=(",", ":"))
    assert CommitInfo.decode(json.loads(stored)) == info
    other = _old_single(5, {"lane": 1, "tick": 0, "cap": 0}, ["w0", "w1"])
    folded = CommitInfo.fold([info, CommitInfo.decode(other)]).encode()
    assert json.dumps(folded) == json.dumps(_old_fold([info.encode(), other]))
