"""Repair does not rewrite checkpoints from a state built through a journal entry committed into
the slot of a lost one (python/maintain/fsck.py): a committer that read the journal before the
loss creates the free slot, the entries after it were built on the lost entry, and before, fsck
rebuilt the states after it through the foreign entry and repair overwrote the sound checkpoints
with them, which the entries after them then contradicted (simulation ``damage`` seed 20054)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.store import layout


def _batch(b: int, rows: int = 2) -> pa.Table:
    return pa.table({"k": ["a"] * rows, "v": list(range(b * 10, b * 10 + rows))})


def _hole_filled(tmp_path: Path) -> tuple[Path, int]:
    """A stream whose entry ``pos`` was lost and then created again by a stale committer (its
    commit of three records, where the entries after it were built on a commit of two)."""
    root, fork = tmp_path / "s", tmp_path / "fork"
    s = Stream.create(f"file://{root}", segments=1, compaction="off")
    for b in range(3):
        s.append(_batch(b), writer_id="w", batch_id=b)
    shutil.copytree(root, fork)
    stale = Stream.open(f"file://{fork}")
    stale.append(_batch(50, rows=3), writer_id="x", batch_id=0)
    pos = stale.state.pos
    for b in range(3, 40):
        s.append(_batch(b), writer_id="w", batch_id=b)
    m = s.state.checkpoint
    assert m is not None and pos < m.prev < m.pos < s.state.pos  # checkpoints after the slot
    (root / layout.entry(pos)).write_bytes((fork / layout.entry(pos)).read_bytes())
    return root, pos


def test_repair_keeps_the_checkpoints_after_an_entry_committed_into_a_lost_slot(tmp_path: Path) -> None:
    root, pos = _hole_filled(tmp_path)
    url = f"file://{root}"
    m = Stream.open(url).state.checkpoint
    assert m is not None
    before = {p: (root / layout.checkpoint(p)).read_bytes() for p in (m.prev, m.pos)}
    report = Stream.repair_url(url)
    assert {p: (root / layout.checkpoint(p)).read_bytes() for p in (m.prev, m.pos)} == before
    named = [p for p in report.problems if p.kind == "entry"]
    assert named and not any(p.repairable for p in named)
    assert str(layout.entry(pos)) in named[0].message
