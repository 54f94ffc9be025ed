"""``tstream create``: a new stream with its config fixed at creation (segments, timestamping, writers)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import keys as K
from ..api.config import TIMESTAMPING_MODES
from ..api.stream import Stream
from .common import add_command, positive_int, storage_options


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


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``create`` to the top-level subparsers ``sub``."""
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
