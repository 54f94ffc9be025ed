"""Maintenance costs at production shape: one micro-batch of 200 Spark tasks into 64 segments.

Each task wrote one shared file holding a slice of every segment (``write/shared.py``): 200
files, 12,800 chunks in one journal entry. Counted through the store observer (docs/costs.md):
what fsck reads in its full and its footers-only mode, what ``vacuum(orphans=True)`` lists and
reads, and what a sink abort's proof costs. Nothing here is timed. In the slow set (the shape
costs ~10 s of CPU); ``tests/test_budgets.py`` pins vacuum's and abort's calls at 10 and 10,000
commits by default.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import replace

import pyarrow as pa
import pytest
from conftest import CallLog
from helpers import counted_verify
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.chunkfile.footer import FOOTER_GUESS
from pyspark_tstream.read.file_checks import PAGE_THREADS
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import Store
from pyspark_tstream.timestamps import now_ms
from pyspark_tstream.write.commit import CommitIntent, CommitRequest
from pyspark_tstream.write.group import Published, new_id
from pyspark_tstream.write.requests import abort_keeps
from pyspark_tstream.write.spec import ChunkInfo
from pyspark_tstream.write.writing import write_batches

pytestmark = pytest.mark.slow

TASKS, SEGMENTS, ROWS = 200, 64, 6_400
SCHEMA = pa.schema([("key", pa.string()), ("v", pa.int64())])


def _task_files(s: Stream) -> list[ChunkInfo]:
    """The chunks of :data:`TASKS` tasks' shared files. One task's file is written, and the
    others are byte copies of it under their own names (the same rows: fsck and vacuum judge
    files by their metadata, and writing 12,800 slices takes a minute on a busy machine)."""
    spec = s.write_spec(SCHEMA, key="key")
    table = pa.table({"key": [f"k{i}" for i in range(ROWS)], "v": list(range(ROWS))}, schema=SCHEMA)
    first = write_batches(spec, [table], task="p0a0")
    (path,) = {c.path for c in first}
    assert len(first) == SEGMENTS  # one shared file, a slice per segment
    data = s.store.read(path)
    out = list(first)
    for t in range(1, TASKS):
        copy = path.replace("p0a0", f"p{t}a0")
        s.store.write(copy, data)
        out += [replace(c, path=copy, task=f"p{t}a0") for c in first]
    return out


@pytest.fixture(scope="module")
def shaped() -> tuple[str, list[ChunkInfo]]:
    s = Stream.create(f"memory://shape-{uuid.uuid4().hex}/s", schema=SCHEMA, segments=SEGMENTS, compaction="off")
    chunks = _task_files(s)
    s.commit(chunks, writer_id="q1", batch_id=0, session=True, schema=SCHEMA)
    return s.url, chunks


def _data(rel: str) -> bool:
    return layout.is_data_file(rel.split(" ")[0])


def test_fsck_at_production_shape(shaped: tuple[str, list[ChunkInfo]]) -> None:
    url, chunks = shaped
    files = {c.path for c in chunks}
    data = len(files) * Store(url).size(next(iter(files)))
    quick, qlog, quick_bytes = counted_verify(url, footers_only=True)
    full, flog, full_bytes = counted_verify(url, footers_only=False)
    assert quick.ok and full.ok and quick.checked["chunks"] == full.checked["chunks"] == TASKS
    for log in (qlog, flog):
        # one ranged footer read per file, not per slice; one listing per segment folder (+ data/'s)
        assert sum(op == "read_range" and _data(rel) for op, rel in log.calls) == TASKS, log.by_op()
        assert log.count("list") <= SEGMENTS + 2, log.by_op()
    assert not [rel for op, rel in qlog.calls if op == "read_many" and _data(rel)]
    # the full check then fetches each file alone (PAGE_THREADS at a time: at most that many
    # whole files in memory), so its bytes are the data's; the quick one's are the footers'
    whole = [rel for op, rel in flog.calls if op == "read_many" and _data(rel)]
    assert len(whole) == TASKS and all("(+" not in rel for rel in whole) and PAGE_THREADS == 4
    assert full_bytes >= data and quick_bytes <= TASKS * FOOTER_GUESS, (quick_bytes, full_bytes, data)
    assert sum(flog.by_op().values()) - sum(qlog.by_op().values()) == TASKS


def test_orphan_vacuum_at_production_shape(shaped: tuple[str, list[ChunkInfo]]) -> None:
    url, chunks = shaped
    s = Stream.open(url)
    log = CallLog()
    s.store.observer = log
    counts = s.vacuum(orphans=True)
    ops = log.by_op()
    assert counts.orphans == 0 and all(s.store.exists(p) for p in {c.path for c in chunks})
    # a shared file lives in its first segment's folder: every task's is in one folder here.
    # listings: requests twice, data/, that folder and its macro folder, the manifests; the
    # deltas in one batched read (one entry, however many chunks); no per-file call for files
    # an entry names
    folders = {c.path.rsplit("/", 1)[0] for c in chunks}
    # batched reads: the deltas, the manifests', and the journal's two polls (each reads the next
    # slot and the one after it, so a lost entry is named: journal/holes.py)
    assert ops["list"] == 4 + 2 * len(folders) and ops["read_many"] <= 4, log.calls
    assert sum(ops.values()) <= 12, ops


def test_abort_at_production_shape(shaped: tuple[str, list[ChunkInfo]]) -> None:
    url, chunks = shaped
    s = Stream.open(url)
    paths = [c.path for c in chunks]
    log = CallLog()
    s.store.observer = log
    # batch 1 of the 200 tasks was never committed: the proof is 3 calls, whatever its size
    assert abort_keeps(s.store, s.journal, "q1", 1, paths) is None
    assert log.by_op() == Counter({"list": 1, "read": 1, "read_many": 1}), log.calls  # the head, then slot + probe
    # with pending group-commit requests (one per waiting writer), one batched read of them more
    for _ in range(3):
        req = CommitRequest(chunks=chunks[:SEGMENTS], intent=CommitIntent(writer_id="other", batch_id=7,
                                                                          schema=SCHEMA), now=now_ms())
        item = Published.of(new_id(), s.state.pos, req)
        s.store.write(item.path, item.encode())
    log.reset()
    assert abort_keeps(s.store, s.journal, "q1", 1, paths) is not None  # a request names its files
    assert log.by_op() == Counter({"list": 1, "read_many": 1}), log.calls
