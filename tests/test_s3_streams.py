"""``s3://`` streams end to end through the Python API, on moto and on SeaweedFS.

The storage contract (``test_storage.py``) proves each store call; these tests prove what a
user of ``Stream`` notices on a real S3 server: round trips, exactly-once commits under 16
concurrent committers, the ambiguous outcome of a conditional PUT whose answer was lost,
transient and permanent faults on the exact request that matters, and credentials that never
leak into messages, reprs, the bucket or the logs. Nothing of tstream is mocked: faults are
injected by an HTTP proxy between s3fs and the server.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import commits_in
from helpers import SECRET, check_segments
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.conf.options import SinkOptions, SourceOptions
from pyspark_tstream.errors import StorageError, StreamNotFoundError, TStreamError
from pyspark_tstream.store import layout
from pyspark_tstream.store.failures import RetryPolicy
from pyspark_tstream.store.storage import Store
from s3servers import BUCKET, REGION, TargetedFaultProxy, boto3_client, free_ports, s3_storage_options

pytestmark = pytest.mark.s3

JOURNAL = f"/{layout.JOURNAL}/"
DATA = "/data/"


@dataclass(frozen=True)
class S3Root:
    """A fresh stream root on one S3 server: where it is and how to reach it."""

    endpoint: str
    prefix: str  # key prefix of the stream inside BUCKET

    @property
    def url(self) -> str:
        return f"s3://{BUCKET}/{self.prefix}"

    @property
    def options(self) -> dict[str, Any]:
        return s3_storage_options(self.endpoint)

    def keys(self, under: str = "") -> list[str]:
        """Every object key below the stream root (and ``under``), read straight from the server."""
        client = boto3_client(self.endpoint)
        found: list[str] = []
        token: dict[str, str] = {}
        while True:
            page = client.list_objects_v2(Bucket=BUCKET, Prefix=f"{self.prefix}/{under}", **token)
            found += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return sorted(found)
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def get(self, key: str) -> bytes:
        return boto3_client(self.endpoint).get_object(Bucket=BUCKET, Key=key)["Body"].read()


def _fresh_prefix(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:12]}/stream"


@pytest.fixture(params=[
    pytest.param("moto", id="moto"),
    pytest.param("seaweedfs", id="seaweedfs", marks=pytest.mark.seaweedfs),
])
def s3_root(request: pytest.FixtureRequest) -> S3Root:
    """A fresh, empty stream root on moto and on SeaweedFS."""
    return S3Root(request.getfixturevalue(f"{request.param}_server"), _fresh_prefix("api"))


def _events(n: int, *, start: int = 0, t0: int = 1_700_000_000_000, keys: int = 7) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "key": [f"dev-{i % keys}" for i in ids.tolist()],
                     "t": t0 + ids * 10, "payload": [f"p{i:06d}" for i in ids.tolist()]})


# -- 1. the core API on both servers -------------------------------------------------------------
def test_create_append_read_info_round_trip(s3_root: S3Root) -> None:
    s = Stream.create(s3_root.url, segments=3, storage_options=s3_root.options)
    ack1 = s.append(_events(500), key="key", timestamp="t", writer_id="w", batch_id=1)
    ack2 = s.append(_events(300, start=500), key="key", timestamp="t", writer_id="w", batch_id=2)
    assert (ack1.pos, ack1.rows, ack2.pos, ack2.rows) == (1, 500, 2, 300)
    assert not ack1.duplicate and not ack2.duplicate

    t = Stream.open(s3_root.url, storage_options=s3_root.options).read()
    assert t.num_rows == 800
    got = t.sort_by("id")
    assert got["id"].to_pylist() == list(range(800))
    assert got["payload"].to_pylist() == [f"p{i:06d}" for i in range(800)]
    # client times in the past are kept exactly, and become _timestamp
    assert got["t"].to_pylist() == pc.cast(got["_timestamp"], pa.int64()).to_pylist()
    per_key = t.group_by("key").aggregate([("_segment", "count_distinct")])
    assert set(per_key["_segment_count_distinct"].to_pylist()) == {1}
    check_segments(t)

    info = s.info()
    assert (info.position, info.rows, len(info.segments)) == (2, 800, 3)
    assert info.url == s3_root.url and info.bytes > 0 and info.tick > 0
    assert sum(seg.rows for seg in info.segments) == 800
    assert info.writers["w"].commits == 2 and info.writers["w"].rows == 800
    # the objects really are on the server, under the stream's own prefix
    data = [k for k in s3_root.keys("data/") if k.endswith(".parquet")]
    # one file per append, a slice of it per segment the append reached
    assert len(data) == 2 and info.chunks >= 3
    assert f"{s3_root.prefix}/{layout.entry(2)}" in s3_root.keys(f"{layout.META}/")


@pytest.mark.slow
def test_a_lost_macro_map_is_rebuilt_on_an_object_store(s3_root: S3Root) -> None:
    """fsck and repair of a compacted stream whose map bucket objects are all gone (listing,
    conditional create and ranged reads of the macro-chunks' timestamp column, on the server)."""
    from pyspark_tstream.journal.state import segment_number
    from pyspark_tstream.maps.macromap import MacroMap

    s = Stream.create(s3_root.url, segments=2, compaction="off", storage_options=s3_root.options)
    for b in range(12):
        s.append(_events(50, start=b * 50), key="key", timestamp="t")
    before = s.read().sort_by("id")
    assert s.compact().macros == 2 and s.vacuum(grace_ms=0).replaced > 0
    mm = MacroMap(s.store)
    seg = min(s.refresh().compaction.summaries)
    healthy = mm.latest(seg, 0).macros
    folder = layout.macro_bucket_folder(segment_number(seg), 0)
    s.store.delete([f"{folder}/{n}" for n in s.store.list(folder)])
    fresh = Stream.open(s3_root.url, storage_options=s3_root.options)
    report = fresh.verify()
    assert [(p.kind, p.repairable) for p in report.problems] == [("macro map", True)], report.summary()
    assert fresh.repair().ok
    assert mm.latest(seg, 0).macros == healthy
    assert Stream.open(s3_root.url, storage_options=s3_root.options).read().sort_by("id").equals(before)


def test_same_writer_batch_twice_is_a_no_op(s3_root: S3Root) -> None:
    s = Stream.create(s3_root.url, segments=2, storage_options=s3_root.options)
    first = s.append(_events(40), key="key", writer_id="w", batch_id=7)
    # a second handle (a restarted producer) replays the same batch
    other = Stream.open(s3_root.url, storage_options=s3_root.options)
    again = other.append(_events(40), key="key", writer_id="w", batch_id=7)
    assert not first.duplicate and again.duplicate
    assert again.pos == first.pos and again.segments == first.segments
    assert other.read().num_rows == 40
    journal = s3_root.keys(f"{layout.JOURNAL}/")
    assert journal == [f"{s3_root.prefix}/{layout.entry(p)}" for p in (0, 1)]  # no entry for it
    assert not other.append(_events(40, start=40), writer_id="w", batch_id=8).duplicate
    assert s.read().num_rows == 80


def test_read_after_write_across_handles(s3_root: S3Root) -> None:
    a = Stream.create(s3_root.url, segments=2, storage_options=s3_root.options)
    b = Stream.open(s3_root.url, storage_options=s3_root.options)
    written = 0
    for round_no in range(3):
        for writer, reader in ((a, b), (b, a)):
            ack = writer.append(_events(25, start=written), key="key")
            written += 25
            # the other handle sees the commit at once: no listing cache, no stale head
            t = reader.read()
            assert t.num_rows == written, f"round {round_no}"
            assert reader.state.pos == ack.pos
            assert sorted(t["id"].to_pylist()) == list(range(written))
    fresh = Stream.open(s3_root.url, storage_options=s3_root.options)
    assert fresh.info().position == 6 and fresh.read().num_rows == written


# -- 2. 16 concurrent committers on SeaweedFS ----------------------------------------------------
def test_sixteen_concurrent_committers_on_seaweedfs(seaweedfs_server: str) -> None:
    """16 threads, each its own handle; every (writer, batch) is attempted by two threads.

    SeaweedFS is the slow, ``<Condition>``-less server: a lost race there comes back as
    ``OSError(EINVAL)``, and each contended slot takes a while, so this is where a committer
    that misreads a lost race (and believes it won) or gives up would show.
    """
    root = S3Root(seaweedfs_server, _fresh_prefix("race"))
    threads, batches, rows = 16, 3, 20
    # compaction off: this test counts journal positions and the (writer, batch) parts they hold
    Stream.create(root.url, segments=4, storage_options=root.options, compaction="off")
    barrier = threading.Barrier(threads)
    acks: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        writer = f"w{t % 8}"  # threads t and t + 8 commit the same (writer, batch) pairs
        try:
            s = Stream.open(root.url, storage_options=root.options)
            barrier.wait()
            for b in range(batches):
                data = pa.table({"writer": [writer] * rows, "batch": [b] * rows, "i": list(range(rows)),
                                 "key": [f"k{(b * 7 + i) % 13}" for i in range(rows)]})
                ack = s.append(data, key="key", writer_id=writer, batch_id=b)
                with lock:
                    acks.append(ack)
        except BaseException as e:  # noqa: BLE001 - surfaced below: a thread must not hide it
            errors.append(e)

    started = time.monotonic()
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.monotonic() - started
    assert not errors, errors
    assert elapsed < 600, f"16 committers took {elapsed:.0f} s (hung?)"  # a hang guard, not a speed test

    pairs = {(f"w{w}", b) for w in range(8) for b in range(batches)}
    n = len(pairs)
    # one winner per (writer, batch): exactly one non-duplicate ack, and it names its own slot
    winners = [a for a in acks if not a.duplicate]
    assert len(acks) == threads * batches
    assert sorted((a.writer_id, a.batch_id) for a in winners) == sorted(pairs)
    # group commit may fold several (writer, batch) pairs into one entry: the journal holds
    # positions 1..P with P <= N, nothing beyond, and every pair in exactly one entry's parts
    store = Stream.open(root.url, storage_options=root.options)
    last = store.state.pos
    assert 1 <= last <= n and all(1 <= a.pos <= last for a in winners)
    assert root.keys(f"{layout.JOURNAL}/") == [f"{root.prefix}/{layout.entry(p)}" for p in range(last + 1)]
    entries = [store.journal.read_entry(p) for p in range(1, last + 1)]
    assert [e.pos for e in entries] == list(range(1, last + 1))
    parts = [((w, b), pos) for w, b, pos, _ in commits_in(entries)]
    assert sorted(pair for pair, _ in parts) == sorted(pairs)
    at = dict(parts)
    assert all(at[(a.writer_id, a.batch_id)] == a.pos for a in winners)
    # the losing twin learns where its batch went: the winner's position
    won_at = {(a.writer_id, a.batch_id): a.pos for a in winners}
    assert all(a.pos == won_at[(a.writer_id, a.batch_id)] for a in acks if a.duplicate)

    t = store.read()
    assert t.num_rows == n * rows
    counts = t.group_by(["writer", "batch"]).aggregate([("i", "count_distinct"), ("i", "count")])
    assert counts.num_rows == n
    assert set(counts["i_count"].to_pylist()) == {rows} == set(counts["i_count_distinct"].to_pylist())
    check_segments(t)


# -- 3. faults on the request that matters -------------------------------------------------------
@pytest.fixture
def proxied(targeted_fault_proxy: TargetedFaultProxy) -> Iterator[tuple[Stream, TargetedFaultProxy]]:
    """A stream (2 segments, one committed batch) reached through the fault proxy."""
    root = S3Root(targeted_fault_proxy.endpoint, _fresh_prefix("faults"))
    s = Stream.create(root.url, segments=2, storage_options=root.options)
    s.append(_events(30), key="key", writer_id="w", batch_id=1)
    targeted_fault_proxy.reset()
    yield s, targeted_fault_proxy


def _actions(proxy: TargetedFaultProxy, method: str, fragment: str) -> list[str]:
    return [a for m, p, a in proxy.requests if m == method and fragment in p]


@pytest.mark.parametrize("identity", ["writer-batch", "one-shot"])
def test_ambiguous_journal_put_is_acknowledged_once(
        proxied: tuple[Stream, TargetedFaultProxy], identity: str) -> None:
    """The server applies the conditional journal PUT, the client loses the answer, the retry
    meets 412: the append is still an ordinary success, committed exactly once.

    The retry may come from our own loop or from aiohttp, which silently re-sends an idempotent
    method (PUT) once when a pooled connection drops; either way the journal must tell its own
    entry (by nonce) from a rival's.
    """
    s, proxy = proxied
    # without a (writer, batch) no dedupe can hide a double commit: only the nonce check can
    who: dict[str, Any] = {"writer_id": "w", "batch_id": 2} if identity == "writer-batch" else {}
    proxy.on("PUT", JOURNAL, "apply-drop")
    ack = s.append(_events(30, start=30), key="key", **who)

    slot = layout.entry(2)
    journal_puts = [(p, a) for m, p, a in proxy.requests if m == "PUT" and JOURNAL in p]
    # the faulted request was exactly the commit point, and the retry hit the same key
    assert [a for _, a in journal_puts] == ["apply-drop", "pass"]
    assert all(p.endswith(slot) for p, _ in journal_puts)
    assert not ack.duplicate and (ack.pos, ack.rows) == (2, 30)
    assert sum(seg["rows"] for seg in ack.segments.values()) == 30

    fresh = Stream.open(s.store.url, storage_options=s.store.storage_options)
    assert fresh.state.pos == 2  # one entry, not two
    t = fresh.read()
    assert t.num_rows == 60 and sorted(t["id"].to_pylist()) == list(range(60))
    assert fresh.journal.read_entry(2).batch == who.get("batch_id")
    # the head hint was written after the ambiguous commit too
    assert json.loads(s.store.read(layout.HEAD))["pos"] == 2
    if who:  # the same batch again is a duplicate of that commit
        assert fresh.append(_events(30, start=30), **who).pos == 2
    # and the next commit takes the next slot
    nxt = fresh.append(_events(30, start=60), key="key", writer_id="w", batch_id=3)
    assert (nxt.pos, nxt.duplicate) == (3, False)
    assert Stream.open(s.store.url, storage_options=s.store.storage_options).read().num_rows == 90


def test_transient_faults_on_commit_and_chunk_io_are_retried(
        proxied: tuple[Stream, TargetedFaultProxy]) -> None:
    """503/500/dropped connections on the commit PUT, a chunk upload and chunk and journal GETs
    are absorbed by the bounded retry: the user sees a normal append and a complete read."""
    s, proxy = proxied
    proxy.on("PUT", JOURNAL, "503", "500")
    ack = s.append(_events(30, start=30), key="key", writer_id="w", batch_id=2)
    assert not ack.duplicate and ack.pos == 2
    assert _actions(proxy, "PUT", JOURNAL) == ["503", "500", "pass"]

    # the data chunk upload is a store call like any other: retried, not surfaced
    proxy.reset()
    proxy.on("PUT", DATA, "503", "drop")
    ack = s.append(_events(30, start=60), writer_id="w", batch_id=3)
    assert ack.pos == 3 and ack.rows == 30
    assert _actions(proxy, "PUT", DATA)[:2] == ["503", "drop"]

    # chunk reads: all chunks of a read are fetched concurrently; only the failed ones again
    reader = Stream.open(s.store.url, storage_options=s.store.storage_options)
    chunks = reader.state.chunks
    assert chunks >= 4  # the keyed batches went to both segments
    proxy.reset()
    proxy.on("GET", DATA, "503", "500", "drop")
    t = reader.read()
    assert t.num_rows == 90 and sorted(t["id"].to_pylist()) == list(range(90))
    gets = _actions(proxy, "GET", DATA)
    assert sorted(a for a in gets if a != "pass") == ["500", "503", "drop"]
    # one GET per file: the slices of an append's one file are adjacent spans, fetched together
    files = {c.path for d in reader.journal.deltas(reader.state, 1, reader.state.pos) for c in d.chunks}
    assert len(files) == 3 and len(gets) == len(files) + 3
    # and journal reads on open
    proxy.reset()
    proxy.on("GET", layout.HEAD, "503")
    proxy.on("GET", JOURNAL, "500")
    assert Stream.open(s.store.url, storage_options=s.store.storage_options).state.pos == 3
    assert _actions(proxy, "GET", layout.HEAD)[0] == "503" and _actions(proxy, "GET", JOURNAL)[0] == "500"


def _snapshot(s: Stream) -> tuple[int, int, list[int]]:
    fresh = Stream.open(s.store.url, storage_options=s.store.storage_options)
    return fresh.state.pos, fresh.state.rows, sorted(fresh.read()["id"].to_pylist())


@pytest.mark.parametrize("target", ["journal", "chunk"])
def test_permanent_403_fails_clearly_and_changes_nothing(
        proxied: tuple[Stream, TargetedFaultProxy], target: str) -> None:
    """A 403 on the commit PUT or on the chunk upload: one request, a non-retriable
    StorageError naming the object, the stream exactly as before, and the next append works."""
    s, proxy = proxied
    before = _snapshot(s)
    fragment = JOURNAL if target == "journal" else DATA
    proxy.reset()
    proxy.on("PUT", fragment, "403")
    with pytest.raises(StorageError) as info:
        s.append(_events(30, start=30), key="key", writer_id="w", batch_id=2)
    err = info.value
    assert not err.retriable
    assert "AccessDenied" in str(err) or "Access Denied" in str(err)
    assert err.path.startswith(s.store.display_url + "/")
    assert (JOURNAL.strip("/") if target == "journal" else DATA.strip("/")) in err.path
    assert _actions(proxy, "PUT", fragment) == ["403"]  # a permanent error is not retried
    if target == "chunk":
        assert _actions(proxy, "PUT", JOURNAL) == []  # a failed write never reaches the commit

    assert _snapshot(s) == before
    ack = s.append(_events(30, start=30), key="key", writer_id="w", batch_id=2)
    assert (ack.pos, ack.duplicate) == (2, False)
    assert _snapshot(s)[:2] == (2, 60)


def test_permanent_403_on_chunk_read_names_the_chunk(
        proxied: tuple[Stream, TargetedFaultProxy]) -> None:
    """A 403 on a chunk GET fails the read clearly; nothing is cached as broken."""
    s, proxy = proxied
    proxy.on("GET", DATA, "403")
    with pytest.raises(StorageError) as info:
        s.read()
    assert not info.value.retriable and "/data/" in str(info.value)
    assert s.read().num_rows == 30  # a later read is unaffected


def test_fsck_through_a_failing_store_raises_instead_of_reporting_damage(
        proxied: tuple[Stream, TargetedFaultProxy]) -> None:
    """A store that refuses the footer reads says nothing about the chunks: fsck must not report
    each as "unreadable", with a remedy that truncates the stream past records that are fine."""
    s, proxy = proxied
    proxy.on("GET", ".parquet", "403")  # a refusal is not retried
    with pytest.raises(StorageError) as info:
        s.verify()
    assert not info.value.retriable and ".parquet" in str(info.value)
    assert s.verify().ok  # the store answers again: nothing was wrong with the chunks


# -- 5. credentials never leak (Python API side; Spark side in test_s3_spark.py) -----------------
ACCESS_KEY_ID = "AKIA-TSTREAM-KEYID-7Q"


def _leaky_options(endpoint: str) -> dict[str, Any]:
    return {"endpoint_url": endpoint, "key": ACCESS_KEY_ID, "secret": SECRET,
            "client_kwargs": {"region_name": REGION}}


def _assert_clean(texts: list[str], *, key_id: bool = True) -> None:
    for text in texts:
        assert SECRET not in text, text[:2000]
        if key_id:
            assert ACCESS_KEY_ID not in text, text[:2000]


def test_credentials_never_leak_from_the_python_api(
        moto_server: str, seaweedfs_server: str, caplog: pytest.LogCaptureFixture) -> None:
    """A distinctive key and secret must show up nowhere a user or an operator can read.

    moto accepts any signature, so it carries the successful round trip; SeaweedFS checks
    signatures, so a wrong secret there gives a real 403; a proxy that echoes the credentials
    in its error body stands for a server that is careless with them.
    """
    caplog.set_level(logging.DEBUG)  # every logger: ours, s3fs, botocore, aiobotocore
    shown: list[str] = []

    # a successful life on moto: create, append, read, info
    root = S3Root(moto_server, _fresh_prefix("creds"))
    opts = _leaky_options(moto_server)
    s = Stream.create(root.url, segments=2, storage_options=opts)
    ack = s.append(_events(50), key="key", writer_id="w", batch_id=1)
    producer = s.writer("session-1")
    producer.append(_events(10, start=50), key="key", batch_id=1)
    producer.close()
    reader = Stream.open(root.url, storage_options=opts)
    shown += [json.dumps(reader.info().to_dict(), default=str), repr(reader), str(reader), repr(reader.store),
              str(reader.store), reader.url, repr(ack), repr(reader.state),
              repr(reader.write_spec(_events(1).schema, key="key"))]
    assert reader.read().num_rows == 60
    for opt_cls in (SourceOptions, SinkOptions):
        parsed = opt_cls.from_options({"path": root.url, "storage.endpoint_url": moto_server,
                                       "storage.key": ACCESS_KEY_ID, "storage.secret": SECRET})
        assert parsed.storage_options["secret"] == SECRET  # workers still get the real value
        shown += [repr(parsed), str(parsed)]

    # every object in the bucket, metadata and data alike, read back behind tstream's back
    keys = root.keys()
    assert any(layout.HEAD in k for k in keys) and any(k.endswith(".parquet") for k in keys)
    blobs = [root.get(k) for k in keys]
    assert all(SECRET.encode() not in b and ACCESS_KEY_ID.encode() not in b for b in blobs)

    # failed operations: a dead endpoint, a missing bucket, a server-side 403, an echoing proxy
    dead = f"http://127.0.0.1:{free_ports(1)[0]}"
    failures: list[BaseException] = []
    fast = RetryPolicy(attempts=2, base_delay=0.01)
    for attempt in (
        lambda: Store(root.url, _leaky_options(dead), retry=fast).read(layout.HEAD),
        lambda: Stream.open(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/s", storage_options=opts),
        lambda: Stream.create(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/s", storage_options=opts),
        lambda: Stream.create(f"s3://{BUCKET}/{_fresh_prefix('denied')}",
                              storage_options=_leaky_options(seaweedfs_server)),
        lambda: Stream.create(f"s3://{BUCKET}/{_fresh_prefix('denied')}",
                              storage_options={**s3_storage_options(seaweedfs_server),
                                               "secret": SECRET}),
        lambda: Stream.open(f"s3://{ACCESS_KEY_ID}:{SECRET}@{BUCKET}/s", storage_options=opts),
    ):
        with pytest.raises((TStreamError, OSError)) as info:
            attempt()
        failures.append(info.value)
    assert isinstance(failures[0], StorageError) and failures[0].retriable
    assert isinstance(failures[1], (StreamNotFoundError, StorageError))
    assert isinstance(failures[2], FileNotFoundError) and "no such bucket" in str(failures[2])
    # SeaweedFS checks signatures: an unknown key id and a wrong secret are both a real 403
    for denied in failures[3:5]:
        assert isinstance(denied, StorageError) and not denied.retriable, denied
    # botocore's DEBUG log prints raw response bodies, so a server that echoes credentials
    # reaches that log whatever tstream does; everything before this point is held to all logs
    before_echo = list(caplog.records)
    proxy = TargetedFaultProxy(moto_server, echo_in_errors=f"{ACCESS_KEY_ID}:{SECRET}").start()
    try:
        echoed = Stream.open(root.url, storage_options=_leaky_options(proxy.endpoint))
        proxy.on("PUT", JOURNAL, "403")
        with pytest.raises(StorageError) as info:
            echoed.append(_events(5, start=60), writer_id="w", batch_id=2)
        failures.append(info.value)
        proxy.on("GET", DATA, "403")
        with pytest.raises(StorageError) as info:
            echoed.read()
        failures.append(info.value)
    finally:
        proxy.stop()
    for e in failures:
        shown += [str(e), repr(e), str(getattr(e, "path", "")), str(getattr(e, "filename", ""))]

    _assert_clean(shown)
    # log records of every library: never the secret (botocore's DEBUG Authorization header
    # names the access key id by design, so only tstream's own records are held to that)
    assert any(r.name.startswith("botocore") for r in before_echo)  # DEBUG really was on
    _assert_clean([r.getMessage() for r in before_echo], key_id=False)
    _assert_clean([r.getMessage() for r in caplog.records if r.name.startswith("pyspark_tstream")])
