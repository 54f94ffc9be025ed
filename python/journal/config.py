"""The stream config as a journal state stores it: its settings, typed, and their stored form.

The stored form is a JSON object keyed by the Python field names (``segments``,
``writer_lease_ms``, ...), written once at creation and copied into every later state. A stream
created before a setting existed stores no key for it: the setting reads as its default and the
object is written back without the key, so a state re-encodes byte for byte. Keys this version
does not know (a later version's) are kept and written back as they were.

Checking values a user gives (the policy texts need the parsers of the layers above) is
:class:`~pyspark_tstream.api.config.StreamConfig`'s job; this record only decodes what a
creation checked, refusing a wrong-typed stored value (``TypeError``: corrupt metadata).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from .. import keys as K

_C = TypeVar("_C", bound="ConfigRecord")


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_text_or_none(v: Any) -> bool:
    return v is None or isinstance(v, str)


#: Stored key -> the check its stored value passes (a wrong type is corrupt metadata).
_STORED_TYPES: dict[str, Any] = {
    "segments": _is_int,
    "timestamping": lambda v: isinstance(v, str),
    "timestamping_uncapped": lambda v: isinstance(v, bool),
    "writers": lambda v: isinstance(v, list) and all(isinstance(w, str) for w in v),
    "writer_lease_ms": _is_int,
    "writer_retention_ms": _is_int,
    "retention": _is_text_or_none,
    "scaling": _is_text_or_none,
    "compression": lambda v: isinstance(v, str),
    "compaction": lambda v: isinstance(v, str),
}


@dataclass(frozen=True)
class ConfigRecord:
    """Settings fixed at stream creation, as stored in the journal state (field meanings:
    :class:`~pyspark_tstream.api.config.StreamConfig`)."""

    segments: int = K.SEGMENTS_DEFAULT
    timestamping: str = K.TIMESTAMPING_DEFAULT
    timestamping_uncapped: bool = K.TIMESTAMPING_UNCAPPED_DEFAULT
    writers: tuple[str, ...] = K.WRITERS_DEFAULT
    writer_lease_ms: int = K.WRITER_LEASE_MS_DEFAULT
    writer_retention_ms: int = K.WRITER_RETENTION_MS_DEFAULT
    retention: str | None = None
    scaling: str | None = None
    compression: str = K.COMPRESSION_DEFAULT
    compaction: str = K.COMPACTION_DEFAULT
    #: The stored object's keys in order, with the values of those this version does not know;
    #: None for a config made here (every setting is stored). Not a setting: left out of
    #: equality, and ``dataclasses.replace`` starts afresh.
    _stored: tuple[tuple[str, Any], ...] | None = field(default=None, init=False, compare=False, repr=False)

    #: The settings, in stored order (one definition for both directions).
    FIELDS: ClassVar[tuple[str, ...]] = ("segments", "timestamping", "timestamping_uncapped", "writers",
                                         "writer_lease_ms", "writer_retention_ms", "retention", "scaling",
                                         "compression", "compaction")

    def to_dict(self) -> dict[str, Any]:
        """Every setting as plain primitives, keyed by field name (``writers`` a list)."""
        d = {name: getattr(self, name) for name in self.FIELDS}
        d["writers"] = list(self.writers)
        return d

    def to_json(self) -> dict[str, Any]:
        """The stored form: the keys the stream stored (all of them for a config made here)."""
        values = self.to_dict()
        if self._stored is None:
            return values
        return {k: values[k] if k in values else v for k, v in self._stored}

    @classmethod
    def from_json(cls: type[_C], d: Mapping[str, Any]) -> _C:
        """The record of a stored config; ``TypeError`` naming the key if a value has the wrong type."""
        if not isinstance(d, Mapping):
            raise TypeError("state.config has the wrong type")
        for k, ok in _STORED_TYPES.items():
            if k in d and not ok(d[k]):
                raise TypeError(f"state.config.{k} has the wrong type ({d[k]!r})")
        vals = {k: d[k] for k in cls.FIELDS if k in d}
        if "writers" in vals:
            vals["writers"] = tuple(vals["writers"])
        rec = cls(**vals)
        object.__setattr__(rec, "_stored", tuple(d.items()))
        return rec

