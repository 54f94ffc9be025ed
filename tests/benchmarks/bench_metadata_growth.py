"""Metadata a commit writes and reads as producers grow: it should follow the change, not the writers.

    python tests/benchmarks/bench_metadata_growth.py            # 10, 100, 300, 1000 producers
    python tests/benchmarks/bench_metadata_growth.py --smoke    # 10 and 50 producers (CI)
    python tests/benchmarks/bench_metadata_growth.py --producers 300 --writers   # the target's row only

Producers with stable writer ids (a service instance, a gateway, a checkpoint location) each
append 256 records to a 64-segment ``file://`` stream: one commit of 64 chunks (4 records a
segment). Chunks are metadata only (fake paths, nothing read back), so the figures are the
journal's alone. Per producer count:

* **first commits**: the first commit of every producer, one after another (each adds a writer
  to the state): total seconds, and ms a commit over the first and last tenth (flat: linear);
* **bytes/commit**: metadata bytes written a commit (journal entry, head hint, checkpoints,
  index nodes), averaged over those commits and over 50 more by known producers (``--steady``);
* **CPU/commit**: process CPU a commit of a producer the state already knows (steady state);
* **poll**: store calls and bytes of a reader's refresh with nothing new.

A second table: ``W`` writer handles committing in turn to one stream (each behind the others
by ``W - 1`` commits, so each commit loses a race and catches up), process CPU a commit against
``W``; and one handle committing as each of the ``W`` writers in turn (never behind: the
commit's own work on a state of ``W`` writers). Format 5 wrote the whole state in every entry
and the head hint (1,571 KiB at 1,000 producers); format 6 writes the change and a checkpoint
every so often.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data import report
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.store.storage import Store
from pyspark_tstream.timestamps import raw_hybrid, raw_marks
from pyspark_tstream.write.spec import ChunkInfo

SEGMENTS = 64
ROWS = 4  # a segment; 256 records a commit
T0 = 1_700_000_000_000
#: Commits each figure of the writers table is taken over, at least.
MIN_COMMITS = 48


class Bytes:
    """Counts metadata bytes a store writes and reads, and its calls (wraps one Store)."""

    def __init__(self, store: Store) -> None:
        self.written = self.read = self.calls = 0
        for name in ("write", "put_if_absent"):
            setattr(store, name, self._writer(getattr(store, name)))
        store.read = self._reader(store.read)  # type: ignore[method-assign]
        store.read_many = self._many(store.read_many)  # type: ignore[method-assign]

    def _writer(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(rel: str, data: bytes) -> Any:
            self.calls += 1
            if rel.startswith("_tstream/"):
                self.written += len(data)
            return fn(rel, data)
        return wrapped

    def _reader(self, fn: Callable[..., bytes]) -> Callable[..., bytes]:
        def wrapped(rel: str, *a: Any, **k: Any) -> bytes:
            self.calls += 1
            data = fn(rel, *a, **k)
            self.read += len(data)
            return data
        return wrapped

    def _many(self, fn: Callable[..., list[bytes]]) -> Callable[..., list[bytes]]:
        def wrapped(rels: Any, *a: Any, **k: Any) -> list[bytes]:
            self.calls += 1
            out = fn(rels, *a, **k)
            self.read += sum(len(d) for d in out)
            return out
        return wrapped


def commit(s: Stream, writer: str, batch: int, i: int) -> None:
    """One producer's append of 256 records to every segment (metadata only)."""
    chunks = []
    for seg in s.state.segments:
        raw = raw_hybrid(T0 + i * 10 + np.arange(ROWS, dtype=np.int64))
        chunks.append(ChunkInfo(seg=seg.id, path=f"data/{seg.number}/fake-{uuid.uuid4().hex[:8]}.parquet", rows=ROWS,
                                bytes=400, raw_lo=int(raw[0]), raw_hi=int(raw[-1]), key_lo=seg.lo, key_hi=seg.hi,
                                marks=raw_marks(raw)))
    s.commit(chunks, writer_id=writer, batch_id=batch)


def producers(n: int, root: Path, steady: int = 50) -> list[Any]:
    warm = Stream.create(f"file://{root}/warm{n}", segments=SEGMENTS, compaction="off")
    commit(warm, "warm", 0, 0)  # imports and first-call costs out of the figures
    url = f"file://{root}/p{n}"
    s = Stream.create(url, segments=SEGMENTS, compaction="off")
    counted = Bytes(s.store)
    times = []
    t_all = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        commit(s, f"producer-{i:05d}", 0, i)
        times.append(time.perf_counter() - t)
    first_s = time.perf_counter() - t_all
    tenth = max(1, n // 10)
    early, late = sum(times[:tenth]) / tenth * 1e3, sum(times[-tenth:]) / tenth * 1e3
    first_bytes = counted.written / n
    counted.written = 0
    cpu = time.process_time()
    for j in range(steady):
        commit(s, f"producer-{(j * 7) % n:05d}", 1 + j, n + j)
    cpu_ms = (time.process_time() - cpu) / steady * 1e3
    steady_bytes = counted.written / steady
    reader = Stream.open(url)
    polled = Bytes(reader.store)
    reader.refresh()
    newest = len(s.store.read("_tstream/head.json"))
    mark = s.state.checkpoint
    return [n, f"{first_s:.1f}", f"{early:.1f}", f"{late:.1f}", f"{first_bytes / 1024:.1f}",
            f"{steady_bytes / 1024:.1f}", f"{cpu_ms:.1f}", polled.calls, polled.read, f"{newest / 1024:.1f}",
            f"{(mark.bytes if mark else 0) / 1024:.0f}"]


def contention(w: int, root: Path, rounds: int) -> list[Any]:
    """``w`` handles committing in turn (each catches up on the others' ``w - 1`` commits), then
    one handle committing as each of the ``w`` writers in turn (never behind): process CPU a
    commit of each. Every handle's first commit (opening, its first catch-up) is not counted,
    and each figure is over at least :data:`MIN_COMMITS` commits."""
    url = f"file://{root}/w{w}"
    Stream.create(url, segments=SEGMENTS, compaction="off")
    handles = [Stream.open(url) for _ in range(w)]
    for k, h in enumerate(handles):
        commit(h, f"writer-{k}", 0, k)
    i = w
    rounds = max(rounds, -(-MIN_COMMITS // w))
    cpu = time.process_time()
    for r in range(1, rounds + 1):
        for k, h in enumerate(handles):
            commit(h, f"writer-{k}", r, i)
            i += 1
    per = (time.process_time() - cpu) / (i - w) * 1e3
    alone = handles[0]
    alone.refresh()
    n = 0
    cpu = time.process_time()
    for r in range(rounds + 1, 2 * rounds + 1):
        for k in range(w):
            commit(alone, f"writer-{k}", r, i)
            i += 1
            n += 1
    one = (time.process_time() - cpu) / n * 1e3
    return [w, i - w - n, f"{per:.1f}", f"{one:.1f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="10 and 50 producers; 1 and 8 writers")
    ap.add_argument("--producers", type=int, nargs="+", help="these producer counts only (e.g. 300)")
    ap.add_argument("--writers", type=int, nargs="*", help="these writer counts only (none: no second table)")
    ap.add_argument("--steady", type=int, default=50,
                    help="commits by known producers the steady figures average over (a checkpoint of the "
                         "whole state lands every ~2x its size of entries: fewer commits catch one or none)")
    args = ap.parse_args()
    counts = args.producers or ((10, 50) if args.smoke else (10, 100, 300, 1000))
    writers = args.writers if args.writers is not None else (1, 8) if args.smoke else (1, 4, 16, 64)
    root = Path(tempfile.mkdtemp(prefix="tstream-bench-growth-"))
    try:
        rows = [producers(n, root, args.steady) for n in counts]
        print(report(
            "Metadata a commit writes and reads against producers (64 segments, 256 records a commit, file://)",
            ["producers", "first commits s", "ms/commit first 10%", "ms/commit last 10%", "KiB written/commit (first)",
             "KiB written/commit (steady)", "CPU ms/commit (steady)", "poll calls", "poll bytes",
             "newest entry KiB", "checkpoint KiB"], rows,
            "Targets (issue #52): at 300 producers <= 16 KiB of metadata a commit on average; the first commits "
            "linear in producers (last tenth's ms/commit close to the first's); a poll with nothing new 1 call "
            "of 0 bytes."))
        per = [contention(w, root, 3 if args.smoke else 6) for w in writers]
        if not per:
            return
        print()
        print(report("Writers committing in turn to one stream",
                     ["writers", "commits", "CPU ms/commit (each behind by writers - 1)",
                      "CPU ms/commit (one handle, never behind)"], per,
                     "Target: CPU a commit within +-25 % from 1 to 64 writers (load on the machine counts here). "
                     "Behind by writers - 1, a commit also loses one race (its first attempt is on a stale "
                     "state) and applies the others' changes, which grows with them; never behind, the "
                     "commit's own work on the state."))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
