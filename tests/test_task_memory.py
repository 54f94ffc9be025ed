"""Spark tasks keep the memory they free (``task_memory``), and nothing else changes allocators.

Each check runs in a fresh interpreter, as Spark's workers do: the setting is per process (and
other tests run a task's code inside the test process, which then keeps freed memory too).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import process_roles
import pytest
from helpers import CHILD_EXIT
from pyspark_tstream.spark.task_memory import ENV

glibc_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="task_memory tunes glibc's malloc: Linux with glibc only (elsewhere it changes nothing)")

_CYCLES = """
import json, sys, time
import numpy as np, pyarrow as pa
from pyspark_tstream.spark.task_memory import keep_freed_memory
applied = [keep_freed_memory() for _ in range(2)] if sys.argv[1] == "keep" else []

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

returned = []
for cycle in range(12):
    buf = pa.allocate_buffer(32 << 20)           # Arrow's default pool
    np.frombuffer(buf, dtype=np.uint8)[:] = 1   # touch every page
    arr = np.ones(4 << 20)                      # numpy: glibc malloc, 32 MB
    held = rss()
    del buf, arr
    time.sleep(0.05)                            # long enough for an allocator's delayed purge
    returned.append(held - rss())               # what went back to the kernel (faults in again)
print(json.dumps([applied, pa.default_memory_pool().backend_name, returned]))""" + CHILD_EXIT


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process these tests start inherits neither variable that changes the outcome."""
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)


def _cycles(mode: str, **env: str) -> tuple[list[bool], str, list[int]]:
    done = subprocess.run([sys.executable, "-c", _CYCLES, mode], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    applied, pool, returned = json.loads(done.stdout.strip().splitlines()[-1])
    return applied, pool, returned


def _fresh_pool() -> str:
    return subprocess.run([sys.executable, "-c", "import pyarrow; print(pyarrow.default_memory_pool().backend_name)"],
                          capture_output=True, text=True, check=True).stdout.strip()


@glibc_linux
def test_freed_memory_stays_with_the_process() -> None:
    # what the setting is for: by default the 64 MB freed each cycle goes back to the kernel
    # (and is faulted in and zeroed again by the next cycle)
    _, pool, returned = _cycles("default")
    assert pool == _fresh_pool()
    assert min(returned[2:]) >= 32 << 20, returned
    applied, pool, returned = _cycles("keep")
    assert applied == [True, True]  # once per process, then the same answer
    assert pool == "system"
    assert max(returned[2:]) < 4 << 20, returned


@glibc_linux
def test_the_environment_turns_it_off() -> None:
    applied, pool, _ = _cycles("keep", **{ENV: "default"})
    assert applied == [False, False]
    assert pool == _fresh_pool()


@glibc_linux
def test_a_pool_the_worker_was_given_is_kept() -> None:
    applied, pool, _ = _cycles("keep", ARROW_DEFAULT_MEMORY_POOL="jemalloc")
    assert applied == [True, True]  # glibc's settings still apply (numpy's arrays)
    assert pool == "jemalloc"


@glibc_linux
@pytest.mark.parametrize("name", ["source task (stream)", "source task (batch)", "sink task (batch)",
                                  "sink task (stream)"])
def test_a_task_keeps_freed_memory(role_jobs: dict, name: str, tmp_path: Path) -> None:
    role, payload = role_jobs[name]
    assert process_roles.run(role, payload, tmp_path).pool == "system"


@pytest.mark.parametrize("name", ["source driver (plan a micro-batch)", "batch write commit"])
def test_driver_side_processes_keep_their_allocator(role_jobs: dict, name: str, tmp_path: Path) -> None:
    role, payload = role_jobs[name]
    assert process_roles.run(role, payload, tmp_path).pool == _fresh_pool()


_API = """
import sys
import pyarrow as pa
sys.path.insert(0, sys.argv[2])
import process_roles
from pyspark_tstream.api.stream import Stream
s = Stream.create(f"file://{sys.argv[1]}/s", segments=2)
s.append(process_roles.rows_for(pa.schema([("id", pa.int64()), ("k", pa.string()), ("t", pa.int64())]),
                                list(range(10))), key="k", timestamp="t")
assert s.read().num_rows == 10
print(pa.default_memory_pool().backend_name, flush=True)
""" + CHILD_EXIT


def test_the_python_api_keeps_its_callers_allocator(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _API, str(tmp_path), str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == _fresh_pool()
