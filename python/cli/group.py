"""``tstream group URL ACTION ...``: consumer groups from the shell (XGROUP, XREADGROUP, XACK...).

Thin: each action opens the stream and the group and calls one :class:`~pyspark_tstream.api.groups.Group`
method. Record output uses the unambiguous ``<ms>-<logical>@<segment>`` ids that ``ack`` and
``claim`` take back.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..api.groups import DELETED_KEY, Group
from .common import URL_HELP, millis, open_stream, positive_int
from .format import json_default, print_records, print_table

EPILOG = """\
examples:
  tstream group file:///tmp/s create billing --start 0        # from the beginning ($: only new)
  tstream group file:///tmp/s read billing worker-1 --count 100 --block 5000
  tstream group file:///tmp/s ack billing 1767225600000-0@0 1767225600000-1@0
  tstream group file:///tmp/s pending billing --consumer worker-1
  tstream group file:///tmp/s claim billing worker-2 --min-idle 60000
  tstream group file:///tmp/s info                           # every group: position, pending, lag
"""


def _open(args: argparse.Namespace) -> Group:
    return Group.open(open_stream(args), args.name)


def run_create(args: argparse.Namespace) -> int:
    _say_position(Group.create(open_stream(args), args.name, start=args.start, exist_ok=args.exist_ok))
    return 0


def _say_position(group: Group) -> None:
    sys.stdout.write(f"group {group.name}: delivers records after {group.info().last_delivered_id}\n")


def _print_delivery(table: Any, args: argparse.Namespace) -> None:
    print_records(table, args.format, sys.stdout)
    deleted = (table.schema.metadata or {}).get(DELETED_KEY)
    if deleted:
        ids = json.loads(deleted)
        sys.stderr.write(f"tstream: {len(ids)} pending entries were removed by retention and left the "
                         f"pending list: {' '.join(ids)}\n")


def run_read(args: argparse.Namespace) -> int:
    _print_delivery(_open(args).read(args.consumer, count=args.count, block_ms=args.block), args)
    return 0


def run_ack(args: argparse.Namespace) -> int:
    sys.stdout.write(f"{_open(args).ack(args.ids)}\n")
    return 0


def run_pending(args: argparse.Namespace) -> int:
    rows = _open(args).pending(consumer=args.consumer)
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps(row.to_dict()) + "\n")
    elif rows:
        print_table([{"id": r.id, "consumer": r.consumer, "idle ms": r.idle_ms, "deliveries": r.deliveries}
                     for r in rows], sys.stdout)
    else:
        sys.stderr.write("no pending entries\n")
    return 0


def run_claim(args: argparse.Namespace) -> int:
    group = _open(args)
    table = group.claim(args.consumer, args.min_idle, ids=args.ids or None, count=args.count)
    _print_delivery(table, args)
    return 0


def run_setid(args: argparse.Namespace) -> int:
    group = _open(args)
    group.set_position(args.start)
    _say_position(group)
    return 0


def run_info(args: argparse.Namespace) -> int:
    stream = open_stream(args)
    names = [args.name] if args.name else Group.names(stream)
    infos = [Group.open(stream, n).info() for n in names]
    if args.json:
        plain = [i.to_dict() for i in infos]
        sys.stdout.write(json.dumps(plain[0] if args.name else plain, indent=2, default=json_default) + "\n")
    elif not infos:
        sys.stderr.write(f"no consumer groups on {stream.url}\n")
    else:
        print_table([{"group": i.name, "last delivered": i.last_delivered_id, "pending": i.pending,
                      "lag": i.lag, "lag ms": i.lag_ms, "read": i.entries_read,
                      "consumers": ",".join(c.name for c in i.consumers) or "-"} for i in infos],
                    sys.stdout)
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``group`` and its actions to the top-level subparsers ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    g = sub.add_parser("group", formatter_class=fmt, help="consumer groups (create, read, ack, pending, claim)",
                       description="Redis-style consumer groups stored in the stream.", epilog=EPILOG)
    g.add_argument("url", help=URL_HELP)
    actions = g.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(g))

    def action(name: str, run: Any, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = actions.add_parser(name, parents=[common], formatter_class=fmt, help=help_text,
                                                        description=help_text, epilog=EPILOG)
        p.set_defaults(run=run)
        return p

    p = action("create", run_create, "create a group (XGROUP CREATE)")
    p.add_argument("name")
    p.add_argument("--start", default="$", help="$ (only new records, default), 0 (all), a time or an id")
    p.add_argument("--exist-ok", action="store_true", help="succeed if the group exists")

    for name, run, text in (("read", run_read, "deliver new records to a consumer (XREADGROUP)"),
                            ("claim", run_claim, "take over idle pending records (XCLAIM / XAUTOCLAIM)")):
        p = action(name, run, text)
        p.add_argument("name")
        p.add_argument("consumer")
        if name == "claim":
            p.add_argument("--min-idle", metavar="MS", type=millis, required=True,
                           help="only entries idle this long (ms, or 30s, 5m)")
            p.add_argument("ids", nargs="*", metavar="ID", help="ids to claim (default: the oldest idle ones)")
        else:
            p.add_argument("--block", metavar="MS", type=millis,
                           help="wait up to MS for new records (0: forever)")
        p.add_argument("--count", metavar="N", type=positive_int, help="at most N records")
        p.add_argument("--format", choices=("json", "table"), default="json")

    p = action("ack", run_ack, "acknowledge records (XACK); prints how many were pending")
    p.add_argument("name")
    p.add_argument("ids", nargs="+", metavar="ID")

    p = action("pending", run_pending, "list pending entries (XPENDING)")
    p.add_argument("name")
    p.add_argument("--consumer", help="only this consumer's entries")
    p.add_argument("--json", action="store_true", help="one JSON object per entry")

    p = action("setid", run_setid, "move the group's position (XGROUP SETID)")
    p.add_argument("name")
    p.add_argument("start", help="$, 0, a time or an id")

    p = action("info", run_info, "position, pending, consumers and lag (XINFO GROUPS)")
    p.add_argument("name", nargs="?", help="one group (default: every group)")
    p.add_argument("--json", action="store_true")
