"""Every error tstream raises on purpose, built in one place: classes, condition names, messages.

One base class, ``TStreamError``; each subclass mixes in the builtin it resembles so callers can
catch either (``except ValueError`` keeps working). Messages name the option, column or file, the
bad value and what to do. Conflicts carry structured ``expected``/``found`` fields, and
``retriable`` tells a retry loop whether trying again can help (as in kafka-python and s2-sdk).

Each class has a stable ``condition`` name (``TSTREAM_SCHEMA_MISMATCH``), like Spark's error
classes: programs and logs match on it instead of on message text, which may be reworded.
:func:`conditions` lists them all. Texts raised from more than one module live once, in
:data:`MESSAGES` (by condition), filled by :func:`error` and the small factories below it.
"""

from __future__ import annotations

from typing import Any, ClassVar

#: A structured field without a default: the constructor requires it.
REQUIRED: Any = object()


class TStreamError(Exception):
    """Base class of every tstream error.

    ``fields`` lists the structured keyword arguments a class takes (name -> default, or
    :data:`REQUIRED`); each becomes an attribute, so no subclass needs its own constructor.
    """

    condition: ClassVar[str] = "TSTREAM_ERROR"
    fields: ClassVar[dict[str, Any]] = {}
    retriable: bool = False

    def __init__(self, message: str, **values: Any) -> None:
        super().__init__(message)
        unknown = sorted(set(values) - set(self.fields))
        if unknown:
            raise TypeError(f"{type(self).__name__} takes no field {unknown[0]!r}")
        for name, default in self.fields.items():
            if name not in values and default is REQUIRED:
                raise TypeError(f"{type(self).__name__} needs the field {name!r}")
            setattr(self, name, values.get(name, default))


class _AtPath(TStreamError):
    """An error about one stored object: ``path`` is its URI (credentials never included)."""

    fields = {"path": REQUIRED}
    path: str


class ConfigError(TStreamError, ValueError):
    """An option or stream-config value is unknown or malformed."""

    condition = "TSTREAM_INVALID_CONFIG"
    fields = {"option": None, "value": None}
    option: str | None
    value: Any


class InvalidCutError(ConfigError):
    """A stream cut names a segment the stream never had, or a position outside what was written."""

    condition = "TSTREAM_INVALID_CUT"


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


class SchemaChangedError(TStreamError, RuntimeError):
    """The stream gained columns after a streaming query fixed its schema; restart the query.

    ``columns`` are the new columns, ``pos`` the journal position of the first commit that
    added one (None when no change record says where: a write by an older tstream).
    """

    condition = "TSTREAM_SCHEMA_CHANGED"
    fields = {"columns": REQUIRED, "pos": None}
    columns: list[str]
    pos: int | None


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
    fields = {"path": REQUIRED, "version": REQUIRED, "feature": None}
    version: int
    #: the feature this build does not know, when a declared one is what refused the object
    feature: str | None


class CommitConflictError(TStreamError, RuntimeError):
    """Another committer took the journal slot; refresh and try again."""

    condition = "TSTREAM_COMMIT_CONFLICT"
    fields = {"expected": REQUIRED, "found": None}
    retriable = True
    expected: int
    found: int | None


class SegmentSealedError(TStreamError, RuntimeError):
    """A chunk targets a segment that a scale sealed; rewrite it for the successors."""

    condition = "TSTREAM_SEGMENT_SEALED"
    fields = {"segment": REQUIRED}
    retriable = True
    segment: int


class StaleWriteError(TStreamError, RuntimeError):
    """A commit stalled past the orphan fence and some of its files are gone (orphan cleanup
    deleted them): nothing was committed; retrying writes the files again."""

    condition = "TSTREAM_STALE_WRITE"
    fields = {"missing": REQUIRED}
    retriable = True
    missing: list[str]


class DataLossError(TStreamError, RuntimeError):
    """Records a reader needs were removed by truncation or retention."""

    condition = "TSTREAM_DATA_LOSS"
    fields = {"lost": REQUIRED}
    lost: list[dict[str, Any]]


class StorageError(_AtPath, OSError):
    """The store failed in a way that retrying did not fix."""

    condition = "TSTREAM_STORAGE_FAILURE"
    fields = {"path": REQUIRED, "retriable": False}


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


# -- messages used from more than one place -----------------------------------------------------
#: Message templates by condition (a ``.`` suffix names a case of it, as in Spark's error
#: classes): the one copy of texts several modules raise. :func:`error` fills them.
MESSAGES: dict[str, str] = {
    "TSTREAM_CORRUPT_METADATA": (
        "{kind} {path} is unreadable ({reason}); run `tstream fsck {url}` to see what it affects and "
        "`tstream repair {url}` to rebuild what the journal holds"),
    "TSTREAM_UNSUPPORTED_FORMAT": (
        "{what}{path} has format version {version}, newer than this pyspark-tstream reads ({reads}); "
        "upgrade pyspark-tstream (pip install -U pyspark-tstream)"),
    "TSTREAM_UNSUPPORTED_FORMAT.FEATURE": (
        "{path} (format version {version}) needs {part} feature {feature!r} (added in {since}), which this "
        "pyspark-tstream ({build}) does not know, so it does not {refused}; upgrade pyspark-tstream "
        "(pip install -U pyspark-tstream)"),
    "TSTREAM_STREAM_NOT_FOUND": (
        "no stream at {url}; create it with Stream.create, `tstream create` or a first write"),
    "TSTREAM_STREAM_EXISTS": "a stream already exists at {url}; open it with Stream.open",
}


def error(name: str, **params: Any) -> TStreamError:
    """The error of condition ``name`` (``CONDITION`` or ``CONDITION.CASE``) with its message
    from :data:`MESSAGES` filled by ``params``; the params its class declares as ``fields``
    become its structured fields."""
    cls = conditions()[name.split(".")[0]]
    return cls(MESSAGES[name].format(**params), **{k: v for k, v in params.items() if k in cls.fields})


def corrupt(kind: str, path: str, e: BaseException, url: str) -> CorruptMetadataError:
    """The one error for an unreadable metadata object: what, where, why, and the remedy.

    ``url`` is the stream's (the remedy names it): ``store.layout.stream_url(path)``, which
    this module cannot call (the store imports the errors).
    """
    reason = f"{type(e).__name__}: {e}" if not isinstance(e, FileNotFoundError) else "it is missing"
    err = error("TSTREAM_CORRUPT_METADATA", kind=kind, path=path, reason=reason, url=url)
    assert isinstance(err, CorruptMetadataError)
    return err


def newer_format(path: str, version: int, reads: int, what: str = "") -> UnsupportedFormatError:
    """Refusal of an object written in format ``version`` by a tstream newer than this one."""
    err = error("TSTREAM_UNSUPPORTED_FORMAT", what=f"{what} " if what else "", path=path, version=version,
                reads=reads)
    assert isinstance(err, UnsupportedFormatError)
    return err
