"""Every error tstream raises on purpose.

One base class, ``TStreamError``; each subclass mixes in the builtin it resembles so callers can
catch either (``except ValueError`` keeps working). Messages name the option, column or file, the
bad value and what to do. Conflicts carry structured ``expected``/``found`` fields, and
``retriable`` tells a retry loop whether trying again can help (as in kafka-python and s2-sdk).

Each class has a stable ``condition`` name (``TSTREAM_SCHEMA_MISMATCH``), like Spark's error
classes: programs and logs match on it instead of on message text, which may be reworded.
:func:`conditions` lists them all.
"""

from __future__ import annotations

from typing import Any, ClassVar


class TStreamError(Exception):
    """Base class of every tstream error."""

    condition: ClassVar[str] = "TSTREAM_ERROR"
    retriable: bool = False


class _AtPath(TStreamError):
    """An error about one stored object: ``path`` is its URI (credentials never included)."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class ConfigError(TStreamError, ValueError):
    """An option or stream-config value is unknown or malformed."""

    condition = "TSTREAM_INVALID_CONFIG"

    def __init__(self, message: str, *, option: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.option = option
        self.value = value


class StreamNotFoundError(TStreamError, FileNotFoundError):
    """No stream exists at the URL; create it first (Stream.create or a first write)."""

    condition = "TSTREAM_STREAM_NOT_FOUND"


class StreamExistsError(TStreamError, FileExistsError):
    """A stream already exists at the URL; open it instead of creating it."""

    condition = "TSTREAM_STREAM_EXISTS"


class InvalidPathError(TStreamError, ValueError):
    """A stream URL or a name inside it is malformed or escapes the stream root."""

    condition = "TSTREAM_INVALID_PATH"


class SchemaMismatchError(TStreamError, ValueError):
    """Data does not match the stream's schema (missing, extra or retyped columns)."""

    condition = "TSTREAM_SCHEMA_MISMATCH"


class TimestampError(TStreamError, ValueError):
    """A timestamp column is missing, null under ``client-require``, or out of range."""

    condition = "TSTREAM_INVALID_TIMESTAMP"


class CorruptChunkError(_AtPath, OSError):
    """A data chunk named by the journal is missing, truncated or unreadable."""

    condition = "TSTREAM_CORRUPT_CHUNK"


class CorruptMetadataError(_AtPath, OSError):
    """A metadata record is unreadable; the stream needs repair from its journal."""

    condition = "TSTREAM_CORRUPT_METADATA"


class UnsupportedFormatError(CorruptMetadataError):
    """Metadata written by a newer tstream format; upgrade pyspark-tstream to read it."""

    condition = "TSTREAM_UNSUPPORTED_FORMAT"

    def __init__(self, message: str, *, path: str, version: int) -> None:
        super().__init__(message, path=path)
        self.version = version


class CommitConflictError(TStreamError, RuntimeError):
    """Another committer took the journal slot; refresh and try again."""

    condition = "TSTREAM_COMMIT_CONFLICT"

    retriable = True

    def __init__(self, message: str, *, expected: int, found: int | None = None) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found


class SegmentSealedError(TStreamError, RuntimeError):
    """A chunk targets a segment that a scale sealed; rewrite it for the successors."""

    condition = "TSTREAM_SEGMENT_SEALED"

    retriable = True

    def __init__(self, message: str, *, segment: int) -> None:
        super().__init__(message)
        self.segment = segment


class DataLossError(TStreamError, RuntimeError):
    """Records a reader needs were removed by truncation or retention."""

    condition = "TSTREAM_DATA_LOSS"

    def __init__(self, message: str, *, lost: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.lost = lost


class StorageError(_AtPath, OSError):
    """The store failed in a way that retrying did not fix."""

    condition = "TSTREAM_STORAGE_FAILURE"

    def __init__(self, message: str, *, path: str, retriable: bool = False) -> None:
        super().__init__(message, path=path)
        self.retriable = retriable


class UnsupportedOperationError(TStreamError, ValueError):
    """The operation is not what tstream supports (e.g. overwrite of a stream)."""

    condition = "TSTREAM_UNSUPPORTED_OPERATION"


class GroupNotFoundError(TStreamError, FileNotFoundError):
    """No consumer group of that name exists on the stream; create it first."""

    condition = "TSTREAM_GROUP_NOT_FOUND"


class GroupExistsError(TStreamError, FileExistsError):
    """A consumer group of that name already exists; open it instead."""

    condition = "TSTREAM_GROUP_EXISTS"


class EntryIdError(TStreamError, ValueError):
    """An entry id is malformed or matches several pending entries."""

    condition = "TSTREAM_INVALID_ENTRY_ID"


def conditions() -> dict[str, type[TStreamError]]:
    """Every condition name and its error class (public classes of this module)."""
    out: dict[str, type[TStreamError]] = {}
    todo: list[type[TStreamError]] = [TStreamError]
    while todo:
        cls = todo.pop()
        if not cls.__name__.startswith("_"):
            out[cls.condition] = cls
        todo.extend(cls.__subclasses__())
    return out
