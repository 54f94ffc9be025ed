"""The long run: many seeds across profiles, in one process, with a running tally.

``cd tests && python -m sim.longrun --seeds 10000`` runs seeds ``--start`` on, round robin over
the profiles (so a run cut short has covered each alike), prints a line every ``--every`` seeds
and a table at the end: per profile the seeds run, the failing ones (each with its replay
command) and the CPU seconds. Exit status 1 when any seed failed.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from .profiles import PROFILES
from .world import replay_command, simulate

#: The profiles of today's code (the ``*-old-*`` ones put bugs back on purpose).
CLEAN = ("default", "all", "sinks", "vacuums", "compactions", "crashes", "autoscale", "torn", "checkpoints", "expiry",
         "first-writes", "requests", "crowd", "expiry-crowd", "sessions", "declared", "first-sinks", "backends",
         "buggify", "mount", "mount-stalls", "sink-stalls", "backends-s3", "damage", "upkeep")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seeds", type=int, default=10_000, help="seeds in all, shared by the profiles")
    p.add_argument("--start", type=int, default=100_000, help="the first seed")
    p.add_argument("--profiles", default=",".join(CLEAN), help="comma-separated profile names")
    p.add_argument("--every", type=int, default=200, help="print a tally every this many seeds")
    args = p.parse_args(argv)
    names = args.profiles.split(",")
    runs: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    failed: list[str] = []
    started = time.process_time()
    for i in range(args.seeds):
        name, seed = names[i % len(names)], args.start + i
        t = time.process_time()
        try:
            simulate(seed, PROFILES[name])
        except AssertionError as e:
            failed.append(f"{name} {seed}: {str(e).splitlines()[0][:200]}\n  {replay_command(seed, PROFILES[name])}")
            print(failed[-1], flush=True)
        runs[name] += 1
        cpu[name] += time.process_time() - t
        if (i + 1) % args.every == 0:
            print(f"{i + 1} seeds, {len(failed)} failed, {time.process_time() - started:.0f} CPU-s", flush=True)
    print(f"{'profile':12s} {'seeds':>6s} {'CPU-s':>8s} {'seeds/CPU-s':>11s}")
    for name in names:
        print(f"{name:12s} {runs[name]:6d} {cpu[name]:8.1f} {runs[name] / max(cpu[name], 1e-9):11.2f}")
    print(f"{'all':12s} {sum(runs.values()):6d} {sum(cpu.values()):8.1f}  failed: {len(failed)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    from pyspark_tstream.exits import exit_now  # an exit Arrow's thread pools cannot abort

    exit_now(main())
