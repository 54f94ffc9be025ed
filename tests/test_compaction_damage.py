"""Compaction meeting damaged pieces: it merges around them, never stops at or copies them."""

from __future__ import annotations

import logging

import pytest
from compaction_streams import fill_stream, planned_files, same_records
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import app as cli
from pyspark_tstream.compaction.policy import COMPACT_EVERY
from pyspark_tstream.errors import CorruptChunkError

#: The logic here sits above the store: its memory:// cases run by default, its file:// cases
#: in the slow set (tests/test_storage.py pins the file store's own primitives by default).
pytestmark = pytest.mark.slow_on_file


def _damage(s: Stream, path: str, how: str) -> None:
    if how == "missing":
        s.store.delete([path])
    elif how == "corrupt":
        s.store.write(path, s.store.read(path)[: 100])
    else:  # another chunk's bytes: a valid file with other rows
        other = next(c for e in (s.journal.read_entry(p) for p in range(1, 5)) for c in e.chunks if c.path != path)
        s.store.write(path, s.store.read(other.path))


@pytest.mark.parametrize("how", ["missing", "corrupt", "other rows"])
def test_an_unreadable_chunk_is_left_as_it_is_and_the_rest_compacts(
        url: str, how: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, one damaged small chunk made every compaction of the stream raise: its segment's
    chunks then piled up for good. Now the runs either side of it merge; it stays listed as it
    is, so a read meets the same error, fsck the same remedy, and putting the file back heals
    (the chunk then stays a file of its own, like any chunk a compaction passed over)."""
    s = fill_stream(url, appends=60, rows=7, segments=1)
    before = s.read()
    victim = s.journal.read_entry(30).chunks[0]
    saved = s.store.read(victim.path)
    _damage(s, victim.path, how)
    with caplog.at_level(logging.WARNING, logger="pyspark_tstream"):
        assert cli.main(["compact", url]) == 0
    assert "1 unreadable chunk(s) left as they are: run `tstream fsck`" in capsys.readouterr().out
    assert s.store.uri(victim.path) in caplog.text and "tstream fsck" in caplog.text
    fresh = Stream.open(url)
    assert planned_files(fresh) == {victim.path} | {p for p in planned_files(fresh) if "/m-" in p}
    assert len(planned_files(fresh)) == 3  # the runs before and after it, and the chunk itself
    with pytest.raises(CorruptChunkError, match="tstream fsck") as err:
        fresh.read()
    assert err.value.path == s.store.uri(victim.path)
    (problem,) = fresh.verify().problems
    assert problem.kind == "chunk" and not problem.repairable
    assert (problem.details["first_seq"], problem.details["last_seq"]) == (victim.seq, victim.seq + victim.rows - 1)
    # what the macro-chunks replaced goes at vacuum; the damaged chunk stays, named by the map
    assert fresh.vacuum(grace_ms=0).replaced == 59
    assert s.store.exists(victim.path) == (how != "missing")
    s.store.write(victim.path, saved)  # the operator's remedy
    same_records(before, Stream.open(url).read())
    assert Stream.open(url).verify().ok


def test_automatic_compaction_goes_on_past_an_unreadable_chunk(url: str, caplog: pytest.LogCaptureFixture) -> None:
    s = Stream.create(url, segments=1, compaction="target=1MB,min=4")
    for b in range(8):
        s.append([{"k": "a", "b": b}], key="k")
    victim = s.journal.read_entry(s.refresh().pos).chunks[0]
    assert victim.path in planned_files(s)  # not merged yet
    saved = s.store.read(victim.path)
    s.store.delete([victim.path])
    with caplog.at_level(logging.WARNING, logger="pyspark_tstream"):
        for b in range(8, 300):
            s.append([{"k": "a", "b": b}], key="k")  # the data commits never fail
            assert len(planned_files(s)) <= 3 * 4 + 4 + COMPACT_EVERY + 1, b
    assert s.store.uri(victim.path) in caplog.text
    with pytest.raises(CorruptChunkError):
        Stream.open(url).read()
    s.store.write(victim.path, saved)
    assert Stream.open(url).read()["b"].to_pylist() == list(range(300))
