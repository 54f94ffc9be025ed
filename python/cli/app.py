"""The ``tstream`` command line: S2 / redis-cli style access to streams, without Spark.

This module is the top-level parser, the dispatch and :func:`main`. Each subcommand lives in a
module of its own with a ``register(sub, common)`` that adds it (``create``, ``info``,
``append``, ``read``, consumer groups in ``group``, ``scale``/``cut``/``truncate``/``trim``/
``vacuum`` in ``admin``, ``fsck``/``repair`` in ``fsck``); the parser class, argument types and
storage options they share are in :mod:`~pyspark_tstream.cli.common`, so no two CLI modules
import each other.

Errors the user can act on never show a traceback: they print one ``tstream: error: ...`` line
on stderr. Exit codes: 0 success, 1 runtime error (store, data, missing stream), 2 usage error
(bad arguments, including values the core rejects as config: URL, group name, id, options),
130 interrupted. Set ``TSTREAM_DEBUG=1`` to get the traceback instead. Credentials given as
storage options are never printed: every error line is scrubbed of their values.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..errors import ConfigError, EntryIdError, InvalidPathError, TStreamError
from ..exits import exit_now
from ..version import __version__
from .admin import register as register_admin
from .append import register as register_append
from .common import Parser, key_value, secret_values
from .create import register as register_create
from .fsck import register as register_fsck
from .group import register as register_group
from .history import register as register_history
from .info import register as register_info
from .read import register as register_read

EPILOG = """\
examples:
  tstream create file:///tmp/telemetry --segments 4
  echo '{"device": "d1", "temp": 21.5}' | tstream append file:///tmp/telemetry --key device
  tstream append file:///tmp/telemetry events.parquet --key device --timestamp t
  tstream read file:///tmp/telemetry --ago 15m --format table
  tstream read file:///tmp/telemetry --tail 10 --follow
  tstream info file:///tmp/telemetry
  tstream info file:///tmp/telemetry --segments --format table
  tstream history file:///tmp/telemetry
  tstream group file:///tmp/telemetry create billing --start 0
  tstream group file:///tmp/telemetry read billing worker-1 --count 10 --block 5000
  tstream group file:///tmp/telemetry ack billing 1767225600000-0@0
  tstream info s3://bucket/telemetry --storage-option endpoint_url=http://127.0.0.1:9000
  TSTREAM_STORAGE_OPTIONS='{"token": "/keys/reader.json"}' tstream info gs://bucket/telemetry
  tstream fsck file:///tmp/telemetry         # exit code 1 if anything is damaged
  tstream repair file:///tmp/telemetry

URLs: file:///abs/path (or a bare path), memory://name, s3://bucket/prefix,
abfss://container@account.dfs.core.windows.net/prefix (abfs://, az://container/prefix with
account_name), gs://bucket/prefix (gcs://).
Storage options (endpoint, region, credentials) come from --storage-option KEY=VALUE
(repeatable; JSON-looking values are decoded) or the TSTREAM_STORAGE_OPTIONS environment
variable (a JSON object), which keeps secrets out of shell history; s3fs also reads the usual
AWS_* variables, adlfs the AZURE_* ones and gcsfs GOOGLE_APPLICATION_CREDENTIALS. Credentials
are never printed.
"""


def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, TStreamError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


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

    register_create(sub, common)
    register_info(sub, common)
    register_history(sub, common)
    register_append(sub, common)
    register_read(sub, common)
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


def console() -> NoReturn:
    """The ``tstream`` console script: :func:`main`, then an exit that Arrow's thread pools cannot
    abort once the command is done (:mod:`pyspark_tstream.exits`)."""
    exit_now(main())


if __name__ == "__main__":
    console()
