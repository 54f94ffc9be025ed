"""Ending a tstream process whose work is done, without the interpreter's teardown.

Arrow's C++ thread pools (Parquet's reader among them) can still be alive while CPython tears
the interpreter down; on a loaded machine one is then destroyed while joinable and the process
aborts with "terminate called without an active exception" (SIGABRT, exit 134), after every line
of its output was written (apache/arrow#34314, #38352). A command's exit code is what scripts
and CI read, so a command that has finished ends through :func:`exit_now`: everything a normal
exit does that matters to tstream still happens (output flushed, worker threads joined, the exit
handlers that drain background hints and upkeep run), and only the teardown is skipped.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """End this process with ``code`` as a normal exit would, minus the interpreter's teardown."""
    _flush()
    # non-daemon threads (a ThreadPoolExecutor's workers: group commit's background deletes) are
    # joined here as at a normal exit; threading._shutdown is what CPython's own exit calls
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    _flush()  # what the exit handlers wrote
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe or stream: nothing left to say on it
