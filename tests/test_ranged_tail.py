"""A slice whose row groups lie in the footer read of its shared file (read/ranged.py).

The last segment of a shared file sits just before the footer; when the tail read that finds
the footer (``footer_guess`` bytes) already covers the start of its row groups, the ranged read
must still open; otherwise a one-segment read of the last segment of every shared file fails
as "corrupt chunk" (Parquet magic bytes not found).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark_tstream.read.ranged import fetch_ranges, footer_guess, source
from pyspark_tstream.store.storage import Store


@dataclass(frozen=True)
class View:
    offset: int
    rows: int
    file_bytes: int


def _shared_file(store: Store, rel: str) -> tuple[int, list[int]]:
    """A file of 16 small row groups (a segment each), like a Spark task's shared file."""
    sizes = [30 + 3 * i for i in range(16)]
    sink = pa.BufferOutputStream()
    schema = pa.schema([("v", pa.int64()), ("body", pa.string())])
    with pq.ParquetWriter(sink, schema) as w:
        at = 0
        for n in sizes:
            w.write_table(pa.table({"v": list(range(at, at + n)), "body": [f"{i:064x}" for i in range(at, at + n)]},
                                   schema=schema))
            at += n
    data = sink.getvalue().to_pybytes()
    store.write(rel, data)
    return len(data), sizes


def test_last_slice_inside_the_footer_read_opens(tmp_path) -> None:
    store = Store(f"file://{tmp_path}")
    size, sizes = _shared_file(store, "data/f.parquet")
    meta = pq.ParquetFile(pa.BufferReader(store.read("data/f.parquet"))).metadata
    last = meta.row_group(len(sizes) - 1).column(0)
    start = min(x for x in (last.dictionary_page_offset, last.data_page_offset) if x is not None)
    assert start > size - footer_guess(size), "the case needs the last row group inside the tail read"
    view = View(offset=sum(sizes[:-1]), rows=sizes[-1], file_bytes=size)
    f = pq.ParquetFile(source(fetch_ranges(store, "data/f.parquet", size, [view])))
    got = f.read_row_group(len(sizes) - 1).column("v").to_pylist()
    assert got == list(range(view.offset, view.offset + view.rows))


def test_every_slice_of_a_shared_file_reads(tmp_path) -> None:
    store = Store(f"file://{tmp_path}")
    size, sizes = _shared_file(store, "data/f.parquet")
    at = 0
    for g, n in enumerate(sizes):
        f = pq.ParquetFile(source(fetch_ranges(store, "data/f.parquet", size, [View(at, n, size)])))
        assert f.read_row_group(g).column("v").to_pylist() == list(range(at, at + n))
        at += n
