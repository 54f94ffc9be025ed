"""Damaged and lost metadata as drawn faults, and an operator running ``tstream repair`` at random.

For a profile with ``damages`` set, a vandal actor (a failing disk, a stray script, an operator's
mistake) damages that many metadata objects while the others run, each at a point the seed draws:
a journal entry, a checkpoint or the head hint, **lost** (deleted), **torn** (cut to half its
bytes) or, for entries and checkpoints, with **one digit changed** in the position it names. An
operator looks ``repairs`` times at random: ``Stream.repair_url`` (``tstream repair``), with
``--drop-torn-entry`` when the newest entry is torn and nothing holds a copy.

What a run must show, per damage: either nothing lost (no acknowledged record missing, no
``_seq`` reused or skipped: the run's usual end checks) or a ``CorruptMetadataError`` that
names a damaged object (a read that fails clearly is an acceptable outcome; a wrong answer is
not). Every ``CorruptMetadataError`` raised in the run is recorded where it is made and must name
a damaged object (the vandal's, or a derived one repair could not rebuild); an acknowledged
batch may be missing at the end only if the operator set its entry aside (``repair
--drop-torn-entry``: the loss that command reports).

Drawn only where today's checks can detect the damage (the checksums of the damage work will
detect more; until then these are left out, and why):

* a changed digit anywhere but the position an entry or checkpoint names (a row count, a
  ``_seq``, a writer's batch): parsing accepts it, and the cross-checks
  (``journal/crosscheck.py``) see only some of it (a checkpoint's next ``_seq`` that the entries
  after it contradict); a changed digit of the head hint (readers trust its copy of the newest
  entry until a commit confirms it: ``EntryLog.confirm``);
* the newest entry lost or torn when the head hint holds no copy of it: nothing else does, so no
  check can tell it from a journal that ends one entry earlier (the next commit takes its
  position); the vandal damages the newest entry only while the hint copies it.

An older entry lost is drawn: a committer whose view is older than it refuses to create in its
slot, since an entry lies past it (``journal/holes.py``; before, the create succeeded and forked
the journal: seeds 1,500,146 and 20,054, ``tests/test_journal_hole.py``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import CorruptMetadataError
from pyspark_tstream.store import layout

from .actors import restarting

if TYPE_CHECKING:
    from .world import World

#: What the vandal may do to each kind of object (see the module docstring for what is left out).
MODES = {"entry": ("lost", "torn", "digit"), "checkpoint": ("lost", "torn", "digit"), "head": ("lost", "torn")}
#: ``damage_undetectable``: what is left out too (a digit of any number, the head's digits), to
#: show that the run's checks catch what today's checks in the product do not.
UNDETECTABLE = {"entry": ("digit",), "checkpoint": ("digit",), "head": ("digit",)}
#: The position an entry or checkpoint names: its own ``pos`` (an entry's first key, a
#: checkpoint's after its version) and its state's or change's. Not the nested ``pos`` of a
#: field (the compaction record's ``{"segs":...,"pos":N}``): a digit changed there is a number
#: parsing accepts and the cross-checks do not see, left out with the other numbers above.
_POS = re.compile(rb'(?:^\{|^\{"v":\d+,|"state":\{|"change":\{)"pos":(\d+)')
_ANY_NUMBER = re.compile(rb"[\[,:](\d+)")
_SET_ASIDE = re.compile(r"journal entry (\d+) was torn")


def _memory() -> Any:
    from fsspec.implementations.memory import MemoryFileSystem

    return MemoryFileSystem()


def _key(world: World, rel: str) -> str:
    return f"/{world.url.split('://', 1)[1]}/{rel}"


def _read(world: World, rel: str) -> bytes | None:
    got = _memory().store.get(_key(world, rel))
    return None if got is None else bytes(got.getvalue())


def _listed(world: World, prefix: str) -> list[str]:
    root = _key(world, "")
    return sorted(k[len(root):] for k in _memory().store if k.startswith(root + prefix) and k.endswith(".json"))


def _targets(world: World, kind: str) -> list[str]:
    """The objects of ``kind`` the vandal may damage now."""
    if kind == "head":
        return [layout.HEAD] if _read(world, layout.HEAD) is not None else []
    if kind == "checkpoint":
        return _listed(world, layout.CHECKPOINTS)
    entries = [rel for rel in _listed(world, "_tstream/journal/") if rel.count("/") == 3]
    if entries and _read(world, entries[-1]) != _read(world, layout.HEAD):
        entries.pop()  # the newest entry, which no hint copies: its loss could not be detected
    return entries


def _damage(world: World, rng: random.Random) -> None:
    """Damage one object the seed draws (nothing when no object of the drawn kind may be)."""
    modes = UNDETECTABLE if world.profile.damage_undetectable else MODES
    kind = rng.choice(sorted(modes))
    mode = rng.choice(modes[kind])
    targets = _targets(world, kind)
    if not targets:
        return
    rel = rng.choice(targets)
    world.sched.yield_point("damage", rel)
    data = _read(world, rel)
    if data is None:
        return
    fs = _memory()
    if mode == "lost":
        fs.store.pop(_key(world, rel), None)
    elif mode == "torn":
        fs.pipe_file(_key(world, rel), data[: len(data) // 2])
    else:
        numbers = list((_ANY_NUMBER if world.profile.damage_undetectable else _POS).finditer(data))
        if not numbers:
            return
        found = rng.choice(numbers)
        at = found.start(1) + rng.randrange(len(found.group(1)))
        digit = rng.choice([d for d in b"0123456789" if d != data[at]])
        fs.pipe_file(_key(world, rel), data[:at] + bytes([digit]) + data[at + 1:])
    world.damaged[rel] = mode
    world.note(f"damage: {kind} {mode}")
    world.sched.trace.append((world.sched.actor_name() or "", "DAMAGE", f"{mode} {rel}"))


def vandal(world: World, damages: int, rng: random.Random) -> Any:
    """An actor that damages ``damages`` metadata objects at drawn points of the run."""
    left = {"n": damages}

    def body() -> bool:
        while left["n"] > 0:
            world.sched.sleep_until(world.sched.now + rng.randrange(2 * world.grace_ms))
            left["n"] -= 1
            _damage(world, rng)
        return True

    return restarting(world.sched, body, world.expected)


def operator(world: World, runs: int, rng: random.Random) -> Any:
    """An operator who runs ``tstream repair`` ``runs`` times at random, with
    ``--drop-torn-entry`` when the newest entry is torn and no hint copies it."""
    from pyspark_tstream.maintain.repair import torn_newest
    from pyspark_tstream.store.storage import Store

    left = {"runs": runs}

    def body() -> bool:
        while left["runs"] > 0:
            world.sched.sleep_until(world.sched.now + rng.randrange(2 * world.grace_ms))
            left["runs"] -= 1
            try:
                repair(world, torn_newest(Store(world.url)) is not None)
            except world.expected:
                pass
        return True

    return restarting(world.sched, body, world.expected)


def repair(world: World, drop_torn: bool) -> None:
    """One ``tstream repair``; note what it did (and which entries it set aside, losing them)."""
    report = Stream.repair_url(world.url, drop_torn_entry=drop_torn)
    world.note("repairs run")
    for done in report.repaired:
        world.note("repairs: " + re.sub(r"\d+", "N", done.split(":")[0])[:60])
        found = _SET_ASIDE.match(done)
        if found:
            world.set_aside.add(int(found.group(1)))


def names_damage(world: World, error: BaseException, modes: tuple[str, ...] = ()) -> bool:
    """Whether ``error`` names an object the vandal damaged (in one of ``modes``: any when empty)."""
    text = f"{getattr(error, 'path', '')} {error}"
    return any(rel in text for rel, mode in world.damaged.items() if not modes or mode in modes)


def guarded(world: World, body: Callable[[], None]) -> Callable[[], None]:
    """An actor that stops when it meets a lost object as ``FileNotFoundError`` naming it (what
    a vacuum or a writer reading a lost journal entry or checkpoint raises: clear, if not a
    ``CorruptMetadataError``); any other ``FileNotFoundError`` still fails the run."""
    def run() -> None:
        try:
            body()
        except FileNotFoundError as e:
            if not names_damage(world, e, ("lost",)):
                raise
            world.note("actors stopped by a lost object they named")
    return run


@contextmanager
def recording(world: World) -> Iterator[None]:
    """Record every ``CorruptMetadataError`` made during the run (nothing unless ``damages``)."""
    if not world.profile.damages:
        yield
        return
    init = CorruptMetadataError.__init__

    def made(self: CorruptMetadataError, message: str, **values: Any) -> None:
        init(self, message, **values)
        world.corrupt_seen.append(f"{values.get('path', '')} {message}")

    CorruptMetadataError.__init__ = made  # type: ignore[method-assign]
    try:
        yield
    finally:
        CorruptMetadataError.__init__ = init  # type: ignore[method-assign]
