"""Bugs the simulation (``tests/test_simulation.py``) found, each pinned without it."""

from __future__ import annotations

import uuid

import pyarrow as pa
from pyspark_tstream.api.stream import Stream

SCHEMA = pa.schema([("id", pa.int64()), ("key", pa.string())])


def _url() -> str:
    return f"memory://sim-found-{uuid.uuid4().hex}/stream"


def test_to_reader_of_a_handle_opened_before_the_first_write_returns_the_columns() -> None:
    """``to_reader`` took its columns from the handle's state before refreshing it: a handle
    opened before the first write read the new records with no user columns."""
    url = _url()
    Stream.create(url, segments=2)
    early = Stream.open(url)  # no schema yet
    Stream.open(url).append(pa.table({"id": [1, 2], "key": ["a", "b"]}, schema=SCHEMA), key="key")
    table = early.to_reader(system_columns=True).read_all()
    assert table.num_rows == 2
    assert sorted(table.column("id").to_pylist()) == [1, 2]
