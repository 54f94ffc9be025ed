"""Benchmark data and bookkeeping shared by the benchmark scripts (no Spark here: see ``_spark.py``).

The dataset is the one ``/work/shared/research/perf-baseline.md`` measured: increasing epoch-ms
``ts``, a 1000-value string ``key``, an int64 ``val`` and a 64-byte hex ``body``. It is generated
once with pyarrow (seeded, so every run compares the same rows) and written as a folder of
Parquet files that both Spark's native reader and tstream's sink consume.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

KEYS = 1000
BODY_BYTES = 64
#: Rows per input file: like a landing folder of mid-sized files (Spark packs them into tasks).
ROWS_PER_FILE = 250_000
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)

if TYPE_CHECKING:
    from pyspark_tstream.api.stream import Stream


def make_table(rows: int, *, body_type: str = "string", seed: int = 7) -> pa.Table:
    """``rows`` records: ts (ms, +1 per row, ending a day ago), key, val, body (hex text).

    The timestamps end in the past so that no sink caps them at arrival time: the write path is
    measured without the (rare) capping work.
    """
    rng = np.random.default_rng(seed)
    base = time.time_ns() // 1_000_000 - 86_400_000 - rows
    ts = np.arange(base, base + rows, dtype=np.int64)
    names = pa.array([f"key-{i:04d}" for i in range(KEYS)], pa.string())
    key = names.take(pa.array(rng.integers(0, KEYS, rows)))
    val = rng.integers(-(10 ** 12), 10 ** 12, rows, dtype=np.int64)
    raw = np.frombuffer(rng.bytes(rows * BODY_BYTES // 2), dtype=np.uint8)
    text = np.empty(rows * BODY_BYTES, dtype=np.uint8)
    text[0::2], text[1::2] = _HEX[raw >> 4], _HEX[raw & 15]
    offsets = np.arange(0, (rows + 1) * BODY_BYTES, BODY_BYTES, dtype=np.int32)
    btype = pa.string() if body_type == "string" else pa.binary()
    body = pa.Array.from_buffers(btype, rows, [None, pa.py_buffer(offsets), pa.py_buffer(text)])
    return pa.table({"ts": ts, "key": key, "val": val, "body": body})


def write_input(table: pa.Table, folder: str) -> list[str]:
    """``table`` as ``part-NNNN.parquet`` files of about :data:`ROWS_PER_FILE` rows (snappy)."""
    os.makedirs(folder, exist_ok=True)
    files = max(1, min(50, -(-table.num_rows // ROWS_PER_FILE)))
    per = -(-table.num_rows // files)
    paths = []
    for i in range(files):
        path = os.path.join(folder, f"part-{i:04d}.parquet")
        # dictionary only on key: the default would dictionary-encode the random body too
        pq.write_table(table.slice(i * per, per), path, compression="snappy", use_dictionary=["key"])
        paths.append(path)
    return paths


def folder_bytes(folder: str) -> tuple[int, int]:
    """(number of Parquet files, total bytes) under ``folder``."""
    n = size = 0
    for root, _, names in os.walk(folder):
        for name in names:
            if name.endswith(".parquet"):
                n += 1
                size += os.path.getsize(os.path.join(root, name))
    return n, size


class CpuMeter:
    """CPU seconds of a JVM and of its descendant processes (the Python workers), from /proc.

    A query's CPU split shows where the cores went: Spark's JVM (scan, Arrow conversion,
    Parquet write) or Python (tstream's own code, Arrow IPC). A process that exits is counted
    through its parent's ``cutime`` when reaped, possibly during a later query, so
    :meth:`between` charges each process only the CPU it used between the two snapshots.
    Elsewhere than Linux every reading is 0.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def snapshot(self) -> tuple[float, float, dict[int, float]]:
        """(JVM threads, JVM's reaped children, {descendant pid: its CPU incl. reaped children})."""
        stats: dict[int, tuple[int, float, float]] = {}
        try:
            names = os.listdir("/proc")
        except OSError:
            return 0.0, 0.0, {}
        for name in names:
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                utime, stime, cutime, cstime = (int(x) / self.tick for x in fields[11:15])
                stats[int(name)] = (int(fields[1]), utime + stime, cutime + cstime)
            except (OSError, IndexError, ValueError):
                continue
        if self.pid not in stats:
            return 0.0, 0.0, {}
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        desc: dict[int, float] = {}
        todo = list(children.get(self.pid, []))
        while todo:
            pid = todo.pop()
            desc[pid] = stats[pid][1] + stats[pid][2]
            todo.extend(children.get(pid, []))
        return stats[self.pid][1], stats[self.pid][2], desc

    @staticmethod
    def between(a: tuple[float, float, dict[int, float]],
                b: tuple[float, float, dict[int, float]]) -> tuple[float, float]:
        """(JVM, Python) CPU seconds used from snapshot ``a`` to snapshot ``b``."""
        jvm = b[0] - a[0]
        python = b[1] - a[1] + sum(cpu - a[2].get(pid, 0.0) for pid, cpu in b[2].items())
        # a process gone since ``a`` shows up whole in its parent's cutime: take back what ``a`` saw
        python -= sum(cpu for pid, cpu in a[2].items() if pid not in b[2])
        return jvm, max(python, 0.0)


#: The runs of a :class:`Pair`, in the order they are reported; ratios are native's wall over each.
SIDES = ("tstream", "native", "floor", "stored")


@dataclass
class Pair:
    """One comparison: a tstream variant against its native twin (and a floor), back to back.

    The floor is the same query through a do-nothing Python data source: what PySpark alone
    costs for a Python source or sink of this shape; ``stored`` (sinks) the same sink writing
    what it is given to Parquet files, the least any Python sink that keeps its rows does.
    """

    group: str
    name: str
    tstream: Callable[[int], dict[str, Any]]
    native: Callable[[int], dict[str, Any]]
    floor: Callable[[int], dict[str, Any]] | None = None
    stored: Callable[[int], dict[str, Any]] | None = None
    walls: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    ratios: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES if s != "native"})
    details: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {s: [] for s in SIDES})

    def run(self, round_no: int, *, record: bool) -> None:
        # rotate which side goes first: none always gets the warmer caches
        sides = [s for s in SIDES if getattr(self, s) is not None]
        k = round_no % len(sides)
        got: dict[str, float] = {}
        for side in sides[k:] + sides[:k]:
            detail = getattr(self, side)(round_no)
            got[side] = detail["wall"]
            if record:
                self.walls[side].append(detail["wall"])
                self.details[side].append(detail)
        if record:
            for side in self.ratios:
                if side in got:
                    self.ratios[side].append(got["native"] / got[side])


class StoreCalls:
    """Counts store calls seen through ``Store.observer`` (the unit of tstream's cost budgets)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, op: str, rel: str) -> None:
        self.n += 1


def counted_stream(url: str) -> tuple[Stream, StoreCalls]:
    """A fresh handle on the stream at ``url``, its store calls counted from the journal read that
    opens it (reset ``n`` to count only what follows)."""
    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.journal.journal import Journal
    from pyspark_tstream.store.storage import Store

    calls = StoreCalls()
    store = Store(url)
    store.observer = calls
    return Stream(store, Journal(store).head()), calls


def report(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], note: str) -> str:
    """A benchmark's printed result: ``# title``, the table (:func:`render`), then what it means."""
    return f"# {title}\n\n{render(headers, rows)}\n\n{note}"


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def spread(xs: Sequence[float]) -> str:
    return f"{min(xs):.2f}–{max(xs):.2f}" if xs else "-"


def render(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-style Markdown table (numbers right-aligned)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    numeric = [all(_numeric(r[i]) for r in cells) and bool(cells) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.rjust(w) if num else v.ljust(w)
                                 for v, w, num in zip(values, widths, numeric)) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2)) for w, num in zip(widths, numeric)) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in cells])


def _numeric(text: str) -> bool:
    if text == "-":
        return True
    t = text.replace("×", "").replace("%", "").replace(",", "").replace("–", "").replace(".", "").replace("-", "")
    return t.isdigit()
