"""The sink task's fast paths write exactly what the plain paths write.

Ordering a run by client time skips the sort for ordered runs, merges a few ordered stretches
and sorts shuffled runs as unique (time, position) keys; a gathered group is concatenated once
before it is split among unordered segments; the dictionary decision stops hashing a sample of
mostly distinct strings early. Each is checked against the plain computation it replaces.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.chunkfile import encoding
from pyspark_tstream.timestamps import MAX_MS
from pyspark_tstream.write import ordering, writing
from pyspark_tstream.write.writing import write_batches


def _runs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    n = 20_000
    ties = T0 + rng.integers(0, 50, n)  # many equal times: stability decides their order
    stretches = np.concatenate([T0 + np.arange(a, a + 4_000) for a in (8_000, 0, 16_000, 4_000, 12_000)])
    return {
        "shuffled": T0 + rng.permutation(n),
        "shuffled ties": ties,
        "few stretches": stretches,
        "descending": T0 + np.arange(n)[::-1].copy(),
        # 150k rows over all of 1970..4199: (time, position) keys would overflow 64 bits
        "wide span": np.tile(np.array([0, MAX_MS, 5, MAX_MS - 1, 7, 3], dtype=np.int64), 25_000),
        "two rows": np.array([T0 + 1, T0], dtype=np.int64),
    }


@pytest.mark.parametrize("name", list(_runs()))
def test_time_order_is_the_stable_sort(name: str) -> None:
    ms = _runs()[name]
    order, in_time = ordering.time_order(ms)
    expected = np.argsort(ms, kind="stable")
    assert order is not None and order.tolist() == expected.tolist()
    assert in_time.tolist() == ms[expected].tolist()


def test_ordered_runs_are_not_sorted() -> None:
    for ms in (T0 + np.arange(1_000), np.full(1_000, T0), np.array([T0]), np.zeros(0, dtype=np.int64)):
        order, in_time = ordering.time_order(ms)
        assert order is None and in_time is ms


def test_a_shuffled_run_sorts_keys_not_a_stable_argsort(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key sort is the path a shuffled run takes (and it gives the stable order, above)."""
    ms = _runs()["shuffled ties"]
    expected = np.argsort(ms, kind="stable")

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("a shuffled run went through argsort")

    monkeypatch.setattr(np, "argsort", refuse)
    order, _ = ordering.time_order(ms)
    assert order is not None and order.tolist() == expected.tolist()


def test_shuffled_and_time_ordered_input_write_the_same_chunk(url: str) -> None:
    """One segment, rows with many tied times: shuffled input (sorted in a run) and the same rows
    already in stable time order (streamed) give one chunk with the same rows and raw stamps."""
    rng = np.random.default_rng(4)
    n = 30_000
    table = pa.table({"v": np.arange(n), "t": T0 + rng.integers(0, 2_000, n)})
    in_time = table.take(pa.array(np.argsort(table["t"].to_numpy(), kind="stable")))
    s = Stream.create(url, segments=1)
    spec = s.write_spec(table.schema, timestamp="t")

    def written(t: pa.Table) -> list[tuple[list[int], list[int]]]:
        chunks = write_batches(spec, t.to_batches(max_chunksize=10_000))
        files = [pq.read_table(pa.BufferReader(s.store.read(c.path))) for c in chunks]
        return [(f["v"].to_pylist(), f[writing.RAW_TSO].to_pylist()) for f in files]

    shuffled = written(table)
    assert shuffled == written(in_time)
    assert len(shuffled) == 1 and shuffled[0][0] == in_time["v"].to_pylist()


def test_gathered_groups_split_among_unordered_segments_as_batch_by_batch(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unordered segments take their rows from a gathered group (concatenated once): the chunks
    are the ones writing Spark's batches one by one gives."""
    rng = np.random.default_rng(6)
    n = 100_000
    table = pa.table({"k": [f"k{i % 17}" for i in range(n)], "t": T0 + rng.permutation(n),
                      "body": [f"payload-{i}" for i in range(n)]})
    batches = table.to_batches(max_chunksize=10_000)
    s = Stream.create(url, segments=3)

    def written(gather_rows: int) -> list[tuple[int, list[str], list[int]]]:
        monkeypatch.setattr(writing, "GATHER_ROWS", gather_rows)
        chunks = write_batches(s.write_spec(table.schema, key="k", timestamp="t"), iter(batches))
        files = [pq.read_table(pa.BufferReader(s.store.read(c.path))) for c in chunks]
        return sorted((c.seg, f["body"].to_pylist(), f[writing.RAW_TSO].to_pylist())
                      for c, f in zip(chunks, files))

    one_by_one = written(1)
    assert len(one_by_one) == 3
    assert written(1 << 16) == one_by_one


@pytest.mark.parametrize("values", [
    [f"payload-{i}" for i in range(16_384)],  # all distinct: decided on the prefix
    [f"key-{i % 1000}" for i in range(16_384)],  # repeating: hashed whole
    [f"v{i % 4096}" for i in range(16_384)],  # exactly a quarter distinct: dictionary
    [f"v{i % 4097}" for i in range(16_384)],  # one more: not
    [None if i == 0 else f"v{i % 4096}" for i in range(16_384)],  # a null counts as one more value
    [f"v{i}" for i in range(12)],  # shorter than the prefix
])
def test_the_dictionary_decision_is_the_distinct_count_rule(values: list[str | None]) -> None:
    arr = pa.array(values, pa.string())
    table = pa.Table.from_arrays([pa.chunked_array([arr.slice(0, 5_000), arr.slice(5_000)])], names=["s"])
    n = table.num_rows
    expected = pc.count_distinct(table["s"], mode="all").as_py() * encoding.DICTIONARY_REPEATS <= n
    assert encoding.dictionary_columns(table) == (["s"] if expected else [])
