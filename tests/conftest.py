"""Shared pytest setup for tstream's tests."""

from __future__ import annotations

import sys
from pathlib import Path

# --import-mode=importlib keeps tests/ off sys.path; the S3 server plugin lives there
sys.path.insert(0, str(Path(__file__).resolve().parent))

pytest_plugins = ["s3servers"]

import atexit  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import uuid  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable, Iterable, Iterator  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

# Every Spark JVM the tests start through spark-submit (the session of each xdist worker, the
# fresh processes of test_registration, Spark Connect's server, the matrix cells) compiles with
# C1 only and collects with the serial collector: these JVMs live minutes and run small queries,
# where C2's compiler threads and the parallel collector's threads are mostly overhead on 2
# cores. Measured on 2 cores: tests/test_spark_source.py 158 -> 110 CPU-s, 113 -> 101 s;
# tests/test_spark_sink.py 76 -> 49 CPU-s. Less load also keeps Spark's fixed 10 s limit for a
# new Python worker to connect back out of reach. Not set for the benchmarks (their figures
# compare against Spark's native paths with its default JIT). setdefault: a user's own wins.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Retention and compaction after Stream.append run in the committing call, not on a background
# thread (python/api/upkeep.py, the product's default): tests count store calls, inject crashes at
# the n-th call and read back what a commit left, which a background run would make racy. Inherited
# by child processes; tests/test_upkeep_background.py unsets it to pin the default.
os.environ.setdefault("TSTREAM_UPKEEP", "inline")
# a folder of this run's own for the stores that answered it (reach_memo), inherited by Spark's
# workers; made only when a memo is written, removed when the run ends
_MEMOS = os.path.join(tempfile.gettempdir(), f"tstream-test-memos-{os.getpid()}")
if "TSTREAM_MEMO_DIR" not in os.environ:
    os.environ["TSTREAM_MEMO_DIR"] = os.path.join(_MEMOS, "reached")
    atexit.register(shutil.rmtree, _MEMOS, ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def _forget_memory_objects() -> Iterator[None]:
    """Drop the ``memory://`` objects a test module made, when the module ends.

    fsspec's memory filesystem is one process-wide dict, and its listings (and ``histories.
    clone``) scan all of it: the 100,000-commit histories of the budget tests, left there, made
    every later ``memory://`` test several times slower (a compaction crash test: 20 s alone,
    190 s after them). Module scope, because module fixtures and caches (``test_budgets``'
    history, ``test_budgets_scale._history``) keep their streams across a module's tests.
    """
    from fsspec.implementations.memory import MemoryFileSystem

    before = set(MemoryFileSystem.store)
    dirs_before = set(MemoryFileSystem.pseudo_dirs)
    yield
    for key in set(MemoryFileSystem.store) - before:
        MemoryFileSystem.store.pop(key, None)
    MemoryFileSystem.pseudo_dirs[:] = [d for d in MemoryFileSystem.pseudo_dirs if d in dirs_before]


@pytest.fixture(params=["memory", "file"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh stream URL on a fast backend (the S3 servers have their own fixtures)."""
    if request.param == "memory":
        return f"memory://ts-{uuid.uuid4().hex}/stream"
    return f"file://{tmp_path}/stream"


class CallLog:
    """Counts store calls through ``Store.observer``; optionally raises at the n-th call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail_at: int | None = None
        self.error: type[BaseException] = RuntimeError

    def __call__(self, op: str, rel: str) -> None:
        self.calls.append((op, rel))
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            raise self.error(f"injected crash at store call {self.fail_at}: {op} {rel}")

    def reset(self) -> None:
        self.calls.clear()

    def count(self, *ops: str) -> int:
        return sum(1 for op, _ in self.calls if not ops or op in ops)

    def by_op(self) -> Counter[str]:
        return Counter(op for op, _ in self.calls)

    def metadata(self, *ops: str) -> int:
        """Calls on tstream metadata (not data chunks)."""
        return sum(1 for op, rel in self.calls if rel.startswith("_tstream/") and (not ops or op in ops))


def crash_at(s: Any, k: int, act: Callable[[Any], object]) -> CallLog:
    """``act(s)`` with the ``k``-th store call of stream ``s`` raising (an injected crash); the
    calls it made. The crash's ``RuntimeError`` is expected and dropped: the caller checks what
    the store holds."""
    crash = CallLog()
    crash.fail_at = k
    s.store.observer = crash
    try:
        act(s)
    except RuntimeError:
        pass
    s.store.observer = None
    return crash


def commits_in(entries: Iterable[Any]) -> list[tuple[Any, Any, int, list[Any]]]:
    """``(writer, batch, pos, chunks)`` of every commit in journal ``entries``: an entry that
    folded several (group commit) as its parts one by one, any other entry as itself."""
    out = []
    for e in entries:
        if not e.folds:
            out.append((e.writer, e.batch, e.pos, e.chunks))
            continue
        at = 0
        for f in e.folds:
            out.append((f.writer, f.batch, e.pos, e.chunks[at:at + f.chunks]))
            at += f.chunks
        assert at == len(e.chunks), f"entry {e.pos}: its parts cover exactly its chunks"
    return out


@pytest.fixture
def calllog() -> Iterator[CallLog]:
    yield CallLog()


@pytest.fixture(scope="module")
def role_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, object]]:
    """Each process role's job (``process_roles.jobs``) on one small stream per module."""
    import process_roles

    folder = tmp_path_factory.mktemp("roles")
    return process_roles.jobs(process_roles.stream(folder), checkpoint=str(folder / "ckpt"))


# spark / spark_connect session fixtures (tests/sparkfixtures.py)
pytest_plugins.append("sparkfixtures")
# Azurite and fake-gcs-server, and a fresh root on every backend (tests/servers.py)
pytest_plugins.append("servers")
# an rclone FUSE mount without hard links (tests/fuse_mount.py)
pytest_plugins.append("fuse_mount")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that move to the ``slow`` set (CI's second run) by a rule rather than one by one.

    - Every SeaweedFS case: the same tests run on moto in the default set; SeaweedFS is the
      second, slower S3 server (its process starts in seconds) and the cluster's store.
    - ``slow_on_file``: a crash-at-every-store-call loop whose ``memory://`` case stays in the
      default set; the ``file://`` case replays the same crash points over local files, whose
      own primitives (atomic create, rename) ``tests/test_storage.py`` pins in the default set.
    """
    slow = pytest.mark.slow
    for item in items:
        on_file = item.get_closest_marker("slow_on_file") is not None and "file" in getattr(
            getattr(item, "callspec", None), "params", {}).get("url", "")
        seaweedfs = item.get_closest_marker("seaweedfs") is not None or "seaweedfs_server" in getattr(
            item, "fixturenames", ())
        if seaweedfs or on_file:
            item.add_marker(slow)
