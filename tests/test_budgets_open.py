"""Store-call budgets of opening a stream and of a fresh handle's first commit (issues #58, #62).

A fresh handle knows the newest entry through the head hint's copy; before its first commit it
must know that the entry's own slot holds the same bytes (committing past a missing or torn
newest entry would overwrite the only copy, ``EntryLog.confirm``). That check used to be a GET
of its own on the first commit, which the Spark sink pays at every micro-batch (its commit runs
on a fresh handle): now the open reads the newest slot in the same batched read as the probe of
the slot after it (and, on a cold handle, the checkpoint and the entries its state is rebuilt
from). Counted through the store observer: a batched ``read_many`` is one round trip.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import CallLog
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import Store


def _rows(first: int, n: int = 5) -> pa.Table:
    return pa.table({"k": [f"k{i % 3}" for i in range(first, first + n)],
                     "v": pa.array(range(first, first + n), pa.int64())})


def _history(url: str, appends: int) -> None:
    s = Stream.create(url, segments=2)
    for i in range(appends):
        s.append(_rows(10 * i), key="k")


def _reads(log: CallLog) -> list[tuple[str, str]]:
    return [(op, rel) for op, rel in log.calls if op in ("read", "read_many", "exists")]


@pytest.mark.parametrize("appends", [1, 7, 23])
def test_a_fresh_handles_first_commit_reads_no_metadata(url: str, appends: int) -> None:
    """Open: the head hint, then one batched read; the first commit reads nothing back (it only
    reads what lies around its slot, in one batch)."""
    _history(url, appends)
    log = CallLog()
    store = Store(url)
    store.observer = log
    s = Stream.at(store)
    assert [op for op, _ in log.calls] == ["read", "read_many"], log.calls
    log.reset()
    before = s.state.pos
    ack = s.append(_rows(1000), key="k")
    assert ack.pos == before + 1
    # nothing read back but one batched read of what lies around the slot (the slot, the
    # entries before and after it, the head hint: a create into a lost entry's slot forks the
    # journal, journal/holes.py), in line on a local store, beside the data upload on an object
    # store (test_group_commit)
    assert _reads(log) == [("read_many", f"{layout.entry(before)} (+3)")], log.calls
    assert log.metadata("read", "exists") == 0


def test_a_fresh_handle_that_only_reads_still_sees_a_newer_commit(url: str) -> None:
    """The open's batched probe of the slot after the hint's: a commit the hint lags behind
    is found (and walked past) as before."""
    _history(url, 3)
    s = Stream.open(url)
    s.context.journal.hints.background = True  # keep the hint of the next commits from landing
    s.context.journal.hints.offer = lambda pos, data: None  # type: ignore[method-assign]
    s.append(_rows(500), key="k")
    s.append(_rows(600), key="k")
    fresh = Stream.open(url)
    assert fresh.state.pos == 5
    assert fresh.append(_rows(700), key="k").pos == 6
    assert fresh.read().num_rows == 6 * 5
