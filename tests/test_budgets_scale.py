"""Cost budgets at PDP-32 scale: 10 vs 100,000 commits and 10 vs 10,000 epochs (docs/design.md §3.6).

Every figure is a count of store calls through the store observer; nothing here is timed.
"""

from __future__ import annotations

import functools

import pytest
from conftest import CallLog
from histories import HISTORY_T0, add_commit, clone, commit_history, epoch_history
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.journal.timeindex import COL_MAX_TSO
from pyspark_tstream.store.storage import Store
from pyspark_tstream.timestamps import pack

pytestmark = pytest.mark.slow


def _open_counted(url: str, log: CallLog) -> Stream:
    store = Store(url)
    store.observer = log
    return Stream(store, Journal(store).head())


@functools.cache
def _history(n: int) -> str:
    """One ``n``-commit history per module (with real data files around the start, middle and
    end, which the bounded reads open); tests that write to it work on a :func:`clone`."""
    mid = n // 2
    s = commit_history(n, real=set(range(0, 40)) | set(range(mid - 20, mid + 40)) | set(range(n - 40, n)))
    return f"memory://{s.store.root}"


def _costs(s: Stream) -> dict[str, float]:
    url = f"memory://{s.store.root}"
    log = CallLog()
    out: dict[str, float] = {}
    reader = _open_counted(url, log)
    out["open"] = log.count()
    log.reset()
    reader.refresh()
    out["poll"] = log.count()
    log.reset()
    seeker = _open_counted(url, log)
    seeker.journal.search(seeker.state, COL_MAX_TSO, pack(HISTORY_T0 + (seeker.state.pos // 2) * 10))
    out["seek"] = log.count()
    log.reset()
    writer = _open_counted(url, log)
    base = writer.state.pos
    for i in range(64):
        add_commit(writer, base + i, writer="budget")
    out["commit_writes"] = log.metadata("write", "put_if_absent") / 64
    out["commit_calls"] = log.count() / 64
    log.reset()
    seg = writer.refresh().segments[0].id
    writer.scale(split=seg, parts=2)
    add_commit(writer, base + 64, writer="budget")  # files the sealed record into its shard
    out["scale"] = log.count()
    log.reset()
    writer.epoch_at(HISTORY_T0)
    out["epoch_at"] = log.count()
    log.reset()
    writer.truncate((writer.state.tick >> 18) - 5)
    out["truncate"] = log.count()
    out["lists"] = sum(1 for op, _ in log.calls if op == "list")
    return out


@pytest.mark.parametrize("build", [pytest.param(lambda: (commit_history(10), Stream.open(clone(_history(100_000)))),
                                                id="commits"),
                                   pytest.param(lambda: (epoch_history(10), epoch_history(10_000)), id="epochs")])
def test_costs_flat_at_scale(build: object) -> None:
    small, large = (_costs(s) for s in build())  # type: ignore[operator]
    for name, m in (("small", small), ("large", large)):
        # format v6: a cold open reads the head, probes past it, then the checkpoint it names and
        # the entries after it in one batched read (protocol §13); a poll stays at most 2
        assert m["open"] <= 4 and m["poll"] <= 2, (name, m)
        assert m["seek"] <= 8, (name, m)  # the cold open's two more reads (format v6) + the descent
        assert m["commit_writes"] <= 4, (name, m)
        assert m["epoch_at"] <= 8, (name, m)
        assert m["lists"] == 0, (name, m)
    for key in ("poll", "seek", "commit_calls", "scale", "epoch_at", "truncate"):
        assert large[key] <= small[key] + 4, (key, small, large)


def _bounded_costs(n: int) -> dict[str, int]:
    """Store calls of ``read(start=t, limit=10)`` mid-history, of ``startingTail=10`` (the
    tail seek), and of the first micro-batch of a query at ``earliest`` with
    ``maxRecordsPerTrigger=10`` (planning, then reading it)."""
    from pyspark_tstream.conf.options import SourceOptions
    from pyspark_tstream.datasource.stream_reader import TStreamStreamReader
    from pyspark_tstream.read.reading import read_table
    from pyspark_tstream.spark.arrow import spark_schema

    mid = n // 2
    url = clone(_history(n))
    log = CallLog()
    out: dict[str, int] = {}
    reader = _open_counted(url, log)
    log.reset()
    table = reader.read(start=HISTORY_T0 + mid * 10, limit=10)
    out["read"] = log.count()
    assert table.column("v").to_pylist() == list(range(5 * mid, 5 * mid + 10))
    log.reset()
    bound = reader.seek_tail(10)
    out["tail"] = log.count()
    tail = reader.plan_read(bound, reader.state.tick)
    assert read_table(reader.store, reader.schema, tail.chunks, bound, tail.hi).num_rows == 10
    log.reset()
    stream = _open_counted(url, log)
    source = TStreamStreamReader(SourceOptions.from_options({"path": url, "maxRecordsPerTrigger": "10"}),
                                 spark_schema(stream.schema), stream)
    start = source.initialOffset()
    end = source.latestOffset(start, source.getDefaultReadLimit())
    parts = source.partitions(start, end)
    out["plan"] = log.count()
    out["cached"] = source._window.cached_entries
    rows = [v for p in parts for b in source.read(p) for v in b.column(0).to_pylist()]
    out["batch"] = log.count()
    assert sorted(rows) == list(range(10))
    return out


def test_bounded_reads_cost_the_same_at_100_and_100k_commits() -> None:
    from pyspark_tstream.journal.timeindex import FANOUT
    from pyspark_tstream.read.window import WINDOW_NODES

    small, large = _bounded_costs(100), _bounded_costs(100_000)
    for key in ("read", "tail", "plan", "batch"):
        assert abs(large[key] - small[key]) <= 2, (key, small, large)
    assert large["read"] <= 8 and large["batch"] <= 12, large
    # the driver holds a window of nodes ahead of its position, not the history
    assert large["cached"] <= 2 * FANOUT and large["cached"] <= WINDOW_NODES * FANOUT, large
