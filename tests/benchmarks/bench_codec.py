"""What the record codec costs on the cold-open and commit paths: JSON <-> records of a large
stream state and of a wide entry's chunks.

    python tests/benchmarks/bench_codec.py            # 64 segments, 2,000 writers; 12,800 chunks
    python tests/benchmarks/bench_codec.py --smoke    # small sizes, for CI

Spark-free and store-free: each figure is the least CPU time (ms) of repeated runs (the least
disturbed, on a shared machine) of

* ``state decode``: ``StreamState.from_json(json.loads(bytes))`` after the shape check a cold
  open runs on it (``check_entry``), and ``state encode``: ``json.dumps(state.to_json())``;
* ``chunks decode``: ``Chunk.from_json`` of every stored chunk of a 12,800-chunk entry after
  ``check_chunk`` of each (what ``Entry.build`` does), and ``chunks encode``: ``to_json`` of each.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from pyspark_tstream.journal.chunk import Chunk
from pyspark_tstream.journal.config import ConfigRecord
from pyspark_tstream.journal.shapes import check_chunk, check_entry
from pyspark_tstream.journal.state import Segment, StreamState, Writer
from pyspark_tstream.journal.summary import Summary


def big_state(segments: int, writers: int) -> StreamState:
    segs = [Segment(i, i << 20, (i + 1) << 20, next_seq=1000 + i, last_tso=10**15 + i, rows=5000, bytes=10**6,
                    chunks=40, win_rows=10, win_bytes=200, win_wall=1700000000000) for i in range(segments)]
    ws = {f"writer-{i:05d}": Writer(tso=10**15 + i, wall=1700000000000 + i, live=i % 2 == 0, seen=True,
                                    batches=[[b, 100 + b] for b in range(64)], floor=3, commits=70, rows=700,
                                    lanes={s.id: 10**15 + s.id for s in segs[:8]}) for i in range(writers)}
    index = [[Summary(p, 10**15 + p, 10**15, 1700000000000 + p, p * 10, 0, p * 100) for p in range(31)]
             for _ in range(3)]
    return StreamState(pos=12345, epoch=3, tick=10**15, max_tso=10**15 + 9, wall=1700000000000, created=1600000000000,
                       schema="QUJD" * 100, config=ConfigRecord(), segments=segs, writers=ws, index=index,
                       rows=10**7, bytes=10**9, chunks=10**5, next_number=segments, head_pos=7, first_tso=10**15)


def wide_chunks(n: int) -> list[list[Any]]:
    chunks = [Chunk(seg=i % 64, path=f"data/{i % 64}/f{i // 64:06d}.parquet", rows=1000, bytes=20000, seq=i * 1000,
                    floor=0, lo=10**15 + i, hi=10**15 + i + 999, offset=(i // 64) * 1000, sorted=i % 3 != 0,
                    marks=tuple(10**15 + i + k * 100 for k in range(10)), file_bytes=10**9,
                    span_start=i * 20000, span_bytes=20000) for i in range(n)]
    return json.loads(json.dumps([c.to_json() for c in chunks]))


def best_ms(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times) * 1000  # the least disturbed run: the machine is shared


def state_decode(data: bytes) -> StreamState:
    d = json.loads(data)
    check_entry({"pos": 0, "wall": 0, "op": "", "nonce": "", "chunks": [], "state": d})
    return StreamState.from_json(d)


def chunks_decode(stored: list[list[Any]]) -> list[Chunk]:
    for c in stored:
        check_chunk(c)
    return [Chunk.from_json(c) for c in stored]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="small sizes")
    args = ap.parse_args()
    segments, writers, n, reps = (8, 50, 400, 3) if args.smoke else (64, 2000, 12_800, 15)
    state = big_state(segments, writers)
    data = json.dumps(state.to_json(), separators=(",", ":")).encode()
    stored = wide_chunks(n)
    chunks = chunks_decode(stored)
    print(f"state: {segments} segments, {writers} writers, {len(data) / 1e6:.2f} MB; entry: {n} chunks")
    for name, fn in (("state decode", lambda: state_decode(data)),
                     ("state encode", lambda: json.dumps(state.to_json(), separators=(",", ":"))),
                     ("chunks decode", lambda: chunks_decode(stored)),
                     ("chunks encode", lambda: [c.to_json() for c in chunks])):
        print(f"{name:14s} {best_ms(fn, reps):8.2f} ms")


if __name__ == "__main__":
    main()
