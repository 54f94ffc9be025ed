"""A finished tstream command ends through ``pyspark_tstream.exits.exit_now``: a normal exit
(code, output, worker threads, exit handlers) without the interpreter's teardown, where Arrow's
thread pools can abort a process whose work is done (apache/arrow#34314)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

_CHILD = """
import atexit, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pyarrow.parquet  # Parquet's thread pools loaded, as in every tstream command
folder = Path(sys.argv[1])
atexit.register(lambda: (folder / "handler").write_text("ran"))
def late():
    time.sleep(0.3)
    (folder / "worker").write_text("done")
ThreadPoolExecutor(1).submit(late)  # a worker still busy: joined as at a normal exit
sys.stdout.write("buffered, never flushed by hand")
from pyspark_tstream.exits import exit_now
exit_now(int(sys.argv[2]))
raise AssertionError("exit_now returned")
"""


def test_exit_now_is_a_normal_exit_without_teardown(tmp_path: Path) -> None:
    for code in (0, 3):
        folder = tmp_path / str(code)
        folder.mkdir()
        done = subprocess.run([sys.executable, "-c", _CHILD, str(folder), str(code)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == code, done.stderr[-3000:]
        assert done.stdout == "buffered, never flushed by hand" and "AssertionError" not in done.stderr
        assert (folder / "worker").read_text() == "done"  # the busy worker finished before the exit
        assert (folder / "handler").read_text() == "ran"  # and the exit handlers ran


def test_the_console_scripts_end_through_exit_now() -> None:
    scripts = {e.name: e.value for e in entry_points(group="console_scripts") if e.value.startswith("pyspark_tstream")}
    assert scripts == {"tstream": "pyspark_tstream.cli:console"}
    demo = (Path(__file__).resolve().parents[1] / "python" / "demo" / "__main__.py").read_text()
    assert "exit_now(0)" in demo
