"""``tstream read``: complete records in read order, printed batch by batch (XRANGE / XREAD BLOCK).

Records come through the reader behind :meth:`~pyspark_tstream.api.stream.Stream.to_reader`
(:meth:`Reader.bounds <pyspark_tstream.api.read.Reader.bounds>` then :meth:`Reader.batches
<pyspark_tstream.api.read.Reader.batches>`): a long range is printed as it is read, never held
whole. ``--follow`` then reads each newly complete span ``(last tick, new tick]`` the same way.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import pyarrow as pa

from ..api.read import ReadRange, projection
from ..api.stream import Stream
from ..errors import ConfigError
from ..timestamps import iso, now_ms, pack
from .common import (
    add_command,
    count_int,
    duration_ms,
    millis,
    open_stream,
    positive_int,
    time_ms,
)
from .format import print_records

#: Records per printed batch, so a long range never sits in memory at once.
PAGE_ROWS = 10_000


def _first_range(stream: Stream, args: argparse.Namespace) -> ReadRange:
    start = args.timestamp if args.timestamp is not None else (
        max(now_ms() - args.ago, 0) if args.ago is not None else None)
    if start is not None and args.until is not None and args.until < start:
        flag = "--timestamp" if args.timestamp is not None else "--ago"
        raise ConfigError(f"--until {iso(args.until)} is before the start {flag} gives ({iso(start)}): records "
                          "are read from the start up to --until; swap them or leave --until out",
                          option="until", value=args.until)
    return stream.reading.bounds(start=start, end=args.until, tail=args.tail)


class _Printer:
    """Prints batches in the chosen format: one header (table format), records counted."""

    def __init__(self, fmt: str) -> None:
        self.fmt, self.header = fmt, True

    def print(self, reader: pa.RecordBatchReader) -> int:
        n = 0
        for batch in reader:
            if batch.num_rows:
                n += print_records(pa.Table.from_batches([batch]), self.fmt, sys.stdout, header=self.header)
                self.header = False
        return n


def run_read(args: argparse.Namespace) -> int:
    if args.max_wait is not None and not args.follow:
        raise ConfigError("--max-wait only applies with --follow", option="max-wait")
    stream = open_stream(args)
    until = None if args.until is None else pack(args.until) - 1
    printer = _Printer(args.format)
    left = args.count
    rng = _first_range(stream, args)
    idle_since = time.monotonic()
    try:
        while True:
            # every user column and the system columns (the schema may grow while following)
            user, out = projection(stream.schema or pa.schema([]), None, True)
            n = printer.print(stream.reading.batches(rng, user, out, limit=left, batch_rows=PAGE_ROWS))
            if n:
                idle_since = time.monotonic()
            left = None if left is None else left - n
            if left == 0 or not args.follow or (until is not None and rng.hi >= until):
                break  # --count reached, or all asked for is read: never wait for more
            done = max(rng.lo, rng.hi)  # read through here (a start after the tick: nothing yet)
            if not _wait_for_tick(stream, done, idle_since, args):
                break
            tick = stream.state.tick
            rng = ReadRange(done, tick if until is None else min(tick, until))
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how a --follow ends
    return 0


def _wait_for_tick(stream: Stream, after: int, idle_since: float, args: argparse.Namespace) -> bool:
    """Poll (1 store call each) until the tick passes ``after``; False once --max-wait is over."""
    while stream.refresh().tick <= after:
        if args.max_wait is not None and time.monotonic() - idle_since >= args.max_wait / 1000:
            return False
        time.sleep(args.poll / 1000)
    return True


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``read`` to the top-level subparsers ``sub``."""
    p = add_command(sub, common, "read", run_read,
                    help="read records (XRANGE / XREAD)",
                    description="Print complete records (at or below the tick) in _tso order.",
                    epilog="examples:\n  tstream read file:///tmp/s --ago 1h --until=-30m\n"
                           "  tstream read file:///tmp/s --tail 5 --follow --max-wait 30s --format table")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--timestamp", metavar="T", type=time_ms, help="from this time (epoch ms or ISO-8601)")
    start.add_argument("--ago", metavar="DURATION", type=duration_ms, help="from now minus this (90s, 15m, 1h, 7d)")
    start.add_argument("--tail", metavar="N", type=count_int, help="the last N records")
    p.add_argument("--until", metavar="T", type=time_ms,
                   help="records before this time (ISO-8601, epoch ms, or --until=-5m)")
    p.add_argument("--count", metavar="N", type=positive_int, help="stop after N records")
    p.add_argument("--format", choices=("json", "table"), default="json")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing records as the tick advances")
    p.add_argument("--max-wait", metavar="DURATION", type=duration_ms, help="with --follow: stop after this long "
                   "without new records")
    p.add_argument("--poll", metavar="MS", type=millis, default=200, help=argparse.SUPPRESS)
