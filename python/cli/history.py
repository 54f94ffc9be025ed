"""``tstream history``: the stream's commits, one row per commit (``Stream.metadata("history")``);
and :func:`print_metadata`, how any metadata table prints (``tstream info --segments/--files``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

import pyarrow as pa

from .common import add_command, open_stream
from .format import json_default, print_json_lines, print_table

#: History columns shown in table output (JSON lines carry every column).
HISTORY_TABLE = ("position", "committed_at", "operation", "writer_id", "batch_id", "records", "files", "bytes")


def print_metadata(table: pa.Table, fmt: str, out: TextIO, columns: tuple[str, ...] | None = None) -> int:
    """``table`` as JSON lines (``fmt`` ``json``: every column, times in ISO-8601) or an aligned
    text table (``columns`` of it, default all); returns the rows printed."""
    rows = table.to_pylist()
    if fmt == "json":
        return print_json_lines(rows, out)
    listed = [{k: _shown(r[k]) for k in (columns or table.column_names)} for r in rows]
    print_table(listed, out)
    return len(listed)


def _shown(value: Any) -> Any:
    """A table cell: times as ISO-8601 (as in JSON), lists as ``a,b``, other values as they are."""
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    text = json_default(value)
    return text if not isinstance(value, (int, float, str, bool, type(None))) else value


def run_history(args: argparse.Namespace) -> int:
    table = open_stream(args).metadata("history", starting_position=args.start, ending_position=args.end)
    print_metadata(table, args.format, sys.stdout, None if args.format == "json" else HISTORY_TABLE)
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``history`` to the top-level subparsers ``sub``."""
    p = add_command(sub, common, "history", run_history,
                    help="list the stream's commits",
                    description="One row per commit: position, time, operation (append, compact, scale, "
                                "truncate, gc, ...), writer, batch, records, files, bytes. The commits a "
                                "group-commit entry folded share its position. Default: the newest 1,000 "
                                "journal positions.",
                    epilog="examples:\n  tstream history file:///tmp/s\n"
                           "  tstream history file:///tmp/s --from 100 --to 200 --format json | jq .operation")
    p.add_argument("--from", dest="start", type=int, metavar="POSITION",
                   help="first journal position to list (inclusive)")
    p.add_argument("--to", dest="end", type=int, metavar="POSITION", help="last journal position to list (inclusive)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="an aligned table (default) or JSON lines with every column")
