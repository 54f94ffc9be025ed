"""A first write fixes a stream's config only once one of its commits lands (docs/design.md §2).

The sink creates a missing stream before its tasks run (they route by its segments). A write
that then fails leaves a stream with the write's config and no commit: the next write may give
other options and is not held to the failed one's. A stream made on purpose (``Stream.create``,
``tstream create``) keeps its config: a write that disagrees fails naming the option, the
stream's value and the remedy, and changes nothing.
"""

from __future__ import annotations

import shutil
import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import CallLog
from pyspark_tstream.api.config import StreamConfig
from pyspark_tstream.api.creation import create_for_write, recreate
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.epochs.routing import key_hash
from pyspark_tstream.errors import ConfigError, UnsupportedFormatError
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import Store
from pyspark_tstream.write.writing import write_batches

GOLDEN = Path(__file__).parent / "golden"
KEYED = pa.schema([("device", pa.string()), ("v", pa.int64())])


@pytest.fixture
def mem() -> str:
    """A fresh in-memory stream URL."""
    return f"memory://first-{uuid.uuid4().hex}/stream"


def _keyed(n: int) -> pa.Table:
    return pa.table({"device": [f"d{i}" for i in range(n)], "v": list(range(n))})


def test_a_failed_first_write_does_not_fix_the_config(mem: str) -> None:
    # the sink created the stream with segments=2, then its tasks failed: no commit landed
    Stream.for_write(Store(mem), KEYED, config={"segments": 2, "compression": "zstd"}, key="device")
    assert Stream.open(mem).config.segments == 2
    stream, spec = Stream.for_write(Store(mem), KEYED, config={"segments": 4}, key="device")
    assert len(spec.segment_ids) == 4 and stream.config.segments == 4
    reopened = Stream.open(mem)
    # the whole config is the corrected write's: compression is back to its default
    assert reopened.config.segments == 4 and reopened.config.compression == "snappy"
    assert len(reopened.state.segments) == 4 and reopened.state.pos == 1
    stream.append(_keyed(20), key="device")
    assert Stream.open(mem).read().num_rows == 20


def test_a_landed_commit_fixes_the_config(mem: str) -> None:
    stream, _ = Stream.for_write(Store(mem), KEYED, config={"segments": 2}, key="device")
    stream.append(_keyed(5), key="device")
    with pytest.raises(ConfigError, match=r"segments=4 disagrees with the stream at memory://.*: it has "
                                          r"segments=2.*drop the option segments.*new stream path") as info:
        Stream.for_write(Store(mem), KEYED, config={"segments": 4}, key="device")
    assert info.value.option == "segments" and info.value.value == 4
    assert Stream.open(mem).config.segments == 2 and Stream.open(mem).read().num_rows == 5


def test_an_explicitly_created_stream_keeps_its_config(mem: str) -> None:
    Stream.create(mem, segments=2)
    before = Stream.open(mem).state.pos
    with pytest.raises(ConfigError, match=r"timestamping='arrival' disagrees with the stream at memory://.*"
                                          r"it has timestamping='client-prefer'.*Stream.create") as info:
        Stream.for_write(Store(mem), KEYED, config={"timestamping": "arrival", "segments": 2}, key="device")
    assert info.value.option == "timestamping" and info.value.value == "arrival"
    assert Stream.open(mem).state.pos == before and Stream.open(mem).config.timestamping == "client-prefer"


def test_a_heartbeat_after_the_write_created_the_stream_fixes_its_config(mem: str) -> None:
    stream, _ = Stream.for_write(Store(mem), KEYED, config={"segments": 2}, key="device")
    stream.heartbeat("w1")  # a commit of any kind lands: the config is the stream's now
    with pytest.raises(ConfigError, match="segments=3 disagrees"):
        Stream.for_write(Store(mem), KEYED, config={"segments": 3}, key="device")


def test_re_created_stream_can_be_re_created_again_until_a_commit_lands(mem: str) -> None:
    for n in (2, 3, 5):
        Stream.for_write(Store(mem), KEYED, config={"segments": n}, key="device")
    s = Stream.open(mem)
    assert s.config.segments == 5 and s.state.pos == 2
    # the markers of the replaced creations are gone; the newest creation's stays
    assert s.store.list(layout.WRITE_CREATED) == [f"{s.context.entry.nonce}.json"]


def test_a_write_whose_config_agrees_costs_no_extra_store_call(mem: str) -> None:
    Stream.for_write(Store(mem), KEYED, config={"segments": 2}, key="device")
    for config in ({"segments": 2}, {}):
        store, log = Store(mem), CallLog()
        store.observer = log
        Stream.for_write(store, KEYED, config=config, key="device")
        assert log.count() == 2 and log.by_op()["read"] >= 1, log.calls  # head and one probe past it
        assert not [rel for _, rel in log.calls if rel.startswith(layout.WRITE_CREATED)]


def test_creating_costs_one_marker_and_re_creating_seven_calls(mem: str) -> None:
    def calls(config: dict[str, int]) -> Counter[str]:
        store, log = Store(mem), CallLog()
        store.observer = log
        Stream.for_write(store, KEYED, config=config, key="device")
        # the head hint's write aside (in the background on object stores)
        return Counter(op for op, rel in log.calls if (op, rel) != ("write", layout.HEAD))

    created = calls({"segments": 2})
    # the marker, entry 0 and its checkpoint (format v6: the state every later entry's change applies to)
    assert created["write"] == 2 and created["put_if_absent"] == 1
    # the journal looking for a head, and the check that the folder holds nothing but tstream's
    assert created["list"] == 2
    # the head, then one batch: the probe past it and the newest entry's own slot (known through
    # the head hint alone: a commit past a lost or torn one would leave a hole); the marker's read,
    # the new marker, the entry, the replaced marker's delete
    # (and before the entry's create, one batched read of what lies around its slot: no create
    # into a lost entry's slot, journal/holes.py)
    assert calls({"segments": 3}) == Counter({"read": 1, "read_many": 3, "write": 1, "put_if_absent": 1,
                                              "delete": 1})


def test_a_writer_routed_before_a_re_creation_lands_its_keys_in_their_segments(mem: str) -> None:
    old, spec = Stream.for_write(Store(mem), KEYED, config={"segments": 1}, key="device")
    chunks = write_batches(spec, [_keyed(40)], ordered=True)
    Stream.for_write(Store(mem), KEYED, config={"segments": 4}, key="device")  # another first write
    old.commit(chunks, schema=KEYED)
    s = Stream.open(mem)
    t = s.read()
    assert t.num_rows == 40 and s.config.segments == 4
    by_id = {g.id: g for g in s.state.segments}
    hashes = key_hash(t.column("device")).tolist()
    for h, seg in zip(hashes, t.column("_segment").to_pylist()):
        assert by_id[seg].lo <= h < by_id[seg].hi


def test_a_lost_creation_race_leaves_no_marker(mem: str) -> None:
    # another process created the stream between our look and our create: ours is refused
    Stream.create(mem, segments=2)
    store = Store(mem)
    assert create_for_write(store, StreamConfig(segments=3)) is None
    assert store.list(layout.WRITE_CREATED) == []
    with pytest.raises(ConfigError, match="segments=3 disagrees"):
        Stream.for_write(store, KEYED, config={"segments": 3}, key="device")


def test_a_newer_marker_is_not_taken_for_one_this_version_understands(mem: str) -> None:
    s, _ = Stream.for_write(Store(mem), KEYED, config={"segments": 2}, key="device")
    rel = layout.write_created(s.context.entry.nonce)
    s.store.write(rel, b'{"v": 99, "nonce": "x"}')
    with pytest.raises(UnsupportedFormatError, match=r"first-write marker .*format version 99.*upgrade"):
        Stream.for_write(Store(mem), KEYED, config={"segments": 3}, key="device")
    assert Stream.open(mem).config.segments == 2


@pytest.mark.parametrize("name", sorted(p.parent.name for p in GOLDEN.glob("*/stream")))
def test_old_streams_without_markers_keep_their_config(tmp_path: Path, name: str) -> None:
    shutil.copytree(GOLDEN / name / "stream", tmp_path / name)
    url = f"file://{tmp_path}/{name}"
    before = Stream.open(url)
    n = before.config.segments
    with pytest.raises(ConfigError, match=f"segments={n + 1} disagrees.*it has segments={n}"):
        Stream.for_write(Store(url), before.schema, config={"segments": n + 1})
    stream, _ = Stream.for_write(Store(url), before.schema, config={"segments": n})
    assert stream.state.pos == before.state.pos



def test_a_re_creation_that_loses_to_a_first_commit_changes_nothing(mem: str) -> None:
    stream, _ = Stream.for_write(Store(mem), KEYED, config={"segments": 2}, key="device")
    seen = stream.context.entry  # what a second write read: the creation, newest then
    stream.append(_keyed(10), key="device")  # the first write's commit lands first
    store = Store(mem)
    assert recreate(store, Journal(store), seen, StreamConfig(segments=4)) is None  # the slot was taken
    s = Stream.open(mem)
    assert s.config.segments == 2 and s.read().num_rows == 10
    assert s.store.list(layout.WRITE_CREATED) == [f"{seen.nonce}.json"]  # the loser's marker is gone
    with pytest.raises(ConfigError, match="segments=4 disagrees"):
        Stream.for_write(Store(mem), KEYED, config={"segments": 4}, key="device")
