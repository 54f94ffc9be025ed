"""Cost budgets at PDP-32 scale: 10 vs 100,000 commits and 10 vs 10,000 epochs (docs/design.md §3.6).

Every figure is a count of store calls through the store observer; nothing here is timed.
"""

from __future__ import annotations

import pytest
from conftest import CallLog
from histories import T0, add_commit, commit_history, epoch_history

from pyspark_tstream.journal import COL_MAX_TSO, Journal
from pyspark_tstream.storage import Store
from pyspark_tstream.stream import Stream
from pyspark_tstream.timestamps import pack

pytestmark = pytest.mark.slow


def _open_counted(url: str, log: CallLog) -> Stream:
    store = Store(url)
    store.observer = log
    return Stream(store, Journal(store).head())


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
    seeker.journal.search(seeker.state, COL_MAX_TSO, pack(T0 + (seeker.state.pos // 2) * 10))
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
    writer.epoch_at(T0)
    out["epoch_at"] = log.count()
    log.reset()
    writer.truncate((writer.state.tick >> 18) - 5)
    out["truncate"] = log.count()
    out["lists"] = sum(1 for op, _ in log.calls if op == "list")
    return out


@pytest.mark.parametrize("build", [pytest.param(lambda: (commit_history(10), commit_history(100_000)), id="commits"),
                                   pytest.param(lambda: (epoch_history(10), epoch_history(10_000)), id="epochs")])
def test_costs_flat_at_scale(build: object) -> None:
    small, large = (_costs(s) for s in build())  # type: ignore[operator]
    for name, m in (("small", small), ("large", large)):
        assert m["open"] <= 2 and m["poll"] <= 2, (name, m)
        assert m["seek"] <= 6, (name, m)
        assert m["commit_writes"] <= 4, (name, m)
        assert m["epoch_at"] <= 8, (name, m)
        assert m["lists"] == 0, (name, m)
    for key in ("poll", "seek", "commit_calls", "scale", "epoch_at", "truncate"):
        assert large[key] <= small[key] + 4, (key, small, large)
