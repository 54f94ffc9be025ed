"""A seeded scheduler that runs actor threads one at a time, switching only at store calls.

Invariant: while :meth:`Scheduler.run` runs, exactly one actor thread executes tstream code at a
time (a thread an actor's process starts is an actor too, :meth:`Scheduler.spawn`), and which
one runs next, the simulated clock, every random id and every injected fault are drawn from one
``random.Random(seed)``: the same seed replays the same schedule (CHESS/Coyote style). Every
store call goes through ``Store._call``, which notifies ``store.observer`` first: the observer
installed on every ``Store`` built during a run is the scheduling point.

What is patched for the run (and restored after):

* ``Store.__init__``: every store gets the observer and a no-wait retry policy (retries cost no
  real time; ``RetryPolicy.delay`` of 0 s);
* ``Store._call``: the call itself may fail transiently (a ``ConnectionResetError`` the retry
  policy handles) or be *ambiguous* (applied, then the answer lost: the retry of a create sees
  the object exist, as on S3);
* ``pyspark_tstream.timestamps.time``: ``now_ms`` reads the simulated clock, which advances by a
  seeded step at every store call;
* ``fsspec``'s memory filesystem ``datetime``: objects are stamped with the simulated clock, so
  ``Store.modified_ms`` (orphan graces) agrees with ``now_ms``;
* ``uuid.uuid4``: seeded (chunk names, request ids, commit nonces);
* ``read.file_checks``' thread pools (fsck's and repair's file checks): run in line, so an
  actor's checks are scheduled like its other store calls;
* ``GroupCommit.pause`` and ``clock``: a waiting group committer sleeps on the simulated clock;
* ``Fence.clock`` (``store/fence.py``): the orphan fence measures a committer's stall on the
  simulated clock, as orphan cleanup's grace does (``Fence.since_wall``, the sink's commit of
  its tasks' stamps, reads ``now_ms``, patched above);
* ``GroupCommit._executor``: runs its work in line. tstream's only background threads on
  ``memory://`` are the group committer's pool (publishing a request beside the listing) and
  upkeep's; head hints and request deletes run in line on ``memory://`` already
  (``HeadHints.background`` is false there). In line, a request is published before the
  listing, one of the orders the pool allows;
* ``inline_from_env``: upkeep runs in line whatever ``TSTREAM_UPKEEP`` says (the
  long run, ``sim.longrun``, runs outside pytest and its ``conftest``): a background thread
  would escape the scheduler, its store calls unscheduled and unfaulted, alive past its
  process's crash and past the run.
"""

from __future__ import annotations

import logging
import random
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import fsspec.implementations.memory as fsspec_memory
from pyspark_tstream import timestamps
from pyspark_tstream.api import upkeep as upkeep_mod
from pyspark_tstream.read import file_checks
from pyspark_tstream.store.fence import Fence
from pyspark_tstream.store.layout import CHECKPOINTS, MACROS, REQUESTS
from pyspark_tstream.store.storage import RetryPolicy, Store
from pyspark_tstream.write.group import GroupCommit

#: The simulated clock's start (epoch ms).
T0 = 1_700_000_000_000
#: Retries cost no time; two attempts, so a transient fault is retried once.
NO_WAIT = RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0)
#: Seconds the driver waits for a run before it declares the actors deadlocked.
DEADLOCK_S = 120.0


class Crash(BaseException):
    """The actor's process died between two store calls (a BaseException: no ``except
    Exception`` in tstream may survive it, as no code survives a killed process)."""


class Stuck(BaseException):
    """The run took more store calls than its cap (a livelock, or a budget set too high)."""


@dataclass(frozen=True)
class Faults:
    """Per-store-call fault probabilities (each drawn at the call's scheduling point)."""

    crash: float = 0.01  # the actor dies before the call
    error: float = 0.01  # the call fails after its retries (a retriable StorageError)
    transient: float = 0.03  # the call fails once and its retry succeeds
    ambiguous: float = 0.15  # a conditional create applies, its answer is lost (retry: "exists")
    torn: float = 0.0  # a journal entry's create leaves half its bytes and the actor dies (file:// crash)
    #: the actor dies at the store call right after publishing a group-commit request (a fault
    #: placed where it matters, as FoundationDB's BUGGIFY places them; drawn only when set)
    published: float = 0.0
    #: the call is throttled (429/503) a few times in a row before it succeeds: the store's
    #: retries absorb it (drawn only when set; a run with it sets more attempts: ``retry``)
    throttle: float = 0.0
    #: the actor dies at the store call right after creating a macro-map version or writing a
    #: checkpoint of the state (placed, as ``published``; drawn only when set): a later
    #: compaction adopts the dead one's map version, a rebuild starts from the checkpoint
    placed: float = 0.0

    @classmethod
    def none(cls) -> Faults:
        return cls(crash=0.0, error=0.0, transient=0.0, ambiguous=0.0, torn=0.0, published=0.0, throttle=0.0,
                   placed=0.0)


@dataclass
class _Actor:
    name: str
    body: Callable[[], None]
    crashable: bool
    thread: threading.Thread | None = None
    done: bool = False
    wake: int | None = None  # sleeping until this simulated time
    dead: bool = False  # crashed: every store call raises Crash until the body restarts
    published: bool = False  # its last store call published a group-commit request
    placed: bool = False  # its last store call created a macro-map version or wrote a checkpoint
    error: BaseException | None = None
    error_tb: str = ""
    baton: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    lives: int = 0  # restarts after a crash: a thread of an earlier life dies with it
    #: a thread of another actor's process (:meth:`Scheduler.spawn`): that actor and its life
    process: tuple[_Actor, int] | None = None
    stall: tuple[int, int] | None = None  # (store calls, ms): it stalls that long before that call


@dataclass
class Scheduler:
    """Runs actors one at a time; see the module docstring. ``max_steps`` caps store calls."""

    seed: int
    faults: Faults = field(default_factory=Faults)
    max_steps: int = 20_000
    max_step_ms: int = 40
    restart_delay_ms: int = 0  # a crashed actor restarts after up to this long (others run meanwhile)
    faults_off: frozenset[int] = frozenset()  # numbers (from 1, in draw order) of faults not applied
    retry: RetryPolicy = NO_WAIT  # every store's retry policy during the run
    #: the exception a faulty attempt raises, by (kind, op, path): "transient", "error",
    #: "ambiguous", "throttled" (None: a dropped connection, as every store may see)
    errors: Callable[[str, str, str], BaseException] | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.ids = random.Random(self.seed ^ 0x5EED)
        self.now = T0
        self.faults_drawn = 0
        self.trace: list[tuple[str, str, str]] = []
        self._current: str | None = None
        self._actors: dict[str, _Actor] = {}
        self._by_thread: dict[int, _Actor] = {}
        self._local = threading.local()

    # -- the actors' side ------------------------------------------------------------------------
    def actor_name(self) -> str | None:
        """The running actor's name (None on the driver thread)."""
        a = self._by_thread.get(threading.get_ident())
        return a.name if a is not None else None

    def revive(self) -> None:
        """The calling actor restarts after a :class:`Crash` (a new process of that role)."""
        actor = self._by_thread[threading.get_ident()]
        actor.dead = False
        actor.lives += 1

    def spawn(self, what: str, body: Callable[[], None], stall_ms: int = 0) -> None:
        """A thread of the calling actor's process runs ``body``, scheduled as an actor of its
        own: it dies with the process (at its next store call after the actor's crash, a
        :class:`Crash` ``body`` need not handle), its own crash kills the process, and with
        ``stall_ms`` it stalls up to that long before one of its first 24 store calls (a slow thread,
        a pause). Called from an actor only (the driver's threads are not scheduled)."""
        me = self._by_thread[threading.get_ident()]
        name = f"{me.name}.{what}{sum(a.process is not None and a.process[0] is me for a in self._actors.values())}"

        def run() -> None:
            try:
                body()
            except Crash:
                pass  # the process died: nothing of it runs on

        stall = (1 + self.rng.randrange(24), self.rng.randrange(stall_ms)) if stall_ms else None
        actor = _Actor(name, run, me.crashable, process=(me, me.lives), stall=stall)
        self._actors[name] = actor
        actor.thread = threading.Thread(target=self._main, args=(actor,), name=f"sim-{name}", daemon=True)
        actor.thread.start()
        self._by_thread[actor.thread.ident] = actor  # type: ignore[index]

    def observe(self, op: str, rel: str) -> None:
        """The scheduling point before every store call (installed as ``Store.observer``)."""
        actor = self._by_thread.get(threading.get_ident())
        if actor is None:  # the driver (setup, final checks): not scheduled, no faults
            return
        if actor.stall is not None and not self._gone(actor):
            calls, ms = actor.stall
            actor.stall = (calls - 1, ms) if calls > 1 else None
            if calls == 1:
                self.trace.append((actor.name, "STALL", f"{ms} ms"))
                self.sleep_until(self.now + ms)
        if self._gone(actor):
            raise Crash(f"{actor.name} is dead")
        self.trace.append((actor.name, op, rel))
        if len(self.trace) > self.max_steps:
            raise Stuck(f"more than {self.max_steps} store calls")
        self.now += self.rng.randrange(self.max_step_ms + 1)
        self._local.plan = None
        f, r = self.faults, self.rng.random()
        kind = None
        just_published, actor.published = actor.published, op == "write" and rel.startswith(REQUESTS)
        just_placed, actor.placed = actor.placed, ((op == "put_if_absent" and rel.startswith(MACROS))
                                                   or (op == "write" and rel.startswith(CHECKPOINTS)))
        if actor.crashable and r < f.crash:
            kind = "CRASH"
        elif f.published and just_published and actor.crashable and self.rng.random() < f.published:
            kind = "CRASH"
        elif f.placed and just_placed and actor.crashable and self.rng.random() < f.placed:
            kind = "CRASH"
        elif r - f.crash < f.error:
            kind = "ERROR"
        elif r - f.crash < f.error + f.transient:
            kind = "transient"
        elif op == "put_if_absent" and r - f.crash < f.error + f.transient + f.ambiguous:
            kind = "AMBIGUOUS"
        elif (op == "put_if_absent" and actor.crashable and rel.startswith("_tstream/journal/")
              and r - f.crash < f.error + f.transient + f.ambiguous + f.torn):
            kind = "TORN"
        elif f.throttle and r - f.crash < f.error + f.transient + f.ambiguous + f.torn + f.throttle:
            kind = "THROTTLED"
        if kind is not None:
            self.faults_drawn += 1
            if self.faults_drawn in self.faults_off:  # shrinking: this fault left out
                kind = None
        if kind == "CRASH":
            self._kill(actor)
            self.trace.append((actor.name, "CRASH", rel))
            self._switch(actor)
            raise Crash(f"{actor.name} crashed before {op} {rel}")
        if kind is not None:
            if kind != "transient":
                self.trace.append((actor.name, kind, rel))
            self._local.plan = kind.lower()
            if kind == "THROTTLED":  # a run the retries absorb: fewer than the attempts
                self._local.throttles = 1 + self.rng.randrange(max(1, self.retry.attempts - 1))
        self._switch(actor)
        if self._gone(actor):  # its process died while others ran (a thread of it crashed, or it did)
            raise Crash(f"{actor.name}'s process died before {op} {rel}")

    def die(self) -> None:
        """The calling actor's process dies here (its next store call raises :class:`Crash`)."""
        self._kill(self._by_thread[threading.get_ident()])

    @staticmethod
    def _gone(actor: _Actor) -> bool:
        """Whether ``actor`` is dead; a thread (:meth:`spawn`) is once its process died."""
        if actor.process is not None:
            owner, life = actor.process
            if owner.dead or owner.lives != life:
                actor.dead = True
        return actor.dead

    @staticmethod
    def _kill(actor: _Actor) -> None:
        """``actor`` dies, and with a thread (:meth:`spawn`) its process."""
        actor.dead = True
        if actor.process is not None and actor.process[0].lives == actor.process[1]:
            actor.process[0].dead = True

    def is_dead(self) -> bool:
        """Whether the calling actor's process died (:meth:`die`) and has not restarted."""
        actor = self._by_thread.get(threading.get_ident())
        return actor is not None and actor.dead

    def yield_point(self, op: str, rel: str) -> None:
        """A scheduling point inside a store call (no fault): another actor may run here, as
        another thread could inside a store call that is not atomic."""
        actor = self._by_thread.get(threading.get_ident())
        if actor is None:
            return
        self.trace.append((actor.name, op, rel))
        self._switch(actor)

    def perform(self, op: str, rel: str, fn: Callable[[], Any], tear: Callable[[], None]) -> Any:
        """Run one attempt of a store call with the fault its scheduling point drew (``tear``
        cuts the object the call wrote to half its bytes)."""
        plan = getattr(self._local, "plan", None)
        if plan == "torn":  # written, torn, and the process died before anything else
            self._local.plan = None
            fn()
            tear()
            self._kill(self._by_thread[threading.get_ident()])
            raise Crash(f"{self.actor_name()} died writing {rel}, leaving it torn")
        if plan == "transient":
            self._local.plan = None
            raise self._error("transient", op, rel, "simulated dropped connection")
        if plan == "error":  # every attempt fails: the call raises a retriable StorageError
            raise self._error("error", op, rel, "simulated outage")
        if plan == "ambiguous":
            self._local.plan = None
            fn()  # applied ...
            raise self._error("ambiguous", op, rel, "simulated lost answer")  # ... answer lost
        if plan == "throttled":
            self._local.throttles -= 1
            if self._local.throttles <= 0:
                self._local.plan = None
            raise self._error("throttled", op, rel, "simulated throttling")
        return fn()

    def _error(self, kind: str, op: str, rel: str, what: str) -> BaseException:
        if self.errors is not None:
            return self.errors(kind, op, rel)
        return ConnectionResetError(f"{what}: {op} {rel}")

    def sleep_until(self, ms: int) -> None:
        """The calling actor waits until the simulated clock reaches ``ms``: the others run
        meanwhile; alone, it moves the clock there at once."""
        me = self._by_thread[threading.get_ident()]
        me.wake = ms
        try:
            while self.now < ms:
                others = [a for a in self._actors.values() if a is not me and not a.done]
                if all(a.wake is not None for a in others):  # all asleep: the clock moves to the first waking
                    self.now = max(self.now, min([ms] + [a.wake for a in others if a.wake is not None]))
                    if self.now >= ms:
                        break
                self.trace.append((me.name, "sleep", ""))
                if len(self.trace) > self.max_steps:
                    raise Stuck(f"more than {self.max_steps} store calls")
                self._switch(me, others=True)
        finally:
            me.wake = None

    def _switch(self, me: _Actor, others: bool = False) -> None:
        """Hand the baton to a seeded choice of the live actors (maybe ``me`` again unless
        ``others``) and wait for it to come back."""
        live = [a for a in self._actors.values() if not a.done and not (others and a is me)]
        nxt = live[self.rng.randrange(len(live))]
        if nxt is me:
            return
        self._current = nxt.name
        nxt.baton.release()  # wakes exactly the chosen thread
        me.baton.acquire()

    # -- the driver's side ---------------------------------------------------------------------
    def add(self, name: str, body: Callable[[], None], *, crashable: bool = True) -> None:
        """An actor running ``body`` (which handles its own :class:`Crash`, see :func:`restarting`)."""
        self._actors[name] = _Actor(name, body, crashable)

    def wrap(self, around: Callable[[Callable[[], None]], Callable[[], None]]) -> None:
        """Run every actor added so far as ``around(body)``."""
        for actor in self._actors.values():
            actor.body = around(actor.body)

    def run(self) -> None:
        """Run every actor to its end; re-raise the first actor failure (with its traceback)."""
        self._all_done = threading.Event()
        for a in self._actors.values():
            a.thread = threading.Thread(target=self._main, args=(a,), name=f"sim-{a.name}", daemon=True)
            a.thread.start()
            self._by_thread[a.thread.ident] = a  # type: ignore[index]
        first = list(self._actors.values())[self.rng.randrange(len(self._actors))]
        self._current = first.name
        first.baton.release()
        if not self._all_done.wait(DEADLOCK_S):
            raise AssertionError(f"deadlock: actor {self._current} holds the baton; last calls {self.trace[-5:]}")
        self._by_thread.clear()  # thread ids are reused: a later thread is the driver's
        for a in self._actors.values():
            if a.error is not None:
                raise AssertionError(f"actor {a.name} failed: {type(a.error).__name__}: {a.error}\n{a.error_tb}")

    def _main(self, actor: _Actor) -> None:
        actor.baton.acquire()  # the baton comes only once every thread is registered
        try:
            actor.body()
        except BaseException as e:  # noqa: BLE001 - reported by run()
            actor.error, actor.error_tb = e, traceback.format_exc()
        finally:
            actor.done = True
            self._by_thread.pop(threading.get_ident(), None)  # the id may be reused by a pool's thread
            live = [a for a in self._actors.values() if not a.done]
            if live:
                nxt = live[self.rng.randrange(len(live))]
                self._current = nxt.name
                nxt.baton.release()
            else:
                self._current = None
                self._all_done.set()

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self.ids.getrandbits(128), version=4)


def restarting(sched: Scheduler, body: Callable[[], bool], expected: tuple[type[BaseException], ...] = (),
               restarts: int = 20) -> Callable[[], None]:
    """An actor body that reruns ``body`` after each :class:`Crash` (a fresh process picks the
    role up from what is durable) or ``expected`` error it did not handle itself (its process
    gave up and was started again), until it returns True or ``restarts`` such ends happened."""
    def run() -> None:
        for _ in range(restarts):
            try:
                if body():
                    return
            except Crash:
                sched.revive()
                if sched.restart_delay_ms:
                    sched.sleep_until(sched.now + sched.rng.randrange(sched.restart_delay_ms))
            except expected:
                pass
    return run


class _Clock:
    """``pyspark_tstream.timestamps.time`` during a run: ``time_ns`` is the simulated clock."""

    def __init__(self, sched: Scheduler) -> None:
        self._sched = sched

    def time_ns(self) -> int:
        return self._sched.now * 1_000_000

    def time(self) -> float:
        return self._sched.now / 1000


class _MemoryDatetime(datetime):
    """``datetime`` for fsspec's memory filesystem: ``now`` is the simulated clock."""

    sched: Scheduler | None = None

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        assert cls.sched is not None
        return datetime.fromtimestamp(cls.sched.now / 1000, tz or UTC)


class _InlineExecutor:
    """A ``ThreadPoolExecutor`` stand-in that runs the work at ``submit``."""

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        f: Future[Any] = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - delivered at result(), as a pool would
            f.set_exception(e)
        return f


class _InlinePool(_InlineExecutor):
    """A ``ThreadPoolExecutor`` stand-in (``with``, ``map``) that runs the work in the caller."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _InlinePool:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def map(self, fn: Callable[..., Any], *iterables: Any) -> Iterator[Any]:
        return iter([fn(*args) for args in zip(*iterables)])


@contextmanager
def patched(sched: Scheduler) -> Iterator[None]:
    """The patches of the module docstring, for one run."""
    init, call = Store.__init__, Store._call

    def store_init(self: Store, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.retry = sched.retry
        self.observer = sched.observe

    def store_call(self: Store, op: str, rel: str, fn: Callable[[], Any]) -> Any:
        def tear() -> None:
            full = self.full(rel)
            data = self.fs.cat_file(full)
            self.fs.pipe_file(full, data[:len(data) // 2])

        return call(self, op, rel, lambda: sched.perform(op, rel, fn, tear))

    _MemoryDatetime.sched = sched
    log = logging.getLogger("pyspark_tstream")
    level = log.level
    log.setLevel(logging.ERROR)  # aborts keeping files, failed upkeep: expected here, and many
    saved = [(Store, "__init__", init), (Store, "_call", call), (timestamps, "time", timestamps.time),
             (fsspec_memory, "datetime", fsspec_memory.datetime), (uuid, "uuid4", uuid.uuid4),
             (GroupCommit, "_executor", GroupCommit._executor),
             (GroupCommit, "pause", GroupCommit.__dict__["pause"]),
             (GroupCommit, "clock", GroupCommit.__dict__["clock"]),
             (Fence, "clock", Fence.__dict__["clock"]),
             (file_checks, "ThreadPoolExecutor", file_checks.ThreadPoolExecutor),
             (upkeep_mod, "inline_from_env", upkeep_mod.inline_from_env)]
    Store.__init__ = store_init  # type: ignore[method-assign]
    Store._call = store_call  # type: ignore[method-assign]
    timestamps.time = _Clock(sched)  # type: ignore[assignment]
    fsspec_memory.datetime = _MemoryDatetime  # type: ignore[misc]
    uuid.uuid4 = sched.uuid4
    GroupCommit._executor = lambda self: _InlineExecutor()  # type: ignore[method-assign, assignment, return-value]
    GroupCommit.pause = staticmethod(lambda s: sched.sleep_until(sched.now + max(1, round(s * 1000))))  # type: ignore[assignment]
    GroupCommit.clock = staticmethod(lambda: sched.now / 1000)  # type: ignore[assignment]
    Fence.clock = staticmethod(lambda: sched.now / 1000)  # type: ignore[assignment]
    file_checks.ThreadPoolExecutor = _InlinePool  # type: ignore[misc, assignment]
    upkeep_mod.inline_from_env = lambda: True
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        _MemoryDatetime.sched = None
        log.setLevel(level)
