"""Every error tstream raises on purpose.

One base class, ``TStreamError``; each subclass mixes in the builtin it resembles so callers can
catch either (``except ValueError`` keeps working). Messages name the option, column or file, the
bad value and what to do. Conflicts carry structured ``expected``/``found`` fields, and
``retriable`` tells a retry loop whether trying again can help (as in kafka-python and s2-sdk).
"""

from __future__ import annotations

from typing import Any


class TStreamError(Exception):
    """Base class of every tstream error."""

    retriable: bool = False


class ConfigError(TStreamError, ValueError):
    """An option or stream-config value is unknown or malformed."""

    def __init__(self, message: str, *, option: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.option = option
        self.value = value


class StreamNotFoundError(TStreamError, FileNotFoundError):
    """No stream exists at the URL; create it first (Stream.create or a first write)."""


class StreamExistsError(TStreamError, FileExistsError):
    """A stream already exists at the URL; open it instead of creating it."""


class InvalidPathError(TStreamError, ValueError):
    """A stream URL or a name inside it is malformed or escapes the stream root."""


class SchemaMismatchError(TStreamError, ValueError):
    """Data does not match the stream's schema (missing, extra or retyped columns)."""


class TimestampError(TStreamError, ValueError):
    """A timestamp column is missing, null under ``client-require``, or out of range."""


class CorruptChunkError(TStreamError, OSError):
    """A data chunk named by the journal is missing, truncated or unreadable."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class CorruptMetadataError(TStreamError, OSError):
    """A metadata record is unreadable; the stream needs repair from its journal."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class UnsupportedFormatError(CorruptMetadataError):
    """Metadata written by a newer tstream format; upgrade pyspark-tstream to read it."""

    def __init__(self, message: str, *, path: str, version: int) -> None:
        super().__init__(message, path=path)
        self.version = version


class CommitConflictError(TStreamError, RuntimeError):
    """Another committer took the journal slot; refresh and try again."""

    retriable = True

    def __init__(self, message: str, *, expected: int, found: int | None = None) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found


class SegmentSealedError(TStreamError, RuntimeError):
    """A chunk targets a segment that a scale sealed; rewrite it for the successors."""

    retriable = True

    def __init__(self, message: str, *, segment: int) -> None:
        super().__init__(message)
        self.segment = segment


class DataLossError(TStreamError, RuntimeError):
    """Records a reader needs were removed by truncation or retention."""

    def __init__(self, message: str, *, lost: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.lost = lost


class StorageError(TStreamError, OSError):
    """The store failed in a way that retrying did not fix."""

    def __init__(self, message: str, *, path: str, retriable: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.retriable = retriable


class UnsupportedOperationError(TStreamError, ValueError):
    """The operation is not what tstream supports (e.g. overwrite of a stream)."""


class GroupNotFoundError(TStreamError, FileNotFoundError):
    """No consumer group of that name exists on the stream; create it first."""


class GroupExistsError(TStreamError, FileExistsError):
    """A consumer group of that name already exists; open it instead."""


class EntryIdError(TStreamError, ValueError):
    """An entry id is malformed or matches several pending entries."""
