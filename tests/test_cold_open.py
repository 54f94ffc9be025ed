"""A cold open (a fresh handle's first seek or tail) reads a bounded number of store objects.

On an object store every object is a request; a cold seek or tail that replayed every journal
entry since the newest checkpoint (up to 200) and read the time index's newest entries twice
sent 58-99 requests at 30 ms each (issue #62). Now a small state is checkpointed every
``SMALL_EVERY`` entries and the entries a read fetched are kept for its second look: what is
left is the head, one checkpoint, at most ``SMALL_EVERY`` entries, the entries of the time
index's node the read falls in (at most ``FANOUT``: their chunk lists live only there) and the
data. Counted through the store observer: a batched read of n objects counts n.

Round trips of metadata (a batched read of parallel GETs is one): a cold tail makes 3 (the
head; one batch of the checkpoint, the entries after it, the newest entry's slot and the probe
past it; the read's own refresh probe together with the open index node's entries). A cold
seek into older, compacted data makes 3 too: the flushed level-1 index node the target falls in
(the state names it) is read in one batch with the macro-map bucket versions the state names
(read ahead: which of them name the compacted chunks only the node's chunks tell).
"""

from __future__ import annotations

import re
import uuid

import pyarrow as pa
import pytest
from histories import HISTORY_T0, commit_history
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal.checkpoint import SMALL_EVERY
from pyspark_tstream.journal.timeindex import FANOUT
from pyspark_tstream.store.storage import Store

#: Data objects a read of these few records may open (4 segments, fresh small chunks).
DATA_OBJECTS = 8
#: What a cold seek or tail may read: head, checkpoint, replayed entries, one index node's
#: entries, the newest entry once more (the read looks for a newer commit), the data.
COLD_OBJECTS = 2 + SMALL_EVERY + FANOUT + 1 + DATA_OBJECTS
#: Metadata round trips of a cold tail, and of a cold seek (an index node with the bucket
#: versions the state names, in one batch).
TAIL_TRIPS, SEEK_TRIPS = 3, 3
_PLUS = re.compile(r" \(\+(\d+)\)$")


class Objects:
    """Store objects touched through ``Store.observer`` (``read_many`` labels "<first> (+n)")."""

    def __init__(self) -> None:
        self.n = 0
        self.batches: list[str] = []
        self.log: list[str] = []
        self.trips = 0  # calls on metadata: each one round trip, however many objects it reads

    def __call__(self, op: str, rel: str) -> None:
        self.trips += rel.startswith("_tstream/")
        self.log.append(rel)
        extra = _PLUS.search(rel)
        self.n += 1 + (int(extra.group(1)) if extra else 0)
        if op == "read_many" and rel.startswith("_tstream/journal/"):
            self.batches.append(rel)

    def check(self, what: str, trips: int) -> None:
        assert self.n <= COLD_OBJECTS, f"a cold {what} read {self.n} objects"
        assert self.trips <= trips, f"a cold {what} made {self.trips} metadata round trips: {self.log}"
        # the same entries are never fetched twice by one read
        assert len(set(self.batches)) == len(self.batches), f"a cold {what} read {self.batches}"


def _rows(first: int, n: int) -> pa.Table:
    return pa.table({"key": [f"k{i % 8}" for i in range(first, first + n)],
                     "ts": pa.array(range(1_000_000 + first, 1_000_000 + first + n), pa.int64()),
                     "v": pa.array(range(first, first + n), pa.int64())})


@pytest.mark.parametrize("appends", [15, 60, 150])
def test_cold_seek_and_tail_read_few_objects(tmp_path: object, appends: int) -> None:
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=4)
    for i in range(appends):
        s.append(_rows(i * 20, 20), key="key", timestamp="ts")
    s.upkeep.settle(60)
    total = appends * 20

    seen = Objects()
    store = Store(url)
    store.observer = seen
    tail = Stream.at(store).read(tail=30, columns=["v"])
    assert sorted(tail["v"].to_pylist()) == list(range(total - 30, total))
    seen.check("tail", TAIL_TRIPS)

    # a long tail, over flushed index nodes of compacted commits: the nodes its span crosses (the
    # state's open level-1 summaries name them) and the map versions ride in the refresh too
    seen = Objects()
    store = Store(url)
    store.observer = seen
    long = Stream.at(store).read(tail=total * 2 // 3, columns=["v"])
    assert sorted(long["v"].to_pylist()) == list(range(total - total * 2 // 3, total))
    assert seen.trips <= TAIL_TRIPS, seen.log

    start = total // 2
    for how in ("read", "to_reader"):
        seen = Objects()
        store = Store(url)
        store.observer = seen
        opened = Stream.at(store)
        got = opened.read(start=1_000_000 + start, limit=25, columns=["v"]) if how == "read" else \
            opened.to_reader(start=1_000_000 + start, limit=25, columns=["v"]).read_all()
        assert sorted(got["v"].to_pylist()) == list(range(start, start + 25))
        seen.check(f"seek ({how})", SEEK_TRIPS)
        if appends >= 60:  # the seek read compacted data: its map versions rode in a metadata batch
            assert any("/m-" in rel for rel in seen.log), seen.log


@pytest.mark.parametrize("commits", [FANOUT * FANOUT + 100])
def test_cold_seek_round_trips_past_two_index_levels(commits: int) -> None:
    """Past ``FANOUT²`` commits the time index has a third level: the state names a level-2 node,
    and the level-1 node under it is known only from it. A cold seek there makes one round trip
    more than :data:`SEEK_TRIPS` (the level-2 node rides in the read's refresh probe), and the
    same objects budget (data files only of the commits it returns)."""
    url = f"memory://cold-deep-{uuid.uuid4().hex}/s"
    target = commits // 2
    commit_history(commits, url, real=range(target, target + 6))
    seen = Objects()
    store = Store(url)
    store.observer = seen
    got = Stream.at(store).read(start=HISTORY_T0 + target * 10, limit=25, columns=["v"])
    assert sorted(got["v"].to_pylist()) == list(range(5 * target, 5 * target + 25))
    seen.check("deep seek", SEEK_TRIPS + 1)
