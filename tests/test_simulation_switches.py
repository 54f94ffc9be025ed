"""The simulation finds the historical bugs: each put back behind a test-only switch
(``tests/sim/switches.py``), some seed of its profile reports it, with the command that replays it;
so does one planted bug no release had (a floor that ignores the tick), which only the readers'
tick check catches.

Each test searches seeds from 0 up to the bound ``docs/operations.md`` states and passes at the
first that finds the bug; a seed is not pinned, since any change to the store calls a seed makes
moves where its faults land. The default set searches for the bugs found within a few seeds (a
few CPU-seconds); the ``slow`` set for the others. Each profile without its switch is clean on
the finding seed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from sim.profiles import PROFILES
from sim.world import Profile, simulate


@dataclass(frozen=True)
class Found:
    """A switched profile, within how many seeds its bug must be found, what the violation says,
    and whether the default set searches for it (the slow set always does)."""

    profile: str
    within: int
    says: str
    quick: bool = True
    #: other ways the same bug may be reported first (fsck meeting the lost file before a read)
    or_says: tuple[str, ...] = ()

    def told(self, text: str) -> bool:
        """Whether ``text`` reports this bug."""
        return any(s in text for s in (self.says, *self.or_says))


#: Seeds within which the orphan-cleanup race is found: the rarest (a writer dead right after
#: publishing its request and back late, the request folded meanwhile), so its profile places a
#: crash right after every publication; 8 of seeds 0-59 of `requests-old-orphans` find it, the
#: first seed 4 (`crashes-old-orphans`, crashes anywhere alike: seed 724 first, before group
#: commit's leaders and waiters).
ORPHANS_WITHIN = 60

FOUND = {
    # an abort deleted the files of a published group-commit request another writer then folded
    "abort": Found("sinks-old-abort", 40, "named by the journal is missing"),
    # vacuum deleted chunks adopted as parts of a crashed compaction's map version
    "adopt": Found("compactions-old-adopt", 40, "named by the journal is missing"),
    # a vacuum failed on a file another vacuum deleted between its listing and its age check
    "aged": Found("vacuums-old-aged", 60, "no such object", quick=False),
    # orphan cleanup deleted the chunks of a published request another writer then folded
    "orphans": Found("requests-old-orphans", ORPHANS_WITHIN, "named by the journal is missing", quick=False),
    # a memory:// listing failed on a key another thread deleted between snapshot and lookup
    "listing": Found("default-old-listing", 10, "no such object"),
    # a settled published request's files deleted while a fold after its writer's expiry could
    # still name them, both ways a commit meets it
    # (first seed 37 since commits confirm a newest entry known through the head hint alone: the
    # slow set searches; tests/test_group_commit_settled.py pins both ways in the default set)
    "settled": Found("expiry-crowd-old-settled", 60, "named by the journal is missing", quick=False),
    # the second way alone: an entry of others' requests left out its committer's settled one
    "unowned": Found("expiry-crowd-old-unowned", 120, "named by the journal is missing", quick=False,
                     or_says=("which is gone or unreadable, while the files it replaced",)),
    # planted, never shipped: floors above the writer's lane alone, not the tick; only the
    # readers' check that no record appears at or below a tick they were given catches it
    "floor": Found("default-planted-floor", 20, "appeared at or below tick"),
    # planted: expiry drops a declared writer like any other; the journal's history catches it
    "declared": Found("declared-planted-expired", 10, "dropped declared writer"),
    # the orphan-cleanup race again, under buggify's knobs (a 1.5 s grace, a crash after half the
    # publications, waiters racing after one poll): found within a few seeds, not 60
    "orphans-buggify": Found("buggify-old-orphans", 10, "named by the journal is missing"),
    # planted: the cloud backends miss a lost create's 409/412; the backends profile's check that
    # every injected failure is translated (retriable, or "exists") catches it
    "conflict": Found("backends-planted-conflict", 10, "did not classify"),
    # no orphan fence: a sink driver stalled past the orphan grace committed its tasks' files
    # though orphan cleanup had deleted them meanwhile
    "unfenced": Found("sink-stalls-old-unfenced", 10, "named by the journal is missing"),
}


def _clean(f: Found) -> Profile:
    """The profile ``f`` switches a bug into, as it runs today's code."""
    return PROFILES[re.split(r"-(?:old|planted)-", f.profile, maxsplit=1)[0]]


def _violation(profile: str, seed: int) -> str | None:
    try:
        simulate(seed, PROFILES[profile])
    except AssertionError as e:
        return str(e)
    return None


def _check_report(f: Found, seed: int, text: str) -> None:
    assert f.told(text), text[:2000]
    assert f"TSTREAM_SIM_SEED={seed} TSTREAM_SIM_PROFILE={f.profile} " in text  # the replay command
    assert "last store calls" in text


def _first_finding(f: Found) -> tuple[int, str]:
    """The first seed below ``f.within`` whose run reports the bug, and its report."""
    for seed in range(f.within):
        text = _violation(f.profile, seed)
        if text is not None:
            _check_report(f, seed, text)
            return seed, text
    raise AssertionError(f"no seed of {f.within} of {f.profile} found its bug")


@pytest.mark.parametrize("bug", sorted(b for b, f in FOUND.items() if f.quick))
def test_the_harness_finds_the_bug_within_a_few_seeds(bug: str) -> None:
    f = FOUND[bug]
    seed, _ = _first_finding(f)
    simulate(seed, _clean(f))  # the same seed without the switch: the switch alone is the violation


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(b for b, f in FOUND.items() if not f.quick))
def test_the_harness_finds_the_bug_within_its_stated_seeds(bug: str) -> None:
    f = FOUND[bug]
    seed, _ = _first_finding(f)
    simulate(seed, _clean(f))


def test_shrinking_a_failing_seed_yields_a_shorter_failing_run() -> None:
    """The listing race put back: shrinking keeps the seed, drops actors, operations and
    faults while it still fails, and its replay command reproduces the smaller failure."""
    from sim.shrink import apply_tweak, shrink

    f = FOUND["listing"]
    first, _ = _first_finding(f)
    small = shrink(first, PROFILES[f.profile], budget=25)
    assert small.steps < small.first_steps * 3 / 4, (small.first_steps, small.steps)
    assert f.says in small.violation
    whole = PROFILES[f.profile]
    fewer = [n for n in ("writers", "batches", "sinks", "sink_batches", "readers", "compactions")
             if getattr(small.profile, n) < getattr(whole, n)]
    assert small.profile.faults_off and fewer, small.tweak  # fewer actors or operations
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
