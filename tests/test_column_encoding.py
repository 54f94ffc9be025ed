"""Chunk files choose Parquet encodings per column (python/chunkfile/encoding.py).

Timestamps, the raw hybrid timestamps and other integer columns whose deltas are small are
DELTA_BINARY_PACKED in chunks *and* in the macro-chunks compaction writes (before, compaction
compressed them with the codec, and a TimestampType column was never delta-encoded); random
integers stay plain; repeated strings are dictionary-encoded. The records read back are the
same whatever the encodings.
"""

from __future__ import annotations

import io
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ORDER, T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.chunkfile.encoding import chunk_encodings, delta_columns, delta_packed_bytes
from pyspark_tstream.schema import RAW_TSO


def _batch(b: int, rows: int, rng: np.random.Generator) -> pa.Table:
    ms = T0 + b * rows + np.arange(rows) + rng.integers(0, 3, rows)  # near-increasing event times
    return pa.table({
        "ts": pa.array(ms * 1000, pa.timestamp("us", tz="UTC")),  # what Spark's TimestampType is
        "key": pa.array([f"k{i % 5}" for i in range(rows)]),
        "n": pa.array(b * rows + np.arange(rows), pa.int64()),  # a counter
        "val": pa.array(rng.integers(-(10 ** 15), 10 ** 15, rows), pa.int64()),  # random
        "day": pa.array((ms // 86_400_000).astype(np.int32), pa.date32()),
        "maybe": pa.array([None if i % 3 == 0 else int(x) for i, x in enumerate(ms)], pa.int64()),
    })


def _encodings(store_root: Path, rel: str) -> dict[str, set[str]]:
    meta = pq.ParquetFile(store_root / rel).metadata
    out: dict[str, set[str]] = {}
    for g in range(meta.num_row_groups):
        for i in range(meta.num_columns):
            col = meta.row_group(g).column(i)
            out.setdefault(col.path_in_schema, set()).update(col.encodings)
    return out


def _check_layout(enc: dict[str, set[str]]) -> None:
    for name in ("ts", RAW_TSO, "n", "day", "maybe"):
        assert "DELTA_BINARY_PACKED" in enc[name], (name, enc[name])
    assert "DELTA_BINARY_PACKED" not in enc["val"] and "PLAIN" in enc["val"]
    assert "RLE_DICTIONARY" in enc["key"]


def test_chunks_and_macro_chunks_delta_encode_time_and_counter_columns(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    s = Stream.create(f"file://{tmp_path}", segments=2, compaction="off")
    batches = [_batch(b, 2_000, rng) for b in range(12)]
    for b in batches:
        s.append(b, key="key", timestamp="ts")
    before = s.read().sort_by(ORDER)
    st = s.refresh()
    chunks = s.plan(st.head_tso, st.tick)
    for c in chunks:
        _check_layout(_encodings(tmp_path, c.path))

    counts = s.compact()
    assert counts.macros == 2
    st = s.refresh()
    macros = {c.path for c in s.plan(st.head_tso, st.tick)}
    assert len(macros) == 2 and not macros & {c.path for c in chunks}
    for rel in macros:
        _check_layout(_encodings(tmp_path, rel))
    after = Stream.open(f"file://{tmp_path}").read().sort_by(ORDER)
    assert after.equals(before)
    assert after.num_rows == 24_000
    assert sorted(after["n"].to_pylist()) == list(range(24_000))
    assert after.schema.field("ts").type == pa.timestamp("us", tz="UTC")


def test_chunks_written_before_delta_encoding_still_read_and_compact(tmp_path: Path) -> None:
    """A stream whose chunks compressed every column (the rule before) reads the same."""
    import pyspark_tstream.write.writing as writing

    rng = np.random.default_rng(5)
    s = Stream.create(f"file://{tmp_path}", segments=2, compaction="off")
    old = {"compression": "snappy", "use_dictionary": ["key"]}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writing, "chunk_encodings", lambda table, codec: dict(old))
        for b in range(4):
            s.append(_batch(b, 1_000, rng), key="key", timestamp="ts")
    st = s.refresh()
    for c in s.plan(st.head_tso, st.tick):
        assert "DELTA_BINARY_PACKED" not in set().union(*_encodings(tmp_path, c.path).values())
    for b in range(4, 8):
        s.append(_batch(b, 1_000, rng), key="key", timestamp="ts")
    before = s.read().sort_by(ORDER)
    assert before.num_rows == 8_000
    s.compact()
    after = Stream.open(f"file://{tmp_path}").read().sort_by(ORDER)
    assert after.equals(before)


@pytest.mark.parametrize("kind", ["increasing", "jittered", "random", "small", "constant", "wrapping"])
def test_the_delta_size_estimate_matches_what_pyarrow_writes(kind: str) -> None:
    rng = np.random.default_rng(11)
    n = 16_384
    values = {
        "increasing": np.arange(n, dtype=np.int64) * 1000 + T0,
        "jittered": np.arange(n, dtype=np.int64) * 1000 + rng.integers(-400, 400, n),
        "random": rng.integers(-(10 ** 15), 10 ** 15, n),
        "small": rng.integers(0, 100, n),
        "constant": np.full(n, 42, dtype=np.int64),
        "wrapping": np.where(np.arange(n) % 2 == 0, np.iinfo(np.int64).max, np.iinfo(np.int64).min),
    }[kind]
    buf = io.BytesIO()
    pq.write_table(pa.table({"v": values}), buf, use_dictionary=False, compression="none",
                   column_encoding={"v": "DELTA_BINARY_PACKED"}, write_statistics=False)
    written = pq.ParquetFile(pa.BufferReader(buf.getvalue())).metadata.row_group(0).column(0).total_compressed_size
    estimate = delta_packed_bytes(values)
    assert abs(estimate - written) <= 0.1 * written + 64, (estimate, written)


def test_which_columns_are_delta_encoded() -> None:
    n = 5_000
    rng = np.random.default_rng(2)
    table = pa.table({
        "ts": pa.array((T0 + np.arange(n)) * 1000, pa.timestamp("us", tz="UTC")),
        "when": pa.array([datetime(2026, 1, 1, tzinfo=timezone.utc)] * n),
        "id": pa.array(rng.integers(0, 2 ** 62, n), pa.int64()),
        "small": pa.array(rng.integers(0, 10, n), pa.int32()),
        "tiny": pa.array(rng.integers(0, 10, n), pa.int8()),  # stored as INT32, left alone
        "f": pa.array(rng.random(n)),
        "s": pa.array([str(i) for i in range(n)]),
        "nulls": pa.array([None] * n, pa.int64()),
    })
    assert delta_columns(table) == ["ts", "when", "small"]
    assert delta_columns(table, skip=["ts"]) == ["when", "small"]
    assert delta_columns(table.slice(0, 100)) == []  # under one block: not worth deciding
    kw = chunk_encodings(table, "snappy")
    assert kw["column_encoding"] == {"ts": "DELTA_BINARY_PACKED", "when": "DELTA_BINARY_PACKED",
                                     "small": "DELTA_BINARY_PACKED"}
    assert all(kw["compression"][c] == "none" for c in ("ts", "when", "small"))
    assert kw["use_dictionary"] is False  # "s" has 5,000 distinct values
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)  # pyarrow accepts the combination
    assert pq.read_table(pa.BufferReader(buf.getvalue())).equals(table)
