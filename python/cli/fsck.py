"""``tstream fsck`` and ``tstream repair``: check a stream, rebuild what its journal holds.

Thin over :mod:`~pyspark_tstream.maintain.fsck`. The summary goes to stdout, the progress bar to stderr
(on a terminal, or with ``--progress``). Exit codes: 0 the stream is sound (after repair: nothing
left to fix), 1 problems found (after repair: some could not be rebuilt; the lines say which).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..api.stream import Stream
from .common import add_command, add_progress, open_stream, storage_options
from .format import Progress


def _progress(args: argparse.Namespace) -> tuple[Progress, Any]:
    bar = Progress(None, enabled=args.progress or sys.stderr.isatty(), unit="objects")
    bar.total = 0

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(1, done)

    return bar, update


def run_fsck(args: argparse.Namespace) -> int:
    stream = open_stream(args)
    bar, update = _progress(args)
    report = stream.verify(progress=update, footers_only=args.footers_only)
    bar.close()
    sys.stdout.write(report.summary() + "\n")
    if not report.ok:
        fixable = sum(p.repairable for p in report.problems)
        sys.stdout.write(f"{fixable} of {len(report.problems)} problem(s) can be rebuilt from the journal: "
                         f"tstream repair {stream.url}\n")
    return 0 if report.ok else 1


def run_repair(args: argparse.Namespace) -> int:
    bar, update = _progress(args)
    # not opened first: a stream whose newest entry is torn cannot be opened, and repair is the way out
    report = Stream.repair_url(args.url, storage_options(args), progress=update, drop_torn_entry=args.drop_torn_entry)
    bar.close()
    for line in report.repaired:
        sys.stdout.write(f"repaired: {line}\n")
    if not report.repaired:
        sys.stdout.write("nothing to rebuild\n")
    sys.stdout.write(report.summary() + "\n")
    return 0 if report.ok else 1


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``fsck`` and ``repair`` to the top-level subparsers ``sub``."""
    p = add_command(sub, common, "fsck", run_fsck, help="check a stream for damage",
                    description="Check journal entries, head and anchor hints, index nodes, sealed-segment "
                                "shards, epoch records and every live chunk: its size, rows and times from its "
                                "footer, then every page decoded against its checksum. Exit code 0 when "
                                "sound, 1 when something is wrong.",
                    epilog="example:\n  tstream fsck file:///tmp/telemetry\n"
                           "  tstream fsck --footers-only s3://bucket/telemetry")
    add_progress(p)
    p.add_argument("--footers-only", "--quick", dest="footers_only", action="store_true",
                   help="check chunk files from their footers alone (size, rows, times: one ranged read "
                        "each) without reading and decoding their pages; finds missing, truncated and "
                        "swapped files, not a damaged page inside one")
    p = add_command(sub, common, "repair", run_repair, help="rebuild damaged metadata",
                    description="Rebuild what the journal holds (head and anchor hints, index nodes, "
                                "sealed-shard versions and hints, epoch records) and say exactly what "
                                "cannot be rebuilt (a missing chunk: its segment, _seq and time range, and "
                                "the cut that truncates past it). Exit code 0 when nothing is left to fix.",
                    epilog="example:\n  tstream repair file:///tmp/telemetry")
    add_progress(p)
    p.add_argument("--drop-torn-entry", action="store_true",
                   help="the newest journal entry is torn and no hint holds a copy: set it aside, losing "
                        "the one commit it held (repair says when this is needed)")
