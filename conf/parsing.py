"""Typed parsers for option values: each names the key, the bad value and what is accepted.

Spark hands every option over as a string in a lower-cased, case-insensitive dict; the Python
API may pass plain dicts with real types (``5``, ``True``) and any key case. Every parser takes
either, looks the key up case-insensitively, treats a missing key or ``None`` as "use the
default", and raises :class:`~pyspark_tstream.errors.ConfigError` with ``option`` and ``value``
set. A key that looks like a credential never has its value echoed (see :func:`is_secret_key`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, overload

from .. import keys as K
from ..errors import ConfigError, TimestampError
from ..store.failures import is_secret_key
from ..timestamps import parse_duration_ms, to_ms
from ..units import size_bytes

MASK = "***"

# Substrings that mark a credential anywhere in a key, plus whole words that do so only as a
# word ("storage.key", "account_key", "aws_access_key_id", but not "keyColumn").
def shown(key: str, value: Any) -> str:
    """``repr(value)`` for messages, or a mask when ``key`` names a credential."""
    return MASK if is_secret_key(key) else repr(value)


def config_error(key: str, value: Any, problem: str) -> ConfigError:
    """A ``ConfigError`` reading ``<key>=<value> <problem>``, with the value masked if secret."""
    secret = is_secret_key(key)
    return ConfigError(f"{key}={MASK if secret else repr(value)} {problem}", option=key,
                       value=MASK if secret else value)


def lookup(opts: Mapping[str, Any], key: str) -> Any:
    """The value of ``key`` in ``opts`` whatever the case of either; ``None`` if absent."""
    if key in opts:
        return opts[key]
    low = key.lower()
    if low in opts:
        return opts[low]
    for k, v in opts.items():
        if k.lower() == low:
            return v
    return None


def _text(key: str, raw: Any) -> str:
    """Stripped text of a raw value; blank text is an error rather than a silent default."""
    text = str(raw).strip()
    if not text:
        raise config_error(key, raw, "is empty; remove the option or give it a value")
    return text


@overload
def option_as_str(opts: Mapping[str, Any], key: str, default: str) -> str: ...
@overload
def option_as_str(opts: Mapping[str, Any], key: str, default: None = None) -> str | None: ...


def option_as_str(opts: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    """A non-blank string, stripped."""
    raw = lookup(opts, key)
    return default if raw is None else _text(key, raw)


@overload
def option_as_int(opts: Mapping[str, Any], key: str, default: int, *, min_value: int | None = None,
                  max_value: int | None = None) -> int: ...
@overload
def option_as_int(opts: Mapping[str, Any], key: str, default: None = None, *,
                  min_value: int | None = None, max_value: int | None = None) -> int | None: ...


def option_as_int(opts: Mapping[str, Any], key: str, default: int | None = None, *,
                  min_value: int | None = None, max_value: int | None = None) -> int | None:
    """An integer (decimal digits), optionally bounded ``min_value <= n <= max_value``."""
    raw = lookup(opts, key)
    if raw is None:
        return default
    if isinstance(raw, bool):
        raise config_error(key, raw, "is not an integer")
    if isinstance(raw, int):
        value = raw
    else:
        text = _text(key, raw)
        if not re.fullmatch(r"[+-]?\d+", text):
            raise config_error(key, raw, "is not an integer; use decimal digits like 1000")
        value = int(text)
    _check_bounds(key, raw, value, min_value, max_value)
    return value


def _check_bounds(key: str, raw: Any, value: int, lo: int | None, hi: int | None) -> None:
    if lo is not None and value < lo:
        raise config_error(key, raw, f"must be at least {lo}" if lo != 1 else "must be positive")
    if hi is not None and value > hi:
        raise config_error(key, raw, f"must be at most {hi}")


@overload
def option_as_bool(opts: Mapping[str, Any], key: str, default: bool) -> bool: ...
@overload
def option_as_bool(opts: Mapping[str, Any], key: str, default: None = None) -> bool | None: ...


def option_as_bool(opts: Mapping[str, Any], key: str, default: bool | None = None) -> bool | None:
    """``true`` or ``false``, any case (as Spark's own boolean options)."""
    raw = lookup(opts, key)
    if raw is None or isinstance(raw, bool):
        return default if raw is None else raw
    text = _text(key, raw).lower()
    if text not in ("true", "false"):
        raise config_error(key, raw, "is not a boolean; use true or false")
    return text == "true"


@overload
def option_as_duration_ms(opts: Mapping[str, Any], key: str, default: int, *,
                          min_value: int | None = 0) -> int: ...
@overload
def option_as_duration_ms(opts: Mapping[str, Any], key: str, default: None = None, *,
                          min_value: int | None = 0) -> int | None: ...


def option_as_duration_ms(opts: Mapping[str, Any], key: str, default: int | None = None, *,
                          min_value: int | None = 0) -> int | None:
    """A duration like ``90s``, ``15m``, ``1h``, ``7d``, ``250ms`` (bare number: seconds) → ms."""
    raw = lookup(opts, key)
    if raw is None:
        return default
    try:
        value = parse_duration_ms(_text(key, raw), option=key)
    except TimestampError as e:
        raise ConfigError(str(e), option=key, value=raw) from e
    _check_bounds(key, raw, value, min_value, None)
    return value


@overload
def option_as_timestamp_ms(opts: Mapping[str, Any], key: str, default: int, *,
                           now: int | None = None) -> int: ...
@overload
def option_as_timestamp_ms(opts: Mapping[str, Any], key: str, default: None = None, *,
                           now: int | None = None) -> int | None: ...


def option_as_timestamp_ms(opts: Mapping[str, Any], key: str, default: int | None = None, *,
                           now: int | None = None) -> int | None:
    """Epoch ms from epoch-ms digits or ISO-8601 (``2026-11-01T00:00:00Z``), as Kafka's
    ``startingTimestamp`` takes it: a negative value is refused (before 1970 to Kafka users, "ago"
    to the core's parser), pointing to ``startingAgo``."""
    raw = lookup(opts, key)
    if raw is None:
        return default
    if (isinstance(raw, str) and raw.strip().startswith("-")) or (
            isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw < 0):
        raise ConfigError(f"{key}={raw!r} is negative; {key} takes epoch ms (0 or more) or ISO-8601 "
                          f"(2026-11-01T00:00:00Z); for a time before now use {K.STARTING_AGO}=<duration> "
                          "(90s, 15m, 1h, 7d)", option=key, value=raw)
    try:
        return to_ms(raw if not isinstance(raw, str) else _text(key, raw), option=key, now=now, ago=False)
    except TimestampError as e:
        raise ConfigError(str(e), option=key, value=raw) from e


@overload
def option_as_choice(opts: Mapping[str, Any], key: str, default: str,
                     choices: Sequence[str]) -> str: ...
@overload
def option_as_choice(opts: Mapping[str, Any], key: str, default: None,
                     choices: Sequence[str]) -> str | None: ...


def option_as_choice(opts: Mapping[str, Any], key: str, default: str | None,
                     choices: Sequence[str]) -> str | None:
    """One of ``choices``, matched without regard to case; returns the canonical spelling."""
    raw = lookup(opts, key)
    if raw is None:
        return default
    text = _text(key, raw)
    for choice in choices:
        if choice.lower() == text.lower():
            return choice
    raise config_error(key, raw, f"is not one of {', '.join(choices)}")


def option_as_list(opts: Mapping[str, Any], key: str,
                   default: Sequence[str] = ()) -> list[str]:
    """Comma-separated names (or a JSON list of strings); blanks dropped, items stripped."""
    raw = lookup(opts, key)
    if raw is None:
        return list(default)
    if isinstance(raw, str) and raw.strip().startswith("["):
        items = option_as_json(opts, key)
    elif isinstance(raw, str):
        items = raw.split(",")
    else:
        items = raw
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
        raise config_error(key, raw, "is not a list of names; use a,b,c or a JSON list of strings")
    return [i.strip() for i in items if i.strip()]


def option_as_json(opts: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """A JSON document (values already decoded in the Python API are returned as they are)."""
    raw = lookup(opts, key)
    if raw is None or not isinstance(raw, str):
        return default if raw is None else raw
    try:
        return json.loads(_text(key, raw))
    except json.JSONDecodeError as e:
        raise config_error(key, raw, f"is not valid JSON ({e.msg} at column {e.colno})") from e


@overload
def option_as_bytes(opts: Mapping[str, Any], key: str, default: int, *,
                    min_value: int | None = 1) -> int: ...
@overload
def option_as_bytes(opts: Mapping[str, Any], key: str, default: None = None, *,
                    min_value: int | None = 1) -> int | None: ...


def option_as_bytes(opts: Mapping[str, Any], key: str, default: int | None = None, *,
                    min_value: int | None = 1) -> int | None:
    """A size: bytes (``1048576``) or with a unit like Spark's (``64m``, ``64MB``, ``1g``, ``1GiB``).

    Units are binary, as in Spark's byte-size configs: ``64MB`` is 64 × 2**20 bytes.
    """
    raw = lookup(opts, key)
    if raw is None:
        return default
    if isinstance(raw, bool):
        raise config_error(key, raw, "is not a size")
    if isinstance(raw, int):
        value = raw
    else:
        size = size_bytes(_text(key, raw))
        if size is None:
            raise config_error(key, raw, "is not a size; use bytes or a unit: k, m, g, t (e.g. 64MB, 1g)")
        value = size
    _check_bounds(key, raw, value, min_value, None)
    return value
