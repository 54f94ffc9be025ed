"""What metadata checksums cost (python/journal/seal.py): the CPU of encoding and decoding the two
largest metadata objects with and without the seal.

    python tests/benchmarks/bench_metadata_seal.py            # 12,800 chunks, 20,000 writers, 5 rounds
    python tests/benchmarks/bench_metadata_seal.py --smoke    # 1,280 chunks, 2,000 writers, 1 round

* a commit's entry of ``--chunks`` slices (a 1M-row write into 64 segments, 200 tasks: the
  entry bench_wide_write.py measures), stored packed: ``Entry.encode`` and ``Entry.parse``;
* a checkpoint of a state with ``--writers`` writers and 64 segments: ``checkpoint.encode`` and
  ``checkpoint.decode`` (a cold open reads one).

"off" is the same object of a stream that does not declare ``checksums``; "digest" is
:func:`~pyspark_tstream.journal.seal.verify` alone (one CRC-32 pass over the stored bytes: what
sealing adds to a decode, and, with one copy of the bytes, to an encode). Times are the median of
``--rounds`` interleaved runs of each, microseconds of wall time of this process (no store I/O).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from pyspark_tstream.api.config import StreamConfig
from pyspark_tstream.api.creation import initial_state
from pyspark_tstream.journal import checkpoint, seal
from pyspark_tstream.journal.entries import Chunk, Entry
from pyspark_tstream.journal.features import NEW_STREAM
from pyspark_tstream.journal.state import StreamState, Writer


def _times(fns: list[Callable[[], object]], rounds: int) -> list[float]:
    """Median wall microseconds of each of ``fns``, run interleaved (a loaded machine's drift
    falls on all of them alike)."""
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            out[i].append(time.perf_counter() - t)
    return [statistics.median(x) * 1e6 for x in out]


def _state(writers: int, sealed: bool) -> StreamState:
    st = initial_state(StreamConfig(segments=64), None, 1_700_000_000_000)
    st.features = {k: dict(v) for k, v in NEW_STREAM.items()} if sealed else {}
    st.writers = {f"writer-{i:06d}": Writer(tso=1 << 60 | i, wall=1_700_000_000_000 + i, live=True)
                  for i in range(writers)}
    return st


def _entry(chunks: int, sealed: bool) -> Entry:
    cs = [Chunk(seg=i % 64, path=f"data/{i % 64}/w-{i // 64:04d}-0123456789abcdef.parquet", rows=78,
                bytes=8_000 + i, seq=78 * (i // 64), floor=1 << 60, lo=(1 << 60) + i, hi=(1 << 60) + i + 77,
                offset=78 * (i % 64), file_bytes=540_000, span_start=8_400 * (i % 64), span_bytes=8_400)
          for i in range(chunks)]
    return Entry(pos=1, op="append", wall=1_700_000_000_000, state=_state(0, sealed), chunks=cs,
                 writer="w", batch=0, change={"checkpoint": [0, 100, 0, 0]})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=12_800)
    ap.add_argument("--writers", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.chunks, a.writers, a.rounds = 1_280, 2_000, 1
    print(f"{'object':<34} {'bytes':>10} {'encode off':>11} {'encode on':>10} {'decode off':>11} "
          f"{'decode on':>10} {'digest':>8}")

    def show(what: str, objects: dict[bool, object], encode: Callable[[object], bytes],
             decode: Callable[[bytes], object]) -> None:
        data = {k: encode(o) for k, o in objects.items()}
        enc_off, enc_on, dec_off, dec_on, digest = _times([
            lambda: encode(objects[False]), lambda: encode(objects[True]),
            lambda: decode(data[False]), lambda: decode(data[True]), lambda: seal.verify(data[True])], a.rounds)
        print(f"{what:<34} {len(data[True]):>10,} {enc_off:>9.0f}us {enc_on:>8.0f}us {dec_off:>9.0f}us "
              f"{dec_on:>8.0f}us {digest:>6.0f}us")

    entries = {k: _entry(a.chunks, k) for k in (False, True)}
    deltas = {k: e.delta_json() for k, e in entries.items()}
    show(f"entry, {a.chunks:,} chunks (packed)", {k: k for k in entries},
         lambda k: entries[bool(k)].encode(deltas[bool(k)]), lambda d: Entry.parse(d, path="mem://e"))
    states = {k: _state(a.writers, k) for k in (False, True)}
    show(f"checkpoint, {a.writers:,} writers", {k: k for k in states},
         lambda k: checkpoint.encode(states[bool(k)]), lambda d: checkpoint.decode(d, 0, "mem://c"))

if __name__ == "__main__":
    main()
