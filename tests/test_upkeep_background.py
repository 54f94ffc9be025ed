"""Upkeep runs off the append path on every store, unless asked to run in line (issue #62).

``tests/conftest.py`` asks for in-line upkeep (``TSTREAM_UPKEEP=inline``) so that store-call
counts and crash points stay deterministic; these tests take that setting away to pin the
product's default: a ``Stream.append`` at which compaction is due hands it to a background
thread on ``file://`` as on an object store, a process that exits lets the run finish, and the
Spark sink's commit (``Stream.commit``) keeps it in line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from helpers import CHILD_EXIT
from pyspark_tstream.api import upkeep as upkeep_mod
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.api.upkeep import UPKEEP_ENV, Upkeep
from pyspark_tstream.compaction.policy import COMPACT_EVERY
from pyspark_tstream.errors import ConfigError
from pyspark_tstream.store import layout


def _rows(first: int, n: int = 10) -> pa.Table:
    return pa.table({"k": [f"k{i % 3}" for i in range(first, first + n)],
                     "v": pa.array(range(first, first + n), pa.int64())})


@pytest.fixture
def default_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product's default: no ``TSTREAM_UPKEEP`` (conftest sets ``inline``)."""
    monkeypatch.delenv(UPKEEP_ENV, raising=False)


@pytest.fixture
def compactions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The threads automatic compaction ran on, in order."""
    threads: list[int] = []
    real = upkeep_mod.compact

    def watched(*a: Any, **kw: Any) -> Any:
        threads.append(threading.get_ident())
        return real(*a, **kw)

    monkeypatch.setattr(upkeep_mod, "compact", watched)
    yield threads


def _append_until_compaction_due(s: Stream) -> None:
    """Append until the next append lands at a position where compaction is considered."""
    while (s.state.pos + 1) % COMPACT_EVERY:
        s.append(_rows(s.state.pos * 10))
        s.upkeep.settle(60)


def test_compaction_due_after_an_append_runs_off_the_callers_thread_on_every_store(
        url: str, default_mode: None, compactions: list[int]) -> None:
    s = Stream.create(url, segments=1, compaction="min=4")
    assert not s.upkeep.inline
    _append_until_compaction_due(s)
    compactions.clear()
    ack = s.append(_rows(10_000))
    assert ack.pos % COMPACT_EVERY == 0
    s.upkeep.settle(60)
    assert compactions and threading.get_ident() not in compactions, compactions
    after = Stream.open(url)
    assert any(after.journal.read_entry(p).op == "compact" for p in range(ack.pos + 1, after.state.pos + 1))
    assert after.read().num_rows == 10 * (ack.pos - 1) + 10  # every append once (entry 0: no rows)


def test_inline_upkeep_runs_in_the_committing_call(url: str, monkeypatch: pytest.MonkeyPatch,
                                                   compactions: list[int]) -> None:
    monkeypatch.setenv(UPKEEP_ENV, "inline")
    s = Stream.create(url, segments=1, compaction="min=4")
    assert s.upkeep.inline
    _append_until_compaction_due(s)
    compactions.clear()
    ack = s.append(_rows(10_000))
    assert compactions == [threading.get_ident()]  # already done when the append returned
    assert Stream.open(url).journal.read_entry(ack.pos + 1).op == "compact"


def test_one_handle_may_ask_for_inline_upkeep(url: str, default_mode: None, compactions: list[int]) -> None:
    s = Stream.create(url, segments=1, compaction="min=4")
    s.upkeep.inline = True
    _append_until_compaction_due(s)
    compactions.clear()
    s.append(_rows(10_000))
    assert compactions == [threading.get_ident()]


def test_the_sinks_commit_keeps_upkeep_in_line(url: str, default_mode: None, compactions: list[int]) -> None:
    """``Stream.commit`` (the Spark sink's driver commit, in a process that may end when it
    returns) leaves no upkeep thread working after it returns."""
    s = Stream.create(url, segments=1, compaction="min=4")
    _append_until_compaction_due(s)
    compactions.clear()
    spec = s.write_spec(_rows(0).schema)
    from pyspark_tstream.write.writing import write_batches

    chunks = write_batches(spec, [_rows(10_000)], ordered=True)
    s.commit(chunks, writer_id="sink", batch_id=0, session=True, fresh=True)
    assert compactions == [threading.get_ident()]
    assert not s.upkeep._running


@pytest.mark.parametrize("value", ["sometimes", "in-line", "1"])
def test_a_bad_upkeep_mode_is_an_error_naming_the_variable(url: str, monkeypatch: pytest.MonkeyPatch,
                                                         value: str) -> None:
    s = Stream.create(url, segments=1)
    monkeypatch.setenv(UPKEEP_ENV, value)
    with pytest.raises(ConfigError, match=rf"{UPKEEP_ENV}='{value}' is not one of background, inline") as e:
        s.append(_rows(0))
    assert e.value.option == UPKEEP_ENV and e.value.value == value
    assert Stream.open(url).state.pos == 0  # refused before anything was written


@pytest.mark.parametrize("value, inline", [("background", False), (" Inline ", True), ("", False)])
def test_upkeep_modes(url: str, monkeypatch: pytest.MonkeyPatch, value: str, inline: bool) -> None:
    monkeypatch.setenv(UPKEEP_ENV, value)
    s = Stream.create(url, segments=1)
    assert Upkeep(s.context, trim=lambda: None).inline is inline


def test_an_exiting_process_lets_background_compaction_finish(tmp_path: Any, default_mode: None) -> None:
    """A short-lived process (``tstream append``, a script) whose append made compaction due:
    the exit waits for the background run, so compaction still happens."""
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=1, compaction="min=4")
    _append_until_compaction_due(s)
    pos = s.state.pos
    script = f"""
import pyarrow as pa
from pyspark_tstream.api import upkeep
from pyspark_tstream.api.stream import Stream
real = upkeep.compact
def slow(*a, **kw):
    import time
    time.sleep(1.0)  # still running when the script reaches its exit
    return real(*a, **kw)
upkeep.compact = slow
s = Stream.open({url!r})
assert not s.upkeep.inline
s.append(pa.table({{"k": ["a"], "v": pa.array([1], pa.int64())}}))
print("appended", flush=True)
""" + CHILD_EXIT
    env = {k: v for k, v in __import__("os").environ.items() if k != UPKEEP_ENV}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "appended" in done.stdout
    after = Stream.open(url)
    assert after.state.pos >= pos + 2
    assert after.journal.read_entry(pos + 2).op == "compact", after.journal.read_entry(pos + 2).op


def _head_pos(url: str) -> int:
    s = Stream.open(url)
    return int(json.loads(s.store.read(layout.HEAD))["pos"])


@pytest.mark.parametrize("mode", ["default", "inline"])
def test_head_hint_leaves_the_append_path_on_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                  mode: str) -> None:
    """On ``file://`` the head hint (and the listing of others' requests) is written off the
    committing thread, as on an object store: on a FUSE mount each write is a round trip, and
    on a local disk its fsync. ``TSTREAM_UPKEEP=inline`` keeps it in line (store-call counts and
    crash points of tests); ``memory://`` writes it in line always."""
    if mode == "default":
        monkeypatch.delenv(UPKEEP_ENV, raising=False)
    else:
        monkeypatch.setenv(UPKEEP_ENV, "inline")
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2)
    assert s.context.journal.hints.background == (mode == "default")
    assert s.appending.group.background == (mode == "default")
    assert not Stream.create(f"memory://hint-{tmp_path.name}/s", segments=1).context.journal.hints.background
    s.append(_rows(0))
    caller = threading.get_ident()
    mine: list[str] = []
    s.store.observer = lambda op, rel: mine.append(rel) if threading.get_ident() == caller else None
    for b in range(1, 4):
        s.append(_rows(b * 10))
    assert (layout.HEAD in mine) == (mode == "inline"), mine
    s.context.journal.hints.settle(10)
    assert _head_pos(url) == s.state.pos
