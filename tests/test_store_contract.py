"""The store contract: what every backend tstream stores on must do, run on each one's real server.

One body per rule, parametrized over :func:`servers.backend_params` (``memory``, ``file`` in the
default set; moto, SeaweedFS, Azurite and fake-gcs-server in the slow set, each started by the
tests), so a new backend is one row in ``tests/servers.py``. The rules are the ones the journal relies on:
exactly one winner of a create-if-absent raced by threads and by processes, ranged reads,
listings with sizes, deletes of what is missing, transient failures retried, and no secret in
any message. The URL forms and error rules of the Azure and GCS backends, which need no server,
are pinned at the end.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import CHILD_EXIT
from pyspark_tstream.errors import ConfigError, InvalidPathError, StorageError
from pyspark_tstream.store.failures import RetryPolicy
from pyspark_tstream.store.storage import Store, split_url
from s3servers import FaultProxy, free_ports
from servers import AZURITE_KEY, SERVED, azurite_connection_string, backend_params, root_on

#: A retry policy quick enough for tests that exhaust it.
QUICK = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.02)


def _store(root: tuple[str, dict[str, Any]], retry: RetryPolicy | None = None) -> Store:
    return Store(root[0], root[1], retry=retry)


# -- create-if-absent --------------------------------------------------------------------------
@pytest.mark.parametrize("backend", backend_params())
def test_create_if_absent_raced_by_threads_has_one_winner(backend: str,
                                                          backend_root: tuple[str, dict[str, Any]]) -> None:
    racers = 8
    barrier = threading.Barrier(racers)
    won: list[int] = []
    errors: list[BaseException] = []

    def race(i: int) -> None:
        store = _store(backend_root)  # a handle of its own, as separate writers have
        try:
            barrier.wait()
            if store.put_if_absent("_tstream/journal/000000/000000000001.json", f"writer {i}".encode()):
                won.append(i)
        except BaseException as e:  # noqa: BLE001 - surfaced below: a thread must not hide it
            errors.append(e)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(won) == 1
    assert _store(backend_root).read("_tstream/journal/000000/000000000001.json") == f"writer {won[0]}".encode()


_RACER = """
import json, sys, time
from pathlib import Path
from pyspark_tstream.store.storage import Store
url, options, go, me = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
store = Store(url, options)
store.exists("warm-up")  # connect before the start line, so the race is on the create
Path(str(go) + "." + me).touch()
while not go.exists():
    time.sleep(0.005)
print(json.dumps(store.put_if_absent("slot.json", me.encode())))
""" + CHILD_EXIT


@pytest.mark.slow  # starts four interpreters
@pytest.mark.parametrize("backend", [p for p in backend_params() if p.values[0] != "memory"])
def test_create_if_absent_raced_by_processes_has_one_winner(backend: str, backend_root: tuple[str, dict[str, Any]],
                                                            tmp_path: Path) -> None:
    url, options = backend_root
    go = tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, url, json.dumps(options), str(go), f"p{i}"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    try:
        for _ in range(6000):  # every racer connected (up to 60 s on a busy machine)
            if all((tmp_path / f"go.p{i}").exists() or r.poll() is not None for i, r in enumerate(racers)):
                break
            threading.Event().wait(0.01)
        go.touch()
        outcomes = [r.communicate(timeout=120) for r in racers]
    finally:
        for r in racers:
            if r.poll() is None:
                r.kill()
    assert all(r.returncode == 0 for r in racers), [err[-2000:] for _, err in outcomes]
    won = [f"p{i}" for i, (out, _) in enumerate(outcomes) if json.loads(out.strip().splitlines()[-1])]
    assert len(won) == 1
    assert _store(backend_root).read("slot.json") == won[0].encode()


# -- reads -------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", backend_params())
def test_ranged_reads_return_exactly_the_bytes_asked(backend: str, backend_root: tuple[str, dict[str, Any]]) -> None:
    store = _store(backend_root)
    data = bytes(range(256)) * 40
    store.write("data/0/c.parquet", data)
    for start, end in [(0, 10), (len(data) - 8, len(data)), (1000, 1001), (0, len(data))]:
        assert store.read_range("data/0/c.parquet", start, end) == data[start:end]
    assert store.size("data/0/c.parquet") == len(data)


@pytest.mark.parametrize("backend", backend_params())
def test_read_many_keeps_order_and_names_the_missing_object(backend: str,
                                                           backend_root: tuple[str, dict[str, Any]]) -> None:
    store = _store(backend_root)
    for name in "abc":
        store.write(f"x/{name}", name.encode() * 3)
    assert store.read_many(["x/c", "x/a", "x/c", "x/b"]) == [b"ccc", b"aaa", b"ccc", b"bbb"]
    with pytest.raises(FileNotFoundError, match="x/nope"):
        store.read_many(["x/a", "x/nope"])
    assert store.read_present(["x/b", "x/nope"]) == [b"bbb", None]


@pytest.mark.parametrize("backend", backend_params())
def test_writes_replace_and_chunks_upload_on_close(backend: str, backend_root: tuple[str, dict[str, Any]]) -> None:
    store = _store(backend_root)
    store.write("_tstream/head.json", b"old")
    store.write("_tstream/head.json", b"new")
    assert store.read("_tstream/head.json") == b"new"
    with store.open_output("data/1/chunk.parquet") as f:
        f.write(b"PAR1")
    assert store.read("data/1/chunk.parquet") == b"PAR1"
    assert store.modified_ms("data/1/chunk.parquet") > 1_600_000_000_000  # an epoch-ms time, not seconds


# -- listing and deleting ------------------------------------------------------------------------
@pytest.mark.parametrize("backend", backend_params())
def test_listing_names_and_sizes(backend: str, backend_root: tuple[str, dict[str, Any]]) -> None:
    store = _store(backend_root)
    assert store.list() == [] and store.list("nothing") == [] and store.list_sizes("nothing") == {}
    store.write("f/x.json", b"abc")
    store.write("f/y.json", b"hello")
    store.write("f/sub/z.json", b"z")
    assert store.list("f") == ["sub", "x.json", "y.json"]
    sizes = store.list_sizes("f")
    assert {k: sizes[k] for k in ("x.json", "y.json")} == {"x.json": 3, "y.json": 5}
    assert set(sizes) <= {"sub", "x.json", "y.json"}
    assert store.exists("f/x.json") and not store.exists("f/none.json")


@pytest.mark.parametrize("backend", backend_params())
def test_deleting_what_is_missing_is_fine(backend: str, backend_root: tuple[str, dict[str, Any]]) -> None:
    store = _store(backend_root)
    store.write("d/a", b"1")
    store.delete(["d/a", "d/never-was", "d/a"])
    store.delete(["d/a"])
    assert not store.exists("d/a")
    with pytest.raises(FileNotFoundError) as info:
        store.read("d/a")
    assert info.value.filename == f"{store.display_url}/d/a"


# -- failures ----------------------------------------------------------------------------------
@pytest.fixture
def proxied_root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, Any], FaultProxy]]:
    """A fresh root on the served backend ``backend``, reached through a :class:`FaultProxy`."""
    backend = request.node.callspec.params["backend"]
    fixture, _, options = SERVED[backend]
    proxy = FaultProxy(request.getfixturevalue(fixture)).start()
    url, _ = root_on(request, backend, tmp_path)
    try:
        yield url, options(proxy.endpoint), proxy
    finally:
        proxy.stop()


@pytest.mark.slow
@pytest.mark.parametrize("backend", list(SERVED))
def test_throttling_and_dropped_connections_are_retried(backend: str,
                                                        proxied_root: tuple[str, dict[str, Any], FaultProxy]) -> None:
    url, options, proxy = proxied_root
    store = Store(url, options)
    assert store.put_if_absent("j/1.json", b"first")  # connects before faults are planned
    proxy.reset()
    proxy.plan("503", "drop", "503")  # throttled, connection lost, throttled: then through
    assert store.put_if_absent("j/2.json", b"second")
    assert [a for _, _, a in proxy.requests][:4] == ["503", "drop", "503", "pass"]
    proxy.reset()
    proxy.plan("503", "drop")
    assert store.read("j/2.json") == b"second"
    assert not store.put_if_absent("j/2.json", b"again")  # a lost race is an answer, not a failure
    assert store.read("j/2.json") == b"second"


@pytest.mark.slow
@pytest.mark.parametrize("backend", list(SERVED))
def test_an_outage_longer_than_the_retries_is_a_retriable_error(
        backend: str, proxied_root: tuple[str, dict[str, Any], FaultProxy]) -> None:
    url, options, proxy = proxied_root
    store = Store(url, options, retry=QUICK)
    store.write("h.json", b"x")
    proxy.outage(30.0)
    with pytest.raises(StorageError, match="failed after 2 attempts") as info:
        store.read("h.json")
    assert info.value.retriable


def _throttled_s3() -> BaseException:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": "SlowDown", "Message": "slow down"},
                        "ResponseMetadata": {"HTTPStatusCode": 503}}, "PutObject")


def _timed_out_s3() -> BaseException:
    from botocore.exceptions import ReadTimeoutError

    return ReadTimeoutError(endpoint_url="http://127.0.0.1:1")


def _throttled_azure() -> BaseException:
    from azure.core.exceptions import HttpResponseError

    busy = HttpResponseError(message="The server is busy.")
    busy.status_code, busy.error_code = 503, "ServerBusy"
    return busy


def _timed_out_azure() -> BaseException:
    from azure.core.exceptions import ServiceResponseTimeoutError

    return ServiceResponseTimeoutError("read timed out")


def _throttled_gcs() -> BaseException:
    from gcsfs.retry import HttpError

    return HttpError({"code": 429, "message": "rate limit exceeded"})


def _timed_out_gcs() -> BaseException:
    import aiohttp

    return aiohttp.ServerTimeoutError("timeout on reading data from socket")


@pytest.mark.parametrize("url, options, faults", [
    ("memory://contract-faults/s", {}, [lambda: TimeoutError("timed out"), lambda: ConnectionResetError("reset")]),
    ("file:///tmp/contract-faults/s", {}, [lambda: TimeoutError("timed out")]),
    ("s3://bucket/s", {"anon": True}, [_throttled_s3, _timed_out_s3]),
    ("abfs://box/s", {"account_name": "acct1", "anon": True}, [_throttled_azure, _timed_out_azure]),
    ("gs://bucket/s", {"token": "anon"}, [_throttled_gcs, _timed_out_gcs]),
], ids=["memory", "file", "s3", "azure", "gcs"])
def test_each_librarys_throttling_and_timeouts_are_retried(url: str, options: dict[str, Any],
                                                           faults: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Injected at the backend boundary, as each library raises them: every one is retried, and a
    permanent failure (a missing object) is not."""
    store = Store(url, options, retry=RetryPolicy(attempts=4, base_delay=0.001, max_delay=0.002))
    calls: list[str] = []
    pending = [make() for make in faults]

    def create(path: str, data: bytes) -> None:
        calls.append(path)
        if pending:
            raise pending.pop(0)

    monkeypatch.setattr(store.backend, "create", create)
    assert store.put_if_absent("j/1.json", b"x")
    assert len(calls) == len(faults) + 1 and not pending

    def missing(path: str) -> bytes:
        calls.append(path)
        raise FileNotFoundError(path)

    monkeypatch.setattr(store.backend, "read", missing)
    calls.clear()
    with pytest.raises(FileNotFoundError):
        store.read("j/2.json")
    assert len(calls) == 1


def _secret_options(backend: str, port: int) -> tuple[dict[str, Any], list[str]]:
    """Options of ``backend``'s scheme that carry a secret, pointed at a port nothing listens on;
    and the secrets."""
    endpoint = f"http://127.0.0.1:{port}"
    scheme = SERVED[backend][1]
    if scheme == "s3":
        return {"endpoint_url": endpoint, "key": "AKIACONTRACTKEY0001", "secret": "contract/Secret+0001",
                "client_kwargs": {"region_name": "us-east-1"}}, ["AKIACONTRACTKEY0001", "contract/Secret+0001"]
    if scheme == "abfs":
        return {"connection_string": azurite_connection_string(endpoint)}, [AZURITE_KEY]
    return {"endpoint_url": endpoint, "token": "/nonexistent/contract-secret-token.json"}, ["contract-secret-token"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", list(SERVED))
def test_secrets_never_appear_in_repr_pickles_or_errors(backend: str) -> None:
    options, secrets = _secret_options(backend, free_ports(1)[0])
    store = Store(f"{SERVED[backend][1]}://tstream-tests/secret/stream", options, retry=QUICK)
    shown = [repr(store), store.display_url, store.uri("a/b")]
    with pytest.raises(StorageError) as info:
        store.read("_tstream/head.json")
    shown += [str(info.value), repr(info.value)]
    assert all(secret not in text for secret in secrets for text in shown), shown
    assert pickle.loads(pickle.dumps(store)).storage_options == options  # workers get them, messages do not


# -- URL forms and error rules (no server) -------------------------------------------------------
@pytest.mark.parametrize("url, root, account, shown", [
    ("abfss://box@acct1.dfs.core.windows.net/s/t", "box/s/t", "acct1", "abfss://box@acct1.dfs.core.windows.net/s/t"),
    ("abfs://box@acct1.blob.core.windows.net/s", "box/s", "acct1", "abfss://box@acct1.blob.core.windows.net/s"),
    ("az://box/s", "box/s", None, "abfs://box/s"),
    ("abfs://box/s/", "box/s", None, "abfs://box/s"),
], ids=["abfss-dfs", "abfs-blob", "az", "abfs"])
def test_azure_url_forms(url: str, root: str, account: str | None, shown: str) -> None:
    assert split_url(url) == ("abfs", root)
    store = Store(url)
    assert store.backend.options.get("account_name") == account
    assert store.display_url == shown and repr(store) == f"Store({shown!r})"


def test_a_sovereign_cloud_account_reaches_its_own_blob_host() -> None:
    store = Store("abfss://box@acct1.dfs.core.chinacloudapi.cn/s")
    assert store.backend.options == {"account_name": "acct1", "account_host": "acct1.blob.core.chinacloudapi.cn"}


@pytest.mark.parametrize("url, match", [
    ("abfss://box@example.com/s", r"CONTAINER@ACCOUNT.dfs.core.windows.net .*storage.account_name"),
    ("abfss://user:pa55word@acct1.dfs.core.windows.net/s", r"must not carry credentials"),
    ("gs://user:pa55word@bucket/s", r"must not carry credentials"),
    ("gs://bucket/s?token=pa55word", r"query or fragment"),
    ("abfss://box@acct1.dfs.core.windows.net/s?sv=2024-01-01&sig=pa55word", r"query or fragment"),
], ids=["not-an-account-host", "abfss-password", "gs-password", "gs-query", "abfss-sas-in-url"])
def test_bad_azure_and_gcs_urls_are_refused_without_echoing_credentials(url: str, match: str) -> None:
    with pytest.raises(InvalidPathError, match=match) as info:
        Store(url)
    assert "pa55word" not in str(info.value)


def test_an_account_option_that_contradicts_the_url_is_refused() -> None:
    with pytest.raises(ConfigError, match="account_name='other' contradicts the stream URL") as info:
        Store("abfss://box@acct1.dfs.core.windows.net/s", {"account_name": "other"})
    assert info.value.option == "storage.account_name"
    assert Store("abfss://box@acct1.dfs.core.windows.net/s", {"account_name": "acct1"}).backend.options == {
        "account_name": "acct1"}


def test_gcs_url_forms_and_an_option_typo() -> None:
    assert split_url("gcs://bucket/s/") == ("gs", "bucket/s") == split_url("gs://bucket/s")
    with pytest.raises(ConfigError, match=r"storage option 'tokn' is not one gs:// takes \(did you mean 'token'\?\)"):
        Store("gs://bucket/s", {"tokn": "anon"})


def test_azure_secrets_inside_connection_strings_and_sas_tokens_are_redacted() -> None:
    sig = "c2lnbmF0dXJlLXNlY3JldA%3D%3D"
    store = Store("abfs://box/s", {"account_name": "acct1", "sas_token": f"sv=2024-01-01&ss=b&sig={sig}",
                                   "connection_string": azurite_connection_string("http://127.0.0.1:1")})
    text = store.backend.redact(f"GET https://acct1.blob.core.windows.net/box/s?sig={sig} key {AZURITE_KEY}")
    assert sig not in text and AZURITE_KEY not in text and "acct1.blob.core.windows.net" in text


def test_a_secret_echoed_url_encoded_is_redacted_too() -> None:
    """gcsfs sends a token it cannot read as a file to Google's ``tokeninfo?access_token=...``
    and its error names that URL: the secret arrives percent-encoded."""
    store = Store("gs://bucket/s", {"token": "/secret dir/token+1.json"})
    text = store.backend.redact("url=/tokeninfo?access_token=%2Fsecret%20dir%2Ftoken%2B1.json or "
                                "%2Fsecret+dir%2Ftoken%2B1.json")
    assert "secret" not in text and text.count("***") == 2


def test_azure_and_gcs_errors_are_classified_by_status_and_code() -> None:
    from azure.core.exceptions import HttpResponseError, ResourceExistsError, ServiceRequestError
    from gcsfs.retry import HttpError

    azure = Store("abfs://box/s", {"account_name": "acct1", "anon": True}).backend
    busy = HttpResponseError(message="busy")
    busy.status_code, busy.error_code = 503, "ServerBusy"
    throttled = HttpResponseError(message="throttled")
    throttled.status_code = 429
    denied = HttpResponseError(message="denied")
    denied.status_code, denied.error_code = 403, "AuthorizationFailure"
    exists = ResourceExistsError(message="exists")
    exists.status_code, exists.error_code = 409, "BlobAlreadyExists"
    assert azure.is_transient(busy) and azure.is_store_answer(busy)
    assert azure.is_transient(throttled) and azure.is_transient(ServiceRequestError("connection reset"))
    assert not azure.is_transient(denied) and not azure.is_transient(exists)
    assert azure.is_precondition_failed(exists) and not azure.is_precondition_failed(busy)

    gcs = Store("gs://bucket/s", {"token": "anon"}).backend
    assert gcs.is_transient(HttpError({"code": 503, "message": "x"}))
    assert gcs.is_transient(HttpError({"code": 429, "message": "x"}))
    assert not gcs.is_transient(HttpError({"code": 403, "message": "x"}))
    assert gcs.is_precondition_failed(HttpError({"code": 412, "message": "x"}))
    assert gcs.is_precondition_failed(FileExistsError("bucket/s/j"))


def test_the_libraries_own_retry_loops_are_off() -> None:
    """Store owns retrying: stacked under the SDK's (seconds apart) and gcsfs's (six tries, up to
    32 s apart), one throttling storm would cost minutes."""
    import gcsfs.core
    from gcsfs.extended_gcsfs import ExtendedGcsFileSystem

    azure = Store("abfs://box/s", {"connection_string": azurite_connection_string("http://127.0.0.1:1")}).fs
    retries = [p for p in azure.service_client._pipeline._impl_policies if hasattr(p, "total_retries")]
    assert retries and all(p.total_retries == 0 for p in retries)
    gcs = Store("gs://bucket/s", {"token": "anon", "endpoint_url": "http://127.0.0.1:1"}).fs
    assert isinstance(gcs, gcsfs.core.GCSFileSystem)
    # the extended filesystem asks a bucket's layout over gRPC first: a 60 s wait on an emulator
    assert not isinstance(gcs, ExtendedGcsFileSystem)
    assert not hasattr(type(gcs)._request, "__wrapped__")
