"""Hybrid timestamps (Milvus TSO): 45-bit physical milliseconds, 18-bit logical counter.

``tso = ms << 18 | logical``, stored as a signed 64-bit BIGINT: the physical part keeps the
63 - 18 = 45 bits below the sign bit, epoch ms ``0..MAX_MS`` (1970-01-01 .. 3084-12-12).
Every time that becomes a ``_tso`` (a client time, a read or seek bound, an option) passes
:func:`check_ms`, so a later time fails instead of wrapping to a negative ``_tso``.

Within a chunk the writer assigns strictly increasing raw values ``a_i`` (the S2 running-max
rule applied to the chunk's own records); the committer then fixes monotonicity against the
stream with a per-chunk floor ``F`` and readers compute ``tso_i = max(a_i, F + i)``, which
equals the running-max rule over the whole segment.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .errors import TimestampError

LOGICAL_BITS = 18
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
#: The largest physical part a ``_tso`` holds (3084-12-12T12:41:28.831Z): the sign bit of a
#: signed 64-bit BIGINT is not available to it.
MAX_MS = (1 << (63 - LOGICAL_BITS)) - 1

_DURATION = re.compile(r"^\s*(-?)\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|m|min|mins|h|hr|hrs|d|day|days|w)?\s*$")
_UNIT_MS = {None: 1000, "ms": 1, "s": 1000, "sec": 1000, "secs": 1000, "m": 60_000, "min": 60_000,
            "mins": 60_000, "h": 3_600_000, "hr": 3_600_000, "hrs": 3_600_000,
            "d": 86_400_000, "day": 86_400_000, "days": 86_400_000, "w": 604_800_000}


#: A time as the API takes it: epoch ms, a datetime, ISO-8601 text or an ago duration like "-15m".
TimeLike = int | str | datetime | None


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def check_ms(ms: int, *, option: str, value: Any) -> int:
    """``ms`` if a ``_tso`` can hold it, else a :class:`TimestampError` naming ``option`` and ``value``."""
    if ms < 0 or ms > MAX_MS:
        raise TimestampError(f"{option}={value!r} is outside {MS_RANGE}")
    return ms


def pack(ms: int, logical: int = 0) -> int:
    """Hybrid timestamp from a physical ms and a logical counter."""
    return (int(ms) << LOGICAL_BITS) | int(logical)


def physical(tso: int) -> int:
    """The millisecond part of a hybrid timestamp."""
    return int(tso) >> LOGICAL_BITS


def logical(tso: int) -> int:
    """The logical part of a hybrid timestamp."""
    return int(tso) & LOGICAL_MASK


def tso_id(tso: int) -> str:
    """Redis-style id ``<ms>-<logical>``."""
    return f"{physical(tso)}-{logical(tso)}"


def parse_id(text: str) -> int:
    """Parse a ``<ms>-<logical>`` id (or a bare ``<ms>``) into a hybrid timestamp."""
    ms, _, lg = text.partition("-")
    try:
        physical_ms, counter = int(ms), int(lg or 0)
    except ValueError as e:
        raise TimestampError(f"id {text!r} is not of the form <ms>-<logical>") from e
    if not 0 <= counter <= LOGICAL_MASK:
        raise TimestampError(f"id {text!r}: the logical part must be 0..{LOGICAL_MASK}")
    return pack(check_ms(physical_ms, option="id", value=text), counter)


def parse_duration_ms(text: str, *, option: str = "duration") -> int:
    """``90s``, ``15m``, ``1h``, ``7d``, ``250ms`` (a bare number means seconds) → ms."""
    match = _DURATION.match(str(text))
    if not match:
        raise TimestampError(
            f"{option}={text!r} is not a duration; use a number and a unit: ms, s, m, h, d, w "
            "(e.g. 90s, 15m, 1h, 7d)"
        )
    if match.group(1):  # a sign dropped silently would turn -5s into 5s
        raise TimestampError(f"{option}={text!r} is negative; a duration is 0 or more (e.g. 90s, 15m, 1h, 7d)")
    return int(float(match.group(2)) * _UNIT_MS[match.group(3)])


def to_ms(value: Any, *, option: str = "timestamp", now: int | None = None, ago: bool = True) -> int:
    """Epoch ms from an int, a datetime, an ISO-8601 string, or an ago duration like ``-15m``.

    Strings that are all digits are epoch milliseconds; strings starting with ``-`` are
    durations before ``now`` (``ago=False``: where the caller refuses them, as Kafka's
    ``startingTimestamp`` would, its messages do not offer them).
    """
    if isinstance(value, bool):
        raise TimestampError(f"{option}={value!r} is not a timestamp")
    if isinstance(value, (int, np.integer)):
        ms = int(value)
    elif isinstance(value, float):
        ms = int(value)
    elif isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        ms = int(dt.timestamp() * 1000)
    elif isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+", text):
            ms = int(text)
        elif text.startswith("-"):
            ms = (now_ms() if now is None else now) - parse_duration_ms(text[1:], option=option)
        else:
            try:
                dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError as e:
                ways = ("epoch ms (1767225600000), ISO-8601 (2026-11-01T00:00:00Z) or an ago duration (-15m)"
                        if ago else "epoch ms (1767225600000) or ISO-8601 (2026-11-01T00:00:00Z)")
                raise TimestampError(f"{option}={value!r} is not a timestamp; use {ways}") from e
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
            ms = int(dt.timestamp() * 1000)
    else:
        raise TimestampError(f"{option}={value!r} has unsupported type {type(value).__name__}")
    return check_ms(ms, option=option, value=value)


def iso(ms: int) -> str:
    """ISO-8601 UTC text of an epoch-ms value."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


#: What :func:`check_ms` accepts, as error messages say it.
MS_RANGE = f"1970-01-01 .. {iso(MAX_MS)} (epoch ms 0..{MAX_MS}, what a hybrid timestamp holds)"


def raw_hybrid(ms: np.ndarray) -> np.ndarray:
    """Strictly increasing hybrid timestamps for records with millisecond times ``ms``.

    The running-max rule ``a_i = max(ms_i << 18, a_{i-1} + 1)`` in vectorized form:
    ``a_i - i = cummax(x_j - j)``.
    """
    x = ms.astype(np.int64) << LOGICAL_BITS
    if len(x) == 0:
        return x
    idx = np.arange(len(x), dtype=np.int64)
    return np.maximum.accumulate(x - idx) + idx


def apply_floor(raw: np.ndarray, floor: int) -> np.ndarray:
    """Final ``_tso`` of a chunk: ``max(a_i, F + i)``."""
    idx = np.arange(len(raw), dtype=np.int64)
    out: np.ndarray = np.maximum(raw, idx + np.int64(floor))
    return out


def final_bounds(raw_first: int, raw_last: int, rows: int, floor: int) -> tuple[int, int]:
    """First and last ``_tso`` of a chunk after its floor, without reading it."""
    return max(raw_first, floor), max(raw_last, floor + rows - 1)


#: Chunk marks (``Chunk.marks``): the final ``_tso`` of rows ``0, step, 2*step, …`` of a chunk,
#: ``step = mark_step(rows)``. The one place that defines where marks fall.
MARKS_MAX = 32


def mark_step(rows: int) -> int:
    """Rows between two marks of a ``rows``-row chunk: the smallest power of two keeping at most
    ``MARKS_MAX`` marks (entries stay small; a chunk of up to ``MARKS_MAX`` rows is exact)."""
    step = 1
    while -(-rows // step) > MARKS_MAX:
        step *= 2
    return step


def raw_marks(raw: np.ndarray, rows: int | None = None) -> tuple[int, ...]:
    """The writer's sample for ``ChunkInfo.marks``: the raw timestamps of the mark rows of a
    chunk whose raw column is ``raw`` (all ``rows`` of it)."""
    return tuple(raw[:: mark_step(len(raw) if rows is None else rows)].tolist())


class MarkSampler:
    """``raw_marks`` for a chunk written in pieces, in bounded memory: keeps every ``step``-th
    raw timestamp, doubling ``step`` (and dropping every other kept value) as rows arrive."""

    def __init__(self) -> None:
        self.rows = 0
        self.step = 1
        self.kept: list[int] = []

    def add(self, raw: np.ndarray) -> None:
        """Sample the next rows' raw timestamps."""
        end = self.rows + len(raw)
        # the step the sample needs once these rows are in, raised before sampling them: a
        # chunk's first piece of 64k rows would otherwise become 64k Python ints, then 64
        while -(-end // self.step) > 2 * MARKS_MAX:
            self.step *= 2
            self.kept = self.kept[::2]
        first = (-self.rows) % self.step
        self.kept.extend(raw[first:: self.step].tolist())
        self.rows = end

    def marks(self) -> tuple[int, ...]:
        """The raw timestamps at rows ``0, step, 2*step, …`` with ``step = mark_step(rows)``."""
        step = mark_step(self.rows)  # a multiple of self.step: both are powers of two, and
        return tuple(self.kept[:: max(step // self.step, 1)])  # kept never exceeds 2 * MARKS_MAX


def final_marks(raw: tuple[int, ...], rows: int, floor: int) -> tuple[int, ...]:
    """Final ``_tso`` at the mark rows, from their raw values and the committed floor."""
    step = mark_step(rows)
    return tuple(max(int(a), floor + k * step) for k, a in enumerate(raw))


def count_raised(raw: np.ndarray, floor: int) -> int:
    """How many records the floor raised (``a_i - i`` is non-decreasing, so they form a prefix)."""
    d = raw - np.arange(len(raw), dtype=np.int64)
    return int(np.searchsorted(d, floor, side="left"))
