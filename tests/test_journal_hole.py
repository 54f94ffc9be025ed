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

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import CorruptMetadataError
from pyspark_tstream.store import layout


def _batch(b: int) -> pa.Table:
    return pa.table({"k": [f"k{b}"], "v": [b]})


@pytest.mark.xfail(strict=True, reason="open: the fix (branch repairseed-holecheck, Journal._not_a_hole) costs one "
                   "store read per commit, against the one-conditional-create pins of test_group_commit/test_deltas")
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
