"""``tstream info``: tick, epochs, segments, writers, first/last ids and size, as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import add_command, open_stream
from .format import json_default, print_info


def run_info(args: argparse.Namespace) -> int:
    if args.segments or args.files:
        from .history import print_metadata

        stream = open_stream(args)
        print_metadata(stream.metadata("segments" if args.segments else "files"), args.format, sys.stdout)
        return 0
    info = open_stream(args).info().to_dict()
    if args.json:
        sys.stdout.write(json.dumps(info, indent=2, default=json_default) + "\n")
    else:
        print_info(info, sys.stdout)
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``info`` to the top-level subparsers ``sub``."""
    p = add_command(sub, common, "info", run_info,
                    help="show tick, segments, writers",
                    description="Tick, epochs, segments, writers, first/last ids and size.",
                    epilog="examples:\n  tstream info file:///tmp/s --json | jq .tick_time\n"
                           "  tstream info file:///tmp/s --segments --format table")
    p.add_argument("--json", action="store_true", help="print the info as JSON")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--segments", action="store_true",
                       help="list every segment instead (epochs, key range, records, bytes)")
    which.add_argument("--files", action="store_true", help="list the live data files instead")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="with --segments/--files: an aligned table (default) or JSON lines")
