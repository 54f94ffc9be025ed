"""The simulation's profiles, by name (the name a replay command passes as ``TSTREAM_SIM_PROFILE``).

``default``, ``all``, ``sinks`` and the narrower ones run the code as it is (``checkpoints``,
``expiry`` and ``first-writes`` the features newer than the harness, ``crowd`` and
``expiry-crowd`` group commit's leaders and waiters, ``sessions`` producer sessions, ``requests`` the fault that
meets the orphan-cleanup race, ``upkeep`` the product's background upkeep, ``sink-stalls`` the
orphan fence); each ``*-old-*`` profile runs one historical bug put back (:mod:`.switches`), with
the actors that meet it, and ``*-planted-*`` one planted on purpose.
"""

from __future__ import annotations

from dataclasses import replace

from .scheduler import Faults
from .world import Profile

DEFAULT = Profile()
#: Two sinks and two writers contending, store errors 5 % of calls: commits that lose a race,
#: publish their request and then fail, so Spark aborts them (no compaction, vacuum or readers).
SINKS = Profile(name="sinks", writers=2, batches=3, sinks=2, sink_batches=4, compactions=0, vacuums=0, readers=0,
                faults=Faults(crash=0.0, error=0.05, transient=0.02, ambiguous=0.1))
#: Two vacuum actors (each with and without orphan cleanup) beside the default's writers.
VACUUMS = Profile(name="vacuums", vacuumers=2, vacuums=3, readers=0)
#: Four compaction runs, some with a target under a chunk's size (chunks listed as they are).
COMPACTIONS = Profile(name="compactions", compactions=4, compact_targets=("4KB", "2KB"))
#: Writers that crash three times as often and come back up to 15 s later, beside 4 vacuum runs.
CRASHES = Profile(name="crashes", batches=6, vacuums=4, restart_delay_ms=15_000, faults=Faults(crash=0.03))
#: Writers that die right after publishing a group-commit request (a fault placed where it
#: matters) and come back up to 40 s later, beside 8 vacuum runs: requests wait long for their
#: fold while orphan cleanup runs past its grace.
REQUESTS = Profile(name="requests", batches=6, vacuums=8, restart_delay_ms=40_000,
                   faults=Faults(crash=0.03, published=1.0))
#: Auto-scaling on: writers split hot segments and merge cold ones after their commits.
AUTOSCALE = Profile(name="autoscale", batches=5, scaling="records=2/s,factor=2,min=1,max=6,window=0.5")
#: Journal creates torn (half written, the writer dead) on 2 % of them, and an operator who sets
#: a torn newest entry aside (``repair --drop-torn-entry``).
TORN = Profile(name="torn", repairs=6, faults=Faults(torn=0.02))
#: Checkpoints of the state every 4 entries or 1 KiB (the product's 200 entries or 64 KiB, never
#: met by a run this small, lowered: :mod:`.knobs`), truncations and vacuums collecting old entries
#: and checkpoints (the truncator's runs spread over the run's first seconds, so vacuums past the
#: grace find them), 2 % crashes (some right after a committer wrote a checkpoint), and readers
#: that read every other time on a fresh handle and compare each state rebuilt from its checkpoint;
#: enough batches that the journal outgrows an index node (the open node's entries are never
#: collected: the commit that fills it copies them).
CHECKPOINTS = Profile(name="checkpoints", batches=14, truncations=4, truncate_wait_ms=6_000, vacuums=6, reads=4,
                      checkpoint_entries=4, reopen_reads=True, faults=Faults(crash=0.02))
#: Writers expire 2 s after their last commit (``writerRetentionMs``; sessions' leases 8 s) while
#: crashed writers come back up to 15 s later and replay the batch they were on.
EXPIRY = Profile(name="expiry", batches=5, restart_delay_ms=15_000, writer_retention_ms=2_000,
                 writer_lease_ms=8_000, faults=Faults(crash=0.03))
#: No stream before the actors start: three writes through ``Stream.for_write`` (as the sink opens
#: its stream), asking for 1, 2 and 3 segments, race to create it, re-create it while no commit
#: has landed, and commit; compaction, vacuum and a reader wait for it.
FIRST_WRITES = Profile(name="first-writes", created=False, first_writers=3, writers=0, sinks=0, compactions=1,
                       vacuums=1)
#: ``first-writes`` with Spark sinks among the first writes: two ``Stream.for_write`` writes
#: (1 and 2 segments) and two sink drivers (3 and 2 segments) whose tasks write files for the
#: stream they opened, race its creation and re-creation, and commit (``JournalCommitter``) or
#: abort when their commit raised.
FIRST_SINKS = replace(FIRST_WRITES, name="first-sinks", first_writers=2, first_sinks=2, sink_batches=2, batches=2)
#: The store fails as S3, Azure or GCS does (drawn per seed; :mod:`.cloud`): conflicts as
#: 409/412, S3's 409 ConditionalRequestConflict, throttling (429/503, S3's SlowDown) on 5 % of
#: calls in runs the retries absorb, outages past them, and creates applied whose answer timed
#: out on 15 % of conditional creates, beside two sinks, compaction (its macro-maps),
#: consumer-group members (their group versions), vacuum, a reader and 2 % crashes.
BACKENDS = Profile(name="backends", sinks=2, consumers=2, backend="cloud",
                   faults=Faults(crash=0.02, error=0.02, transient=0.03, ambiguous=0.15, throttle=0.05))
#: ``backends`` on S3 alone: its 412s (with and without the condition named), 409
#: ``ConditionalRequestConflict``, SlowDown and read timeouts as s3fs raises them.
BACKENDS_S3 = replace(BACKENDS, name="backends-s3", backend="s3")
#: Buggify (:func:`.knobs.buggified`): per seed, waiters that race their leader after one poll,
#: automatic compaction considered every other position, checkpoints every 2 entries; and
#: always a 1.5 s vacuum grace with vacuums every few seconds, writers expiring after 2 s,
#: a crowd publishing first, a crash right after half the publications, macro-map creates
#: and checkpoint writes (a later compaction adopts the dead one's map version): folds race
#: garbage collection, compactions adopt, expiry meets a checkpoint.
BUGGIFY = Profile(name="buggify", writers=4, batches=4, sinks=1, compactions=3, compact_targets=("4KB", "2KB"),
                  vacuums=4, grace_ms=1_500,
                  buggify=True, crowd=1, writer_retention_ms=2_000, writer_lease_ms=3_000, restart_delay_ms=6_000,
                  faults=Faults(crash=0.02, published=0.5, placed=0.5))
#: Conditional creates through a FUSE mount's claim path (:mod:`.mount`): a holder dies between
#: its claim and its rename on 5 % of creates (another actor takes the name over after the 60 s
#: grace on its own clock), and the actors' clocks run up to 50 % fast or slow.
MOUNT = Profile(name="mount", writers=3, batches=3, mount=True, mount_die=0.05, mount_skew=0.5, grace_ms=90_000,
                faults=Faults(crash=0.01, ambiguous=0.0))
#: ``mount`` with holders that stall past the grace after their last check (on 5 % of creates):
#: the case a lease cannot exclude, which replaced what the actor that took the name over
#: published until a claim was taken over only from a holder that cannot rename any more
#: (``store/claims.py``; each seed draws whether the mount renames without replacing).
#: Its vacuum grace is 10 minutes: a writer whose commits meet a live holder's claim fail after
#: the 60 s grace each and retry the batch with the same files for minutes, and an orphan grace
#: under that deletes files a later commit names (the product's one-hour floor rules it out).
MOUNT_STALLS = replace(MOUNT, name="mount-stalls", mount_stall=0.05, grace_ms=600_000)
#: Damaged and lost metadata as drawn faults (:mod:`.damage`): a vandal damages two journal
#: entries, checkpoints (due every 4 entries) or head hints (lost, torn, or a changed digit of the
#: position an entry or checkpoint names) while the others run, and an operator runs ``tstream
#: repair`` four times at random: nothing lost, or an error naming the damage.
DAMAGE = Profile(name="damage", batches=5, reads=4, checkpoint_entries=4, reopen_reads=True, damages=2, repairs=4,
                 faults=Faults(crash=0.01))
#: Five writers and two sinks contending, a contended writer publishing first once one other
#: request is pending (:mod:`.knobs`): leaders fold, waiters poll, and leaders that die or lag
#: leave waiters to race once out of patience.
CROWD = Profile(name="crowd", writers=5, batches=4, sinks=2, crowd=1, faults=Faults(crash=0.02))
#: Two producer sessions (``Stream.writer``) beside two writers: heartbeats, sessions closed
#: mid-run and opened again by the next append, crashed producers back up to 15 s later while
#: their sessions' 3 s leases end, and a reader reading four times against the tick they hold.
SESSIONS = Profile(name="sessions", writers=2, producers=2, batches=5, reads=4, restart_delay_ms=15_000,
                   writer_lease_ms=3_000, faults=Faults(crash=0.03))
#: Writer expiry beside a crowd: crashed writers replay their batch (twins of a published
#: request) while others lead folds, so an entry of others' requests can leave out a settled
#: request of its own committer that a fold after its writer's expiry may still take.
#: ``expiry``'s retentions and late restarts with two declared writers (the stream's ``writers``:
#: a writer and the sink), which no commit may drop however long they are silent.
DECLARED = replace(EXPIRY, name="declared", declared=("w0", "sink0"))
#: The product's background upkeep (:func:`.knobs.upkeeping`): retention (the newest 60 records)
#: and compaction considered after every third position run on a scheduled thread of the
#: appending writer's process, which dies with it (2 % crashes, back up to 15 s later), crashes
#: it, and stalls up to 2 s once per run, beside a compactor and 6 vacuum runs with orphan cleanup.
UPKEEP = Profile(name="upkeep", batches=6, compactions=1, vacuums=6, restart_delay_ms=15_000, background_upkeep=True,
                 upkeep_stall_ms=2_000, upkeep_every=3, retention="count=60", faults=Faults(crash=0.02))
EXPIRY_CROWD = replace(EXPIRY, name="expiry-crowd", writers=5, sinks=2, batches=4, crowd=1)
#: ``sinks`` whose drivers stall past the orphan grace before a third of their commits, beside
#: orphan cleanup every grace or two: the tasks' files may be gone when the driver resumes, and
#: the orphan fence (its margin half the run's grace, :mod:`.knobs`) must refuse the commit.
SINK_STALLS = replace(SINKS, name="sink-stalls", sink_stall=0.35, vacuums=8)

PROFILES = {p.name: p for p in (
    DEFAULT,
    Profile(name="all", scales=2, truncations=2, consumers=2),
    SINKS,
    VACUUMS,
    COMPACTIONS,
    CRASHES,
    AUTOSCALE,
    TORN,
    CHECKPOINTS,
    EXPIRY,
    FIRST_WRITES,
    REQUESTS,
    CROWD,
    EXPIRY_CROWD,
    SESSIONS,
    DECLARED,
    FIRST_SINKS,
    BACKENDS,
    BACKENDS_S3,
    BUGGIFY,
    MOUNT,
    MOUNT_STALLS,
    SINK_STALLS,
    DAMAGE,
    UPKEEP,
    # a changed digit of any number and of the head hint too: not detectable today (the
    # checksums of the damage work will be), so the run's own checks must find it
    replace(DAMAGE, name="damage-undetectable", damages=3, damage_undetectable=True),
    replace(SINKS, name="sinks-old-abort", switch="old-abort"),
    replace(COMPACTIONS, name="compactions-old-adopt", switch="old-adopt"),
    replace(REQUESTS, name="requests-old-orphans", switch="old-orphans"),
    # three vacuum actors and crashes that leave orphans for them to race over: with two and
    # no extra crashes the bug needed 342 seeds once group commit's waiters left fewer orphans
    replace(VACUUMS, name="vacuums-old-aged", switch="old-aged", vacuumers=3, faults=Faults(crash=0.03)),
    replace(DEFAULT, name="default-old-listing", switch="old-listing"),
    replace(EXPIRY_CROWD, name="expiry-crowd-old-settled", switch="old-settled"),
    replace(EXPIRY_CROWD, name="expiry-crowd-old-unowned", switch="old-unowned"),
    # two readers reading four times each: the planted floor shows only to a read that meets a
    # late commit, rare with one reader reading twice once commits check around their slot
    replace(DEFAULT, name="default-planted-floor", switch="planted-floor", readers=2, reads=4),
    replace(DECLARED, name="declared-planted-expired", switch="planted-expired"),
    replace(BACKENDS, name="backends-planted-conflict", switch="planted-conflict"),
    replace(BUGGIFY, name="buggify-old-orphans", switch="old-orphans"),
    replace(SINK_STALLS, name="sink-stalls-old-unfenced", switch="old-unfenced"),
)}
