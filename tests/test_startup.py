"""Each Spark role imports only what it runs: a Python process starts no faster than its imports.

Spark starts Python processes all the time: the streaming source's driver-side runner once per
query (its start is on the query's critical path), a worker per task slot (each imports the
reader or writer it unpickles), a process per batch write's commit. Here importing the whole
package cost a process ~130 ms, and the first ``pa.array`` call ~0.2 s more (pyarrow imports
pandas to ask whether its argument is a pandas object); a task decoding a 50 MB chunk file costs
~30 ms. So a task imports no pandas, a worker does not import the journal, the planner or
compaction to read chunks, and the driver does not import fsck, compaction or the writer to plan
micro-batches.

Each test does one role's real work — unpickle what Spark ships, then read, write, plan or
commit — in a fresh interpreter (``process_roles.py``) and checks which modules it loaded.
``tests/benchmarks/bench_startup.py`` measures what each role costs its process.
"""

from __future__ import annotations

from pathlib import Path

import process_roles
import pytest
from pyspark_tstream.api.stream import Stream

P = "pyspark_tstream."

#: The core's parts that no task, and no planning driver, has any use for (a package's name stands
#: for all of it: its ``__init__`` loads with any of its modules).
MAINTENANCE = {P + m for m in ("maintain", "compaction", "maps.grouplog", "api.groups", "api.maintain",
                               "api.truncate", "cli")}
#: What plans reads: a task gets its plan in its partition and never plans.
PLANNING = {P + m for m in ("read.planner", "read.window", "read.ends", "read.tasks", "read.compacted")}
#: A reading task: chunks in, Arrow batches out; nothing that plans, commits or writes.
SOURCE_TASK_FORBIDDEN = MAINTENANCE | PLANNING | {P + m for m in (
    "api.stream", "api.context", "journal.journal", "journal.timeindex", "maps.macromap", "write",
    "epochs", "chunkfile.encoding")} | {"fsspec", "asyncio", "pyarrow.compute", "pandas"}
#: The streaming source's driver: opens the stream, plans micro-batches; never writes.
SOURCE_DRIVER_FORBIDDEN = MAINTENANCE | {P + m for m in (
    "write", "chunkfile.encoding", "api.append", "api.upkeep")} | {"pyarrow.compute", "pandas"}
#: A batch write's commit (a process of its own): one journal commit, then the upkeep it
#: triggers; checking a stream or running consumer groups is no part of it.
COMMIT_FORBIDDEN = {P + m for m in ("maintain", "maps.grouplog", "api.groups", "api.maintain", "cli")} | {
    "pandas"}
#: A writing task: rows in, chunk files out; the driver commits them.
SINK_TASK_FORBIDDEN = MAINTENANCE | PLANNING | {P + m for m in (
    "api.stream", "api.context", "journal.journal", "journal.timeindex", "maps.macromap", "write.commit",
    "read.reading", "epochs.scaling", "read.start")} | {"fsspec", "asyncio", "pandas"}


def _forbidden(loaded: frozenset[str], forbidden: set[str], role: str) -> None:
    extra = sorted(loaded & forbidden)
    assert not extra, f"{role} imported {extra}; it has no use for them (import them where they are used)"


def _loaded(jobs: dict[str, tuple[str, object]], name: str, tmp_path: Path) -> frozenset[str]:
    role, payload = jobs[name]
    return process_roles.run(role, payload, tmp_path).modules


@pytest.mark.parametrize("name", ["source task (stream)", "source task (batch)"])
def test_a_source_task_imports_only_what_reads_chunks(role_jobs: dict, name: str, tmp_path: Path) -> None:
    loaded = _loaded(role_jobs, name, tmp_path)
    assert P + "read.reading" in loaded  # the job did run (it also checked the rows it read)
    _forbidden(loaded, SOURCE_TASK_FORBIDDEN, name)


def test_the_source_driver_imports_no_writer_and_no_maintenance(role_jobs: dict, tmp_path: Path) -> None:
    loaded = _loaded(role_jobs, "source driver (plan a micro-batch)", tmp_path)
    assert P + "read.planner" in loaded
    _forbidden(loaded, SOURCE_DRIVER_FORBIDDEN, "the streaming source's driver")


@pytest.mark.parametrize("name", ["sink task (batch)", "sink task (stream)", "sink task (stream, Rows)"])
def test_a_sink_task_imports_only_what_writes_chunks(role_jobs: dict, name: str, tmp_path: Path) -> None:
    loaded = _loaded(role_jobs, name, tmp_path)
    assert P + "write.writing" in loaded
    _forbidden(loaded, SINK_TASK_FORBIDDEN, name)


def test_a_batch_write_commit_imports_no_maintenance(tmp_path: Path) -> None:
    url = process_roles.stream(tmp_path)
    role, payload = process_roles.jobs(url)["batch write commit"]
    loaded = process_roles.run(role, payload, tmp_path).modules
    assert P + "write.commit" in loaded
    _forbidden(loaded, COMMIT_FORBIDDEN, "a batch write's commit")
    assert sorted(Stream.open(url).read()["id"].to_pylist()) == list(range(120)) + list(range(10_000, 10_100))
