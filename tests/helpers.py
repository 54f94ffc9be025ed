"""Constants and small checks shared by tstream's tests: each defined once, here.

Tests run with ``--import-mode=importlib`` and ``tests/`` is not a package; ``conftest.py`` puts
this folder on ``sys.path``, so a test imports these with ``from helpers import ...``. Fixtures
live in ``conftest.py``; streams built for one family of tests live beside them
(``histories.py``, ``compaction_streams.py``, ``process_roles.py``, ``group_requests.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.maintain.fsck_report import Report
from pyspark_tstream.maintain.retention import orphan_files
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import Store
from pyspark_tstream.timestamps import now_ms

if TYPE_CHECKING:
    from conftest import CallLog

#: The event time (ms since the epoch, November 2023) test data starts at: recent enough to be
#: a real date, fixed so that runs are repeatable.
T0 = 1_700_000_000_000
#: One day in milliseconds.
DAY = 86_400_000
#: The order that makes two reads of the same records compare equal: storage order.
ORDER = [("_segment", "ascending"), ("_seq", "ascending")]
#: A store secret the credential tests pass in and then look for: in no log, error, plan or pickle.
SECRET = "S3CR3T-ABC123"

#: The last lines of a child interpreter's script (``python -c``) once its answer is printed:
#: the exit a finished tstream command takes (``pyspark_tstream.exits``), which Arrow's thread
#: pools cannot abort during the interpreter's teardown on a loaded machine.
CHILD_EXIT = """
from pyspark_tstream.exits import exit_now
exit_now(0)
"""

#: The repository's root folder, and what tests read from it.
ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The core package's folder (``pyspark_tstream`` without its Spark adapters).
CORE_DIR = ROOT / "python"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``tstream argv...`` in this process: its exit code, stdout and stderr."""
    from pyspark_tstream.cli import app as cli

    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def orphans(s: Stream) -> set[str]:
    """Data files no commit names (what would leak until ``vacuum(orphans=True)``)."""
    return set(orphan_files(s.store, s.journal, s.refresh(), now_ms(), 0))


def check_segments(t: pa.Table, from_zero: bool = True, lane: str | None = None) -> None:
    """Per segment ``_seq`` is dense (from 0, or from its first value); ``_tso`` strictly
    increases in ``_seq`` order per segment, or with ``lane`` per writer lane (segment x
    ``lane`` column): across lanes it need not, writer lanes tick apart."""
    for seg in pc.unique(t["_segment"]).to_pylist():
        part = t.filter(pc.equal(t["_segment"], seg)).sort_by("_seq")
        seq = part["_seq"].to_numpy()
        first = 0 if from_zero else int(seq[0])
        assert seq.tolist() == list(range(first, first + len(seq))), f"segment {seg}: _seq not dense"
        lanes = {"": part} if lane is None else {f" lane {w}": part.filter(pc.equal(part[lane], w))
                                                 for w in pc.unique(part[lane]).to_pylist()}
        for name, mine in lanes.items():
            assert np.all(np.diff(mine["_tso"].to_numpy()) > 0), f"segment {seg}{name}: _tso not increasing"


def wait_for(cond: Callable[[], Any], timeout: float, what: str, proc: Any = None, every: float = 0.2) -> None:
    """Poll ``cond`` every ``every`` seconds until it holds; fail naming ``what`` after
    ``timeout`` seconds, or as soon as the process ``proc`` (if given) has exited."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


class DataBytes:
    """Counts the bytes of data files ``store`` hands out through its reads (``read_range`` and
    ``read_many``, wrapped from now on): ``total``. Metadata reads are not counted."""

    def __init__(self, store: Store) -> None:
        self.total = 0
        read_range, read_many = store.read_range, store.read_many

        def counted_range(rel: str, start: int, end: int) -> bytes:
            out = read_range(rel, start, end)
            self.total += len(out) if layout.is_data_file(rel) else 0
            return out

        def counted_many(rels: Sequence[str], *, mapped: bool = False) -> list[bytes]:
            out = read_many(rels, mapped=mapped)
            self.total += sum(len(b) for r, b in zip(rels, out) if layout.is_data_file(r))
            return out

        store.read_range = counted_range  # type: ignore[method-assign]
        store.read_many = counted_many  # type: ignore[method-assign]


def counted_verify(url: str, footers_only: bool) -> tuple[Report, CallLog, int]:
    """``verify(footers_only=...)`` of the stream at ``url``, freshly opened: its report, the
    store calls it made and the bytes of data files it read."""
    from conftest import CallLog  # not at the top: scripts the tests start import this module too

    s = Stream.open(url)
    log, counted = CallLog(), DataBytes(s.store)
    s.store.observer = log
    report = s.verify(footers_only=footers_only)
    return report, log, counted.total
