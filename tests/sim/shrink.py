"""Shrinking a failing seed: fewer actors, fewer operations, fewer faults, the same seed.

A failing seed's run is often long: many actors, many operations, a dozen faults of which one
or two matter. :func:`shrink` keeps the seed and greedily tries smaller profiles (each count of
actors and operations lowered, then each fault the run drew left out, one at a time), keeping
every change after which the seed still violates an invariant, within a budget of runs (first
of all: the run with none of its faults). The
result replays with ``TSTREAM_SIM_TWEAK`` (:func:`tweak_text`, :func:`apply_tweak`).

Leaving a fault out changes what follows it (a crash that no longer happens lets its actor run
on), so the shrunk run is another schedule of the same seed: a smaller failing one, not a
proof that the left-out faults are irrelevant to the original.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from .world import Profile, Violation, replay_command, simulate

#: The counts shrinking lowers, in this order (actors before their operations).
COUNTS = ("writers", "sinks", "compactions", "vacuumers", "vacuums", "readers", "scales", "truncations",
          "consumers", "batches", "sink_batches", "reads", "consumer_reads")
#: Counts of operations that matter only while their actors run.
OF_ACTORS = {"batches": "writers", "sink_batches": "sinks", "vacuums": "vacuumers", "reads": "readers",
             "consumer_reads": "consumers"}


@dataclass(frozen=True)
class Shrunk:
    """The smallest failing run found: its profile, the tweak that makes it from the named
    profile, its schedule's length, its violation and the runs shrinking took."""

    seed: int
    profile: Profile
    tweak: str
    first_steps: int  # the failing run's store calls before shrinking
    steps: int
    violation: str
    runs: int

    def command(self) -> str:
        return replay_command(self.seed, self.profile, self.tweak)


def tweak_text(base: Profile, shrunk: Profile) -> str:
    """The fields ``shrunk`` changes from ``base``: ``name=value`` joined by commas (a tuple's
    items by ``+``)."""
    out = []
    for f in fields(Profile):
        a, b = getattr(base, f.name), getattr(shrunk, f.name)
        if a != b:
            out.append(f"{f.name}={'+'.join(map(str, b)) if isinstance(b, tuple) else b}")
    return ",".join(out)


def apply_tweak(base: Profile, text: str) -> Profile:
    """``base`` with the changes of :func:`tweak_text` (integer counts and ``faults_off``)."""
    changes: dict[str, object] = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        if name == "faults_off":
            changes[name] = tuple(int(v) for v in value.split("+") if v)
        elif name in COUNTS:
            changes[name] = int(value)
        else:
            raise ValueError(f"TSTREAM_SIM_TWEAK: {name!r} is not a field shrinking changes; "
                             f"known: {', '.join((*COUNTS, 'faults_off'))}")
    return replace(base, **changes)  # type: ignore[arg-type]


def _violation(seed: int, profile: Profile) -> Violation | None:
    try:
        simulate(seed, profile)
    except Violation as e:
        return e
    return None


def shrink(seed: int, profile: Profile, budget: int = 40) -> Shrunk:
    """The smallest failing variant of ``seed`` of ``profile`` found within ``budget`` runs."""
    best = _violation(seed, profile)
    if best is None:
        raise ValueError(f"seed {seed} of {profile.name} does not fail: nothing to shrink")
    current, runs, first_steps = profile, 1, len(best.trace)

    def attempt(candidate: Profile) -> bool:
        nonlocal best, current, runs
        runs += 1
        found = _violation(seed, candidate)
        if found is None:
            return False
        best, current = found, candidate
        return True

    attempt(replace(current, faults_off=tuple(range(1, best.faults + 1))))  # none of the faults matters?
    for name in COUNTS:
        value = getattr(current, name)
        if name in OF_ACTORS and not getattr(current, OF_ACTORS[name]):
            continue
        for lower in range(value):  # the smallest count that still fails
            if runs >= budget:
                break
            if attempt(replace(current, **{name: lower})):
                break
    off = set(current.faults_off)
    for n in range(1, best.faults + 1):
        if runs >= budget:
            break
        if n not in off and attempt(replace(current, faults_off=tuple(sorted(off | {n})))):
            off.add(n)
    return Shrunk(seed, current, tweak_text(profile, current), first_steps, len(best.trace), str(best), runs)
