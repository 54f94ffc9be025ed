"""Fuzz: damage one stored object of each kind; every read and append either works (with the
right answer) or raises a TStreamError that names the object and a remedy that exists.

Kinds: journal entry (newest, and one still in the open index level), head hint, anchor, level-1
index node, sealed-shard version and hint, epoch record, group log version and hint, data
chunk. Damages: truncated, emptied, random bytes, and valid JSON of the wrong shape (other
types, missing fields, a field of the wrong type, another kind's object).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from typing import Any

import fsspec
import pyarrow as pa
import pytest
from helpers import T0
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import TStreamError
from pyspark_tstream.journal.state import segment_number
from pyspark_tstream.store import layout

#: Remedies an error may name: each is a real command (see tests/test_fsck.py).
REMEDIES = ("tstream fsck", "tstream repair", "tstream truncate", "tstream group")


def _build(url: str) -> dict[str, Any]:
    s = Stream.create(url, segments=2)
    for b in range(45):
        s.append(pa.table({"k": [f"k{b % 5}"], "t": [T0 + b * 1000]}), key="k", timestamp="t")
        if b == 20:
            s.scale(split=s.state.segments[0].id, parts=2)
    s.truncate(T0 + 2_500)
    s.vacuum(grace_ms=0)
    s.append(pa.table({"k": ["k1"], "t": [T0 + 50_000]}), key="k", timestamp="t")
    s.vacuum(grace_ms=0)
    g = Group.create(s, "billing", start="0")
    g.ack(g.read("c1", count=3))
    g.read("c1", count=2)
    return {"pos": s.refresh().pos, "records": sorted(s.read()["t"].cast(pa.int64()).to_pylist())}


_TEMPLATE: dict[str, Any] = {}


def _template() -> tuple[str, dict[str, Any]]:
    if not _TEMPLATE:
        url = f"memory://fuzz-template-{uuid.uuid4().hex}/s"
        _TEMPLATE.update(url=url, expect=_build(url))
    return _TEMPLATE["url"], _TEMPLATE["expect"]


def _copy(src: str) -> str:
    fs = fsspec.filesystem("memory")
    dst = f"memory://fuzz-{uuid.uuid4().hex}/s"
    root_src, root_dst = src.removeprefix("memory:/"), dst.removeprefix("memory:/")
    for path in fs.find(root_src):
        fs.pipe_file(root_dst + path[len(root_src):], fs.cat_file(path))
    return dst


def _targets(s: Stream, pos: int) -> dict[str, str]:
    st = s.refresh()
    open0 = st.index[0][0][0]
    shard = "_tstream/sealed/000000"
    glog = "_tstream/groups/billing"
    versions = sorted(s.store.list(f"{glog}/log/000000"))
    chunk = next(c for p in range(open0, pos + 1) for c in s.journal.read_entry(p).chunks)
    return {
        "entry (newest)": layout.entry(pos),
        "entry (open level)": layout.entry(open0),
        "head": layout.HEAD,
        "anchor": layout.ANCHOR,
        "index node": layout.index_node(1, st.meta_gc_pos // 32 if st.meta_gc_pos // 32 < open0 // 32 else 0),
        "shard version": f"{shard}/00000000.json",
        "shard head": f"{shard}/head.json",
        "epoch record": layout.epoch_record(1),
        "group version": f"{glog}/log/000000/{versions[-1]}",
        "group head": f"{glog}/head.json",
        "chunk": chunk.path,
    }


def _damages(original: bytes) -> dict[str, bytes]:
    rnd = random.Random(len(original))
    out = {"truncated": original[: len(original) // 2], "emptied": b"",
           "random bytes": bytes(rnd.randrange(256) for _ in range(64)),
           "json list": b"[1, 2, 3]", "json null": b"null", "json string": b'"x"', "json object": b"{}",
           "json number": b"7"}
    try:
        doc = json.loads(original)
    except ValueError:
        return out
    if isinstance(doc, dict) and doc:
        keys = sorted(doc)
        for k in keys[:: max(1, len(keys) // 4)]:
            out[f"missing {k}"] = json.dumps({x: v for x, v in doc.items() if x != k}).encode()
            out[f"{k} as text"] = json.dumps({**doc, k: "x"}).encode()
            out[f"{k} as list"] = json.dumps({**doc, k: [[]]}).encode()
    return out


def _check_answer_or_remedy(action: str, run: Callable[[], Any], expect: Any, path: str) -> None:
    try:
        got = run()
    except TStreamError as e:
        text = str(e)
        assert path.rsplit("/", 1)[-1] in text or "no stream" in text, f"{action}: error does not name the object: {e}"
        assert any(r in text for r in REMEDIES) or "no stream" in text, f"{action}: no real remedy: {e}"
        return
    if expect is not None:
        assert got == expect, f"{action}: wrong answer"


def _cases() -> list[tuple[str, str]]:
    url, expect = _template()
    s = Stream.open(url)
    targets = _targets(s, expect["pos"])
    out = []
    for kind, rel in targets.items():
        for damage in _damages(s.store.read(rel)):
            out.append((kind, damage))
    return out


def _sampled(cases: list[tuple[str, str]], every: int = 5) -> list[Any]:
    """Every case, a fifth of them in the default run and the rest under ``slow`` (CI runs all).

    The default fifth still meets every kind of object, and every kind of damage somewhere: each
    kind keeps its cases at positions ``offset, offset + every, ...``, the offset moving on from
    one kind to the next, and every kind's list opens with the same generic damages.
    """
    out, seen = [], {}
    order = {kind: n for n, kind in enumerate(dict.fromkeys(k for k, _ in cases))}
    for kind, damage in cases:
        i = seen[kind] = seen.get(kind, -1) + 1
        offset = order[kind] % every
        marks = () if i % every == offset else (pytest.mark.slow,)
        out.append(pytest.param(kind, damage, marks=marks))
    return out


@pytest.mark.parametrize("kind,damage", _sampled(_cases()))
def test_damaged_object_fails_clearly_or_works(kind: str, damage: str) -> None:
    url0, expect = _template()
    url = _copy(url0)
    s = Stream.open(url)
    rel = _targets(s, expect["pos"])[kind]
    s.store.write(rel, _damages(s.store.read(rel))[damage])

    def read() -> list[int]:
        return sorted(Stream.open(url).read()["t"].cast(pa.int64()).to_pylist())

    def append() -> list[int]:
        Stream.open(url).append(pa.table({"k": ["k2"], "t": [T0 + 60_000]}), key="k", timestamp="t")
        return read()

    def group() -> int:
        g = Group.open(Stream.open(url), "billing")
        return len(g.read("c2", count=1000)) + len(g.pending())

    def verify() -> bool:
        return Stream.open(url).verify().ok

    _check_answer_or_remedy("read", read, expect["records"], rel)
    _check_answer_or_remedy("group", group, None, rel)
    _check_answer_or_remedy("verify", verify, None, rel)
    _check_answer_or_remedy("append", append, None, rel)
    after = _check_read_after_append(url, expect["records"], rel)
    del after


def _check_read_after_append(url: str, before: list[int], rel: str) -> None:
    """After an append (which may have failed), a read returns the old records plus maybe the
    new one, or fails clearly: never anything else."""
    try:
        got = sorted(Stream.open(url).read()["t"].cast(pa.int64()).to_pylist())
    except TStreamError as e:
        assert any(r in str(e) for r in REMEDIES) or "no stream" in str(e), str(e)
        return
    assert got in (before, sorted(before + [T0 + 60_000]))


# -- compaction's objects: the macro map and the manifests ------------------------------------------

_COMPACTED: dict[str, Any] = {}


def _compacted_template() -> tuple[str, dict[str, Any]]:
    """Two compactions: the first one's small chunks collected (reads need the map), the second
    one's manifests still needed by vacuum."""
    if not _COMPACTED:
        url = f"memory://fuzz-compacted-{uuid.uuid4().hex}/s"
        s = Stream.create(url, segments=2, compaction="off")
        for b in range(40):
            s.append(pa.table({"k": [f"k{(b * 3 + i) % 7}" for i in range(4)],
                               "t": [T0 + b * 100 + i for i in range(4)]}),
                     key="k", timestamp="t")
        assert s.compact().macros > 0
        s.vacuum(grace_ms=0)
        for b in range(40, 60):
            s.append(pa.table({"k": [f"k{b % 7}"], "t": [T0 + b * 100]}), key="k", timestamp="t")
        assert s.compact(full=True).macros > 0
        s = Stream.open(url)
        seg = min(s.state.compaction.summaries)
        part = next(p for p in s.journal.read_entry(s.state.pos).info["parts"] if p["seg"] == seg)
        versions = sorted(n for n in s.store.list(layout.macro_bucket_folder(segment_number(seg), 0)) if n[0].isdigit())
        _COMPACTED.update(url=url, records=sorted(s.read()["t"].cast(pa.int64()).to_pylist()), targets={
            "macro map version": f"{layout.macro_bucket_folder(segment_number(seg), 0)}/{versions[-1]}",
            "macro map head": layout.macro_head(segment_number(seg), 0),
            "compaction manifest": part["manifest"],
            "macro-chunk (its replaced files remain)": part["macro"]})
    return _COMPACTED["url"], _COMPACTED


def _compacted_cases() -> list[tuple[str, str]]:
    url, t = _compacted_template()
    store = Stream.open(url).store
    return [(kind, damage) for kind, rel in t["targets"].items() for damage in _damages(store.read(rel))]


@pytest.mark.parametrize("kind,damage", _sampled(_compacted_cases()))
def test_damaged_compaction_object_fails_clearly_and_repair_restores_it(kind: str, damage: str) -> None:
    """A read works or names the object and a remedy; `repair` then leaves a sound stream with
    every record (a damaged macro-chunk: read from the files it replaced, which vacuum keeps),
    and vacuum afterwards keeps them all."""
    url0, t = _compacted_template()
    url = _copy(url0)
    s = Stream.open(url)
    rel = t["targets"][kind]
    s.store.write(rel, _damages(s.store.read(rel))[damage])

    def read() -> list[int]:
        return sorted(Stream.open(url).read()["t"].cast(pa.int64()).to_pylist())

    _check_answer_or_remedy("read", read, t["records"], rel)
    _check_answer_or_remedy("verify", lambda: Stream.open(url).verify().ok, None, rel)
    after = Stream.open(url).repair()
    assert after.ok, after.summary()
    assert read() == t["records"]
    Stream.open(url).vacuum(grace_ms=0)
    assert read() == t["records"] and Stream.open(url).verify().ok
