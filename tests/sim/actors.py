"""The simulation's actors: each a bounded loop of real tstream calls on one ``memory://`` stream.

Every actor keeps what a real process would keep durable elsewhere (a writer's next batch id, as
a Spark checkpoint does) in its closure, and re-opens the stream after a :class:`Crash`. Errors
a caller is expected to meet (a retriable ``StorageError``, a lost-race ``CommitConflictError``,
a scale that lost to another, and with torn entries a ``CorruptMetadataError`` naming repair
until the operator sets the entry aside: ``World.expected``) end the attempt and are retried;
any other exception fails the run. What each actor saw goes to the :class:`~.world.World`'s ledger, which checks it.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.conf.options import SinkOptions
from pyspark_tstream.errors import (
    CommitConflictError,
    ConfigError,
    SegmentSealedError,
    StaleWriteError,
    StorageError,
)
from pyspark_tstream.sink.writer import (
    JournalCommitter,
    TaskChunkWriter,
    TaskCommitMessage,
    TStreamStreamWriter,
)
from pyspark_tstream.spark.handle import StreamHandle
from pyspark_tstream.store.storage import Store
from pyspark_tstream.timestamps import now_ms
from pyspark_tstream.write.group import CONTENDED_COMMITS
from pyspark_tstream.write.writing import write_batches

from .scheduler import restarting

if TYPE_CHECKING:
    from .world import World

SCHEMA = pa.schema([("writer", pa.string()), ("batch", pa.int64()), ("i", pa.int64()), ("key", pa.string())])
#: What a caller retries: the store failed past its retries, the journal kept moving, or the
#: orphan fence found files cleanup deleted while the committer stalled (written again on retry).
EXPECTED = (StorageError, CommitConflictError, StaleWriteError)
#: Attempts at one batch before a writer gives up on it (it stays unacknowledged).
ATTEMPTS = 12


def batch_table(writer: str, batch: int, rows: int) -> pa.Table:
    """Rows of (writer, batch): ``i`` counts them, keys cycle so each key sees several batches."""
    return pa.table({"writer": [writer] * rows, "batch": [batch] * rows, "i": list(range(rows)),
                     "key": [f"k{(batch * 3 + i) % 5}" for i in range(rows)]}, schema=SCHEMA)


def _append_batch(world: World, name: str, b: int, append: Any) -> None:
    """Append batch ``b`` of writer ``name`` through ``append`` (table -> ack), retrying what a
    caller retries up to :data:`ATTEMPTS` times; a batch that never lands is given up on."""
    for _ in range(ATTEMPTS):
        try:
            ack = append(batch_table(name, b, world.rows(name, b)))
        except world.expected:
            continue
        world.acked(name, b, ack)
        return
    world.gave_up.add((name, b))


def appender(world: World, name: str, batches: int, rng: random.Random) -> Any:
    """``Stream.append`` with (writer, batch) ids; after a crash it retries the batch it was on."""
    at = {"batch": 0}

    def body() -> bool:
        s = world.open()
        while at["batch"] < batches:
            b = at["batch"]
            if rng.random() < 0.5:  # a writer that lost lately lists others' requests first
                s.appending.group.contended = CONTENDED_COMMITS
            _append_batch(world, name, b, lambda t: s.append(t, key="key", writer_id=name, batch_id=b))  # noqa: B023
            at["batch"] += 1
        return True

    return restarting(world.sched, body, world.expected)


def producer(world: World, name: str, batches: int, rng: random.Random) -> Any:
    """A producer session (``Stream.writer``): appends with batch ids, and before some batches a
    heartbeat or a close mid-run (its next append opens the session again); closes at its end.
    A crashed one retries the batch it was on; its session holds the tick until its lease ends."""
    at = {"batch": 0}

    def body() -> bool:
        p = world.open().writer(name)
        while at["batch"] < batches:
            b = at["batch"]
            look = rng.random()
            try:
                if look < 0.3:
                    p.heartbeat()
                    world.note("heartbeats")
                elif look < 0.4:
                    p.close()
                    world.note("sessions closed mid-run")
            except world.expected:
                pass
            _append_batch(world, name, b, lambda t: p.append(t, key="key", batch_id=b))  # noqa: B023
            at["batch"] += 1
        for _ in range(ATTEMPTS):
            try:
                p.close()
                break
            except world.expected:
                continue
        return True

    return restarting(world.sched, body, world.expected)


def first_writer(world: World, name: str, batches: int, segments: int) -> Any:
    """A write that may be the stream's first (``Stream.for_write``, as the sink opens its
    stream) with a config of its own (``segments``): it creates the stream (marked as made by a
    write) or re-creates it while no commit has landed, writes its batch's chunks, commits them.
    Once the config is fixed by another write's commit (a ConfigError), its user drops the
    option and writes again."""
    at = {"batch": 0, "config": True}

    def body() -> bool:
        while at["batch"] < batches:
            b = at["batch"]
            config = {"segments": segments} if at["config"] else None
            try:
                s, spec = Stream.for_write(Store(world.url), SCHEMA, config=config, key="key")
                chunks = write_batches(spec, [batch_table(name, b, world.rows(name, b))], ordered=True)
                ack = s.commit(chunks, writer_id=name, batch_id=b, schema=SCHEMA, fresh=True)
            except ConfigError:
                world.note("first writes refused: the config was fixed")
                at["config"] = False
                continue
            except world.expected:
                continue
            world.acked(name, b, ack)
            at["batch"] += 1
        return True

    return restarting(world.sched, body, world.expected)


def _messages(writer: Any, name: str, batch: int, rows: int) -> list[TaskCommitMessage]:
    """What two Spark tasks of one micro-batch send to the driver (each task's own files, and
    the simulated time it started writing them, for the driver's orphan fence)."""
    table = batch_table(name, batch, rows)
    half = rows // 2
    out = []
    for p, part in enumerate((table.slice(0, half), table.slice(half))):
        started = now_ms()
        chunks = write_batches(writer.tasks.spec, [part], task=f"p{p}b{batch}")
        out.append(TaskCommitMessage(p, 0, tuple(chunks), started))
    return out


def sink(world: World, name: str, batches: int, segments: int = 0) -> Any:
    """The Spark sink's micro-batches: tasks write, the driver commits, and aborts when commit
    raised (then replays the batch, as a restarted query does from its checkpoint). A crash of
    the driver replays the batch it was on without an abort. With ``segments``, the driver opens
    its stream as the sink's ``writer`` does (``Stream.for_write`` with that config): it may
    create the stream, re-create it while no commit has landed, or find another write's
    re-creation under its tasks' files; once a commit fixed the config (a ConfigError) its
    user drops the option."""
    at = {"batch": 0, "config": bool(segments)}

    def opened() -> Stream:
        if not segments:
            return world.open()
        config = {"segments": segments} if at["config"] else None
        return Stream.for_write(Store(world.url), SCHEMA, config=config, key="key")[0]

    def body() -> bool:
        while at["batch"] < batches:
            b = at["batch"]
            try:
                stream = opened()
            except ConfigError:
                world.note("first writes refused: the config was fixed")
                at["config"] = False
                continue
            opts = SinkOptions.from_options({"path": stream.url, "writerId": name, "keyColumn": "key"})
            spec = stream.write_spec(SCHEMA, key="key")
            w = TStreamStreamWriter(TaskChunkWriter(spec, SCHEMA),
                                    JournalCommitter(opts, SCHEMA, session=True, handle=StreamHandle.of(stream)))
            try:
                msgs = _messages(w, name, b, world.rows(name, b))
            except world.expected:
                continue  # a task failed: Spark runs the batch again
            p_stall = world.profile.sink_stall
            if p_stall and world.sched.rng.random() < p_stall:
                # the driver paused past the orphan grace before its commit: cleanup may take the
                # tasks' files meanwhile, and the fence must refuse to name them
                world.note("sink drivers stalled past the orphan grace")
                sched = world.sched
                sched.sleep_until(sched.now + world.grace_ms + 1 + sched.rng.randrange(2 * world.grace_ms))
            try:
                ack = w.committer.commit(msgs, b)  # what TStreamStreamWriter.commit runs, with its ack
            except Exception as e:  # noqa: BLE001 - Spark aborts whatever commit raised
                refused = isinstance(e, StaleWriteError)
                world.note("sink commits refused by the fence" if refused else "sink commit failed")
                try:
                    w.abort(msgs, b)
                except world.expected:
                    pass  # a failed abort leaves files for vacuum(orphans=True)
                continue
            world.acked(name, b, ack)
            at["batch"] += 1
        return True

    return restarting(world.sched, body, world.expected)


def compactor(world: World, runs: int, rng: random.Random) -> Any:
    """``Stream.compact``: full packing or the automatic, size-tiered kind."""
    left = {"runs": runs}

    def body() -> bool:
        while left["runs"] > 0:
            left["runs"] -= 1
            try:
                targets = world.profile.compact_targets
                target = targets[rng.randrange(len(targets))] if len(targets) > 1 else targets[0]
                done = world.open().compact(full=rng.random() < 0.5, target=target)
                world.note("macro-chunks written", done.macros)
            except world.expected:
                pass
        return True

    return restarting(world.sched, body, world.expected)


def vacuumer(world: World, runs: int, rng: random.Random) -> Any:
    """``Stream.vacuum`` with the run's grace, with and without orphan cleanup; after its first
    run each waits the grace and a little more, so later runs find replaced files, orphans of
    crashed writers and stale requests old enough to go while the other actors still run."""
    left = {"runs": runs}

    def body() -> bool:
        while left["runs"] > 0:
            if left["runs"] < runs:
                world.sched.sleep_until(world.sched.now + world.grace_ms + rng.randrange(world.grace_ms))
            left["runs"] -= 1
            try:
                counts = world.open().vacuum(grace_ms=world.grace_ms, orphans=rng.random() < 0.6,
                                             orphan_grace_ms=world.grace_ms, unsafe_orphan_grace=True)
                for what, n in counts.to_dict().items():
                    world.note(f"vacuum {what}", n)
            except world.expected:
                pass
        return True

    return restarting(world.sched, body, world.expected)


def scaler(world: World, runs: int, rng: random.Random) -> Any:
    """``Stream.scale``: split a random active segment, or merge two adjacent ones."""
    left = {"runs": runs}

    def body() -> bool:
        while left["runs"] > 0:
            left["runs"] -= 1
            s = world.open()
            segs = sorted(s.state.segments, key=lambda g: g.lo)
            try:
                if len(segs) > 1 and rng.random() < 0.4:
                    k = rng.randrange(len(segs) - 1)
                    s.scale(merge=[segs[k].id, segs[k + 1].id])
                else:
                    s.scale(split=segs[rng.randrange(len(segs))].id)
            except (*world.expected, ConfigError, SegmentSealedError):
                pass  # another scale sealed the segment first
        return True

    return restarting(world.sched, body, world.expected)


def truncator(world: World, runs: int, rng: random.Random) -> Any:
    """``Stream.truncate`` at a time a little in the simulated past, or retention's ``trim`` to
    the newest records (which collects garbage past the grace too)."""
    left = {"runs": runs}

    def body() -> bool:
        while left["runs"] > 0:
            if world.profile.truncate_wait_ms:  # later, with more of the journal to collect
                world.sched.sleep_until(world.sched.now + rng.randrange(world.profile.truncate_wait_ms))
            left["runs"] -= 1
            s = world.open()
            try:
                if rng.random() < 0.5:
                    s.truncate(world.sched.now - rng.randrange(2_000), reason="sim")
                    world.note("truncated")
                else:
                    s.trim(maxlen=5 + rng.randrange(40), gc_grace_ms=world.grace_ms)
                    world.note("trimmed")
            except world.expected:
                pass
        return True

    return restarting(world.sched, body, world.expected)


def reader(world: World, name: str, runs: int, rng: random.Random) -> Any:
    """``Stream.read`` or ``to_reader`` on one handle (refreshed), each result checked."""
    left = {"runs": runs}

    def body() -> bool:
        s = world.open()
        while left["runs"] > 0:
            left["runs"] -= 1
            started = world.sched.now
            try:
                # every other read on a fresh handle: its state rebuilt from a checkpoint
                on = world.open() if world.profile.reopen_reads and left["runs"] % 2 else s
                complete = on.refresh().tick  # the read's range reaches at least this tick
                if rng.random() < 0.5:
                    table = on.read()
                else:
                    table = on.to_reader(system_columns=True).read_all()
                after = on.refresh()
                if world.profile.reopen_reads:
                    world.rebuilt(name, after)
            except FileNotFoundError as e:
                if isinstance(e, world.expected):  # no stream yet (first writes)
                    continue
                world.reader_missed(name, started, e)
                s = world.open()
                continue
            except world.expected:
                continue
            world.saw(name, table, after, complete)
        return True

    return restarting(world.sched, body, world.expected)


def consumer(world: World, name: str, runs: int, rng: random.Random) -> Any:
    """A member of consumer group ``g``: reads new records, acknowledges most, now and then
    claims records idle for longer than the grace (a crashed member's)."""
    from pyspark_tstream.api.groups import Group

    left = {"runs": runs}

    def body() -> bool:
        group = Group.open(world.open(), "g")
        while left["runs"] > 0:
            left["runs"] -= 1
            try:
                if rng.random() < 0.2:
                    world.delivered(name, group.claim(name, world.grace_ms, count=5), claimed=True)
                    continue
                table = group.read(name, count=1 + rng.randrange(6))
                world.delivered(name, table)
                if table.num_rows and rng.random() < 0.8:
                    group.ack(table)
            except world.expected:
                continue
        return True

    return restarting(world.sched, body, world.expected)


def repairer(world: World, runs: int, rng: random.Random) -> Any:
    """An operator who, finding the newest journal entry torn (every reader and writer stops
    there, naming the remedy), runs ``tstream repair --drop-torn-entry``; looks ``runs`` times."""
    from pyspark_tstream.maintain.repair import torn_newest
    from pyspark_tstream.store.storage import Store

    left = {"runs": runs}

    def body() -> bool:
        while left["runs"] > 0:
            world.sched.sleep_until(world.sched.now + rng.randrange(world.grace_ms))
            left["runs"] -= 1
            try:
                if torn_newest(Store(world.url)) is None:
                    continue
                report = Stream.repair_url(world.url, drop_torn_entry=True)
                world.note("torn entries set aside", sum("torn" in d or "aside" in d for d in report.repaired))
            except world.expected:
                pass
        return True

    return restarting(world.sched, body, world.expected)
