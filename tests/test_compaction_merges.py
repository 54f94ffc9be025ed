"""A compaction that repacks macro-chunks into bigger ones: the replaced macro-chunks wait out
vacuum's grace like replaced small chunks, then go (python/compaction/compact.py, gc.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from compaction_streams import fill_stream, same_records
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.read.reading import read_table


def _macros(root: Path) -> set[str]:
    return {p.name for p in root.glob("data/*/m-*.parquet")}


def _age(root: Path, hours: float) -> None:
    """Every file of the stream as if written ``hours`` ago (past the orphan grace)."""
    then = time.time() - hours * 3600
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (then, then))


def test_replaced_macro_chunks_wait_for_the_grace_then_go(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    root = tmp_path / "s"
    s = fill_stream(url, appends=40, segments=2)
    expected = s.read()
    assert s.compact(target="4KB", min_pieces=2, full=False).macros > 2
    s.vacuum(grace_ms=0)  # the small chunks go: only macro-chunks are left
    first = _macros(root)
    st = s.refresh()
    planned = s.plan(st.head_tso, st.tick)  # a reader planned on the first macro-chunks
    assert {c.path.rsplit("/", 1)[-1] for c in planned} <= first
    assert s.compact(target="1MB", min_pieces=2).macros == 2  # repacks them into two
    entry = s.journal.read_entry(s.refresh().pos)
    assert entry.op == "compact" and entry.info["parts"], "the repack's entry names what it replaced"
    _age(root, 7)  # older than the orphan grace, but the repack is younger than vacuum's grace
    s.vacuum(orphans=True)
    assert first <= _macros(root), "orphan cleanup took replaced macro-chunks inside the grace"
    same_records(expected, read_table(s.store, s.schema, planned, st.head_tso, st.tick))
    s.vacuum(grace_ms=0)
    assert len(_macros(root)) == 2 and not first & _macros(root), "replaced macro-chunks piled up"
    same_records(expected, Stream.open(url).read())
    assert Stream.open(url).verify().ok
