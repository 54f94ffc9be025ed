"""A batch read's planning workers open a stream once while it is unchanged, and never read a stale one.

Spark runs a batch read's ``schema`` and its ``reader``/``partitions`` in Python workers it
reuses from query to query; opening a stream decodes its newest journal entry, which names
every chunk of its newest commit (12,800 slices for a 200-task write into 64 segments).
:mod:`pyspark_tstream.spark.kept_streams` keeps what a worker opened; these tests pin that a
kept stream is used only while its head is the very same, and that every read still returns
exactly the stream's records at that moment: after an append, and after the stream was deleted
and created again at the same URL.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.datasource.partitions import read_partition
from pyspark_tstream.datasource.source import TStreamDataSource
from pyspark_tstream.spark import kept_streams


def _append(url: str, ids: range) -> None:
    Stream.open(url).append(pa.table({"id": list(ids), "k": [f"k{i % 5}" for i in ids],
                                      "t": pa.array([T0 + i for i in ids], pa.timestamp("ms", tz="UTC"))}),
                            key="k", timestamp="t")


def _ids(url: str, **options: str) -> list[int]:
    source = TStreamDataSource({"path": url, **options})
    reader = source.reader(source.schema())
    return sorted(i for p in reader.partitions() for b in read_partition(p) for i in b.column("id").to_pylist())


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs of every stream opened from its journal (Stream.at), from now on."""
    kept_streams.forget()
    seen: list[str] = []
    real = Stream.at.__func__  # type: ignore[attr-defined]

    def counted(cls: Any, store: Any) -> Stream:
        seen.append(store.url)
        got: Stream = real(cls, store)
        return got

    monkeypatch.setattr(Stream, "at", classmethod(counted))
    yield seen
    kept_streams.forget()


def test_an_unchanged_stream_is_opened_once_by_schema_and_reader(tmp_path: Path, opens: list[str]) -> None:
    url = f"file://{tmp_path}/s"
    Stream.create(url, segments=4)
    _append(url, range(100))
    opens.clear()
    assert _ids(url) == list(range(100))
    assert _ids(url) == list(range(100))
    assert len(opens) == 1  # the second read, and the first read's reader, reused it


def test_an_append_since_is_read(tmp_path: Path, opens: list[str]) -> None:
    url = f"file://{tmp_path}/s"
    Stream.create(url, segments=4)
    _append(url, range(100))
    assert _ids(url) == list(range(100))
    _append(url, range(100, 150))
    assert _ids(url) == list(range(150))


def test_a_stream_created_again_at_the_same_url_is_read_afresh(tmp_path: Path, opens: list[str]) -> None:
    url = f"file://{tmp_path}/s"
    Stream.create(url, segments=4)
    _append(url, range(100))
    _append(url, range(100, 200))
    assert _ids(url) == list(range(200))
    shutil.rmtree(tmp_path / "s")
    Stream.create(url, segments=4)
    _append(url, range(1000, 1030))
    _append(url, range(1030, 1060))  # the same journal positions as the first stream's
    assert _ids(url) == list(range(1000, 1060))


def test_streams_are_kept_apart_by_url_and_options(tmp_path: Path, opens: list[str]) -> None:
    a, b = f"file://{tmp_path}/a", f"file://{tmp_path}/b"
    for url, ids in ((a, range(10)), (b, range(10, 30))):
        Stream.create(url, segments=2)
        _append(url, ids)
    opens.clear()
    assert _ids(a) == list(range(10)) and _ids(b) == list(range(10, 30))
    assert _ids(a, storeRetryTimeout="5s") == list(range(10))
    assert opens == [a, b, a]  # another retry policy is another store
