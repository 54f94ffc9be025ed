"""The simulation finds the historical bugs: each put back behind a test-only switch
(``tests/sim/switches.py``), some seed of its profile reports it, with the command that replays it.

The default set runs the first seed known to find each (a few CPU-seconds); the ``slow`` set
pins the number of seeds within which the harness finds it, the figure ``docs/operations.md``
states. Each profile without its switch is clean on the same seeds (``test_simulation.py``'s
slow set runs them).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sim.profiles import PROFILES
from sim.world import simulate


@dataclass(frozen=True)
class Found:
    """A switched profile, the first seed that finds its bug, within how many seeds it must be
    found, and what the violation says."""

    profile: str
    first: int
    within: int
    says: str


FOUND = {
    # an abort deleted the files of a published group-commit request another writer then folded
    "abort": Found("sinks-old-abort", 9, 30, "named by the journal is missing"),
    # vacuum deleted chunks adopted as parts of a crashed compaction's map version
    "adopt": Found("compactions-old-adopt", 12, 40, "named by the journal is missing"),
    # a vacuum failed on a file another vacuum deleted between its listing and its age check
    "aged": Found("vacuums-old-aged", 18, 60, "no such object"),
    # orphan cleanup deleted the chunks of a published request another writer then folded
    "orphans": Found("crashes-old-orphans", 271, 300, "named by the journal is missing"),
    # a memory:// listing failed on a key another thread deleted between snapshot and lookup
    "listing": Found("default-old-listing", 0, 3, "no such object"),
}


def _violation(profile: str, seed: int) -> str | None:
    try:
        simulate(seed, PROFILES[profile])
    except AssertionError as e:
        return str(e)
    return None


def _check_report(f: Found, seed: int, text: str) -> None:
    assert f.says in text, text[:2000]
    assert f"TSTREAM_SIM_SEED={seed} TSTREAM_SIM_PROFILE={f.profile} " in text  # the replay command
    assert "last store calls" in text


@pytest.mark.parametrize("bug", sorted(FOUND))
def test_the_first_finding_seed_reports_the_bug(bug: str) -> None:
    f = FOUND[bug]
    text = _violation(f.profile, f.first)
    assert text is not None, f"seed {f.first} of {f.profile} no longer finds the {bug} bug"
    _check_report(f, f.first, text)
    clean = PROFILES[f.profile.rsplit("-old-", 1)[0]]
    simulate(f.first, clean)  # the same seed without the switch: the switch alone is the violation


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(FOUND))
def test_the_harness_finds_the_bug_within_its_stated_seeds(bug: str) -> None:
    f = FOUND[bug]
    for seed in range(f.within):
        text = _violation(f.profile, seed)
        if text is not None:
            _check_report(f, seed, text)
            return
    raise AssertionError(f"no seed of {f.within} of {f.profile} found the {bug} bug")


def test_shrinking_a_failing_seed_yields_a_shorter_failing_run() -> None:
    """The listing race put back: shrinking keeps the seed, drops actors, operations and
    faults while it still fails, and its replay command reproduces the smaller failure."""
    from sim.shrink import apply_tweak, shrink

    f = FOUND["listing"]
    small = shrink(f.first, PROFILES[f.profile], budget=15)
    assert small.steps < small.first_steps * 3 / 4, (small.first_steps, small.steps)
    assert f.says in small.violation
    assert small.profile.faults_off and small.profile.writers < PROFILES[f.profile].writers, small.tweak
    env = dict(item.split("=", 1) for item in small.command().split(" python ")[0].split())
    assert env["TSTREAM_SIM_TWEAK"] == small.tweak
    replayed = apply_tweak(PROFILES[env["TSTREAM_SIM_PROFILE"]], env["TSTREAM_SIM_TWEAK"])
    assert replayed == small.profile
    text: str | None = None
    try:
        simulate(int(env["TSTREAM_SIM_SEED"]), replayed)
    except AssertionError as e:
        text = str(e)
    assert text is not None and f.says in text, f"the shrunk replay did not fail: {small.command()}"
