"""A test server as a subprocess: started on free loopback ports, waited for until it answers a
real request, stopped by PID. One definition for every server the tests start (SeaweedFS in
``s3servers.py``, Azurite and fake-gcs-server in ``servers.py``).

Invariants kept here:

* a server is ready when a real request succeeds (``ready``), not when its port opens: SeaweedFS
  answers 403 for about 0.6 s before its credentials are loaded;
* a port chosen free but bound by another process before the server binds it (parallel jobs)
  makes a fresh choice, at most :data:`PORT_ATTEMPTS` times; any other early exit FAILS with the
  server's log tail, and so does a server not ready after :data:`START_TIMEOUT_S`;
* the server runs in its own session and work folder; it is stopped by PID (SIGTERM, then
  SIGKILL if it hangs) and its folder removed, whatever happened;
* a missing server binary FAILS its tests with the install line (:func:`require_binary`); it
  never skips them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import NoReturn

import pytest

#: Seconds a server may take to answer: Azurite (Node) takes ~10 s to listen on a busy 2-core machine.
START_TIMEOUT_S = 90.0
#: Fresh port choices tried when another process takes a chosen port before the server binds it.
PORT_ATTEMPTS = 3
#: Seconds between two readiness probes.
_POLL_S = 0.1

#: Raises until the server at the endpoint it is given answers a real request.
Ready = Callable[[str], None]
#: The command line of a server that keeps its data in the given folder, and its endpoint URL.
Launch = Callable[[Path], tuple[list[str], str]]


class PortTaken(Exception):
    """The server exited at start because a port chosen free was bound by someone else."""


def require_binary(binary: str | None, what: str, searched: str, install_hint: str) -> str:
    """``binary``, or FAIL the test: ``what`` was not found where ``searched`` says, and how to
    install it."""
    if binary is None:
        _fail(f"{what} not found ({searched}); install it with: {install_hint}")
    return binary


def wait_until_ready(name: str, endpoint: str, ready: Ready, proc: subprocess.Popen[bytes] | None = None,
                     log: Path | None = None, *, port_race_ok: bool = False) -> None:
    """Probe ``ready(endpoint)`` until it succeeds; FAIL naming ``name`` if ``proc`` exits first
    (with ``log``'s tail) or after :data:`START_TIMEOUT_S`. With ``port_race_ok``, an exit whose
    log says a port was in use raises :class:`PortTaken` instead, for the caller to choose again."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            if port_race_ok and "in use" in tail.lower():
                raise PortTaken(tail)
            _fail(f"{name} exited with code {proc.returncode} while starting; log tail:\n{tail}")
        try:
            ready(endpoint)
            return
        except Exception as e:  # noqa: BLE001 - any failure means "not ready yet"; kept below
            last = e
            time.sleep(_POLL_S)
    _fail(f"{name} at {endpoint} not ready after {START_TIMEOUT_S:.0f} s: {last!r}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM by PID (the servers here stop cleanly within ~1 s), SIGKILL if it hangs."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


@contextlib.contextmanager
def running_server(name: str, launch: Launch, ready: Ready,
                   env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Start the server ``launch(folder)`` describes, in a fresh temp folder (its log there too),
    and yield its endpoint once ``ready`` succeeds; stop it by PID and remove the folder on exit."""
    slug = name.lower().replace(" ", "-")
    for attempt in range(PORT_ATTEMPTS):
        work = Path(tempfile.mkdtemp(prefix=f"tstream-{slug}-"))
        log = work / "server.log"
        argv, endpoint = launch(work)
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work,
                                    start_new_session=True)
        try:
            try:
                wait_until_ready(name, endpoint, ready, proc, log, port_race_ok=attempt < PORT_ATTEMPTS - 1)
            except PortTaken:
                continue  # a parallel job bound a port chosen free first: choose again
            yield endpoint
            return
        finally:
            stop(proc)
            shutil.rmtree(work, ignore_errors=True)


def _fail(message: str) -> NoReturn:
    pytest.fail(message, pytrace=False)
