"""Repair has a way out of a torn newest journal entry that no head hint holds a copy of
(python/maintain/repair.py): before, read, fsck, append and repair all failed naming repair."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import main
from pyspark_tstream.errors import CorruptMetadataError
from pyspark_tstream.store import layout


def _torn(tmp_path: Path, *, keep_hint: bool = False) -> tuple[str, int]:
    """A stream of three idempotent appends whose newest entry lost its second half, its head
    hint deleted (or left, older, when ``keep_hint``)."""
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2)
    for b in range(3):
        s.append(pa.table({"k": ["a", "b"], "v": [b, b]}), writer_id="w", batch_id=b)
        if keep_hint and b == 1:
            hint = (tmp_path / "s" / layout.HEAD).read_bytes()
    pos = s.state.pos
    entry = tmp_path / "s" / layout.entry(pos)
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    head = tmp_path / "s" / layout.HEAD
    if keep_hint:
        head.write_bytes(hint)  # a stale hint: older than the torn entry
    else:
        head.unlink()
    return url, pos


@pytest.mark.parametrize("keep_hint", [False, True], ids=["hint-lost", "hint-stale"])
def test_repair_names_the_switch_then_sets_the_torn_entry_aside(tmp_path: Path, keep_hint: bool) -> None:
    url, pos = _torn(tmp_path, keep_hint=keep_hint)
    with pytest.raises(CorruptMetadataError):
        Stream.open(url)
    with pytest.raises(CorruptMetadataError, match=rf"journal entry {pos} .* is torn and no head hint holds a copy"
                                                   r".*--drop-torn-entry"):
        Stream.repair_url(url)
    assert (tmp_path / "s" / layout.entry(pos)).exists()  # refused: nothing changed
    report = Stream.repair_url(url, drop_torn_entry=True)
    assert report.ok, report.summary()
    assert any(f"journal entry {pos} was torn" in line for line in report.repaired)
    assert (tmp_path / "s" / layout.damaged_entry(pos)).exists()
    s = Stream.open(url)
    assert s.state.pos == pos - 1
    assert sorted(s.read()["v"].to_pylist()) == [0, 0, 1, 1]  # the torn entry's commit is lost
    again = s.append(pa.table({"k": ["a", "b"], "v": [2, 2]}), writer_id="w", batch_id=2)
    assert not again.duplicate  # its writer's replay appends it again
    assert sorted(Stream.open(url).read()["v"].to_pylist()) == [0, 0, 1, 1, 2, 2]
    assert Stream.open(url).verify().ok


def test_the_cli_repairs_a_stream_it_cannot_open(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, pos = _torn(tmp_path)
    assert main(["repair", url]) != 0
    assert "--drop-torn-entry" in capsys.readouterr().err
    assert main(["repair", url, "--drop-torn-entry"]) == 0
    assert f"journal entry {pos} was torn" in capsys.readouterr().out
    assert Stream.open(url).read().num_rows == 4


def test_a_sound_stream_is_not_touched_by_the_switch(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2)
    s.append(pa.table({"k": ["a"], "v": [1]}))
    report = Stream.repair_url(url, drop_torn_entry=True)
    assert report.ok and not report.repaired
    assert not (tmp_path / "s" / layout.DAMAGED).exists() and Stream.open(url).read().num_rows == 1
