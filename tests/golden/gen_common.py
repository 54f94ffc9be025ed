"""Helpers shared by the historical fixture generators (pyarrow and json only, no tstream).

Historical: the generators ran once, each against the old commit named in README.md, with
``PYTHONPATH`` resolving ``pyspark_tstream`` to that checkout. They are kept to show how each
fixture was made; running them against today's code would defeat the fixtures' purpose.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from typing import Any

import pyarrow as pa

SCHEMA = pa.schema([
    ("key", pa.string()),
    ("value", pa.float64()),
    ("n", pa.int64()),
    ("ts", pa.timestamp("ms", tz="UTC")),
])
BASE_MS = 1767225600000  # 2026-01-01T00:00:00Z
SYSTEM = ("_segment", "_seq", "_tso", "_timestamp")


def batch(b: int, rows: int = 6) -> pa.Table:
    """Batch ``b``: deterministic rows, keys spread over five values, timestamps 10 ms apart."""
    return pa.table({
        "key": [f"k{(b * 7 + i) % 5}" for i in range(rows)],
        "value": [b * 10.0 + i * 0.5 for i in range(rows)],
        "n": [b * 100 + i for i in range(rows)],
        "ts": pa.array([BASE_MS + b * 1000 + i * 10 for i in range(rows)], pa.timestamp("ms", tz="UTC")),
    }, schema=SCHEMA)


def _cell(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return int(v.timestamp() * 1000) if v.tzinfo else int(v.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)
    return v


def rows_json(table: pa.Table, extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """User (``SCHEMA``'s and ``extra``) and system columns of ``table`` as plain JSON rows
    (timestamps as epoch ms)."""
    cols = [c for c in ("key", "value", "n", "ts", *extra, *SYSTEM) if c in table.column_names]
    return [{c: _cell(r[c]) for c in cols} for r in table.select(cols).to_pylist()]


def out_dir(version: str) -> str:
    """The fixture folder ``tests/golden/<version>``; refuses to overwrite an existing one."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, version)
    if os.path.exists(os.path.join(path, "stream")):
        sys.exit(f"{path}/stream exists: golden fixtures are written once, never regenerated")
    os.makedirs(path, exist_ok=True)
    return path


def write_expected(path: str, expected: dict[str, Any]) -> None:
    with open(os.path.join(path, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
