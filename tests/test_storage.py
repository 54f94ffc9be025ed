"""The storage contract, run against memory://, file://, moto and SeaweedFS.

Every test that takes ``store_url`` runs the same body on all four backends; the fault tests put
an HTTP proxy between s3fs and moto so retries are exercised on the real request path.
"""

from __future__ import annotations

import errno
import pickle
import posixpath
import re
import threading
import time
import uuid
from typing import Any
from urllib.parse import quote

import pytest
from pyspark_tstream.errors import ConfigError, InvalidPathError, StorageError
from pyspark_tstream.store.failures import RetryPolicy, is_precondition_failed, is_store_answer, is_transient
from pyspark_tstream.store.storage import Store, split_url

StoreUrl = tuple[str, dict[str, Any]]


def _store(store_url: StoreUrl, **kwargs: Any) -> Store:
    url, options = store_url
    return Store(url, options, **kwargs)


# -- the contract, on every backend --------------------------------------------------------------
def test_write_read_overwrite_round_trip(store_url: StoreUrl) -> None:
    store = _store(store_url)
    store.write("meta/hint.json", b'{"v": 1}')
    assert store.read("meta/hint.json") == b'{"v": 1}'
    store.write("meta/hint.json", b'{"v": 2}')
    assert store.read("meta/hint.json") == b'{"v": 2}'
    assert store.exists("meta/hint.json")
    assert store.size("meta/hint.json") == len(b'{"v": 2}')
    assert store.read_range("meta/hint.json", 2, 3) == b"v"
    payload = bytes(range(256)) * 4096  # 1 MiB of every byte value survives unchanged
    store.write("chunks/c0.parquet", payload)
    assert store.read("chunks/c0.parquet") == payload
    with store.open_output("chunks/c1.parquet") as f:
        f.write(b"PAR1" * 10)
    assert store.read("chunks/c1.parquet") == b"PAR1" * 10


def test_missing_objects_raise_file_not_found(store_url: StoreUrl) -> None:
    store = _store(store_url)
    with pytest.raises(FileNotFoundError) as info:
        store.read("journal/00000001.json")
    assert info.value.filename == store.uri("journal/00000001.json")
    with pytest.raises(FileNotFoundError):
        store.size("journal/00000001.json")
    assert not store.exists("journal/00000001.json")
    assert store.list("journal") == []


def test_put_if_absent_creates_once_and_never_overwrites(store_url: StoreUrl) -> None:
    store = _store(store_url)
    assert store.put_if_absent("journal/00000001.json", b"first") is True
    assert store.put_if_absent("journal/00000001.json", b"second") is False
    assert store.read("journal/00000001.json") == b"first"
    # s3fs's open(p, "xb") closed with no bytes does an unconditional PUT of b"": never that path
    assert store.put_if_absent("journal/00000001.json", b"") is False
    assert store.read("journal/00000001.json") == b"first"
    # an empty record is a legal record, and it is protected the same way
    assert store.put_if_absent("journal/empty", b"") is True
    assert store.put_if_absent("journal/empty", b"late") is False
    assert store.read("journal/empty") == b""
    assert store.list("journal") == ["00000001.json", "empty"]  # no temp files left behind


def test_put_if_absent_race_has_exactly_one_winner(store_url: StoreUrl,
                                                   request: pytest.FixtureRequest) -> None:
    # a contended round takes ~3 s on SeaweedFS; fewer rounds there still race 16 ways
    rounds = 2 if request.node.callspec.id == "seaweedfs" else 8
    threads_per_round = 16
    stores = [_store(store_url) for _ in range(threads_per_round)]  # 16 independent committers
    for rnd in range(rounds):
        key = f"journal/{rnd:08d}.json"
        barrier = threading.Barrier(threads_per_round)
        outcomes: list[bool | BaseException] = [False] * threads_per_round

        def commit(i: int) -> None:
            barrier.wait()  # noqa: B023 - the threads are joined in this round
            try:
                outcomes[i] = stores[i].put_if_absent(key, f"writer-{i}".encode())  # noqa: B023 - joined in this round
            except BaseException as e:  # noqa: BLE001 - recorded and asserted on below
                outcomes[i] = e  # noqa: B023 - joined in this round

        threads = [threading.Thread(target=commit, args=(i,)) for i in range(threads_per_round)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [o for o in outcomes if isinstance(o, BaseException)] == []
        winners = [i for i, won in enumerate(outcomes) if won is True]
        assert len(winners) == 1, f"round {rnd}: winners {winners}"
        assert stores[0].read(key) == f"writer-{winners[0]}".encode()


def test_read_many_returns_objects_in_order(store_url: StoreUrl) -> None:
    store = _store(store_url)
    # more objects than read_many keeps in flight, so batching is exercised too
    names = [f"chunks/{i:04d}.bin" for i in range(40)]
    for i, name in enumerate(names):
        store.write(name, f"object {i}".encode())
    wanted = names[::-1] + [names[3]]  # any order, duplicates allowed
    assert store.read_many(wanted) == [store.read(n) for n in wanted]
    assert store.read_many([]) == []
    assert store.read_many([names[0]]) == [b"object 0"]
    with pytest.raises(FileNotFoundError) as info:
        store.read_many([names[0], "chunks/missing.bin", names[1]])
    assert info.value.filename == store.uri("chunks/missing.bin")


def test_read_present_gives_none_for_missing_objects(store_url: StoreUrl) -> None:
    store = _store(store_url)
    store.write("req/a", b"a")
    store.write("req/b", b"b")
    assert store.read_present(["req/b", "req/a"]) == [b"b", b"a"]
    assert store.read_present(["req/a", "req/gone", "req/b"]) == [b"a", None, b"b"]
    assert store.read_present([]) == []


def test_list_sizes_names_objects_with_their_sizes(store_url: StoreUrl) -> None:
    store = _store(store_url)
    store.write("data/0/x.parquet", b"12345")
    store.write("data/0/y.parquet", b"")
    assert store.list_sizes("data/0") == {"x.parquet": 5, "y.parquet": 0}
    assert store.list_sizes("data/1") == {}


def test_list_and_idempotent_delete(store_url: StoreUrl) -> None:
    store = _store(store_url)
    for name in ("seg/b", "seg/a", "seg/sub/c", "other"):
        store.write(name, b"x")
    assert store.list("seg") == ["a", "b", "sub"]
    assert store.list() == ["other", "seg"]
    store.delete(["seg/a", "seg/sub/c"])
    # file:// and SeaweedFS (a real filer) keep a folder emptied by deletes; S3 proper does not
    assert store.list("seg") in (["b"], ["b", "sub"])
    assert store.list("seg/sub") == []
    assert not store.exists("seg/a") and not store.exists("seg/sub/c")
    store.delete(["seg/a", "seg/sub/c", "never/existed"])  # deleting again is fine
    store.delete([])
    assert store.list("seg") in (["b"], ["b", "sub"])
    with pytest.raises(FileNotFoundError):
        store.read("seg/a")


@pytest.mark.parametrize("rel", ["../escape", "a/../../b", "/etc/passwd", "a//b", "./a", "a/.",
                                 "", "a\\..\\b"])
def test_paths_escaping_the_root_are_rejected(store_url: StoreUrl, rel: str) -> None:
    store = _store(store_url)
    calls: list[tuple[str, str]] = []
    store.observer = lambda op, path: calls.append((op, path))
    for attempt in (lambda: store.read(rel), lambda: store.write(rel, b"x"),
                    lambda: store.put_if_absent(rel, b"x"), lambda: store.read_many(["ok", rel]),
                    lambda: store.delete([rel]), lambda: store.exists(rel)):
        with pytest.raises(InvalidPathError):
            attempt()
    assert calls == []  # rejected before any store call


def test_pickled_store_works_and_drops_the_observer(store_url: StoreUrl) -> None:
    store = _store(store_url)
    store.observer = lambda op, path: None
    store.write("a", b"1")
    copy = pickle.loads(pickle.dumps(store))
    assert copy.observer is None
    assert (copy.url, copy.storage_options, copy.retry) == (store.url, store.storage_options,
                                                            store.retry)
    assert copy.read("a") == b"1"
    assert copy.put_if_absent("b", b"2") is True
    assert store.read("b") == b"2"


def test_observer_sees_every_call_and_can_inject_faults(store_url: StoreUrl) -> None:
    store = _store(store_url)
    calls: list[tuple[str, str]] = []
    store.observer = lambda op, path: calls.append((op, path))
    store.write("a", b"1")
    store.put_if_absent("b", b"2")
    store.read("a")
    store.read_many(["a", "b"])
    store.read_range("a", 0, 1)
    store.exists("a")
    store.size("a")
    store.list("x")
    store.delete(["a"])
    store.open_output("c").close()
    assert calls == [("write", "a"), ("put_if_absent", "b"), ("read", "a"),
                     ("read_many", "a (+1)"), ("read_range", "a"), ("exists", "a"),
                     ("size", "a"), ("list", "x"), ("delete", "a"), ("open_output", "c")]

    class Crash(Exception):
        """A simulated crash between two store calls."""

    def crash_on_commit(op: str, path: str) -> None:
        if op == "put_if_absent":
            raise Crash(path)

    store.observer = crash_on_commit
    with pytest.raises(Crash):
        store.put_if_absent("journal/1", b"x")
    store.observer = None
    assert not store.exists("journal/1")  # the crash came before the store was touched


# -- URLs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("url", ["s3://bucket/streams/../other", "memory://a/../b",
                                 "/tmp/streams/../x", "file:///tmp/a/../b", "s3://", "",
                                 "file://somehost/tmp/x", "s3://bucket/x?versionId=1"])
def test_bad_urls_are_rejected(url: str) -> None:
    with pytest.raises(InvalidPathError):
        Store(url)


def test_url_forms() -> None:
    assert split_url("s3a://bucket/x/") == ("s3", "bucket/x")
    assert split_url("memory://m/s") == ("memory", "m/s")
    assert split_url("file:///tmp/s") == ("file", "/tmp/s")
    assert split_url("/tmp/s") == ("file", "/tmp/s")
    with pytest.raises(InvalidPathError, match="ftp:// is not a storage scheme tstream knows"):
        Store("ftp://host/s")  # no known-atomic create there: refused, not raced


# -- credentials ---------------------------------------------------------------------------------
SECRET_KEY_ID = "AKIATSTREAMKEYID0001"
SECRET_VALUE = "tstream/Secret+Value/0123456789"


@pytest.mark.s3
def test_credentials_never_appear_in_repr_urls_or_errors(fault_proxy: Any) -> None:
    options = {"endpoint_url": fault_proxy.endpoint, "key": SECRET_KEY_ID,
               "secret": SECRET_VALUE, "client_kwargs": {"region_name": "us-east-1"}}
    store = Store("s3://tstream-tests/cred/stream", options)
    shown = [repr(store), store.display_url, store.uri("journal/1")]
    # a server that echoes the credentials in its error message must not leak them either
    fault_proxy.echo_in_errors = f"{SECRET_KEY_ID}:{SECRET_VALUE}"
    fault_proxy.plan("403")
    with pytest.raises(StorageError) as info:
        store.read("journal/1")
    assert "Access Denied" in str(info.value) and not info.value.retriable
    fault_proxy.plan(*["503"] * store.retry.attempts)
    with pytest.raises(StorageError) as retried:
        store.write("journal/1", b"x")
    shown += [str(info.value), info.value.path, str(retried.value), retried.value.path]
    for url in (f"s3://{SECRET_KEY_ID}:{quote(SECRET_VALUE, safe='')}@bucket/stream",
                f"s3://{SECRET_KEY_ID}:{SECRET_VALUE}@bucket/stream"):
        with pytest.raises(InvalidPathError) as in_url:
            Store(url)
        shown.append(str(in_url.value))
    for text in shown:
        for secret in (SECRET_KEY_ID, SECRET_VALUE, quote(SECRET_VALUE, safe="")):
            assert secret not in text, text


# -- transient faults on the real request path ---------------------------------------------------
def _proxied(fault_proxy: Any, name: str, **kwargs: Any) -> Store:
    options = {"endpoint_url": fault_proxy.endpoint, "key": "testing", "secret": "testing",
               "client_kwargs": {"region_name": "us-east-1"}}
    return Store(f"s3://tstream-tests/{name}/stream", options, **kwargs)


@pytest.mark.s3
def test_reads_cost_one_request(fault_proxy: Any) -> None:
    # s3fs's default whole-object read is HEAD+GET, and a miss HEAD+LIST: twice the cost
    store = _proxied(fault_proxy, "one-request")
    store.write("journal/1", b"x")
    fault_proxy.reset()
    assert store.read("journal/1") == b"x"
    with pytest.raises(FileNotFoundError):
        store.read("journal/2")
    assert store.read_many(["journal/1", "journal/1"]) == [b"x", b"x"]
    assert [m for m, _, _ in fault_proxy.requests] == ["GET", "GET", "GET"]


@pytest.mark.s3
def test_transient_faults_are_retried(fault_proxy: Any) -> None:
    store = _proxied(fault_proxy, "retried")
    fault_proxy.plan("503", "500")
    store.write("a", b"payload")
    fault_proxy.plan("503", "drop")
    assert store.read("a") == b"payload"
    fault_proxy.plan("drop", "503")
    assert store.put_if_absent("journal/1", b"commit") is True
    assert store.read("journal/1") == b"commit"
    store.write("b", b"other")
    fault_proxy.plan("503")  # one of the two concurrent GETs fails; only it is fetched again
    assert store.read_many(["a", "b"]) == [b"payload", b"other"]
    fault_proxy.plan("500")
    store.delete(["a"])
    assert not store.exists("a")
    actions = [a for _, _, a in fault_proxy.requests]
    assert actions.count("pass") >= 1 and "503" in actions and "drop" in actions


@pytest.mark.s3
def test_a_batch_delete_retries_only_what_failed(moto_server: str) -> None:
    """Each attempt of a batch delete meets one failure, on another object each time. Retrying
    the whole batch failed every attempt (a batch of n fails n times as often as one delete):
    vacuums of thousands of files gave up under a 3 % fault rate in the soak."""
    from s3servers import TargetedFaultProxy

    proxy = TargetedFaultProxy(moto_server).start()
    try:
        store = _proxied(proxy, f"delete-retry-{uuid.uuid4().hex[:8]}", retry=RetryPolicy(attempts=3))
        names = [f"data/{c}" for c in "abcd"]
        for n in names:
            store.write(n, b"x")
        proxy.reset()
        # a fails the first attempt; b would fail the second, c the third, were they retried
        for n, fault_at in zip(names, (0, 1, 2)):
            proxy.on("DELETE", n, *(["pass"] * fault_at + ["503"]))
        store.delete(names)
        deletes = [(p.rsplit("/", 1)[1], a) for m, p, a in proxy.requests if m == "DELETE"]
        assert sorted(deletes) == [("a", "503"), ("a", "pass"), ("b", "pass"), ("c", "pass"), ("d", "pass")]
        assert not any(store.exists(n) for n in names)
    finally:
        proxy.stop()


@pytest.mark.s3
@pytest.mark.parametrize("op", ["read", "write", "put_if_absent"])
def test_gives_up_after_bounded_attempts(fault_proxy: Any, op: str) -> None:
    store = _proxied(fault_proxy, f"give-up-{op}", retry=RetryPolicy(attempts=3))
    store.write("a", b"x")
    fault_proxy.reset()
    fault_proxy.plan(*["503"] * 50)
    calls = {"read": lambda: store.read("a"), "write": lambda: store.write("a", b"y"),
             "put_if_absent": lambda: store.put_if_absent("b", b"y")}
    with pytest.raises(StorageError) as info:
        calls[op]()
    assert info.value.retriable and is_transient(info.value.__cause__)
    assert "after 3 attempts" in str(info.value)
    # exactly our attempts reach the server: s3fs's and botocore's retry loops are off
    assert len(fault_proxy.requests) == 3
    fault_proxy.reset()
    assert store.read("a") == b"x"  # nothing was applied by the failed attempts


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.parametrize("action", ["503", "drop"])
def test_a_store_that_answered_waits_out_an_outage_within_its_patience(fault_proxy: Any, action: str) -> None:
    """An outage longer than the bounded attempts (here 3 attempts, ~0.1 s) fails a call unless
    the policy has patience: then a store that has answered keeps retrying until the outage
    ends, and nothing is applied twice."""
    patient = RetryPolicy(attempts=3, base_delay=0.02, max_delay=0.2, patience=6.0, hint="raise storeRetryTimeout")
    store = _proxied(fault_proxy, f"patient-{action}", retry=patient)
    store.write("a", b"x")
    assert store.reached
    fault_proxy.outage(1.5, action)
    t0 = time.monotonic()
    assert store.read("a") == b"x"
    assert store.put_if_absent("journal/1", b"commit") is True
    waited = time.monotonic() - t0
    assert 6.0 > waited >= 1.4
    assert fault_proxy.outage_requests > 3  # more than the bounded attempts were needed

    # a pickled copy (a Spark task of a query that reached the store) is patient at once
    copy = pickle.loads(pickle.dumps(store))
    assert copy.reached and copy.retry == patient
    fault_proxy.outage(1.0, action)
    assert copy.read("journal/1") == b"commit"

    # past its patience the call fails, retriable, saying how long it tried and what to raise
    fault_proxy.outage(30, action)
    t0 = time.monotonic()
    with pytest.raises(StorageError) as info:
        store.read("a")
    assert 5.5 <= time.monotonic() - t0 < 9.0
    assert info.value.retriable and "raise storeRetryTimeout" in str(info.value)
    assert re.search(r"after \d+ attempts over [56]\.\d s", str(info.value)), str(info.value)


@pytest.mark.s3
def test_a_store_never_reached_gives_up_after_its_attempts(fault_proxy: Any) -> None:
    """A wrong endpoint or a store down from the start (no answer: the connection drops) fails
    fast: patience needs an answer first."""
    store = _proxied(fault_proxy, "never-reached",
                     retry=RetryPolicy(attempts=3, base_delay=0.02, max_delay=0.2, patience=30.0, hint="raise it"))
    fault_proxy.outage(30, "drop")
    t0 = time.monotonic()
    with pytest.raises(StorageError) as info:
        store.read("a")
    # well under the 30 s patience: it gave up after its 3 attempts, not after waiting (a loaded
    # machine stretches the attempts' backoff, never to half the patience)
    assert time.monotonic() - t0 < 15.0 and not store.reached
    assert "after 3 attempts" in str(info.value) and "raise it" not in str(info.value)
    # 3 attempts; the HTTP client sends a request again once on a connection dropped unanswered
    assert 3 <= fault_proxy.outage_requests <= 6


@pytest.mark.s3
@pytest.mark.parametrize("action", ["503", "500"])
def test_a_store_answering_errors_from_the_first_call_is_waited_for(fault_proxy: Any, action: str) -> None:
    """An S3 error response (503 SlowDown, 500 InternalError) is the store answering from the
    configured endpoint: patience applies from the first call, as it does once a call has
    succeeded. Otherwise a streaming query's writer, which PySpark creates afresh in a new
    process for each micro-batch, fails the query within seconds when a batch begins inside an
    outage of 503s."""
    store = _proxied(fault_proxy, f"answers-{action}",
                     retry=RetryPolicy(attempts=3, base_delay=0.02, max_delay=0.2, patience=6.0, hint="raise it"))
    fault_proxy.reset()
    # six refusals in a row, counted rather than timed: a loaded machine (the whole suite)
    # spent most of a 1.5 s outage creating the S3 client, so 3 attempts could outlast it
    fault_proxy.plan(*[action] * 6)
    with pytest.raises(FileNotFoundError):  # the answer once the refusals are over
        store.read("a")
    assert store.reached
    tried = [r[2] for r in fault_proxy.requests if r[1].endswith(f"answers-{action}/stream/a")]
    assert tried == [action] * 6 + ["pass"], tried  # past the 3 attempts, up to the answer
    assert is_store_answer(_s3_error(action)) and not is_store_answer(_s3_error("502"))


def _s3_error(code: str) -> Exception:
    """What s3fs raises for an S3 error response with ``code`` (an OSError caused by botocore's)."""
    class ClientError(Exception):  # botocore's shape: a ``response`` dict
        def __init__(self, code: str, status: int) -> None:
            super().__init__(code)
            self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}

    named = {"503": "SlowDown", "500": "InternalError"}.get(code, code)
    err = OSError(16, "store error")
    err.__cause__ = ClientError(named, int(code))
    return err


def test_an_s3_conditional_request_conflict_is_retried() -> None:
    """S3 answers a conditional create that met another in flight for the same key with 409
    ``ConditionalRequestConflict`` (not applied; AWS: retry it). s3fs raises it as an
    ``OSError(EIO)`` caused by botocore's ``ClientError``: transient, and no lost create (the
    retry then wins, or meets the other's object as 412)."""
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    raised = translate_boto_error(ClientError(
        {"Error": {"Code": "ConditionalRequestConflict", "Message": "A conflicting conditional operation"},
         "ResponseMetadata": {"HTTPStatusCode": 409}}, "PutObject"))
    assert isinstance(raised, OSError) and raised.errno == errno.EIO
    assert is_transient(raised) and is_store_answer(raised) and not is_precondition_failed(raised)


def test_patience_must_not_be_negative() -> None:
    with pytest.raises(ConfigError, match="patience must be >= 0"):
        RetryPolicy(patience=-1)


@pytest.mark.s3
def test_permanent_errors_are_not_retried(fault_proxy: Any) -> None:
    store = _proxied(fault_proxy, "permanent")
    fault_proxy.plan("403")
    with pytest.raises(StorageError) as info:
        store.write("a", b"x")
    assert not info.value.retriable
    assert len(fault_proxy.requests) == 1


@pytest.mark.s3
def test_ambiguous_conditional_put_reports_exists(fault_proxy: Any) -> None:
    # the server applies the PUT but the answer is lost; the retry then meets 412. Storage says
    # "exists" (False); the journal tells its own commit apart by the nonce it wrote.
    store = _proxied(fault_proxy, "ambiguous")
    fault_proxy.plan("apply-drop")
    assert store.put_if_absent("journal/1", b"nonce-42") is False
    assert store.read("journal/1") == b"nonce-42"
    assert [a for _, _, a in fault_proxy.requests][:2] == ["apply-drop", "pass"]


def test_sees_objects_another_writer_created_after_a_listing(store_url: StoreUrl) -> None:
    # s3fs caches listings forever by default; a reader that listed once would then never see
    # another process's commit through exists() or size()
    import fsspec

    url, options = store_url
    store = _store(store_url)
    store.write("journal/1", b"a")
    assert store.list("journal") == ["1"]
    other = fsspec.filesystem(store.protocol, skip_instance_cache=True, **options)
    other.pipe_file(store.full("journal/2"), b"bb")  # a different process's view of the store
    assert store.exists("journal/2")
    assert store.size("journal/2") == 2
    assert store.list("journal") == ["1", "2"]


def test_one_definition_of_a_secret_option_for_stores_cli_and_spark_options() -> None:
    """Store errors, CLI output and Spark option errors redact the same option values:
    connection strings, SAS tokens and account keys included, key columns not."""
    from pyspark_tstream.conf import parsing
    from pyspark_tstream.store.failures import is_secret_key, secret_values

    assert parsing.is_secret_key is is_secret_key
    options = {"connection_string": "DefaultEndpointsProtocol=https;AccountKey=abc",
               "client_kwargs": {"sas": "sv=2024&sig=xyz", "region_name": "us-east-1"},
               "account_key": "k3y", "keyColumn": "device", "anon": False}
    assert set(secret_values(options)) == {"DefaultEndpointsProtocol=https;AccountKey=abc", "sv=2024&sig=xyz", "k3y"}


def _memory_store_racing(monkeypatch: pytest.MonkeyPatch, rel: str, race: str) -> Store:
    """A ``memory://`` store holding ``rel`` (and a sibling), whose process-wide key dict
    deletes ``rel`` as "another thread" would: right after the keys are snapshotted
    (``race="snapshot"``) or right after ``rel``'s key is checked (``race="check"``)."""
    from fsspec.implementations.memory import MemoryFileSystem

    store = Store(f"memory://race-{uuid.uuid4().hex}/s")
    store.write(rel, b"1")
    store.write(posixpath.join(posixpath.dirname(rel), "b.json"), b"2")
    gone = store.fs._strip_protocol(store.full(rel))

    class Racing(dict):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            keys = list(super().__iter__())
            if race == "snapshot":
                self.pop(gone, None)
            return iter(keys)

        def __contains__(self, key: object) -> bool:
            found = super().__contains__(key)
            if race == "check" and key == gone:
                self.pop(gone, None)
            return found

    monkeypatch.setattr(MemoryFileSystem, "store", Racing(MemoryFileSystem.store))
    return store


def test_memory_list_survives_a_delete_racing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``memory://`` listing while another thread deletes in the folder (group commit: one
    writer lists the pending requests while another folds and deletes them) sees the deleted
    object or not, never fails: fsspec's ``MemoryFileSystem.ls`` snapshots the keys, then looks
    each one up again and raised ``KeyError`` for one deleted in between, which failed concurrent
    appends on ``memory://`` at random. The race is made certain here: the snapshot is taken,
    then the object is deleted, then the listing goes on."""
    store = _memory_store_racing(monkeypatch, "requests/a.json", race="snapshot")
    assert store.list("requests") in (["a.json", "b.json"], ["b.json"])
    assert store.list("requests") == ["b.json"]


def test_memory_object_deleted_between_check_and_lookup_reads_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """fsspec's ``MemoryFileSystem.info`` (behind ``size`` and ``modified_ms``) checks a key,
    then looks it up: an object another thread deletes in between is "no such object", as on a
    real store, not a ``KeyError``."""
    store = _memory_store_racing(monkeypatch, "data/0/a.parquet", race="check")
    with pytest.raises(FileNotFoundError, match="a.parquet"):
        store.size("data/0/a.parquet")
