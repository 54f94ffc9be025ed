"""Who holds a claim, and whether that process is certainly gone.

A claim file (:mod:`~pyspark_tstream.store.claims`) records its holder: this machine's boot, the
process-id namespace, the process id and the process's start time. Another process of the same
machine, boot and namespace can then tell for certain that the holder is gone (no such process,
or a later one reusing its id): a process that is gone renames nothing more, so its claim may be
taken over without a lease. A holder of another machine (or namespace), a holder whose record is
unreadable, and a live one (perhaps paused, by a GC or a suspended VM) are never "gone".
Linux only (``/proc``); elsewhere no holder is ever known to be gone.
"""

from __future__ import annotations

import functools
import os


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return ""


@functools.cache
def _machine() -> str:
    """This boot of this machine and this process-id namespace ("" where unknown)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}/{ns}" if boot else ""


def _started(pid: int) -> str:
    """The start time of process ``pid`` (clock ticks since boot), "" when there is none."""
    stat = _read(f"/proc/{pid}/stat")
    # the command name (field 2) may hold spaces and parentheses: fields count from the last ")"
    fields = stat[stat.rfind(")") + 2:].split() if stat else []
    return fields[19] if len(fields) > 19 else ""


def identity() -> str:
    """This process as a claim records its holder ("" where the machine cannot be named)."""
    machine = _machine()
    return f"{machine} {os.getpid()} {_started(os.getpid())}" if machine else ""


def local(holder: str) -> bool:
    """Whether ``holder`` (:func:`identity`'s text) names a process of this machine's boot and
    process-id namespace."""
    parts = holder.split()
    return len(parts) == 3 and parts[1].isdigit() and bool(_machine()) and parts[0] == _machine()


def gone(holder: str) -> bool:
    """Whether the process ``holder`` (:func:`identity`'s text) is certainly gone: it is
    :func:`local`, and no process with its id and start time exists."""
    parts = holder.split()
    return local(holder) and _started(int(parts[1])) != parts[2]
