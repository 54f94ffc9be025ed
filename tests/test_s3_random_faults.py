"""Concurrent committers, compaction and vacuum on an object store that fails requests at random.

``test_s3_streams.py`` aims one fault at the request that matters; a live stream meets them
anywhere, all the time, while others commit. Here every store request of four producer
sessions, a compactor and a vacuum goes through a proxy (``s3servers.RandomFaultProxy``) that
fails a tenth of them: S3 ``503 SlowDown`` and ``500 InternalError``, connections dropped
unanswered, and requests the server applied before the connection dropped (a chunk that landed,
a conditional journal create the client cannot tell it won). The store's bounded retries absorb
most; where one still surfaces as a retriable error, the producer appends the same batch id
again, as the soak's producers and any user's retry loop do. Every record must be there exactly
once, and the stream sound.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TypeVar

import pyarrow as pa
import pytest
from conftest import commits_in
from helpers import T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import TStreamError
from s3servers import BUCKET, RandomFaultProxy, s3_storage_options

pytestmark = [pytest.mark.slow, pytest.mark.s3]

T = TypeVar("T")
WRITERS, BATCHES, ROWS = 4, 12, 50


@pytest.fixture
def faulty(moto_server: str) -> Iterator[RandomFaultProxy]:
    """A proxy in front of moto failing 10 % of requests (fixed seed; thread timing varies)."""
    proxy = RandomFaultProxy(moto_server, rate=0.10, seed=7).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def _retrying(what: str, fn: Callable[[], T], errors: Counter[str]) -> T:
    """``fn()`` until it succeeds; a retriable error counted in ``errors``, any other raised."""
    for _ in range(50):
        try:
            return fn()
        except TStreamError as e:
            if not e.retriable:
                raise
            errors[f"{what}: {type(e).__name__}"] += 1
    raise AssertionError(f"{what} failed 50 times in a row")


def test_committers_compaction_and_vacuum_under_random_faults(moto_server: str,
                                                              faulty: RandomFaultProxy) -> None:
    prefix = f"random-faults-{uuid.uuid4().hex[:12]}/stream"
    url = f"s3://{BUCKET}/{prefix}"
    through = s3_storage_options(faulty.endpoint)
    # small chunks, compaction on early: the compactor has work while the producers commit
    Stream.create(url, segments=3, storage_options=s3_storage_options(moto_server),
                  writers=[f"w{w}" for w in range(WRITERS)])
    errors: Counter[str] = Counter()
    failures: list[BaseException] = []
    done = threading.Event()

    def produce(w: int) -> None:
        try:
            session = Stream.open(url, through).writer(f"w{w}")
            for b in range(BATCHES):
                ids = [w * 10_000 + b * ROWS + i for i in range(ROWS)]
                data = pa.table({"id": ids, "key": [f"k{i % 11}" for i in ids],
                                 "t": [T0 + b * 100 + i for i in range(ROWS)]})
                _retrying("append", lambda: session.append(data, key="key", timestamp="t", batch_id=b), errors)  # noqa: B023 - called in this iteration only
            _retrying("close", session.close, errors)
        except BaseException as e:  # noqa: BLE001 - surfaced below: a thread must not hide it
            failures.append(e)

    def maintain() -> None:
        try:
            s = Stream.open(url, through)
            while not done.is_set():
                _retrying("compact", lambda: s.compact(), errors)
                _retrying("vacuum", lambda: s.vacuum(grace_ms=0), errors)
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    producers = [threading.Thread(target=produce, args=(w,)) for w in range(WRITERS)]
    keeper = threading.Thread(target=maintain)
    for t in [*producers, keeper]:
        t.start()
    for t in producers:
        t.join()
    done.set()
    keeper.join()
    assert not failures, failures
    assert faulty.counts["pass"] > 0 and sum(n for a, n in faulty.counts.items() if a != "pass") >= 50, \
        faulty.counts  # the faults happened

    direct = Stream.open(url, s3_storage_options(moto_server))
    t = direct.read()
    ids = Counter(t["id"].to_pylist())
    want = {w * 10_000 + b * ROWS + i for w in range(WRITERS) for b in range(BATCHES) for i in range(ROWS)}
    assert set(ids) == want and max(ids.values()) == 1, "every record exactly once"
    entries = [direct.journal.read_entry(p) for p in range(1, direct.state.pos + 1)]
    # every (writer, batch) committed once: in an entry of its own, or folded into another
    # writer's entry by group commit (which happens under load: 48 commits in 47 entries)
    commits = Counter((w, b) for w, b, _, _ in commits_in(e for e in entries if e.op == "append"))
    assert commits == Counter({(f"w{w}", b): 1 for w in range(WRITERS) for b in range(BATCHES)}), commits
    ops = Counter(e.op for e in entries)
    assert ops["compact"] >= 1, ops  # the compactor merged while the producers committed
    report = direct.verify()
    assert report.ok, report.problems
