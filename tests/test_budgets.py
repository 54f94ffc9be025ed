"""Cost budgets (docs/design.md §3.6), counted through the store observer at small and large history.

Histories are built with the real commit code; their chunks are metadata-only (the operations
measured here never open data files), so 4,096 commits take seconds: two levels of index nodes
(FANOUT² = 1,024), as at 10,000; ``test_budgets_scale.py`` pins 100,000 in the slow set.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from conftest import CallLog
from histories import three_writer_history
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.journal.timeindex import COL_MAX_TSO, FANOUT
from pyspark_tstream.store.storage import Store
from pyspark_tstream.timestamps import pack
from pyspark_tstream.write.requests import abort_keeps
from pyspark_tstream.write.spec import ChunkInfo

COMMITS_SMALL, COMMITS_LARGE = 10, 4_096




@pytest.fixture(scope="module")
def histories() -> dict[int, Stream]:
    return {n: three_writer_history(n, "budget") for n in (COMMITS_SMALL, COMMITS_LARGE)}


def _measure(stream: Stream) -> dict[str, float]:
    url = f"memory://{stream.store.root}"
    out: dict[str, float] = {}
    log = CallLog()

    fresh = Stream.open(url)
    fresh.store.observer = log
    fresh.refresh()
    out["poll"] = log.count()

    log.reset()
    store = Store(url)
    store.observer = log
    opened = Stream(store, Journal(store).head())
    target = pack(1_000_000 + (opened.state.pos // 2) * 10)
    pos = opened.journal.search(opened.state, COL_MAX_TSO, target)
    out["seek_reads"] = log.count()  # open (head + probe) and index descent
    out["seek_pos"] = pos

    writer = Stream.open(url)
    writer.store.observer = log
    log.reset()
    k = 3 * FANOUT  # enough commits to include node flushes at every level the history has
    base = writer.state.pos
    for i in range(k):
        ms = 5_000_000 + i
        seg = writer.state.segments[0].id
        writer.commit([ChunkInfo(seg=seg, path=f"data/x/new-{i}.parquet", rows=1, bytes=10,
                                 raw_lo=pack(ms), raw_hi=pack(ms))], writer_id="bench", batch_id=base + i)
    out["commit_meta_writes"] = log.metadata("write", "put_if_absent") / k
    out["commit_calls"] = log.count() / k
    out["lists"] = log.count("list")
    return out


def test_budgets_flat_from_10_to_4096_commits(histories: dict[int, Stream]) -> None:
    small, large = (_measure(histories[n]) for n in (COMMITS_SMALL, COMMITS_LARGE))
    for m in (small, large):
        assert m["poll"] <= 2
        assert m["seek_reads"] <= 6
        assert m["commit_meta_writes"] <= 4
        assert m["lists"] == 0
    assert large["seek_reads"] - small["seek_reads"] <= 2
    assert large["commit_calls"] - small["commit_calls"] <= 0.5


def test_seek_matches_brute_force_at_large_history(histories: dict[int, Stream]) -> None:
    s = histories[COMMITS_LARGE]
    j = Journal(s.store)
    state = s.refresh()
    # the running max _tso of every position, from the journal itself
    maxes = np.array([j.read_entry(p).state.max_tso for p in range(0, state.pos + 1, 97)])
    positions = list(range(0, state.pos + 1, 97))
    rng = np.random.default_rng(1)
    for target in rng.integers(0, int(maxes[-1]) + 10, 40).tolist() + [0, int(maxes[-1])]:
        got = j.search(state, COL_MAX_TSO, target)
        assert got == state.pos + 1 or j.read_entry(got).state.max_tso > target
        if got > 0:
            assert j.read_entry(got - 1).state.max_tso <= target
        # consistent with the sampled positions
        for p, m in zip(positions, maxes):
            assert (m > target) == (p >= got)


def test_reads_catch_up_through_compacted_nodes(histories: dict[int, Stream]) -> None:
    s = histories[COMMITS_LARGE]
    state = s.refresh()
    log = CallLog()
    s.store.observer = log
    deltas = s.journal.deltas(state, 1, state.pos)
    s.store.observer = None
    assert [d.pos for d in deltas] == list(range(1, state.pos + 1))
    assert log.count() <= 2  # one batched read of nodes, one of the open entries


def _upkeep_costs(s: Stream) -> tuple[Counter[str], Counter[str]]:
    """Store calls of ``vacuum(orphans=True)`` and of a sink abort's proof (``abort_keeps``) on
    a fresh handle of ``s``."""
    opened = Stream.open(f"memory://{s.store.root}")
    log = CallLog()
    opened.store.observer = log
    opened.vacuum(orphans=True)
    vacuum = log.by_op()
    log.reset()
    assert abort_keeps(opened.store, opened.journal, "w0", 10**9, ["data/0/never-committed.parquet"]) is None
    return vacuum, log.by_op()


def test_orphan_vacuum_and_abort_cost_flat_from_10_to_4096_commits(histories: dict[int, Stream]) -> None:
    (small_vacuum, small_abort), (large_vacuum, large_abort) = (_upkeep_costs(histories[n])
                                                                for n in (COMMITS_SMALL, COMMITS_LARGE))
    for vacuum in (small_vacuum, large_vacuum):
        # the deltas from the head on in two batched reads (compacted nodes, then the open
        # entries), whatever the history; four listings: the requests (stale ones, then the
        # pending ones' chunks), data/ (these chunks are metadata only: no segment folder) and
        # the compaction manifests. Reads: those two, the refreshes' polls (each one batched read
        # of the next slot and the one after it, so a lost entry is not taken for the journal's
        # end: api/context.py) and the commit's read of what lies around its slot
        # (journal/holes.py); as many calls in all as when the polls were single reads
        assert vacuum["read"] + vacuum["read_many"] <= 6 and vacuum["list"] == 4, vacuum
    assert sum(large_vacuum.values()) <= sum(small_vacuum.values()) + 3, (small_vacuum, large_vacuum)
    # an abort lists the requests, reads the head and one batch (the probe past it, with the
    # hint's own slot): 3 calls at any history
    assert small_abort == large_abort == Counter({"list": 1, "read": 1, "read_many": 1}), (small_abort, large_abort)
