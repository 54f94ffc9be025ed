"""Format features: a stream needing a feature this build does not know is refused by name.

A reader feature unknown to this build: the stream does not open (the error names the feature
and the release that added it). A writer feature unknown to it: reads work, commits are refused
(naming it). Every object kind's version goes through the same check.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import UnsupportedFormatError
from pyspark_tstream.journal import features
from pyspark_tstream.journal.entries import FORMAT_VERSION, Entry
from pyspark_tstream.journal.operations import Operation
from pyspark_tstream.journal.state import StreamState


def _declaring(part: str, name: str) -> str:
    """A stream whose newest state declares ``part`` feature ``name`` (added in release 9.9)."""
    url = f"memory://features-{uuid.uuid4().hex}/s"
    s = Stream.create(url, segments=2)
    s.append(pa.table({"k": ["a", "b"], "n": [1, 2]}), key="k")

    def declare(st: StreamState, pos: int) -> Entry:
        st.features = {part: {name: "9.9"}}
        return Entry(pos=pos, op=Operation.TICK, wall=st.wall, state=st)

    s.journal.commit(declare, s.state)
    return url


def test_an_unknown_reader_feature_refuses_the_stream_by_name() -> None:
    url = _declaring(features.READER, "time-travel-v2")
    with pytest.raises(UnsupportedFormatError, match=r"reader feature 'time-travel-v2' \(added in 9\.9\)") as e:
        Stream.open(url).read()
    assert e.value.feature == "time-travel-v2"


def test_an_unknown_writer_feature_reads_but_refuses_appends_by_name() -> None:
    url = _declaring(features.WRITER, "row-tracking")
    s = Stream.open(url)
    assert s.read().num_rows == 2 and s.info().rows == 2
    with pytest.raises(UnsupportedFormatError, match=r"writer feature 'row-tracking' \(added in 9\.9\).*reads work"):
        s.append(pa.table({"k": ["c"], "n": [3]}), key="k")
    assert Stream.open(url).read().num_rows == 2


def test_a_known_declared_feature_opens_and_appends() -> None:
    url = _declaring(features.READER, "deltas")
    s = Stream.open(url)
    s.append(pa.table({"k": ["c"], "n": [3]}), key="k")
    assert Stream.open(url).read().num_rows == 3
    assert Stream.open(url).state.features == {"reader": {"deltas": "9.9"}}  # kept by later commits


def test_new_streams_declare_checksums_alone() -> None:
    """A stream this build creates declares the writer feature ``checksums`` and nothing else
    (streams created before it declare none: tests/test_metadata_checksums.py)."""
    s = Stream.create(f"memory://features-{uuid.uuid4().hex}/s", segments=1)
    s.append(pa.table({"k": ["a"]}), key="k")
    assert s.state.to_json()["features"] == {"writer": {"checksums": features.KNOWN["checksums"].since}}
    assert s.state.features == features.NEW_STREAM and not features.KNOWN["checksums"].reader
    assert features.features_of("journal entry", FORMAT_VERSION) >= {"deltas", "checkpoints", "writer-expiry"}


@pytest.mark.parametrize("kind", sorted(features.VERSIONS))
def test_every_object_kind_refuses_a_newer_version_by_name(kind: str) -> None:
    newer = max(features.VERSIONS[kind]) + 1
    with pytest.raises(UnsupportedFormatError, match=f"{kind} mem://x has format version {newer}") as e:
        features.check_object(kind, newer, "mem://x")
    assert e.value.version == newer
    for known in features.VERSIONS[kind]:
        features.check_object(kind, known, "mem://x")


def test_every_feature_a_version_uses_is_known() -> None:
    used = {f for versions in features.VERSIONS.values() for fs in versions.values() for f in fs}
    assert used <= set(features.KNOWN)
