"""One seed's run: the stream, the actors, the ledger of what they saw, and the invariants.

Invariants checked while the actors run (a violation fails the actor that saw it):

* a read returns each (writer, batch, i) at most once, with ``_seq`` unique per segment, and
  per (writer, key) in (batch, i) order;
* a record a read returned is in every later read of that reader, unless truncation removed it
  (its ``_tso`` is at or below the head of the state after the later read);
* the tick a reader sees never goes back, and no record appears at or below a tick an earlier
  read of that reader was complete to (each read returns every record up to the tick of the
  state it began on);
* a read fails with a missing file only when it ran longer than the vacuum grace;
* with ``reopen_reads``: the state a fresh handle rebuilds from the checkpoint a read's state
  names, and the entries since, equals that state.

At the end (:meth:`World.check_end`, no actor running, no faults; a torn newest entry left set
aside first, as the operator would): every acknowledged (writer,
batch) is readable exactly once and whole, unless truncation removed it; ``_seq`` is dense per
segment (when nothing was truncated); the tick never goes back along the journal; one more
vacuum (past the grace, with orphan cleanup: the one that finishes the work of any vacuum cut
short) changes no record read; group ``g`` skipped no record; ``Stream.verify()`` is clean.
Along the journal: writers dropped only as ``journal/expiry.py`` says, a (writer, batch)
committed again only after a drop of its writer, and read that many times (:mod:`.history`);
the config changed only by a re-creation right after a creation (``api/creation.py``).
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from fsspec.implementations.memory import MemoryFileSystem
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import CorruptMetadataError, StreamNotFoundError
from pyspark_tstream.journal.entries import Entry, EntryLog
from pyspark_tstream.journal.journal import Journal
from pyspark_tstream.journal.state import StreamState
from pyspark_tstream.maintain.repair import torn_newest
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import RetryPolicy, Store
from pyspark_tstream.write.commit import CommitIntent

from . import actors, cloud, damage, history
from .knobs import buggified, checkpointing, crowding, expiring, fencing, upkeeping
from .mount import mounted
from .scheduler import Faults, Scheduler, patched
from .switches import switched

Record = tuple[str, int, int]  # (writer, batch, i)
#: A cloud run's store attempts per call (the product's default): throttling runs shorter than
#: this are absorbed by the retries.
CLOUD_ATTEMPTS = 8


@dataclass(frozen=True)
class Profile:
    """Which actors a seed runs and how much each does (``name``: for the replay command)."""

    name: str = "default"
    writers: int = 3
    batches: int = 3
    sinks: int = 1
    sink_batches: int = 3
    compactions: int = 2
    compact_targets: tuple[str, ...] = ("4KB",)  # drawn per run when several (a small one lists chunks as they are)
    vacuums: int = 2  # runs of each vacuum actor
    vacuumers: int = 1
    readers: int = 1
    reads: int = 2
    scales: int = 0
    truncations: int = 0
    consumers: int = 0  # members of consumer group "g"
    repairs: int = 0  # looks of an operator who sets a torn newest journal entry aside
    consumer_reads: int = 4
    segments: int = 2
    scaling: str = ""  # the stream's auto-scaling policy: every data commit may scale (api/upkeep.py)
    grace_ms: int = 5_000
    faults: Faults = field(default_factory=Faults)
    restart_delay_ms: int = 0  # a crashed actor's process comes back after up to this long
    faults_off: tuple[int, ...] = ()  # the seed's faults (numbered from 1 as drawn) left out: shrinking
    switch: str = ""  # a historical bug put back for the run (:mod:`.switches`)
    #: checkpoints of the state at most this many entries apart, and due once the entries since
    #: hold 1 KiB (0: the product's thresholds, which a run of a few hundred entries never meets)
    checkpoint_entries: int = 0
    reopen_reads: bool = False  # readers read every other time on a fresh handle; each read's state compared
    writer_retention_ms: int = 0  # the stream's writerRetentionMs (0: the default, 7 days)
    writer_lease_ms: int = 0  # the stream's writerLeaseMs (0: the default)
    truncate_wait_ms: int = 0  # the truncator waits up to this long before each run
    created: bool = True  # the stream is made before the actors start (else the first writes make it)
    first_writers: int = 0  # writes through Stream.for_write, each with its own segments config
    producers: int = 0  # producer sessions (Stream.writer): heartbeats, closes mid-run
    crowd: int = 0  # group commit's CROWD for the run (0: the product's)
    declared: tuple[str, ...] = ()  # the stream's declared writers (``writers``): never expired
    first_sinks: int = 0  # Spark sinks whose driver opens the stream through Stream.for_write
    #: the store fails as a cloud service does (:mod:`.cloud`): "s3", "azure", "gcs", or "cloud" (drawn per seed)
    backend: str = ""
    #: conditional creates through a FUSE mount's claim path (:mod:`.mount`): holders that die
    #: before their rename, or stall past the claim grace after their checks, and actors whose
    #: clocks run up to ``mount_skew`` fast or slow
    mount: bool = False
    mount_die: float = 0.0
    mount_stall: float = 0.0
    mount_skew: float = 0.0
    #: a sink driver stalls past the orphan grace between its tasks' writes and its commit on
    #: this share of batches (a paused driver; the fence's margin follows the grace, :mod:`.knobs`)
    sink_stall: float = 0.0
    buggify: bool = False  # each buggify knob on with even odds per seed (:func:`.knobs.buggified`)
    #: metadata objects a vandal damages while the others run (:mod:`.damage`); with it, the
    #: ``repairs`` operator runs ``tstream repair`` at random
    damages: int = 0
    damage_undetectable: bool = False  # draw the damage today's checks cannot detect too (:mod:`.damage`)
    #: retention and compaction after an append on a scheduled thread of the appender's process
    #: (:func:`.knobs.upkeeping`), stalling up to ``upkeep_stall_ms`` once per run
    background_upkeep: bool = False
    upkeep_stall_ms: int = 0
    #: retention and automatic compaction considered every this many positions (0: the product's)
    upkeep_every: int = 0
    retention: str = ""  # the stream's retention policy, applied by upkeep after appends (api/upkeep.py)


@dataclass
class Outcome:
    """What one seed did: its schedule, how many store calls, and notes of what happened."""

    seed: int
    trace: list[tuple[str, str, str]]
    notes: Counter[str]
    seconds: float


class World:
    """The shared stream of one seed and the ledger the invariants are checked against."""

    def __init__(self, seed: int, sched: Scheduler, profile: Profile) -> None:
        self.seed = seed
        self.sched = sched
        self.profile = profile
        self.grace_ms = profile.grace_ms
        self.url = f"memory://sim-{seed}-{random.Random(seed).getrandbits(32):08x}/stream"
        self.acks: dict[tuple[str, int], Any] = {}
        #: batches a writer gave up on and moved past: an append that raised may still land (its
        #: published request folded later), after the writer's next batch, so no order holds for them
        self.gave_up: set[tuple[str, int]] = set()
        #: writers some commit attempt dropped as expired: a read may hold a batch of theirs twice
        #: (a replay after the drop appends again); the journal's history decides at the end
        self.expired: set[str] = set()
        #: what an actor retries: a torn newest entry stops everyone (naming repair) until set aside
        self.expected: tuple[type[BaseException], ...] = \
            (*actors.EXPECTED, CorruptMetadataError) if profile.faults.torn or profile.damages else actors.EXPECTED
        #: what the vandal damaged (path -> how), the entries repair set aside (their commits
        #: lost, as it reports), every CorruptMetadataError made (:mod:`.damage`)
        self.damaged: dict[str, str] = {}
        self.set_aside: set[int] = set()
        self.corrupt_seen: list[str] = []
        if not profile.created:  # until a first write made it
            self.expected = (*self.expected, StreamNotFoundError)
        self.notes: Counter[str] = Counter()
        self._seen: dict[str, dict[Record, int]] = defaultdict(dict)  # reader -> record -> _tso
        self._ticks: dict[str, int] = defaultdict(int)
        self._complete: dict[str, int] = {}  # reader -> the tick its reads so far were complete to
        self._delivered: dict[Record, str] = {}  # by a group read, to whom
        self._claimed: set[Record] = set()

    def open(self) -> Stream:
        return Stream.open(self.url)

    def rows(self, writer: str, batch: int) -> int:
        """How many rows (writer, batch) has: fixed by the ids, so a retry writes the same rows."""
        return 2 + (sum(map(ord, writer)) + batch * 5) % 5

    def acked(self, writer: str, batch: int, ack: Any) -> None:
        self.acks[(writer, batch)] = ack
        self.notes["acked"] += 1
        if ack is not None and ack.duplicate:
            self.notes["acked as duplicate"] += 1

    def note(self, what: str, n: int = 1) -> None:
        self.notes[what] += n

    # -- checks as the actors run ------------------------------------------------------------------
    def saw(self, reader: str, table: pa.Table, after: StreamState, complete: int) -> None:
        """Check one read's result against the reader's earlier ones (``complete``: the tick of
        a state refreshed before the read began: the read holds every record up to it)."""
        self.notes["reads"] += 1
        records = _records(table)
        check_read(table, records, f"{reader}'s read", self.gave_up, self.expired)
        tick = after.tick
        assert tick >= self._ticks[reader], f"{reader}: the tick went back from {self._ticks[reader]} to {tick}"
        self._ticks[reader] = tick
        seen = self._seen[reader]
        lost = sorted(r for r, tso in seen.items() if r not in records and tso > after.head_tso)
        assert not lost, (f"{reader}: {len(lost)} record(s) an earlier read returned are gone "
                          f"(not truncated: head_tso {after.head_tso}): {lost[:5]}")
        late = self._complete.get(reader)
        if late is not None:
            appeared = sorted((tso, r) for r, tso in records.items() if r not in seen and tso <= late)
            assert not appeared, (f"{reader}: {len(appeared)} record(s) appeared at or below tick {late}, "
                                  f"to which an earlier read was complete (_tso, record): {appeared[:5]}")
        self._complete[reader] = max(late or 0, complete)
        seen.update(records)

    def delivered(self, consumer: str, table: pa.Table, claimed: bool = False) -> None:
        """A group read gives each record to one consumer, once; a claim may give it again."""
        records = _records(table)
        if claimed:
            self._claimed.update(records)
            self.notes["records claimed"] += len(records)
            return
        twice = sorted(r for r in records if r in self._delivered)
        assert not twice, (f"{consumer}: group g delivered {twice[:3]} again (first to "
                           f"{self._delivered[twice[0]]})")
        self._delivered.update(dict.fromkeys(records, consumer))
        self.notes["records delivered"] += len(records)

    def rebuilt(self, reader: str, after: StreamState) -> None:
        """The state a fresh handle rebuilds at ``after.pos`` from the checkpoint ``after`` names
        and the entries since equals ``after``, which ``reader``'s handle followed entry by entry."""
        mark = after.checkpoint
        if mark is None:
            return
        try:
            again = EntryLog(Store(self.url)).state_at(after.pos, mark.pos)
        except FileNotFoundError:  # collected since: the state is older than the grace
            self.notes["rebuilds of collected states"] += 1
            return
        assert again.to_json() == after.to_json(), (
            f"{reader}: the state at {after.pos} rebuilt from checkpoint {mark.pos} differs from the "
            f"one its handle followed: {_differs(again, after)}")
        self.notes["rebuilds compared"] += 1

    def reader_missed(self, reader: str, started: int, error: FileNotFoundError) -> None:
        if self.profile.damages and damage.names_damage(self, error, ("lost",)):
            self.notes["reads that named a lost object"] += 1
            return
        took = self.sched.now - started
        assert took > self.grace_ms, (f"{reader}: a read that ran {took} ms (< the {self.grace_ms} ms grace) met "
                                      f"a missing file: {error}")
        self.notes["reads past the grace"] += 1

    # -- the end -------------------------------------------------------------------------------
    def check_end(self) -> None:
        """The end-of-run invariants (module docstring), on a fresh handle; with damage
        (:mod:`.damage`), every metadata error names a damaged object, and the end may be one."""
        if not self.profile.damages:
            self._check_end()
            return
        unnamed = [text for text in self.corrupt_seen if not any(rel in text for rel in self.damaged)]
        assert not unnamed, f"a CorruptMetadataError that names no damaged object {sorted(self.damaged)}: {unnamed[0]}"
        try:
            damage.repair(self, torn_newest(Store(self.url)) is not None)  # the operator's last look
            self._check_end()
        except (CorruptMetadataError, FileNotFoundError) as e:
            # a lost journal entry or checkpoint is met as FileNotFoundError naming it by some paths
            named = damage.names_damage(self, e, () if isinstance(e, CorruptMetadataError) else ("lost",))
            assert named, f"the end met damage it does not name ({sorted(self.damaged)}): {e}"
            self.notes["runs ending in an error naming the damage"] += 1
            return
        self.notes["runs ending sound after damage"] += bool(self.damaged)

    def _check_end(self) -> None:
        if self.profile.faults.torn and torn_newest(Store(self.url)) is not None:
            Stream.repair_url(self.url, drop_torn_entry=True)  # the operator's last look
            self.notes["torn entries set aside"] += 1
        s = self.open()
        for name in self._session_names():  # the queries stopped, the producers closed
            s.appending.commit([], CommitIntent(writer_id=name, op="tick", close=True))
        s.refresh()
        table = s.read()
        records = _records(table)
        check_read(table, records, "the final read", self.gave_up, self.expired)
        head = s.state.head_tso
        truncated_some = s.state.head_pos > 0 or head > 0
        entries = _entries(s)
        repeats = self._check_expiry(entries)
        counts = Counter((w, b) for (w, b, _i) in records)
        for (w, b, _i), n in _copies(table).items():
            counts[(w, b)] += n - 1
        for (w, b), ack in sorted(self.acks.items()):
            want = self.rows(w, b) * repeats.get((w, b), 1)
            got = counts.get((w, b), 0)
            if got == want:
                continue
            if getattr(ack, "pos", None) in self.set_aside:  # repair --drop-torn-entry lost it, saying so
                self.notes["acked batches set aside by repair"] += 1
                continue
            gone_below_head = truncated_some and _below(ack, head, self._seen_tsos(w, b))
            assert gone_below_head, (f"acknowledged batch {b} of writer {w} has {got} of its {want} rows "
                                      f"(head_tso {head})")
            self.notes["acked batches truncated"] += 1
        extra = sorted(k for k in counts if k not in self.acks and counts[k] != self.rows(*k) * repeats.get(k, 1))
        assert not extra, f"unacknowledged batches read torn: {extra[:5]}"
        _check_dense(table, s)
        self._note_checkpoints(s)
        self._check_config(entries)
        for entry in entries:
            if entry.op == "scale":
                self.notes["scales committed"] += 1
            if entry.op == "compact" and isinstance(entry.info, dict):  # a dead compaction's parts committed
                parts = entry.info.get("parts", ())
                self.notes["compaction parts adopted"] += sum(bool(p.get("adopted")) for p in parts)
            if entry.folds:
                self.notes["entries folding requests"] += 1
                self.notes["requests folded by others"] += len(entry.folds) - 1
        # a vacuum cut short leaves work a later one finishes: one more, past the grace
        self.sched.now += self.grace_ms
        # simulated time: a commit in flight spans a few store calls, far under this grace (the
        # one-hour floor of vacuum guards real clocks and stalls the simulation does not model)
        s.vacuum(grace_ms=self.grace_ms, orphans=True, orphan_grace_ms=self.grace_ms, unsafe_orphan_grace=True)
        again = _records(s.read())
        changed = sorted(set(records) ^ set(again))
        assert not changed, f"the finishing vacuum changed the records read: {changed[:5]}"
        if self.profile.consumers:
            self._check_group(s, records)
        report = s.verify()
        if not report.ok and self.damaged and any(rel in report.summary() for rel in self.damaged):
            raise CorruptMetadataError(f"fsck after repair: {report.summary()}", path=self.url)
        assert report.ok, report.summary()

    def _check_expiry(self, entries: list[Entry]) -> dict[tuple[str, int], int]:
        """Every writer dropped by the rule; the (writer, batch) committed more than once, each
        repeat after a drop of its writer (:mod:`.history`), with how many times."""
        self.notes["writers expired"] += history.check_drops(entries)
        self.notes["declared writers kept past the retention"] += history.kept_declared(entries)
        repeats = history.allowed_repeats(history.commits_and_drops(entries))
        assert self.profile.writer_retention_ms or not repeats, \
            f"batches committed twice with no writer retention set: {sorted(repeats)[:5]}"
        self.notes["batches appended again after expiry"] += len(repeats)
        return repeats

    def _check_config(self, entries: list[Entry]) -> None:
        """The config changes only by a re-creation, whose entry follows a creation with no
        commit between (``api/creation.py``); once a commit landed it is fixed."""
        for prev, entry in zip(entries, entries[1:]):
            if entry.op == "create":
                assert prev.op == "create" and prev.pos + 1 == entry.pos, \
                    f"entry {entry.pos} re-created the stream after {prev.op} entry {prev.pos}"
                self.notes["re-creations"] += 1
            else:
                assert entry.state.config == prev.state.config, f"entry {entry.pos} changed the config"

    def _note_checkpoints(self, s: Stream) -> None:
        """What the run did with checkpoints of the state: written (by how many commits), a
        crash right after writing one, collected."""
        written: set[str] = set()
        calls: dict[str, list[tuple[str, str]]] = defaultdict(list)  # each actor's last two store calls
        for actor, op, rel in self.sched.trace:
            if op == "write" and rel.startswith(layout.CHECKPOINTS):
                written.add(rel)
                self.notes["checkpoint writes"] += 1
            # a CRASH follows the call it died before; the one before that had completed
            done = calls[actor][0] if op == "CRASH" and len(calls[actor]) == 2 else ("", "")
            if done[0] == "write" and done[1].startswith(layout.CHECKPOINTS):
                self.notes["crashes after a checkpoint write"] += 1
            calls[actor] = (calls[actor] + [(op, rel)])[-2:]
        self.notes["checkpoints collected"] += sum(not s.store.exists(rel) for rel in sorted(written))
        self.notes["journal entries collected"] += max(0, s.state.meta_gc_pos - 1)

    def _check_group(self, s: Stream, records: dict[Record, int]) -> None:
        """Group ``g`` skipped no record: drained by one more member, its pending records
        claimed, every readable record was delivered (a delivery whose answer was lost stays
        pending for its consumer, as in Redis, until claimed)."""
        from pyspark_tstream.api.groups import Group

        group = Group.open(s, "g")
        while True:
            table = group.read("drain", count=1000)
            if not table.num_rows:
                break
            self.delivered("drain", table)
        self.delivered("drain", group.claim("drain", 0), claimed=True)
        skipped = sorted(r for r in records if r not in self._delivered and r not in self._claimed)
        assert not skipped, f"group g never delivered {len(skipped)} readable record(s): {skipped[:5]}"

    def _session_names(self) -> list[str]:
        """The writers that commit as sessions, and the declared writers (live once they
        committed): each holds the tick until it is closed."""
        names = [f"sink{i}" for i in range(self.profile.sinks)] + [f"fs{i}" for i in range(self.profile.first_sinks)]
        names += [f"p{i}" for i in range(self.profile.producers)]
        return names + [w for w in self.profile.declared if w not in names]

    def _seen_tsos(self, writer: str, batch: int) -> list[int]:
        return [tso for seen in self._seen.values() for (w, b, _i), tso in seen.items() if (w, b) == (writer, batch)]


def _records(table: pa.Table) -> dict[Record, int]:
    if "writer" not in table.column_names:  # no schema yet: nothing was written
        return {}
    cols = table.select(["writer", "batch", "i", "_tso"]).to_pydict()
    return {(w, b, i): tso for w, b, i, tso in zip(cols["writer"], cols["batch"], cols["i"], cols["_tso"])}


def check_read(table: pa.Table, records: dict[Record, int], what: str,
               unordered: Collection[tuple[str, int]] = (), expired: Collection[str] = ()) -> None:
    """A read's own invariants: no record twice, ``_seq`` unique per segment, per-key order
    (but for the batches in ``unordered``: given up on by their writers). A batch of a writer
    in ``expired`` may be there twice (a replay after its writer expired appended it again:
    :mod:`.history` checks that at the end), and its records are out of order then."""
    again: set[tuple[str, int]] = set()
    if len(records) != table.num_rows:
        twice = sorted(r for r in _copies(table) if r[0] not in expired)
        assert not twice, f"{what}: {len(twice)} record(s) returned twice: {twice[:5]}"
        again = {(w, b) for (w, b, _i) in _copies(table)}
    if not records:
        return
    cols = table.select(["writer", "batch", "i", "key", "_segment", "_seq", "_tso"]).to_pydict()
    seqs = Counter(zip(cols["_segment"], cols["_seq"]))
    twice = [k for k, n in seqs.items() if n > 1]
    assert not twice, f"{what}: (segment, _seq) returned twice: {twice[:5]}"
    assert cols["_tso"] == sorted(cols["_tso"]), f"{what}: records not in _tso order"
    last: dict[tuple[str, str], tuple[int, int]] = {}
    for w, b, i, k in zip(cols["writer"], cols["batch"], cols["i"], cols["key"]):
        if (w, b) in unordered or (w, b) in again:
            continue
        prev = last.get((w, k))
        assert prev is None or prev < (b, i), f"{what}: key {k} of writer {w}: ({b}, {i}) after {prev}"
        last[(w, k)] = (b, i)


def _copies(table: pa.Table) -> Counter[Record]:
    """The records ``table`` holds more than once, with how many times."""
    if "writer" not in table.column_names:
        return Counter()
    n = Counter(zip(*(table.column(c).to_pylist() for c in ("writer", "batch", "i"))))
    return Counter({r: k for r, k in n.items() if k > 1})


def _differs(a: StreamState, b: StreamState) -> str:
    """The top-level fields of two states' stored forms that differ (for a message)."""
    x, y = a.to_json(), b.to_json()
    return ", ".join(f"{k}: {x.get(k)!r:.120} vs {y.get(k)!r:.120}" for k in sorted(x.keys() | y.keys())
                     if x.get(k) != y.get(k))


def _below(ack: Any, head: int, seen: list[int]) -> bool:
    """Whether some record of an acknowledged batch is known to be at or below ``head``."""
    tsos = seen + ([ack.first_tso] if ack is not None and ack.first_tso is not None else [])
    return bool(tsos) and min(tsos) <= head


def _check_dense(table: pa.Table, s: Stream) -> None:
    """``_seq`` of each segment's records is dense from 0 (no gap, no repeat), when nothing was
    truncated. Truncation removes records by ``_tso``, which is not monotonic in ``_seq`` across
    writers (a sink's task writes its files, and their times, before another writer's commit
    takes the segment's next ``_seq``), so what a segment keeps after it need not be one run of
    ``_seq``."""
    if s.state.head_pos or s.state.head_tso:
        return
    cols = table.select(["_segment", "_seq"]).to_pydict()
    per: dict[int, list[int]] = defaultdict(list)
    for seg, seq in zip(cols["_segment"], cols["_seq"]):
        per[seg].append(seq)
    for seg, seqs in per.items():
        seqs.sort()
        assert seqs == list(range(len(seqs))), \
            f"segment {seg}: _seq not dense from 0: {seqs[:3]}..{seqs[-3:]} ({len(seqs)} records)"


def _entries(s: Stream) -> list[Entry]:
    """The journal's readable entries from the head, checking that the tick never goes back."""
    journal = Journal(s.store)
    out: list[Entry] = []
    for pos in range(s.state.head_pos, s.state.pos + 1):
        entry = journal.try_entry(pos)
        if entry is None:
            continue
        prev = out[-1].state.tick if out else 0
        assert entry.state.tick >= prev, f"entry {pos}: the tick went back from {prev} to {entry.state.tick}"
        out.append(entry)
    return out


def simulate(seed: int, profile: Profile = Profile(),
             tweak: Callable[[World], None] | None = None) -> Outcome:
    """Run one seed to its end and check every invariant; AssertionError on a violation."""
    sched = Scheduler(seed, faults=profile.faults, restart_delay_ms=profile.restart_delay_ms,
                      faults_off=frozenset(profile.faults_off))
    world = World(seed, sched, profile)
    service = cloud.flavour(seed, profile.backend) if profile.backend else ""
    if service:
        sched.retry = RetryPolicy(attempts=CLOUD_ATTEMPTS, base_delay=0.0, max_delay=0.0)
        sched.errors = cloud.errors(service, random.Random(seed ^ 0xE770), world.note)
        world.notes[f"store: {service}"] += 1
    rng = random.Random(seed ^ 0xAC7)
    started = time.perf_counter()
    try:
        with patched(sched), switched(profile.switch, sched), checkpointing(profile.checkpoint_entries), \
                expiring(world), crowding(world), fencing(world), buggified(world), upkeeping(world), mounted(world), \
                damage.recording(world), cloud.cloud_store(service, random.Random(seed ^ 0x409)):
            config: dict[str, Any] = {"scaling": profile.scaling} if profile.scaling else {}
            if profile.writer_retention_ms:
                config["writer_retention_ms"] = profile.writer_retention_ms
            if profile.writer_lease_ms:
                config["writer_lease_ms"] = profile.writer_lease_ms
            if profile.declared:
                config["writers"] = profile.declared
            if profile.retention:
                config["retention"] = profile.retention
            if profile.created:
                Stream.create(world.url, segments=profile.segments, compaction="target=4KB,min=3", **config)
            if tweak is not None:
                tweak(world)
            for i in range(profile.writers):
                sched.add(f"w{i}", actors.appender(world, f"w{i}", profile.batches, random.Random(rng.random())))
            for i in range(profile.sinks):
                sched.add(f"sink{i}", actors.sink(world, f"sink{i}", profile.sink_batches))
            for i in range(profile.first_sinks):
                sched.add(f"fs{i}", actors.sink(world, f"fs{i}", profile.sink_batches, segments=3 - i % 3))
            for i in range(profile.producers):
                sched.add(f"p{i}", actors.producer(world, f"p{i}", profile.batches, random.Random(rng.random())))
            for i in range(profile.first_writers):
                sched.add(f"f{i}", actors.first_writer(world, f"f{i}", profile.batches, 1 + i))
            if profile.compactions:
                sched.add("compact", actors.compactor(world, profile.compactions, random.Random(rng.random())))
            for i in range(profile.vacuumers if profile.vacuums else 0):
                sched.add("vacuum" if i == 0 else f"vacuum{i}",
                          actors.vacuumer(world, profile.vacuums, random.Random(rng.random())))
            if profile.scales:
                sched.add("scale", actors.scaler(world, profile.scales, random.Random(rng.random())))
            if profile.truncations:
                sched.add("truncate", actors.truncator(world, profile.truncations, random.Random(rng.random())))
            if profile.consumers:
                from pyspark_tstream.api.groups import Group

                Group.create(Stream.open(world.url), "g", start=0)
            for i in range(profile.consumers):
                sched.add(f"c{i}", actors.consumer(world, f"c{i}", profile.consumer_reads, random.Random(rng.random())))
            if profile.repairs:
                sched.add("repair", (damage.operator if profile.damages else actors.repairer)(
                    world, profile.repairs, random.Random(rng.random())))
            if profile.damages:
                sched.add("vandal", damage.vandal(world, profile.damages, random.Random(rng.random())), crashable=False)
                sched.wrap(lambda body: damage.guarded(world, body))
            for i in range(profile.readers):
                sched.add(f"r{i}", actors.reader(world, f"r{i}", profile.reads, random.Random(rng.random())))
            try:
                sched.run()
                try:
                    world.check_end()
                except AssertionError:
                    raise
                except Exception as e:
                    raise AssertionError(f"end check: {type(e).__name__}: {e}") from e
            except AssertionError as e:
                raise Violation(f"{profile.name} seed {seed} violated an invariant: {e}\n"
                                f"replay: {replay_command(seed, profile)}\n"
                                f"last store calls (actor, op, path):\n{_tail(sched.trace)}",
                                sched.trace, sched.faults_drawn) from e
    finally:
        _forget(world.url)
    for _actor, op, _rel in sched.trace:
        if op in ("CRASH", "ERROR", "AMBIGUOUS", "TORN", "THROTTLED"):
            world.notes[f"faults: {op.lower()}"] += 1
        if op == "AMBIGUOUS":  # by the kind of object: the journal, a macro-map, a group version...
            world.notes[f"ambiguous creates of {layout_kind(_rel)}"] += 1
    return Outcome(seed, sched.trace, world.notes, time.perf_counter() - started)


class Violation(AssertionError):
    """A seed broke an invariant: the message says which and how to replay it; ``trace`` is
    the run's schedule and ``faults`` how many faults it drew."""

    def __init__(self, message: str, trace: list[tuple[str, str, str]], faults: int) -> None:
        super().__init__(message)
        self.trace = trace
        self.faults = faults


def replay_command(seed: int, profile: Profile, tweak: str = "") -> str:
    """The one line that replays ``seed`` of ``profile`` exactly (``tweak``: the changes a
    shrunk run made to the named profile, :func:`~.shrink.tweak_text`)."""
    changed = f"TSTREAM_SIM_TWEAK={tweak} " if tweak else ""
    return (f"TSTREAM_SIM_SEED={seed} TSTREAM_SIM_PROFILE={profile.name} {changed}"
            "python -m pytest -q -n 0 tests/test_simulation.py -k replay")


def _tail(trace: list[tuple[str, str, str]], n: int = 40) -> str:
    return "\n".join(f"  {i:5d} {a:8s} {op:13s} {rel}" for i, (a, op, rel) in
                     enumerate(trace[-n:], start=max(0, len(trace) - n)))


def layout_kind(rel: str) -> str:
    """The kind of object at ``rel``: its folders without their numbered parts."""
    parts = rel.split("/")[:-1]
    return "/".join(p for p in parts if not p.isdigit()) or rel


def _forget(url: str) -> None:
    """Drop the seed's objects: fsspec's memory store is one process-wide dict, listed whole."""
    bucket = "/" + url.split("://", 1)[1].split("/", 1)[0]
    for key in [k for k in MemoryFileSystem.store if k.startswith(bucket)]:
        MemoryFileSystem.store.pop(key, None)
    MemoryFileSystem.pseudo_dirs[:] = [d for d in MemoryFileSystem.pseudo_dirs if not d.startswith(bucket)]
