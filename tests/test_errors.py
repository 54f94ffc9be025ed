"""Errors: one module, one stable condition name per error class, wording and builtins kept."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from pyspark_tstream import errors
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import (
    CorruptChunkError,
    SchemaMismatchError,
    StorageError,
    StreamNotFoundError,
    TStreamError,
    conditions,
)


def _classes() -> list[type[TStreamError]]:
    return [c for c in vars(errors).values()
            if isinstance(c, type) and issubclass(c, TStreamError) and not c.__name__.startswith("_")]


def test_every_error_class_names_its_own_stable_condition() -> None:
    classes = _classes()
    assert len(classes) >= 16
    for cls in classes:
        # declared on the class itself: a new error must not silently inherit its parent's name
        assert "condition" in vars(cls), f"{cls.__name__} declares no condition"
        assert re.fullmatch(r"TSTREAM_[A-Z_]+", cls.condition), cls.condition
    assert len({c.condition for c in classes}) == len(classes), "condition names must be unique"
    assert conditions() == {c.condition: c for c in classes}


def test_callers_match_on_the_condition_and_the_message_is_unchanged(tmp_path: object) -> None:
    with pytest.raises(StreamNotFoundError) as missing:
        Stream.open("memory://test-errors-missing")
    assert missing.value.condition == "TSTREAM_STREAM_NOT_FOUND"
    assert isinstance(missing.value, FileNotFoundError)
    assert str(missing.value).startswith("no stream at memory://")

    s = Stream.create("memory://test-errors-schema")
    s.append(pa.table({"a": [1]}))
    with pytest.raises(SchemaMismatchError) as bad:
        s.append(pa.table({"a": ["x"]}))
    assert bad.value.condition == "TSTREAM_SCHEMA_MISMATCH" and isinstance(bad.value, ValueError)
    assert "columns with another type: a" in str(bad.value)


def test_errors_about_stored_objects_carry_the_path() -> None:
    chunk = CorruptChunkError("chunk memory://s/data/0/x.parquet is corrupt", path="memory://s/data/0/x.parquet")
    assert isinstance(chunk, OSError) and chunk.path == "memory://s/data/0/x.parquet"
    assert str(chunk) == "chunk memory://s/data/0/x.parquet is corrupt"
    failed = StorageError("gave up", path="s3://b/k", retriable=True)
    assert failed.path == "s3://b/k" and failed.retriable and failed.condition == "TSTREAM_STORAGE_FAILURE"
    assert not StorageError("gave up", path="s3://b/k").retriable


def test_shared_messages_come_from_one_table() -> None:
    """Texts raised from several modules are written once (errors.MESSAGES), by condition."""
    from pyspark_tstream.errors import (
        MESSAGES,
        CommitConflictError,
        CorruptMetadataError,
        UnsupportedFormatError,
        corrupt,
        error,
        newer_format,
    )

    assert {m.split(".")[0] for m in MESSAGES} <= set(conditions())  # CONDITION or CONDITION.CASE
    gone = error("TSTREAM_STREAM_NOT_FOUND", url="memory://x")
    assert isinstance(gone, StreamNotFoundError)
    assert str(gone) == "no stream at memory://x; create it with Stream.create, `tstream create` or a first write"
    newer = newer_format("s3://b/s/_tstream/groups/g/head.json", 9, 2, "consumer-group record")
    assert isinstance(newer, UnsupportedFormatError) and newer.version == 9
    assert str(newer).startswith("consumer-group record s3://b/s/_tstream/groups/g/head.json has format version 9")
    assert "upgrade pyspark-tstream" in str(newer)
    bad = corrupt("index node", "file:///d/s/_tstream/index/1/0.json", ValueError("x"), "file:///d/s")
    assert isinstance(bad, CorruptMetadataError) and bad.path.endswith("0.json")
    assert "`tstream repair file:///d/s`" in str(bad)
    # structured fields are declared once per class; a wrong or missing one is a programming error
    assert CommitConflictError("lost", expected=3).found is None
    with pytest.raises(TypeError, match="needs the field 'expected'"):
        CommitConflictError("lost")
    with pytest.raises(TypeError, match="takes no field 'segment'"):
        CommitConflictError("lost", expected=1, segment=2)
