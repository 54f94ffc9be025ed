"""``tstream scale | cut | truncate | trim | compact | vacuum``: epochs, stream cuts and retention.

Thin: each command opens the stream and calls one :class:`~pyspark_tstream.api.stream.Stream`
method; long work (truncation of a big history, garbage collection) reports progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..api.config import GC_GRACE_MS, ORPHAN_GRACE_MS
from ..api.stream import Stream
from ..epochs.routing import fraction
from ..journal.op_info import GcInfo
from ..timestamps import iso, physical
from .common import add_command, add_progress, open_stream, positive_int, time_ms

EPILOG_SCALE = """\
examples:
  tstream scale file:///tmp/s --split 0 --parts 4        # split segment 0 into 4 key ranges
  tstream scale file:///tmp/s --merge 4294967298 4294967299
"""


def _stream(args: argparse.Namespace) -> Stream:
    return open_stream(args)


def run_scale(args: argparse.Namespace) -> int:
    s = _stream(args)
    if args.split is not None:
        out = s.scale(split=args.split, parts=args.parts)
    else:
        out = s.scale(merge=args.merge)
    segs = {g.id: g for g in s.state.segments}
    sys.stdout.write(f"epoch {out.epoch}: sealed {list(out.sealed)}, created "
                     + ", ".join(f"{c} [{fraction(segs[c].lo):.4f}, {fraction(segs[c].hi):.4f})"
                                 for c in out.created) + "\n")
    return 0


def run_cut(args: argparse.Namespace) -> int:
    cut = _stream(args).cut_at(args.time)
    sys.stdout.write(json.dumps(cut.to_dict()) + "\n")
    return 0


def _report(before: Any, after: Any, counts: GcInfo | None) -> None:
    lines = [f"head: {iso(physical(before.head_tso)) if before.head_tso else '-'} -> "
             f"{iso(physical(after.head_tso)) if after.head_tso else '-'}"]
    if counts:
        lines.append("deleted: " + ", ".join(f"{v} {k}" for k, v in counts.to_dict().items()))
    sys.stdout.write("\n".join(lines) + "\n")


def run_truncate(args: argparse.Namespace) -> int:
    s = _stream(args)
    before = s.refresh()
    target: Any = json.loads(args.cut) if args.cut else args.before
    if isinstance(target, dict):
        target = {int(k): int(v) for k, v in target.items()}
    after = s.truncate(target)
    sys.stderr.write("collecting garbage...\n") if args.vacuum else None
    counts = s.vacuum(grace_ms=0) if args.vacuum else None
    _report(before, after, counts)
    return 0


def run_trim(args: argparse.Namespace) -> int:
    s = _stream(args)
    before = s.refresh()
    after = s.trim(maxlen=args.maxlen, max_age=args.max_age, max_bytes=args.max_bytes,
                   gc_grace_ms=args.grace_ms)
    _report(before, after, None)
    return 0


def run_release(args: argparse.Namespace) -> int:
    s = _stream(args)
    if args.writer not in s.state.writers:
        raise ValueError(f"no writer {args.writer!r} on {s.url}; writers: {sorted(s.state.writers)}")
    s.writer(args.writer).close()
    sys.stdout.write(f"released {args.writer}: tick {iso(physical(s.state.tick)) if s.state.tick else '-'}\n")
    return 0


def run_vacuum(args: argparse.Namespace) -> int:
    sys.stderr.write("collecting garbage...\n")
    counts = _stream(args).vacuum(grace_ms=args.grace_ms, orphans=args.orphans, orphan_grace_ms=args.orphan_grace_ms,
                                  unsafe_orphan_grace=args.unsafe_orphan_grace)
    sys.stdout.write("deleted: " + ", ".join(f"{v} {k}" for k, v in counts.to_dict().items()) + "\n")
    return 0


def run_compact(args: argparse.Namespace) -> int:
    from .format import Progress

    s = _stream(args)
    before = s.refresh().compaction
    bar: list[Progress] = []

    def total(rows: int, size: int) -> None:
        bar.append(Progress(rows, enabled=args.progress or sys.stderr.isatty()))

    counts = s.compact(full=not args.tiered, target=args.target, min_pieces=args.min,
                       progress=lambda rows, size: bar[0].update(rows) if bar else None, total=total)
    if bar:
        bar[0].close()
    plan = s.plan(s.state.head_tso, s.state.tick)
    sys.stdout.write(f"compacted {counts.chunks:,} chunks ({counts.rows:,} records) into "
                     f"{counts.macros:,} macro-chunks ({counts.bytes:,} bytes)"
                     + (f", adopted {counts.adopted}" if counts.adopted else "")
                     + (f", {counts.lost} lost to another compactor" if counts.lost else "")
                     + (f", {counts.unreadable} unreadable chunk(s) left as they are: run `tstream fsck`"
                        if counts.unreadable else "")
                     + f"; a full read now opens {len({c.path for c in plan}):,} files"
                     + ("" if before == s.state.compaction else "; replaced files go at `tstream vacuum`")
                     + "\n")
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the admin subcommands to the ``tstream`` parser."""
    p = add_command(sub, common, "scale", run_scale,
                    help="split or merge segments",
                    description="Seal segments and create successors in a new epoch.", epilog=EPILOG_SCALE)
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--split", type=int, metavar="SEGMENT", help="segment id to split")
    how.add_argument("--merge", type=int, nargs="+", metavar="SEGMENT", help="adjacent segment ids to merge")
    p.add_argument("--parts", type=positive_int, default=2, help="with --split: how many parts (default 2)")

    p = add_command(sub, common, "cut", run_cut,
                    help="stream cut at a time",
                    description="Per segment, the first _seq at or after TIME (JSON).",
                    epilog="example:\n  tstream cut file:///tmp/s 2026-11-01T00:00:00Z")
    p.add_argument("time", type=time_ms, help="epoch ms or ISO-8601")

    p = add_command(sub, common, "truncate", run_truncate,
                    help="drop records before a time or cut",
                    description="Move the head: records before BEFORE (or the --cut) become unreadable.",
                    epilog="examples:\n  tstream truncate file:///tmp/s --before 2026-11-01T00:00:00Z --vacuum\n"
                           "  tstream truncate file:///tmp/s --cut '{\"0\": 1200, \"1\": 900}'")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--before", type=time_ms, metavar="T", help="epoch ms or ISO-8601")
    what.add_argument("--cut", metavar="JSON", help="stream cut {segment: seq}")
    p.add_argument("--vacuum", action="store_true", help="delete the files now (no grace period)")

    p = add_command(sub, common, "trim", run_trim,
                    help="apply retention (XTRIM)",
                    description="Apply the stream's retention policy, or the limits given.",
                    epilog="examples:\n  tstream trim file:///tmp/s --maxlen 1000000\n"
                           "  tstream trim file:///tmp/s --max-age 7d")
    p.add_argument("--maxlen", type=positive_int, help="keep the newest N records")
    p.add_argument("--max-age", metavar="DURATION", help="keep this much time (7d, 12h)")
    p.add_argument("--max-bytes", type=positive_int, help="keep about this many bytes")
    p.add_argument("--grace-ms", type=int, default=GC_GRACE_MS, help="delete files truncated this long ago")

    p = add_command(sub, common, "release", run_release,
                    help="end a writer session",
                    description="Stop a writer from holding the tick back (a stopped streaming query "
                                "otherwise holds it until writerLeaseMs passes). `tstream info` lists writers.",
                    epilog="example:\n  tstream release file:///tmp/s query-3f2a9c0d1e4b5a6f")
    p.add_argument("writer", help="writer id")

    p = add_command(sub, common, "compact", run_compact, help="merge small chunks",
                    description="Merge each segment's small chunks into macro-chunks (records are unchanged; "
                                "replaced files go at the next vacuum after its grace period).",
                    epilog="examples:\n  tstream compact file:///tmp/s\n"
                           "  tstream compact file:///tmp/s --target 64MB")
    p.add_argument("--target", metavar="SIZE", help="macro-chunk size (default: the stream's config, 128MB)")
    p.add_argument("--min", type=positive_int, help="pieces per tiered merge (default: the stream's config)")
    p.add_argument("--tiered", action="store_true",
                   help="do what automatic compaction does (size-tiered merges) instead of packing everything")
    add_progress(p)

    p = add_command(sub, common, "vacuum", run_vacuum,
                    help="delete garbage files",
                    description="Delete files of truncated records, and with --orphans unreferenced files "
                                "of failed task attempts (this lists the data folders).")
    p.add_argument("--grace-ms", type=int, default=GC_GRACE_MS)
    p.add_argument("--orphans", action="store_true")
    p.add_argument("--orphan-grace-ms", type=int, default=ORPHAN_GRACE_MS,
                   help="delete unreferenced files this old (at least 1 hour, unless --unsafe-orphan-grace)")
    p.add_argument("--unsafe-orphan-grace", action="store_true",
                   help="accept an orphan grace under 1 hour: only when no writer of the stream is running")
