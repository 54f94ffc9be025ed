"""A Spark standalone cluster from the installed pyspark: one master and N workers (1 core each).

Each daemon runs in its own process group, so a test can SIGKILL a worker together with its
executor and Python workers, and every process is stopped by PID on exit. Drivers run as child
Python processes (their own group too) so a test can SIGKILL one mid-stream.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from s3servers import HOST, free_ports

_START_TIMEOUT_S = 120.0


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def _env(work: Path) -> dict[str, str]:
    return dict(os.environ, SPARK_HOME=spark_home(), SPARK_LOCAL_IP=HOST, SPARK_LOCAL_DIRS=str(work),
                SPARK_DAEMON_MEMORY="256m", PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                SPARK_NO_DAEMONIZE="1")


def kill_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Signal ``proc``'s whole process group (its JVM children and Python workers too)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)


def stop(proc: subprocess.Popen[bytes]) -> None:
    kill_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        kill_group(proc, signal.SIGKILL)
        proc.wait(timeout=20)
    # the group may outlive its leader (executors): make sure nothing of it is left
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        content = log.read_text(errors="replace") if log.exists() else ""
        if text in content:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{content[-3000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready after {_START_TIMEOUT_S:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


@dataclass
class Cluster:
    master_url: str
    work: Path
    master: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def driver(self, script: str, *args: str, log_name: str = "driver.log") -> subprocess.Popen[bytes]:
        """Run ``script`` (Python source) as a driver process in its own process group."""
        path = self.work / f"driver-{len(self.procs)}.py"
        path.write_text(script)
        out = open(self.work / log_name, "ab")  # noqa: SIM115 - owned by the child until it exits
        proc = subprocess.Popen([sys.executable, str(path), self.master_url, *args], stdout=out,
                                stderr=subprocess.STDOUT, env=_env(self.work), cwd=self.work,
                                start_new_session=True)
        self.procs.append(proc)
        return proc


@contextlib.contextmanager
def standalone_cluster(workers: int = 2) -> Iterator[Cluster]:
    """Master + ``workers`` workers (1 core, 1 GB each) on loopback; everything stopped on exit."""
    work = Path(tempfile.mkdtemp(prefix="tstream-cluster-"))
    spark_class = os.path.join(spark_home(), "bin", "spark-class")
    env = _env(work)
    port, ui = free_ports(2)
    log = work / "master.log"
    with open(log, "wb") as out:
        master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", HOST,
                                   "--port", str(port), "--webui-port", str(ui)],
                                  stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True)
    cluster = Cluster(f"spark://{HOST}:{port}", work, master)
    try:
        _wait_for(log, "I have been elected leader", master, "Spark master")
        for i in range(workers):
            wlog = work / f"worker-{i}.log"
            wdir = work / f"worker-{i}"
            wdir.mkdir()
            with open(wlog, "wb") as out:
                w = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", cluster.master_url,
                                      "--cores", "1", "--memory", "1g", "--host", HOST, "--webui-port", "0",
                                      "--work-dir", str(wdir)],
                                     stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work,
                                     start_new_session=True)
            cluster.workers.append(w)
        for i, w in enumerate(cluster.workers):
            _wait_for(work / f"worker-{i}.log", "Successfully registered with master", w, f"Spark worker {i}")
        yield cluster
    finally:
        for p in cluster.procs + cluster.workers + [master]:
            stop(p)
        import shutil

        shutil.rmtree(work, ignore_errors=True)
