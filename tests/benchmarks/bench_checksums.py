"""What page checksums cost: a chunk's write and read with and without a CRC32 per page.

    python tests/benchmarks/bench_checksums.py             # 2M rows, 3 interleaved rounds
    python tests/benchmarks/bench_checksums.py --smoke     # 50k rows, 1 round

Spark-free, on the benchmark dataset (``_data.make_table``: ts, key, val, 64-byte body). Two
levels, each timed with checksums off and on (CPU seconds of this process, median of rounds):

* ``encode`` / ``decode``: pyarrow alone, the rows as one chunk file in memory, encoded with
  the options a chunk writer passes (``chunk_encodings``), decoded whole;
* ``tstream write`` / ``tstream read``: ``write_batches`` + commit into a ``file://`` stream of
  4 segments, then ``Stream.read()`` of all of it (the sinks' and readers' Python floor,
  docs/performance.md, plus tstream's own work).

"off" empties :data:`~pyspark_tstream.chunkfile.checksums.WRITE_CHECKSUMS` and
``VERIFY_CHECKSUMS`` in place, the one switch every writer and decoder reads.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _data import make_table
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.chunkfile import checksums
from pyspark_tstream.chunkfile.encoding import chunk_encodings
from pyspark_tstream.write.writing import write_batches

ON = (dict(checksums.WRITE_CHECKSUMS), dict(checksums.VERIFY_CHECKSUMS))


def _switch(on: bool) -> None:
    for live, saved in zip((checksums.WRITE_CHECKSUMS, checksums.VERIFY_CHECKSUMS), ON):
        live.clear()
        live.update(saved if on else {})


def _cpu(fn: Callable[[], object]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def round_(table: pa.Table, base: str, on: bool, results: dict[tuple[str, bool], list[float]]) -> None:
    _switch(on)
    buf = io.BytesIO()

    def encode() -> None:
        with pq.ParquetWriter(buf, table.schema, **chunk_encodings(table, "zstd"),
                              **checksums.WRITE_CHECKSUMS) as w:
            w.write_table(table, row_group_size=65_536)

    results[("encode", on)].append(_cpu(encode))
    data = buf.getvalue()
    results[("decode", on)].append(_cpu(lambda: pq.read_table(pa.BufferReader(data),
                                                               **checksums.VERIFY_CHECKSUMS)))
    url = f"file://{base}/s-{'on' if on else 'off'}-{time.monotonic_ns()}"
    s = Stream.create(url, schema=table.schema, segments=4)
    spec = s.write_spec(table.schema, key="key", timestamp="ts")
    results[("tstream write", on)].append(_cpu(lambda: s.commit(write_batches(spec, table.to_batches(65_536),
                                                                              task="t0"))))
    results[("tstream read", on)].append(_cpu(lambda: Stream.open(url).read()))
    shutil.rmtree(url[len("file://"):], ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="50k rows, 1 round")
    args = ap.parse_args()
    rows, rounds = (50_000, 1) if args.smoke else (args.rows, args.rounds)
    table = make_table(rows)
    results: dict[tuple[str, bool], list[float]] = {(k, on): [] for k in
                                                    ("encode", "decode", "tstream write", "tstream read")
                                                    for on in (False, True)}
    base = tempfile.mkdtemp(prefix="bench-checksums-")
    try:
        warm: dict[tuple[str, bool], list[float]] = {k: [] for k in results}
        for on in (False, True):  # first calls pay imports and allocator growth: not counted
            round_(table.slice(0, 50_000), base, on, warm)
        for _ in range(rounds):
            for on in (False, True):  # interleaved: load drifts hit both alike
                round_(table, base, on, results)
    finally:
        _switch(True)
        shutil.rmtree(base, ignore_errors=True)
    print(f"{rows:,} rows, {rounds} round(s), CPU seconds (median)")
    print(f"{'step':<16}{'no CRC':>10}{'CRC32':>10}{'overhead':>10}")
    for step in ("encode", "decode", "tstream write", "tstream read"):
        off, on_ = statistics.median(results[(step, False)]), statistics.median(results[(step, True)])
        print(f"{step:<16}{off:>10.3f}{on_:>10.3f}{(on_ / off - 1) * 100:>9.1f}%")


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
