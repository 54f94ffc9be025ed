"""Format features: what a reader or a writer must know to handle a stream, named one by one.

One job: the single check every stored object passes before it is trusted. Each object kind
(journal entries, checkpoints, epoch history chunks, first-write markers, group-commit requests,
consumer-group records, macro-map buckets) has versions; each version maps to the named
:class:`Feature` s it uses (:data:`VERSIONS`). A **reader** feature changes what a reader must
understand to get right answers (an entry holding a change instead of the whole state); a
**writer** feature only what a writer must keep when it commits (writer state that expires:
a writer that did not know it would keep expired writers), so a build that lacks it still reads.

A stream declares the features it uses beyond its version's in its state
(``StreamState.features``: feature name to the release that added it, under ``reader`` and
``writer``; absent for every stream written so far, so no stored byte changed); a stream with no
declaration uses its version's features. :func:`check_object` refuses an object whose version
this build does not know; :func:`check_reader` an unknown declared reader feature (at open,
where the state is decoded: every read refused, naming the feature and its release);
:func:`check_writer` an unknown declared writer feature (at a commit: reads work, appends and
every other commit are refused, naming it). A future reader feature also bumps the journal
entries' version, so builds older than this module (which ignore the declaration) refuse it too.
docs/protocol.md (§16) lists the features and the rules. A stream this build creates declares
the writer feature ``checksums`` (:data:`NEW_STREAM`; :mod:`.seal`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UnsupportedFormatError, error, newer_format
from ..version import __version__
from .seal import FEATURE as CHECKSUMS


@dataclass(frozen=True)
class Feature:
    """A named capability of the format: ``reader`` if readers must know it (else writers
    only), the release that added it (``since``) and what it is."""

    name: str
    reader: bool
    since: str
    about: str


#: Every feature this build knows.
KNOWN: dict[str, Feature] = {f.name: f for f in (
    Feature("lanes", True, "format 2", "writer lanes: a segment's chunks may overlap in time; chunk fields "
            "offset, sorted, marks"),
    Feature("sliced-files", True, "format 3", "a chunk may be a slice of a file several segments share "
            "(file_bytes); an entry of many chunks stores them packed"),
    Feature("group-commit", False, "format 4", "an entry may fold several writers' requests (folds) and the "
            "state remembers the ids folded lately (state.folded)"),
    Feature("slice-spans", False, "format 5", "each slice of a shared file is a Parquet file of its own "
            "(span_start, span_bytes); a rewrite must keep the span"),
    Feature("deltas", True, "format 6", "an entry holds its change to the state, not the whole state"),
    Feature("checkpoints", True, "format 6", "the whole state is written every so often as a checkpoint; "
            "state.checkpoint names the newest"),
    Feature("writer-expiry", False, "format 6", "the state of a writer quiet past the retention expires"),
    Feature("partial-buckets", True, "macro map format 2", "a macro-map bucket may be partial: some "
            "compacted _seq is read from the journal, not from its macro-chunks"),
    Feature("group-cursor-seq", True, "consumer-group format 2", "a group cursor names (tso, segment, seq), "
            "not every record of a segment at a tso"),
    Feature(CHECKSUMS, False, "0.1.0", "every metadata object ends with a checksum of its content "
            "(key crc, journal/seal.py), verified before use; declared by every stream created since"),
)}

_STREAM_1: frozenset[str] = frozenset()
_STREAM_2 = _STREAM_1 | {"lanes"}
_STREAM_3 = _STREAM_2 | {"sliced-files"}
_STREAM_4 = _STREAM_3 | {"group-commit"}
_STREAM_5 = _STREAM_4 | {"slice-spans"}
_STREAM_6 = _STREAM_5 | {"deltas", "checkpoints", "writer-expiry"}

#: Per object kind, the features each version this build knows uses. An object with no
#: version is version 1.
VERSIONS: dict[str, dict[int, frozenset[str]]] = {
    "journal entry": {1: _STREAM_1, 2: _STREAM_2, 3: _STREAM_3, 4: _STREAM_4, 5: _STREAM_5, 6: _STREAM_6},
    "epoch history chunk": {1: _STREAM_1, 2: _STREAM_2, 3: _STREAM_3, 4: _STREAM_4, 5: _STREAM_5, 6: _STREAM_6},
    "checkpoint": {6: _STREAM_6},
    "first-write marker": {1: frozenset()},
    "commit request": {1: frozenset({"group-commit"})},
    "consumer-group record": {1: frozenset(), 2: frozenset({"group-cursor-seq"})},
    "macro map bucket": {1: frozenset(), 2: frozenset({"partial-buckets"})},
}

#: The version of each kind this build writes.
WRITES: dict[str, int] = {kind: max(versions) for kind, versions in VERSIONS.items()}

#: The key of a state's declaration, and its two parts.
FEATURES, READER, WRITER = "features", "reader", "writer"


def checksummed(features: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether a state's declared ``features`` (``StreamState.features``) include the writer
    feature :data:`CHECKSUMS`: every metadata object the stream writes is sealed
    (:mod:`.seal`), and one that is not is damage."""
    return CHECKSUMS in (features.get(WRITER) or {})


#: What a stream created by this build declares (``StreamState.features``).
NEW_STREAM: dict[str, dict[str, str]] = {WRITER: {CHECKSUMS: KNOWN[CHECKSUMS].since}}


def check_object(kind: str, version: Any, path: str) -> None:
    """Refuse object ``path`` of ``kind`` stored at a ``version`` this build does not know
    (:class:`~pyspark_tstream.errors.UnsupportedFormatError` naming it and the newest known)."""
    known = VERSIONS[kind]
    v = 1 if version is None else version
    if isinstance(v, int) and v not in known and v > max(known):
        raise newer_format(path, v, max(known), kind)


def features_of(kind: str, version: int) -> frozenset[str]:
    """The features a ``kind`` object of ``version`` uses (none for a version this build does not know)."""
    return VERSIONS[kind].get(version, frozenset())


def declared(state_json: Mapping[str, Any], part: str) -> dict[str, str]:
    """The features a stored state declares under ``part`` (:data:`READER` or :data:`WRITER`):
    name to the release that added it (empty: the stream uses its version's features only)."""
    got = (state_json.get(FEATURES) or {}).get(part) or {}
    if not isinstance(got, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in got.items()):
        raise TypeError(f"state.features.{part} must map feature names to releases")
    return dict(got)


def check_reader(features: Mapping[str, Mapping[str, str]], version: int, path: str) -> None:
    """Refuse reading a stream whose state (stored at ``path``) declares a reader feature this
    build does not know, naming the feature and the release that added it."""
    for name, since in sorted((features.get(READER) or {}).items()):
        if name not in KNOWN:
            raise _unknown(path, version, name, since, "reader", "read it")


def check_writer(features: Mapping[str, Mapping[str, str]], version: int, url: str) -> None:
    """Refuse committing to a stream (at ``url``) whose state declares a reader or writer
    feature this build does not know, naming it (reads go on: only commits are refused)."""
    for part in (READER, WRITER):
        for name, since in sorted((features.get(part) or {}).items()):
            if name not in KNOWN:
                raise _unknown(url, version, name, since, part, "append to it (reads work)")


def _unknown(path: str, version: int, name: str, since: str, part: str, refused: str) -> UnsupportedFormatError:
    err = error("TSTREAM_UNSUPPORTED_FORMAT.FEATURE", path=path, version=version, feature=name, since=since,
                part=part, build=__version__, refused=refused)
    assert isinstance(err, UnsupportedFormatError)
    return err
