"""The ``tstream`` command line: S2 / redis-cli style access to streams, without Spark.

Each subcommand is a ``run_*(args) -> int`` function registered in :func:`build_parser`
(``append`` lives in :mod:`~pyspark_tstream.cli.append`, consumer groups in
:mod:`~pyspark_tstream.cli.group`, ``scale``/``cut``/``truncate``/``trim``/``vacuum`` in
:mod:`~pyspark_tstream.cli.admin`; the parser class, argument types and storage options they
share in :mod:`~pyspark_tstream.cli.common`, so no two CLI modules import each other).

Errors the user can act on never show a traceback: they print one ``tstream: error: ...`` line
on stderr. Exit codes: 0 success, 1 runtime error (store, data, missing stream), 2 usage error
(bad arguments, including values the core rejects as config: URL, group name, id, options),
130 interrupted. Set ``TSTREAM_DEBUG=1`` to get the traceback instead. Credentials given as
storage options are never printed: every error line is scrubbed of their values.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from .. import __version__
from .. import keys as K
from ..api.config import TIMESTAMPING_MODES
from ..api.scan import read_after
from ..api.stream import Stream
from ..errors import ConfigError, EntryIdError, InvalidPathError, TStreamError
from ..maps.grouplog import ALL_SEGMENTS
from ..timestamps import now_ms, pack
from .admin import register as register_admin
from .append import register as register_append
from .common import (
    Parser,
    add_command,
    count_int,
    duration_ms,
    key_value,
    millis,
    open_stream,
    positive_int,
    secret_values,
    storage_options,
    time_ms,
)
from .format import json_default, print_info, print_records
from .fsck import register as register_fsck
from .group import register as register_group

#: Records per read while printing, so a long range never sits in memory at once.
PAGE_ROWS = 10_000

EPILOG = """\
examples:
  tstream create file:///tmp/telemetry --segments 4
  echo '{"device": "d1", "temp": 21.5}' | tstream append file:///tmp/telemetry --key device
  tstream append file:///tmp/telemetry events.parquet --key device --timestamp t
  tstream read file:///tmp/telemetry --ago 15m --format table
  tstream read file:///tmp/telemetry --tail 10 --follow
  tstream info file:///tmp/telemetry
  tstream group file:///tmp/telemetry create billing --start 0
  tstream group file:///tmp/telemetry read billing worker-1 --count 10 --block 5000
  tstream group file:///tmp/telemetry ack billing 1767225600000-0@0
  tstream info s3://bucket/telemetry --storage-option endpoint_url=http://127.0.0.1:9000
  tstream fsck file:///tmp/telemetry         # exit code 1 if anything is damaged
  tstream repair file:///tmp/telemetry

URLs: file:///abs/path (or a bare path), memory://name, s3://bucket/prefix.
Storage options (endpoint, region, credentials) come from --storage-option KEY=VALUE
(repeatable; JSON-looking values are decoded) or the TSTREAM_STORAGE_OPTIONS environment
variable (a JSON object), which keeps secrets out of shell history; s3fs also reads the usual
AWS_* variables. Credentials are never printed.
"""


def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, TStreamError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


# -- commands -----------------------------------------------------------------------------------
def run_create(args: argparse.Namespace) -> int:
    config: dict[str, Any] = {"segments": args.segments, "timestamping": args.timestamping,
                              "timestamping_uncapped": args.uncapped}
    if args.writers:
        config["writers"] = tuple(w.strip() for w in args.writers.split(",") if w.strip())
    if args.lease_ms is not None:
        config["writer_lease_ms"] = args.lease_ms
    stream = Stream.create(args.url, storage_options=storage_options(args), **config)
    cfg = stream.config
    extra = (", uncapped" if cfg.timestamping_uncapped else "") + (
        f", writers {','.join(cfg.writers)}" if cfg.writers else "")
    sys.stdout.write(f"created {stream.url}: {cfg.segments} segments, timestamping {cfg.timestamping}{extra}\n")
    return 0


def run_info(args: argparse.Namespace) -> int:
    info = open_stream(args).info()
    if args.json:
        sys.stdout.write(json.dumps(info, indent=2, default=json_default) + "\n")
    else:
        print_info(info, sys.stdout)
    return 0


def _start_cursor(stream: Stream, args: argparse.Namespace) -> tuple[int, int, int]:
    if args.timestamp is not None:
        return max(pack(args.timestamp) - 1, 0), ALL_SEGMENTS, ALL_SEGMENTS
    if args.ago is not None:
        return max(pack(max(now_ms() - args.ago, 0)) - 1, 0), ALL_SEGMENTS, ALL_SEGMENTS
    if args.tail is not None:
        return stream.seek_tail(args.tail), ALL_SEGMENTS, ALL_SEGMENTS
    return 0, -1, -1


def run_read(args: argparse.Namespace) -> int:
    if args.max_wait is not None and not args.follow:
        raise ConfigError("--max-wait only applies with --follow", option="max-wait")
    stream = open_stream(args)
    cursor = _start_cursor(stream, args)
    until = None if args.until is None else pack(args.until) - 1
    left = args.count
    idle_since = time.monotonic()
    header = True
    try:
        while left is None or left > 0:
            page = read_after(stream, cursor, count=min(left or PAGE_ROWS, PAGE_ROWS), until=until)
            if page.records.num_rows:
                n = print_records(page.records, args.format, sys.stdout, header=header)
                header = False
                left = None if left is None else left - n
                idle_since = time.monotonic()
            cursor = page.end
            if left == 0:
                break  # --count reached: never wait for records nobody asked for
            if not page.complete:
                continue  # more records are already complete: no waiting
            if not args.follow or (until is not None and page.bound >= until):
                break
            if not _wait_for_tick(stream, cursor[0], idle_since, args):
                break
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


# -- the parser -----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The ``tstream`` argument parser (subcommands set ``run``)."""
    common = Parser(add_help=False)
    common.add_argument("--storage-option", metavar="KEY=VALUE", type=key_value, action="append",
                        help="fsspec option for the store, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable)")
    parser = Parser(prog="tstream", description="Timestamped streams on a filesystem or object store.",
                    epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tstream {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND", parser_class=Parser)

    p = add_command(sub, common, "create", run_create,
                    help="create a stream",
                    description="Create a stream (fails if one exists).",
                    epilog="example:\n  tstream create file:///tmp/s --segments 8 --writers east,west")
    p.add_argument("--segments", type=positive_int, default=K.SEGMENTS_DEFAULT,
                   help=f"initial segments (default {K.SEGMENTS_DEFAULT})")
    p.add_argument("--timestamping", choices=TIMESTAMPING_MODES, default=K.TIMESTAMPING_DEFAULT)
    p.add_argument("--uncapped", action="store_true", help="keep client times later than arrival")
    p.add_argument("--writers", metavar="A,B", help="declared writers the tick waits for")
    p.add_argument("--lease-ms", type=positive_int, help="drop a silent writer from the tick after this")

    p = add_command(sub, common, "info", run_info,
                    help="show tick, segments, writers",
                    description="Tick, epochs, segments, writers, first/last ids and size.",
                    epilog="example:\n  tstream info file:///tmp/s --json | jq .tick_time")
    p.add_argument("--json", action="store_true", help="print the info as JSON")

    register_append(sub, common)

    p = add_command(sub, common, "read", run_read,
                    help="read records (XRANGE / XREAD)",
                    description="Print complete records (at or below the tick) in _tso order.",
                    epilog="examples:\n  tstream read file:///tmp/s --ago 1h --until=-30m\n"
                           "  tstream read file:///tmp/s --tail 5 --follow --max-wait 30s --format table")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--timestamp", metavar="T", type=time_ms, help="from this time (epoch ms or ISO-8601)")
    start.add_argument("--ago", metavar="DURATION", type=duration_ms, help="from now minus this (90s, 15m, 1h, 7d)")
    start.add_argument("--tail", metavar="N", type=count_int, help="the last N records")
    p.add_argument("--until", metavar="T", type=time_ms, help="records before this time (ISO-8601, epoch ms, or --until=-5m)")
    p.add_argument("--count", metavar="N", type=positive_int, help="stop after N records")
    p.add_argument("--format", choices=("json", "table"), default="json")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing records as the tick advances")
    p.add_argument("--max-wait", metavar="DURATION", type=duration_ms, help="with --follow: stop after this long "
                   "without new records")
    p.add_argument("--poll", metavar="MS", type=millis, default=200, help=argparse.SUPPRESS)

    register_group(sub, common)
    register_admin(sub, common)
    register_fsck(sub, common)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse; trailing ids after options (``claim NAME C --min-idle 0 ID...``) join ``ids``.

    argparse matches a ``nargs="*"`` positional before the options that follow it, so ids
    written after an option would otherwise be "unrecognized".
    """
    args, extra = parser.parse_known_args(argv)
    if extra:
        if getattr(args, "ids", None) is None or any(x.startswith("-") for x in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.ids = list(args.ids) + extra
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except SystemExit as e:  # --help, --version and usage errors: argparse already printed
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()  # the reader (e.g. `| head`) has gone: not an error
        return 0
    except (TStreamError, OSError, ValueError) as e:
        if os.environ.get("TSTREAM_DEBUG"):
            raise
        text = _message(e)
        for secret in secret_values(args):
            text = text.replace(secret, "***")
        sys.stderr.write(f"tstream: error: {text}\n")
        return 2 if isinstance(e, (ConfigError, InvalidPathError, EntryIdError)) else 1


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout is not a real file (tests): nothing will flush to a closed pipe


if __name__ == "__main__":
    sys.exit(main())
