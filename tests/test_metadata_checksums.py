"""Metadata checksums (#58): the writer feature ``checksums`` (python/journal/seal.py).

A stream this build creates declares it and seals every metadata object it writes (the digest
of the object's content, last key ``crc``); every decoder verifies a seal before it uses the
object. Streams created before it (the golden fixtures) declare nothing and keep their format
byte for byte, appends included. A build without the feature (older rules) still reads a
checksummed stream and refuses to commit to it, naming the feature. docs/protocol.md §16.
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import CallLog
from helpers import ROOT
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import CorruptMetadataError, UnsupportedFormatError
from pyspark_tstream.journal import features, seal
from pyspark_tstream.maintain.fsck import verify
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import Store

GOLDEN = ROOT / "tests" / "golden"


def _batch(i: int, rows: int = 3) -> pa.Table:
    return pa.table({"k": [f"k{j % 3}" for j in range(rows)], "n": list(range(i * rows, (i + 1) * rows))})


def _strip(path: Path) -> None:
    """Rewrite the object at ``path`` without its seal (its content otherwise the same)."""
    doc = seal.unseal(path.read_bytes())
    path.write_bytes(json.dumps(doc, separators=(",", ":")).encode())


# -- the seal itself --------------------------------------------------------------------------------
def test_a_sealed_object_verifies_and_any_damage_is_found() -> None:
    doc: dict[str, Any] = {"pos": 12, "writer": "w", "wall": 1796642661626, "chunks": [[1, "a", 2]]}
    data = seal.seal(doc)
    assert data.startswith(json.dumps(doc, separators=(",", ":")).encode()[:-1]) and seal.is_sealed(data)
    assert seal.unseal(data) == doc and seal.unseal(data, required=True) == doc
    for i, b in enumerate(data):  # every digit, in the content or in the digest
        if chr(b).isdigit():
            other = data[:i] + str((int(chr(b)) + 1) % 10).encode() + data[i + 1:]
            with pytest.raises(ValueError):
                seal.unseal(other)
    for cut in (1, len(data) // 2, len(data) - 1):
        with pytest.raises(ValueError):
            seal.unseal(data[:cut])
    with pytest.raises(ValueError, match="malformed"):  # a seal damaged into no seal is no pass
        seal.unseal(data.replace(b'"crc":"', b'"crc":"x'))
    plain = json.dumps(doc).encode()
    assert seal.unseal(plain) == doc  # an object of a stream without the feature
    with pytest.raises(ValueError, match="no checksum"):
        seal.unseal(plain, required=True)
    assert seal.encode(doc, False) == json.dumps(doc, separators=(",", ":")).encode()


# -- older streams: no declaration, no seal, bytes unchanged ---------------------------------------
#: Appends per fixture: v6 stays below its next index node (appending past it fails on main too:
#: the flush reads entries its vacuum collected; reported separately).
APPENDS = {"v1": 40, "v5": 40, "v6": 12}


@pytest.mark.parametrize("name", sorted(APPENDS))
def test_an_older_stream_reads_and_appends_without_seals(name: str, tmp_path: Path) -> None:
    root = tmp_path / "s"
    shutil.copytree(GOLDEN / name / "stream", root)
    before = {p: p.read_bytes() for p in root.rglob("*.json") if p.name != "head.json"}  # hints are rewritten
    s = Stream.open(f"file://{root}")
    rows = s.read().num_rows
    assert not s.state.features
    base = 1767229200000  # after every fixture's records
    for i in range(APPENDS[name]):  # past an index node (v1, v5) and (v6) a checkpoint
        s.append(pa.table({"key": [f"k{i % 5}"], "value": [900.0 + i], "n": [9000 + i],
                           "ts": pa.array([base + i], pa.timestamp("ms", tz="UTC"))}),
                 key="key", timestamp="ts", writer_id="today", batch_id=i)
    s.scale(split=s.state.segments[0].id)
    after = Stream.open(f"file://{root}")
    assert after.read().num_rows == rows + APPENDS[name] and not after.state.features and after.verify().ok
    assert all(p.read_bytes() == data for p, data in before.items())  # nothing rewritten
    sealed = [p for p in root.rglob("*.json") if seal.is_sealed(p.read_bytes())]
    assert not sealed, sealed


# -- a build without the feature -------------------------------------------------------------------
@pytest.fixture()
def checksummed() -> str:
    url = f"memory://checksums-{uuid.uuid4().hex}/s"
    s = Stream.create(url, segments=2, compaction="off")
    for i in range(40):
        s.append(_batch(i), key="k", writer_id="w", batch_id=i)
    s.scale(split=s.state.segments[0].id)
    s.append(_batch(40), key="k", writer_id="w", batch_id=40)
    assert features.checksummed(s.state.features)
    return url


def test_a_build_without_the_feature_reads_a_checksummed_stream_and_refuses_to_commit(
        checksummed: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The older rules: ``checksums`` is a writer feature, so a build that lacks it reads the
    stream (its decoders ignore the extra key) and refuses every commit, naming the feature."""
    want = sorted(Stream.open(checksummed).read()["n"].to_pylist())
    monkeypatch.delitem(features.KNOWN, seal.FEATURE)
    monkeypatch.setattr(seal, "unseal", lambda data, required=False: json.loads(data))  # no verification
    s = Stream.open(checksummed)
    assert sorted(s.read()["n"].to_pylist()) == want == list(range(41 * 3))
    with pytest.raises(UnsupportedFormatError, match="checksums"):
        s.append(_batch(41), key="k", writer_id="w", batch_id=41)
    assert Stream.open(checksummed).state.pos == s.state.pos  # nothing committed


# -- an object of a checksummed stream without its seal is damage ----------------------------------
@pytest.fixture()
def on_disk(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "s"
    url = f"file://{root}"
    s = Stream.create(url, segments=1, compaction="off")
    for i in range(40):
        s.append(_batch(i), key="k", writer_id="w", batch_id=i)
    return root, url


def test_an_entry_without_its_seal_is_refused_by_name(on_disk: tuple[Path, str]) -> None:
    root, url = on_disk
    pos = Stream.open(url).state.pos
    _strip(root / layout.entry(pos))
    _strip(root / layout.HEAD)  # the hint copies it: both edited the same way
    with pytest.raises(CorruptMetadataError, match=rf"journal entry {url}/{layout.entry(pos)} .*no checksum"):
        Stream.open(url)
    problems = verify(Store(url, None))[0].problems
    assert any(p.path.endswith(layout.entry(pos)) and "no checksum" in p.message for p in problems), problems


def test_a_checkpoint_without_its_seal_is_not_used(on_disk: tuple[Path, str],
                                                    caplog: pytest.LogCaptureFixture) -> None:
    root, url = on_disk
    m = Stream.open(url).state.checkpoint
    assert m is not None and m.pos > 0
    _strip(root / layout.checkpoint(m.pos))
    with caplog.at_level(logging.WARNING):
        got = Stream.open(url).read()["n"].to_pylist()
    assert sorted(got) == list(range(40 * 3))
    assert f"checkpoint {url}/{layout.checkpoint(m.pos)} cannot be used" in caplog.text and "no checksum" in caplog.text
    assert [p.kind for p in Stream.open(url).verify().problems] == ["checkpoint"]
    assert Stream.repair_url(url).ok and Stream.open(url).verify().ok
    assert seal.is_sealed((root / layout.checkpoint(m.pos)).read_bytes())  # repair wrote it sealed


# -- cost -----------------------------------------------------------------------------------------
def _calls(monkeypatch: pytest.MonkeyPatch, declare: bool) -> tuple[list[tuple[str, str]], int]:
    """The store calls of one history (create, appends past an index node and checkpoints, a
    scale, a cold open and read) with or without the feature, and its stored metadata bytes."""
    from pyspark_tstream.api import creation

    monkeypatch.setattr(creation, "NEW_STREAM", features.NEW_STREAM if declare else {})
    url = f"memory://budget-{uuid.uuid4().hex}/s"
    s = Stream.create(url, segments=2, compaction="off")
    log = CallLog()
    s.store.observer = log
    for i in range(70):
        s.append(_batch(i), key="k", writer_id="w", batch_id=i)
    s.scale(split=s.state.segments[0].id)
    cold = Stream.open(url)
    cold.store.observer = log
    cold.read()
    assert features.checksummed(cold.state.features) == declare
    return [(op, rel) for op, rel in log.calls if "/" in rel and not rel.startswith("data/")] + \
        [(op, "data") for op, rel in log.calls if rel.startswith("data/")], cold.state.bytes


def test_checksums_add_no_store_call(monkeypatch: pytest.MonkeyPatch) -> None:
    with_seals, _ = _calls(monkeypatch, True)
    without, _ = _calls(monkeypatch, False)
    assert len(with_seals) == len(without) and sorted(op for op, _ in with_seals) == sorted(op for op, _ in without)
