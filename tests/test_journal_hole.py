"""A lost journal entry below the newest one is a hole, never the journal's end (simulation
``damage`` seed 1500146).

A handle that follows the journal entry by entry (``refresh``: one read of the next position)
cannot tell a lost entry from the end. A writer behind the hole that then commits takes the
lost entry's position with its conditional create (the slot is free), and the journal forks:
the entries after the hole were made on the lost state, not on the writer's, so every state
rebuilt across it (readers, checkpoints, ``tstream repair``'s rebuilt checkpoints) is wrong
without an error.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import CallLog
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import CorruptMetadataError
from pyspark_tstream.journal import holes
from pyspark_tstream.store import layout


def _batch(b: int) -> pa.Table:
    return pa.table({"k": [f"k{b}"], "v": [b]})


def test_a_writer_behind_a_lost_entry_does_not_commit_into_its_position(tmp_path: Path) -> None:
    root = tmp_path / "s"
    url = f"file://{root}"
    Stream.create(url, segments=2, compaction="off")
    ahead = Stream.open(url)
    ahead.append(_batch(0), key="k", writer_id="a", batch_id=0)
    behind = Stream.open(url)  # follows the journal from here, entry by entry
    lost = behind.state.pos + 1
    for b in range(1, 5):
        ahead.append(_batch(b), key="k", writer_id="a", batch_id=b)
    newest = ahead.state.pos
    assert newest > lost + 1
    (root / layout.entry(lost)).unlink()
    with pytest.raises(CorruptMetadataError, match=rf"journal entry {url}/{layout.entry(lost)}"):
        behind.append(_batch(9), key="k", writer_id="b", batch_id=0)
    assert not (root / layout.entry(lost)).exists()  # the hole is not filled by another commit
    assert not (root / layout.entry(newest + 1)).exists()


def _named_files(s: Stream, positions: range) -> set[str]:
    """The data files the entries at ``positions`` name (read before any is lost)."""
    return {c.path for p in positions for c in s.journal.read_entry(p).chunks}


def _exists(s: Stream, rel: str) -> bool:
    return s.store.exists(rel)


@pytest.mark.parametrize("background", [False, True], ids=["in-line", "object-store"])
def test_a_stale_append_behind_a_lost_entry_refuses_and_nothing_committed_is_deleted(
        url: str, background: bool) -> None:
    """Two handles; an entry the stale one never read is lost; the stale handle's append
    refuses, naming the lost entry and ``tstream repair``, commits nothing, and a compaction and
    vacuum after it delete no file the journal names (before, the append forked the journal and
    vacuum trusted what the fork said). ``object-store``: the check runs beside the data upload
    (``Journal.expect``), as on ``s3://``."""
    Stream.create(url, segments=2, compaction="off")
    ahead = Stream.open(url)
    behind = Stream.open(url)
    behind.context.journal.hints.background = background
    for b in range(6):
        ahead.append(_batch(b), key="k", writer_id="a", batch_id=b)
    lost = behind.state.pos + 2  # behind has not read it (nor the one before it)
    newest = ahead.state.pos
    named = _named_files(ahead, range(1, newest + 1))
    behind.append(_batch(100), key="k", writer_id="b", batch_id=0)  # lands after ahead's commits
    assert behind.state.pos == newest + 1
    named |= _named_files(ahead, range(newest + 1, newest + 2))
    for b in range(6, 8):
        ahead.append(_batch(b), key="k", writer_id="a", batch_id=b)
    named |= _named_files(ahead, range(newest + 2, ahead.state.pos + 1))
    newest = ahead.state.pos
    lost = behind.state.pos + 1
    ahead.store.delete([layout.entry(lost)])
    with pytest.raises(CorruptMetadataError) as refused:
        behind.append(_batch(101), key="k", writer_id="b", batch_id=1)
    text = str(refused.value)
    assert f"journal entry {ahead.store.uri(layout.entry(lost))}" in text
    assert ahead.store.uri(layout.entry(lost + 1)) in text and "tstream repair" in text
    assert not _exists(ahead, layout.entry(lost)) and not _exists(ahead, layout.entry(newest + 1))
    assert behind.state.pos == lost - 1  # nothing committed, and the handle did not move
    ahead.compact()
    ahead.vacuum(grace_ms=0)
    # every acknowledged record, through the handle that holds the state (a read opens each
    # live file: the compaction's macro-chunks and what it left alone)
    got = ahead.read()
    assert sorted(got.column("v").to_pylist()) == [*range(8), 100]
    # a checkpoint written since holds the state past the hole: a fresh handle starts there
    fresh = Stream.open(url)
    assert fresh.state.pos == ahead.state.pos and fresh.state.checkpoint is not None
    assert fresh.state.checkpoint.pos > lost
    assert sorted(fresh.read().column("v").to_pylist()) == [*range(8), 100]


def test_a_writer_merely_behind_creates_nothing_into_taken_slots(url: str) -> None:
    """A handle behind by several entries (none lost): the check that sees an entry past its
    slot reads the winner instead of a create that would fail, and the append lands after the
    newest entry."""
    Stream.create(url, segments=2, compaction="off")
    ahead, behind = Stream.open(url), Stream.open(url)
    for b in range(4):
        ahead.append(_batch(b), key="k", writer_id="a", batch_id=b)
    log = CallLog()
    behind.store.observer = log
    behind.append(_batch(9), key="k", writer_id="b", batch_id=0)
    assert behind.state.pos == ahead.state.pos + 1
    creates = [rel for op, rel in log.calls if op == "put_if_absent"]
    assert creates == [layout.entry(behind.state.pos)], log.calls


def test_an_answer_serves_only_the_call_that_asked_it(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer asked beside one call's upload is dropped when that call ends, used once, and
    not used once older than ``FRESH_S``: the commit then reads again in line (a loss after an
    answer would otherwise go unseen for as long as the answer is trusted)."""
    s = Stream.create(url, segments=2, compaction="off")
    s.append(_batch(0), key="k")
    past = s.journal.past
    log = CallLog()
    s.store.observer = log
    pos = s.state.pos + 1
    batch = ("read_many", f"{layout.entry(pos - 1)} (+3)")
    past.expect(pos)
    s.journal.forget()
    assert past.around(pos) == holes.Around(pos, before=True, taken=None, after=False, hinted=pos - 1)
    assert log.calls == [batch] * 2, log.calls  # the background's, dropped; then in line
    log.reset()
    monkeypatch.setattr(holes, "FRESH_S", -1.0)
    past.expect(pos)
    past.around(pos)
    assert log.calls == [batch] * 2, log.calls  # too old: read again
    log.reset()
    monkeypatch.setattr(holes, "FRESH_S", 60.0)
    past.expect(pos)
    past.around(pos)
    past.around(pos)
    assert log.calls == [batch] * 2, log.calls  # used once: then read in line


@pytest.mark.parametrize("background", [False, True], ids=["in-line", "object-store"])
def test_a_stale_append_after_the_newest_entry_was_lost_refuses(url: str, background: bool) -> None:
    """The newest entry lost (nothing lies past it; the head hint copies it): a writer that never
    read it refuses to take its slot, naming it and the hint repair restores it from; after
    ``tstream repair`` it appends after it (before, its create took the slot and the acknowledged
    commit was gone: simulation ``damage`` seed 1500041)."""
    Stream.create(url, segments=2, compaction="off")
    ahead, behind = Stream.open(url), Stream.open(url)
    behind.context.journal.hints.background = background
    ahead.append(_batch(0), key="k", writer_id="a", batch_id=0)
    lost = ahead.state.pos
    ahead.store.delete([layout.entry(lost)])
    with pytest.raises(CorruptMetadataError) as refused:
        behind.append(_batch(100), key="k", writer_id="b", batch_id=0)
    text = str(refused.value)
    assert f"journal entry {ahead.store.uri(layout.entry(lost))}" in text and "head hint" in text
    assert not behind.store.exists(layout.entry(lost)) and behind.state.pos == lost - 1
    Stream.repair_url(url)
    behind.append(_batch(100), key="k", writer_id="b", batch_id=0)
    assert behind.state.pos == lost + 1
    assert sorted(Stream.open(url).read().column("v").to_pylist()) == [0, 100]


@pytest.mark.parametrize("background", [False, True], ids=["in-line", "object-store"])
def test_a_writer_whose_own_newest_entry_was_lost_refuses_to_commit_over_it(url: str, background: bool) -> None:
    """The writer of the newest entry commits again after that entry was lost: it refuses (a
    commit would leave a hole below it and overwrite the head hint, the only copy; simulation
    ``damage`` seed 1500014), and after ``tstream repair`` restores it from the hint, appends."""
    s = Stream.create(url, segments=2, compaction="off")
    s.context.journal.hints.background = background
    s.append(_batch(0), key="k", writer_id="a", batch_id=0)
    s.context.journal.hints.settle()
    lost = s.state.pos
    s.store.delete([layout.entry(lost)])
    with pytest.raises(CorruptMetadataError, match="tstream repair") as refused:
        s.append(_batch(1), key="k", writer_id="a", batch_id=1)
    assert f"journal entry {s.store.uri(layout.entry(lost))} is missing" in str(refused.value)
    assert not s.store.exists(layout.entry(lost + 1))
    Stream.repair_url(url)
    s.append(_batch(1), key="k", writer_id="a", batch_id=1)
    assert sorted(Stream.open(url).read().column("v").to_pylist()) == [0, 1]


def test_a_reader_behind_a_lost_entry_names_it_instead_of_standing_still(url: str) -> None:
    """A handle's poll reads the next slot and the one after it in one call: the next entry lost
    while later ones exist is named (before, the poll took the lost entry for the journal's end
    and the handle stayed behind it for good, reading an ever older state without an error:
    simulation ``damage`` seed 20035)."""
    Stream.create(url, segments=2, compaction="off")
    writer, reader = Stream.open(url), Stream.open(url)
    for b in range(3):
        writer.append(_batch(b), key="k", writer_id="a", batch_id=b)
    lost = reader.state.pos + 1
    writer.store.delete([layout.entry(lost)])
    log = CallLog()
    reader.store.observer = log
    with pytest.raises(CorruptMetadataError, match=f"journal entry {re.escape(writer.store.uri(layout.entry(lost)))}"):
        reader.refresh()
    assert log.calls == [("read_many", f"{layout.entry(lost + 1)} (+1)")], log.calls  # one call, as any poll
    assert reader.state.pos == lost - 1


def test_a_poll_with_nothing_new_is_one_call(url: str) -> None:
    """The slot after the next rides in the poll's one call (one round trip on object stores)."""
    s = Stream.create(url, segments=2, compaction="off")
    s.append(_batch(0), key="k")
    log = CallLog()
    s.store.observer = log
    assert s.refresh().pos == s.state.pos
    assert log.calls == [("read_many", f"{layout.entry(s.state.pos + 2)} (+1)")], log.calls
