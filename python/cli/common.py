"""Plumbing every ``tstream`` subcommand module shares: the parser class, argument types, storage options.

Kept apart from :mod:`~pyspark_tstream.cli.app` so that the subcommand modules (``cli_append``,
``cli_admin``, ``cli_group``) and the top-level parser import it, and never each other: the
CLI's modules form a tree, not a cycle. Argument types reject bad values while parsing, so those
are usage errors (exit 2); storage-option values that are credentials are never echoed.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any, NoReturn

from ..api.stream import Stream
from ..errors import ConfigError, TStreamError
from ..store.failures import secret_values as store_secret_values
from ..timestamps import parse_duration_ms, to_ms

STORAGE_ENV = "TSTREAM_STORAGE_OPTIONS"
URL_HELP = ("stream URL: file:///path, memory://name, s3://bucket/prefix, "
            "abfss://container@account.dfs.core.windows.net/prefix or gs://bucket/prefix")


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"tstream: error: {message} (see '{self.prog} --help')\n")


def add_command(sub: Any, common: argparse.ArgumentParser, name: str, run: Callable[[argparse.Namespace], int],
                **kwargs: Any) -> argparse.ArgumentParser:
    """Add subcommand ``name`` taking a stream URL first; ``kwargs`` go to ``add_parser`` (help, ...)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p: argparse.ArgumentParser = sub.add_parser(name, parents=[common], formatter_class=fmt, **kwargs)
    p.add_argument("url", help=URL_HELP)
    p.set_defaults(run=run)
    return p


def add_progress(p: argparse.ArgumentParser) -> None:
    """``--progress``: the progress bar on stderr also when it is not a terminal."""
    p.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")


# -- argument types ---------------------------------------------------------------------------
def _arg(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return convert(text)
        except (TStreamError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e)) from e

    parse.__name__ = convert.__name__
    return parse


def _positive(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"{text!r} is not a positive integer")
    return int(text)


def _count(text: str) -> int:
    if not text.strip().isdigit():
        raise ValueError(f"{text!r} is not a non-negative integer")
    return int(text)


def _millis(text: str) -> int:
    """Milliseconds: a bare integer (as Redis takes BLOCK/min-idle) or a duration like ``5s``."""
    return int(text) if text.strip().isdigit() else parse_duration_ms(text, option="duration")


def _time(text: str) -> int:
    return to_ms(text, option="time")


def _duration(text: str) -> int:
    return parse_duration_ms(text)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        # never echo the text: it may be a credential typed without its key
        raise ValueError("expected KEY=VALUE, e.g. endpoint_url=http://127.0.0.1:9000")
    return key.strip(), value


positive_int, count_int, millis, time_ms, duration_ms, key_value = (
    _arg(f) for f in (_positive, _count, _millis, _time, _duration, _key_value))


# -- shared plumbing ----------------------------------------------------------------------------
def _raw_storage(args: argparse.Namespace) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    env = os.environ.get(STORAGE_ENV)
    if env:
        try:
            given = json.loads(env)
        except ValueError:
            given = None
        if not isinstance(given, dict):
            raise ConfigError(f"{STORAGE_ENV} must hold a JSON object like "
                              '{"endpoint_url": "http://127.0.0.1:9000"}', option=STORAGE_ENV)
        raw.update((f"storage.{k}", v) for k, v in given.items())
    raw.update((f"storage.{k}", v) for k, v in getattr(args, "storage_option", None) or [])
    return raw


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    """fsspec options from ``TSTREAM_STORAGE_OPTIONS`` and ``--storage-option`` (which wins)."""
    from ..conf.options import storage_options_from

    return storage_options_from(_raw_storage(args))


def secret_values(args: argparse.Namespace) -> list[str]:
    """Credential values among the storage options, longest first, to redact from output."""
    try:
        return list(store_secret_values(_raw_storage(args)))
    except ConfigError:
        return []


def open_stream(args: argparse.Namespace) -> Stream:
    """The stream at ``args.url`` with the storage options of the command line and environment."""
    return Stream.open(args.url, storage_options=storage_options(args))
