"""``verify(footers_only=True)`` / ``tstream fsck --footers-only``: chunk files checked from their
footers alone, O(files) bytes instead of O(data).

It reads one footer range per file and no whole file; it still finds a truncated file and one
swapped for another chunk's; a damaged page inside a file whose footer is sound is what only
the full check (and a read) finds (docs/operations.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import T0, counted_verify
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.chunkfile.footer import FOOTER_GUESS
from pyspark_tstream.cli import app as cli
from pyspark_tstream.store import layout

SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("x", pa.float64())])
BATCHES, ROWS = 6, 20_000


def _rows(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"key": [f"k{i}" for i in rng.integers(0, 50, n)], "ts": T0 + seed * 100_000 + np.arange(n),
                     "x": rng.random(n)}, schema=SCHEMA)


@pytest.fixture
def stream() -> Iterator[Stream]:
    """One segment, compaction off: each batch is one chunk file of ~300 KB."""
    s = Stream.create(f"memory://fsck-footers-{uuid.uuid4().hex}/s", schema=SCHEMA, segments=1, compaction="off")
    for b in range(BATCHES):
        s.append(_rows(b, ROWS), key="key", timestamp="ts")
    yield Stream.open(s.url)


def _files(s: Stream) -> dict[str, int]:
    return {c.path: c.bytes for p in range(1, s.state.pos + 1) for c in s.journal.read_entry(p).chunks}


def test_footers_only_reads_one_footer_range_per_file_and_no_page(stream: Stream) -> None:
    files = _files(stream)
    data = sum(files.values())
    quick, log, quick_bytes = counted_verify(stream.url, footers_only=True)
    assert quick.ok and not quick.pages and "footers only" in quick.summary()
    on_data = [(op, rel) for op, rel in log.calls if layout.is_data_file(rel.split(" ")[0])]
    assert sorted(rel for op, rel in on_data) == sorted(files) and {op for op, _ in on_data} == {"read_range"}
    full, log, full_bytes = counted_verify(stream.url, footers_only=False)
    assert full.ok and full.pages and "footers only" not in full.summary()
    assert sum(op == "read_many" and layout.is_data_file(rel.split(" ")[0]) for op, rel in log.calls) == len(files)
    # the full check fetches every byte of every file; the quick one at most a footer's guess of
    # each, whatever the files' size
    assert full_bytes >= data and quick_bytes <= len(files) * FOOTER_GUESS < data, (quick_bytes, full_bytes, data)


def test_footers_only_finds_a_truncated_and_a_swapped_file(stream: Stream) -> None:
    paths = sorted(_files(stream), key=lambda p: stream.store.size(p))
    short, swapped, other = paths[0], paths[1], paths[2]
    stream.store.write(short, stream.store.read(short)[: -1000])
    stream.store.write(swapped, stream.store.read(other))
    for footers_only in (True, False):
        report = Stream.open(stream.url).verify(footers_only=footers_only)
        bad = {p.path: p.message for p in report.problems if p.kind == "chunk"}
        assert set(bad) == {stream.store.uri(short), stream.store.uri(swapped)}, report.summary()


def _flip_page(s: Stream, path: str) -> None:
    """One byte changed inside column ``x``'s data pages: the footer stays sound."""
    data = s.store.read(path)
    col = pq.ParquetFile(pa.BufferReader(data)).metadata.row_group(0).column(SCHEMA.get_field_index("x"))
    where = col.data_page_offset + col.total_compressed_size // 2
    s.store.write(path, data[:where] + bytes([data[where] ^ 0x5A]) + data[where + 1:])


def test_only_the_full_check_finds_a_damaged_page(stream: Stream, capsys: pytest.CaptureFixture[str]) -> None:
    victim = sorted(_files(stream))[0]
    _flip_page(stream, victim)
    assert Stream.open(stream.url).verify(footers_only=True).ok  # documented: footers say nothing of pages
    (problem,) = Stream.open(stream.url).verify().problems
    assert problem.path == stream.store.uri(victim) and "damaged page" in problem.message
    for flag in ("--footers-only", "--quick"):
        assert cli.main(["fsck", flag, stream.url]) == 0
        assert "chunk footers only: pages not decoded" in capsys.readouterr().out
    assert cli.main(["fsck", stream.url]) == 1
    assert "damaged page" in capsys.readouterr().out
