"""What each Python process Spark starts for tstream pays before and for its first work.

    python tests/benchmarks/bench_startup.py            # 7 fresh processes per role
    python tests/benchmarks/bench_startup.py --smoke    # 2 per role, for CI

Spark starts Python processes for tstream all the time: the streaming source's driver-side
runner once per query (on the query's critical path), a worker per task slot, a process per
batch write's commit. Each role's real work — unpickle what Spark ships, then plan, read, write
or commit a small stream — runs in a fresh interpreter that starts as a PySpark worker does
(``tests/process_roles.py``); the figure is the time from unpickling to done, so it is mostly
imports: the work itself is a few milliseconds. "pandas" says whether the role loaded pandas
(pyarrow does on the first ``pa.array`` call, ~0.2 s; see ``pyspark_tstream/arrow_arrays.py``).

Each role runs twice per round: with tstream's bytecode (``.pyc``) written, as a wheel installed
by pip has it, and from a copy of its sources without bytecode, under
``PYTHONDONTWRITEBYTECODE=1``: what an editable install on a machine that sets that variable
pays in every process Spark starts (this one sets it).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import process_roles
from _data import report
from _spark import write_bytecode

NOTE = ("ms = time from unpickling the job to its end in a fresh interpreter that has PySpark, pyarrow "
        "and numpy loaded (as a PySpark worker has), median [min] over the processes: with tstream's "
        "bytecode (a pip-installed wheel), and from its sources without bytecode (an editable install "
        "under PYTHONDONTWRITEBYTECODE=1); modules = pyspark_tstream modules the role loaded.")
VARIANTS = ("bytecode", "source")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=7, help="fresh processes per role")
    ap.add_argument("--smoke", action="store_true", help="2 processes per role (CI)")
    args = ap.parse_args()
    n = 2 if args.smoke else args.processes
    installed = write_bytecode()
    seconds: dict[tuple[str, str], list[float]] = {}
    modules: dict[str, frozenset[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # the sources alone, found first on the path: no .pyc next to them, none written
        sources = Path(tmp) / "sources"
        shutil.copytree(installed, sources / "pyspark_tstream", ignore=shutil.ignore_patterns("__pycache__"))
        envs = {"bytecode": None,
                "source": {"PYTHONPATH": str(sources), "PYTHONDONTWRITEBYTECODE": "1"}}
        for i in range(n):
            # a fresh stream each round: a batch write's commit commits its chunks once
            folder = Path(tmp) / f"r{i}"
            folder.mkdir()
            url = process_roles.stream(folder)
            for variant in VARIANTS:  # each its own jobs: a commit's chunks can be committed once
                for name, (role, payload) in process_roles.jobs(url, checkpoint=str(folder / "ckpt")).items():
                    outcome = process_roles.run(role, payload, folder, envs[variant])
                    from_copy = outcome.package.startswith(str(sources))
                    if from_copy != (variant == "source"):
                        raise AssertionError(f"{name} ({variant}) imported tstream from {outcome.package}")
                    seconds.setdefault((name, variant), []).append(outcome.seconds)
                    modules[name] = outcome.modules
    rows = []
    for name in modules:
        ours = sorted(m for m in modules[name] if m.startswith("pyspark_tstream"))
        rows.append([name, *(f"{statistics.median(xs) * 1000:.0f} [{min(xs) * 1000:.0f}]"
                             for xs in (seconds[(name, v)] for v in VARIANTS)), len(ours),
                     "yes" if "pandas" in modules[name] else "no",
                     "yes" if "fsspec" in modules[name] else "no"])
    print(report(f"Python process start per role ({n} processes each, {sys.version.split()[0]})",
                 ["role", "ms with bytecode [min]", "ms from source [min]", "modules", "pandas", "fsspec"],
                 rows, NOTE))


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    main()
    exit_now(0)
