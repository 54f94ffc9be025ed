"""The Python API of docs/design.md §4: create/open/append/read/info, routing, seeks, bad input."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import sys
import typing
from datetime import datetime, timezone
from functools import cached_property
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark_tstream import Stream as LazyStream
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.epochs.routing import KEY_SPACE, key_hash, route
from pyspark_tstream.errors import (
    ConfigError,
    CorruptChunkError,
    InvalidPathError,
    SchemaMismatchError,
    StreamExistsError,
    StreamNotFoundError,
)


def _events(n: int, start_ms: int = 1_000_000, step: int = 10, keys: int = 7) -> pa.Table:
    return pa.table({"key": [f"dev-{i % keys}" for i in range(n)], "v": list(range(n)),
                     "t": [start_ms + i * step for i in range(n)]})


def test_create_open_and_exists(url: str) -> None:
    assert LazyStream is Stream
    with pytest.raises(StreamNotFoundError, match="no stream at"):
        Stream.open(url)
    Stream.create(url, segments=3)
    with pytest.raises(StreamExistsError, match="already exists"):
        Stream.create(url)
    s = Stream.open(url)
    assert len(s.state.segments) == 3 and s.schema is None
    assert s.read().num_rows == 0


def test_same_key_same_segment_in_order(url: str) -> None:
    s = Stream.create(url, segments=4)
    for b in range(3):
        s.append(_events(300, start_ms=1_000_000 + b * 10_000), key="key", timestamp="t")
    t = s.read()
    assert t.num_rows == 900
    per_key = t.group_by("key").aggregate([("_segment", "count_distinct")])
    assert set(per_key["_segment_count_distinct"].to_pylist()) == {1}
    assert len(set(t["_segment"].to_pylist())) > 1
    for k in ("dev-0", "dev-3"):
        part = t.filter(pc.equal(t["key"], k))
        assert np.all(np.diff(part["_tso"].to_numpy()) > 0)
        assert np.all(np.diff(part["_seq"].to_numpy()) > 0)


def test_read_ranges_limit_and_ago(url: str) -> None:
    s = Stream.create(url, segments=2)
    s.append(_events(100), key="key", timestamp="t")
    assert s.read(start=1_000_500).num_rows == 50
    assert s.read(start=1_000_500, end=1_000_600)["v"].to_pylist() == list(range(50, 60))
    iso = datetime.fromtimestamp(1_000_990 / 1000, tz=timezone.utc).isoformat()
    assert s.read(start=iso)["v"].to_pylist() == [99]
    assert s.read(limit=5)["v"].to_pylist() == [0, 1, 2, 3, 4]
    assert s.read(start=1_000_200, limit=3)["v"].to_pylist() == [20, 21, 22]
    assert s.read(start="-1h").num_rows == 0  # these events are from 1970
    recent = Stream.create(url + "-now", segments=1)
    recent.append([{"x": 1}])
    assert recent.read(start="-1h")["x"].to_pylist() == [1]
    t = s.read(columns=["v", "_tso"])
    assert t.column_names == ["v", "_tso"]


def test_read_returns_system_columns_with_exact_types(url: str) -> None:
    s = Stream.create(url, segments=1)
    s.append(_events(3), timestamp="t")
    t = s.read()
    assert t.schema.field("_timestamp").type == pa.timestamp("ms", tz="UTC")
    for name in ("_tso", "_segment", "_seq"):
        assert t.schema.field(name).type == pa.int64()
    assert t.column_names == ["key", "v", "t", "_timestamp", "_tso", "_segment", "_seq"]


def test_seek_tail_exact(url: str) -> None:
    s = Stream.create(url, segments=3)
    for b in range(5):
        s.append(_events(40, start_ms=2_000_000 + b * 1_000, step=3), key="key", timestamp="t")
    everything = s.read()
    for n in (1, 7, 40, 199, 200, 500):
        lo = s.seek_tail(n)
        tail = everything.filter(pc.greater(everything["_tso"], lo))
        assert tail.num_rows == min(n, 200)
        assert tail["_tso"].to_pylist() == everything["_tso"].to_pylist()[-min(n, 200):]


def test_info_reports_tick_segments_writers(url: str) -> None:
    s = Stream.create(url, segments=2)
    with s.writer("producer-1") as p:
        ack = p.append(_events(10), key="key", timestamp="t", batch_id=0)
        info = s.info()
        assert info.writers["producer-1"].live is True
    info = s.info()
    assert info.writers["producer-1"].live is False
    assert info.rows == 10 and len(info.segments) == 2
    assert info.segments[0].key_range == (0.0, 0.5)
    assert info.first_id == "1000000-0" and info.last_id == ack.last_id
    assert info.tick_id == ack.last_id.split("-")[0] + "-262143"  # the end of that millisecond
    assert info.schema == ("key string", "v int64", "t int64")


def test_routing_hash_is_stable_and_vectorized() -> None:
    # pinned values: changing the hash would split keys of existing streams across segments
    h = key_hash(pa.array(["", "a", "device-42", None]))
    assert h.dtype == np.uint64 and len(set(h.tolist()[:3])) == 3
    assert h.tolist()[2] == 5330338468922747192 and h.tolist()[1] == 4824385676517010403
    assert key_hash(pa.array(["device-42"])).tolist() == key_hash(pa.array(["x", "device-42"])).tolist()[1:]
    assert key_hash(pa.array(["a"], pa.large_string())).tolist() == key_hash(pa.array(["a"])).tolist()
    ints = key_hash(pa.array([1, 2, 3], pa.int32()))
    assert ints.tolist() == key_hash(pa.array([1, 2, 3], pa.int64())).tolist()
    spread = route(key_hash(pa.array([f"k{i}" for i in range(10_000)])), [i * KEY_SPACE // 4 for i in range(4)])
    counts = np.bincount(spread, minlength=4)
    assert counts.min() > 2_000
    with pytest.raises(SchemaMismatchError, match="keyColumn 'm' has type"):
        key_hash(pa.array([{"a": 1}]), name="m")


# -- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["memory://bucket/../other", "file:///tmp/a/../../etc", "", "s3://"],
                         ids=["memory-dotdot", "file-dotdot", "empty", "no-bucket"])
def test_urls_that_escape_root_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidPathError):
        Stream.open(bad)


def test_corrupt_chunk_error_names_file(url: str) -> None:
    s = Stream.create(url, segments=1)
    ack = s.append(_events(5), timestamp="t")
    path = s.journal.read_entry(ack.pos).chunks[0].path
    s.store.write(path, b"PAR1 not really parquet")
    with pytest.raises(CorruptChunkError, match=path):
        s.read()
    s.store.delete([path])
    with pytest.raises(CorruptChunkError, match=f"{path}.*missing"):
        s.read()
    # the stream stays usable: metadata and later commits are fine
    s.append(_events(2, start_ms=5_000_000), timestamp="t")
    assert s.read(start=5_000_000).num_rows == 2


def test_bad_config_and_data_types(url: str) -> None:
    with pytest.raises(ConfigError, match="timestamping='sometimes'.*client-prefer"):
        Stream.create(url, timestamping="sometimes")
    with pytest.raises(ConfigError, match="segments=0"):
        Stream.create(url, segments=0)
    with pytest.raises(ConfigError, match=r"unknown stream config \['segmnets'\]"):
        Stream.create(url, segmnets=3)
    s = Stream.create(url)
    with pytest.raises(TypeError, match="append takes"):
        s.append(42)
    with pytest.raises(SchemaMismatchError, match="keyColumn 'nope' is not a column"):
        s.append([{"a": 1}], key="nope")
    assert s.refresh().pos == 0


def test_system_columns_are_not_stored_twice(url: str) -> None:
    src = Stream.create(url + "-src", segments=1)
    src.append(_events(4), timestamp="t")
    dst = Stream.create(url + "-dst", segments=1)
    dst.append(src.read(), timestamp="_timestamp")
    t = dst.read()
    assert t.column_names == ["key", "v", "t", "_timestamp", "_tso", "_segment", "_seq"]
    assert t["_timestamp"].to_pylist() == src.read()["_timestamp"].to_pylist()


def test_file_backend_never_leaves_temp_files(tmp_path: object) -> None:
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=1)
    for i in range(3):
        s.append([{"i": i}])
    leftovers = [f for _, _, files in os.walk(str(tmp_path)) for f in files if f.endswith(".tmp")]
    assert leftovers == []


def _type_checking_names(module: ModuleType) -> dict[str, Any]:
    """The names ``module`` imports only for type checkers (its ``if TYPE_CHECKING:`` block),
    imported here: parts load lazily, so their types are not in the module's namespace."""
    names: dict[str, Any] = {}
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom), ast.dump(imp)
                source = importlib.import_module("." * imp.level + (imp.module or ""), module.__package__)
                names.update({a.asname or a.name: getattr(source, a.name) for a in imp.names})
    return names


def test_type_hints_of_the_public_stream_methods_resolve() -> None:
    """``typing.get_type_hints`` works on every public ``Stream`` method and property: each name
    an annotation uses is imported (for real, or for type checkers only)."""
    module = sys.modules[Stream.__module__]
    namespace = {**vars(module), **_type_checking_names(module)}
    checked = []
    for name, member in vars(Stream).items():
        if name.startswith("_"):
            continue
        fn = member.fget if isinstance(member, property) else \
            member.func if isinstance(member, cached_property) else getattr(member, "__func__", member)
        if callable(fn):
            assert "return" in typing.get_type_hints(fn, globalns=namespace), name
            checked.append(name)
    assert {"open", "create", "append", "read", "commit", "compact", "verify"} <= set(checked)
