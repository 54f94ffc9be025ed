"""A journal entry's many slices cost a read little metadata work (issue 59).

An append at 64 segments commits a slice a segment, packed into one entry
(python/journal/packing.py); opening and reading the stream decodes every one. The checks a
chunk list needs run as the packed columns are unpacked, a column at a time, so the decoders
do not check each chunk again; and an unpacked list that a decoder trusts always has the shape
the per-chunk check asks for (damaged packed columns fail as corrupt metadata, never as a wrong
answer later).
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import CorruptMetadataError
from pyspark_tstream.journal import seal, shapes
from pyspark_tstream.journal.chunk import Chunk
from pyspark_tstream.journal.entries import Entry
from pyspark_tstream.journal.packing import pack, unpack
from pyspark_tstream.journal.timeindex import node_entries
from pyspark_tstream.store import layout

SEGMENTS = 16


def _chunks() -> list[list[Any]]:
    """Stored lists of slices of two shared files, spans in one, marks and an unsorted chunk."""
    out = []
    for f in range(2):
        start = 0
        for seg in range(5):
            lo = T0 + f * 10 + seg
            c = Chunk(seg=seg, path=f"data/0/w-{f}.parquet", rows=4, bytes=100, seq=f * 4, floor=7, lo=lo, hi=lo + 3,
                      offset=seg * 4, sorted=seg != 3, marks=(lo,) if seg == 2 else (), file_bytes=10_000,
                      span_start=start if f else 0, span_bytes=300 if f else 0)
            start += 300
            out.append(c.to_json())
    return out


def _doc(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(zlib.decompress(base64.b64decode(text)))
    return loaded


def _text(doc: dict[str, Any]) -> str:
    return base64.b64encode(zlib.compress(json.dumps(doc).encode())).decode("ascii")


#: Damages of one packed column value: other JSON types, and values no writer stores.
BAD_VALUES = [1.5, True, None, "3", [], {}, -1, -10**6, 2**70]
COLUMNS = ["f", "s", "r", "b", "q", "fl", "lo", "hi", "o", "m", "ss", "sb", "sizes", "files", "unsorted"]


@pytest.mark.parametrize("column", COLUMNS)
def test_unpacked_chunks_pass_the_chunk_check_or_unpacking_fails(column: str) -> None:
    doc = _doc(pack(_chunks()))
    assert "ss" in doc and "sb" in doc  # a v5 pack: every column present
    for bad in BAD_VALUES:
        for at in (0, len(doc[column]) - 1):
            damaged = json.loads(json.dumps(doc))
            damaged[column][at] = bad
            try:
                lists = unpack(_text(damaged))
            except (ValueError, KeyError, TypeError, IndexError):
                continue  # the decoder reports corrupt metadata
            for c in lists:
                shapes.check_chunk(c)  # what a decoder trusts without checking it again


def test_a_damaged_packed_column_fails_as_corrupt_metadata(url: str) -> None:
    s = Stream.create(url, segments=SEGMENTS, compaction="off")
    s.append(_table(0), key="key", timestamp="ts")
    rel = layout.entry(s.refresh().pos)
    log = s.context.journal.log
    stored = seal.unseal(s.context.store.read(rel))
    assert "packed" in stored  # one slice a segment: packed
    doc = _doc(stored["packed"])
    doc["r"][0] = 1.5  # a row count no writer stores
    stored["packed"] = _text(doc)
    data = seal.seal(stored)  # written so (its checksum matches): the column checks find it
    for decode in (lambda: log.decode(data, rel), lambda: Entry.decode_delta(data, path=rel),
                   lambda: node_entries({"entries": [stored]}, rel)):
        with pytest.raises(CorruptMetadataError, match="wrong type"):
            decode()


def _table(i: int, rows: int = 256) -> pa.Table:
    rng = np.random.default_rng(i)
    return pa.table({"key": [f"k{int(k)}" for k in rng.integers(0, 500, rows)],
                     "ts": np.arange(T0 + i * rows, T0 + (i + 1) * rows, dtype=np.int64),
                     "v": np.arange(rows, dtype=np.int64)})


def test_reading_fresh_slices_checks_no_chunk_one_at_a_time(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Stream.create(url, segments=SEGMENTS, compaction="off")
    for i in range(40):  # a flushed index node (32 positions) and open ones
        s.append(_table(i), key="key", timestamp="ts")
    checked: list[Any] = []
    real = shapes.check_chunk
    monkeypatch.setattr(shapes, "check_chunk", lambda c: (checked.append(c), real(c)))
    fresh = Stream.open(url)
    got = fresh.read()
    reader = sum(b.num_rows for b in fresh.to_reader())
    assert got.num_rows == reader == 40 * 256
    assert checked == []  # every entry's slices are packed: checked a column at a time


def test_opening_a_stream_past_a_damaged_packed_entry_fails_as_corrupt_metadata(url: str) -> None:
    s = Stream.create(url, segments=SEGMENTS, compaction="off")
    for i in range(3):
        s.append(_table(i), key="key", timestamp="ts")
    rel = layout.entry(s.refresh().pos - 1)  # rebuilt from the checkpoint on opening: not the head's copy
    stored = json.loads(s.context.store.read(rel))
    doc = _doc(stored["packed"])
    doc["r"][0] = 1.5
    stored["packed"] = _text(doc)
    s.context.store.write(rel, json.dumps(stored).encode())
    with pytest.raises(CorruptMetadataError, match="journal entry"):
        Stream.open(url).read()


def test_a_stored_chunk_list_decodes_field_by_field() -> None:
    """Chunk.from_json spells the stored order out (it is on every slice's path): every field,
    and every shorter stored list, decodes as the dataclass's own constructor builds it."""
    full = Chunk(seg=1, path="p", rows=2, bytes=3, seq=4, floor=5, lo=6, hi=7, offset=8, sorted=False, marks=(10, 13),
                 file_bytes=11, span_start=1, span_bytes=9)
    stored = full.to_json()
    assert len(stored) == len(Chunk.STORED)
    got = Chunk.from_json(stored)
    assert got == full and list(vars(got)) == list(Chunk.STORED)
    for n in range(8, len(Chunk.STORED)):  # trailing fields left out: their defaults
        assert Chunk.from_json(stored[:n]) == Chunk(**{f: getattr(full, f) for f in Chunk.STORED[:n]})
