"""Nothing is lost under any interleaving the seeds reach: a deterministic simulation of every actor.

Writers (``Stream.append`` with (writer, batch) ids, folding each other's group-commit
requests), the Spark sink's commit and abort (``JournalCommitter``), compaction, vacuum (with and
without orphan cleanup), scaling, truncation and trim, readers and consumer-group members run as
threads on one ``memory://`` stream, one at a time, switching at every store call; the schedule,
the clock, every id and every fault (a crash between any two store calls, a store error past
the retries, a transient error the retry absorbs, a conditional create applied with its answer
lost) come from the seed (``tests/sim``). Profiles write checkpoints of the state every few
entries, let writers expire mid-run (declared writers never), start with no stream for first
writes and first sinks to race, fail as S3, Azure or GCS do, turn buggify's knobs, commit
through a FUSE mount's claims (with holders stalled past the claim grace, the hole a test here
pins closed), and damage metadata while an operator runs ``tstream repair``. A
failing seed's message holds the line that replays it and the last store calls.
``TSTREAM_SIM_SEEDS`` sets how many seeds the default set runs, ``TSTREAM_SIM_SLOW_SEEDS`` the
``slow`` set.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from pyspark_tstream.api import creation
from pyspark_tstream.api.upkeep import UPKEEP_ENV
from pyspark_tstream.store.layout import MACROS
from sim.profiles import PROFILES
from sim.scheduler import Crash, Faults, Scheduler
from sim.shrink import apply_tweak, shrink
from sim.world import Profile, simulate

#: Seeds of each profile in the default set.
SEEDS = int(os.environ.get("TSTREAM_SIM_SEEDS", "8"))
#: Seeds of each profile in the slow set (CI's second run).
SLOW_SEEDS = int(os.environ.get("TSTREAM_SIM_SLOW_SEEDS", "220"))
#: Profiles of the features newer than the harness (format v6 checkpoints, writer expiry, a
#: stream made by its first write, group commit's publish-first crowd, with expiry beside it,
#: producer sessions): in the default set,
#: the few seeds until each acts (:func:`test_the_newer_actors_act`); a quarter of
#: ``SLOW_SEEDS`` each in the slow set.
NEWER = ["checkpoints", "expiry", "first-writes", "crowd", "expiry-crowd", "sessions", "declared", "first-sinks",
         "backends", "backends-s3", "buggify", "mount", "mount-stalls", "sink-stalls", "damage", "upkeep"]


def _run_seeds(profile: Profile, seeds: range) -> None:
    failed: list[tuple[int, str]] = []
    for seed in seeds:
        try:
            simulate(seed, profile)
        except AssertionError as e:
            failed.append((seed, str(e)))
    if failed:
        others = f" (failing seeds: {[s for s, _ in failed]})" if len(failed) > 1 else ""
        small = shrink(failed[0][0], profile)
        raise AssertionError(f"{failed[0][1]}{others}\nshrunk from {small.first_steps} to {small.steps} "
                             f"store calls ({small.tweak or 'no change'}):\n{small.command()}")


@pytest.mark.parametrize("name", ["default", "all", "sinks"])
def test_no_seed_loses_data(name: str) -> None:
    _run_seeds(PROFILES[name], range(SEEDS))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["default", "all", "sinks"])
def test_no_seed_loses_data_many(name: str) -> None:
    _run_seeds(PROFILES[name], range(10_000, 10_000 + SLOW_SEEDS))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vacuums", "compactions", "crashes", "requests", "autoscale", "torn", *NEWER])
def test_no_seed_of_the_narrower_profiles_loses_data(name: str) -> None:
    """The profiles the historical bugs are found with (``tests/test_simulation_switches.py``),
    on today's code."""
    _run_seeds(PROFILES[name], range(20_000, 20_000 + SLOW_SEEDS // 4))


@pytest.mark.parametrize(("name", "within", "note"), [
    pytest.param("torn", 80, "torn entries set aside", marks=pytest.mark.slow),  # first seed 55
    ("autoscale", 10, "scales committed"),
    ("checkpoints", 3, "checkpoints collected"),
    pytest.param("checkpoints", 3, "rebuilds compared", marks=pytest.mark.slow),
    pytest.param("checkpoints", 30, "crashes after a checkpoint write", marks=pytest.mark.slow),
    ("expiry", 3, "writers expired"),
    pytest.param("expiry", 10, "batches appended again after expiry", marks=pytest.mark.slow),
    ("first-writes", 20, "re-creations"),
    ("first-sinks", 10, "re-creations"),
    ("crowd", 3, "folded by another"),
    pytest.param("expiry-crowd", 60, "entries without their settled request",  # first seed 37
                 marks=pytest.mark.slow),
    ("sessions", 3, "sessions closed mid-run"),
    ("sessions", 3, "leases ended by a commit attempt"),
    ("declared", 3, "declared writers kept past the retention"),
    ("backends", 3, "ambiguous creates of _tstream/groups/g/log"),
    ("buggify", 5, "compaction parts adopted"),
    ("backends-s3", 5, "S3 conditional request conflicts"),
    ("mount", 5, "mount claims taken over"),
    ("sink-stalls", 5, "sink commits refused by the fence"),
    ("damage", 3, "runs ending sound after damage"),
    ("damage", 3, "runs ending in an error naming the damage"),
    ("upkeep", 3, "background upkeep runs finished"),
    ("upkeep", 3, "background upkeep runs dead with their process")])
def test_the_newer_actors_act(name: str, within: int, note: str) -> None:
    """A torn journal entry set aside by ``repair --drop-torn-entry`` while the others run,
    auto-scaling's splits and merges, checkpoints collected with the journal entries before
    them, a state rebuilt from a checkpoint compared with one followed entry by entry, a
    committer dead right after writing a checkpoint, writers expired mid-run, a replay after
    an expiry that appended its batch again, a stream made by a write re-created by another
    with other config before any commit, a waiting group committer folded by a leader, and an
    entry of others' requests that left out its committer's own, settled by a twin, a producer
    session closed mid-run and one whose lease a commit ended, a declared writer silent past
    the retention that a commit kept, a consumer group's version created on a cloud store whose
    answer timed out, S3's 409 ``ConditionalRequestConflict`` (a conditional create that met
    another in flight, not applied: retried, never a permanent failure, which the first seed
    with one was before it counted as transient), a dead compaction's macro-chunks adopted under buggify's knobs, a FUSE
    mount's claim of a dead holder taken over after the grace on another actor's clock, a
    background upkeep run finished beside the appends of its process, and one that died with it, a
    sink driver stalled past the orphan grace whose commit the orphan fence refused:
    each loses nothing on the first seed where it happens (searched, not pinned: any change
    to the store calls a seed makes moves where a fault lands)."""
    for seed in range(within):
        if simulate(seed, PROFILES[name]).notes[note] >= 1:
            return
    raise AssertionError(f"no seed of {within} of {name} had {note}")


def test_a_mount_holder_stalled_past_the_claim_grace_loses_nothing() -> None:
    """The hole ``mount-stalls`` found at seed 6, closed: on a mount without hard links, a
    holder that pauses past the 60 s claim grace between its last check and its rename (a GC
    pause, a suspended VM) used to rename its journal entry onto the one the actor that took its
    claim over published, and that acknowledged commit was gone (two commits then shared
    ``_seq``). Now a claim is taken over only where the holder cannot rename any more: the
    mount renames without replacing (``renameat2(RENAME_NOREPLACE)``; the stalled holder's
    rename fails with "exists" and it reads the winner's entry), or, on a mount that cannot (an
    rclone mount answers ``EINVAL``), the holder is a process of this machine that is gone; a
    live holder past the grace makes the waiting committer fail with an error naming the claim.
    Each seed draws which kind of mount it runs on; both outcomes happen within these seeds."""
    notes: dict[str, int] = {}
    for seed in range(12):
        for key, n in simulate(seed, PROFILES["mount-stalls"]).notes.items():
            notes[key] = notes.get(key, 0) + n
    assert notes.get("mount holders stalled past the grace", 0) >= 1
    assert notes.get("mount renames refused: the name exists", 0) >= 1  # fenced by RENAME_NOREPLACE
    assert notes.get("mount claims of live holders refused", 0) >= 1  # no fence: no takeover
    assert notes.get("mount renames onto an existing name", 0) == 0


def test_damage_only_checksums_detect_fails_the_simulation_without_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """``damage-undetectable`` draws the damage the ``damage`` profile leaves out (a changed digit
    of any number, and of the head hint): the checksums (writer feature ``checksums``, declared by
    every stream this build creates) detect all of it, so the profile runs clean; on streams
    without them (created as an older build would) the run meets metadata errors naming objects
    nobody damaged, or records a read returned gone, within a few seeds: the invariants are not
    vacuous."""
    for seed in range(3):  # more in the long run, which draws this profile too
        simulate(seed, PROFILES["damage-undetectable"])
    monkeypatch.setattr(creation, "NEW_STREAM", {})
    for seed in range(12):
        try:
            simulate(seed, PROFILES["damage-undetectable"])
        except AssertionError as e:
            assert "TSTREAM_SIM_PROFILE=damage-undetectable" in str(e)
            return
    raise AssertionError("no seed of 12 of damage-undetectable failed without checksums: the damage checks see nothing")


def test_a_seed_replays_the_same_schedule() -> None:
    first, again = simulate(7, PROFILES["all"]), simulate(7, PROFILES["all"])
    assert len(first.trace) > 100
    assert first.trace == again.trace
    assert first.notes == again.notes
    assert simulate(8, PROFILES["all"]).trace != first.trace


def test_replay() -> None:
    """``TSTREAM_SIM_SEED=N [TSTREAM_SIM_PROFILE=name] [TSTREAM_SIM_TWEAK=...] pytest
    tests/test_simulation.py -k replay`` replays one seed exactly (a failing seed's message prints
    that command, and the shrunk run's); without them it replays seed 0 of the default profile,
    so the entry point itself stays tested."""
    profile = PROFILES[os.environ.get("TSTREAM_SIM_PROFILE", "default")]
    tweak = os.environ.get("TSTREAM_SIM_TWEAK", "")  # what shrinking changed (sim/shrink.py)
    simulate(int(os.environ.get("TSTREAM_SIM_SEED", "0")), apply_tweak(profile, tweak))


def test_a_seed_runs_the_same_whatever_upkeep_the_environment_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness runs upkeep in line (``TSTREAM_UPKEEP`` left aside): ``python -m sim.longrun``
    runs outside pytest, whose ``conftest`` asks for in-line upkeep, and a background thread
    would escape the scheduler (its store calls unscheduled, its clock others' clock, alive past
    its process's crash and past the run)."""
    monkeypatch.setenv(UPKEEP_ENV, "inline")
    inline = simulate(2, PROFILES["crashes"])
    monkeypatch.setenv(UPKEEP_ENV, "background")
    background = simulate(2, PROFILES["crashes"])
    assert any(op == "put_if_absent" and rel.startswith(f"{MACROS}") and actor.startswith("w")
               for actor, op, rel in inline.trace), "no writer's upkeep compacted: pick another seed"
    assert background.trace == inline.trace
    assert background.notes == inline.notes


def test_background_upkeep_replays_the_same_schedule() -> None:
    """Profile ``upkeep``'s threads (spawned at an append, scheduled like the actors) keep a
    seed's schedule the same from run to run."""
    first, again = simulate(1, PROFILES["upkeep"]), simulate(1, PROFILES["upkeep"])
    assert any(".up" in actor for actor, _op, _rel in first.trace)
    assert first.trace == again.trace
    assert first.notes == again.notes


@pytest.mark.slow
def test_background_upkeep_stalled_past_the_orphan_grace_loses_its_compaction() -> None:
    """A compaction's macro-chunk is an orphan until its map version is published, so a run
    stalled longer than the orphan grace meets its files deleted and its commit names a missing
    file. The orphan fence (``store/fence.py``) keeps its product margin here (30 minutes, never
    reached at the simulation's grace of seconds), so stalls of six graces must find the loss, or
    the simulation cannot see this race at all (what the fence is for; with its margin at half the
    grace, seed 83 still loses a macro-chunk: open, docs/operations.md)."""
    stalled = replace(PROFILES["upkeep"], upkeep_stall_ms=6 * PROFILES["upkeep"].grace_ms)
    for seed in range(160):
        try:
            simulate(seed, stalled)
        except AssertionError as e:
            assert "named by the journal is missing" in str(e) or "gone or unreadable" in str(e), e
            return
    raise AssertionError("no seed of 160 lost a compaction stalled past the orphan grace")


def test_a_thread_an_actor_spawns_dies_with_its_process() -> None:
    """:meth:`Scheduler.spawn`: the thread's store calls are scheduling points of its own, and
    after its process dies it makes none (a real crash ends every thread of the process)."""
    sched = Scheduler(5, faults=Faults(crash=0.0, error=0.0, transient=0.0, ambiguous=0.0))
    events: list[str] = []

    def thread() -> None:
        for i in range(200):
            sched.observe("read", f"t{i}")
            events.append("thread call")

    def process() -> None:
        sched.spawn("up", thread)
        for i in range(20):
            sched.observe("read", f"p{i}")
        sched.die()
        events.append("died")
        with pytest.raises(Crash):
            sched.observe("read", "after")

    sched.add("p", process)
    sched.run()
    assert "p.up0" in {actor for actor, _op, _rel in sched.trace}
    assert "thread call" in events and events.count("died") == 1
    assert "thread call" not in events[events.index("died"):]
    assert len(events) < 200
