"""A mount without hard links (a FUSE mount of a cloud store) as the simulated store's create.

For a profile with ``mount`` set, every conditional create of the ``memory://`` store runs the
real claim path of such mounts (``store/claims.py``'s ``claim_create``: an ``O_EXCL`` claim
file, a temp file renamed onto the name, a takeover of a claim whose name has not appeared
after :data:`~pyspark_tstream.store.claims.CLAIM_GRACE` seconds on the watcher's own clock),
with the file-system calls it makes served by the memory store, each a scheduling point:

* each actor's monotonic clock runs at its own rate (drawn per actor, up to ``mount_skew``
  away from the simulated clock's), as the clocks of processes on different machines do;
* a holder dies between its claim and its rename (``mount_die``): its claim is left for the
  grace, and another actor takes the name over;
* a holder stalls past the grace between its last check and its rename (``mount_stall``: a GC
  pause, a suspended VM): the case a lease cannot exclude, where a plain rename would replace
  what the actor that took over published;
* each seed draws whether the mount renames without replacing (``renameat2(RENAME_NOREPLACE)``,
  served atomically here): then a claim is taken over after the grace and a stalled holder's
  rename fails with "exists"; otherwise (as on rclone) only the claim of a holder that is gone
  (it died; the actors are processes of one machine, each restart a new one) is taken over, and
  a committer that meets a live holder's claim past the grace fails with the error naming it.

The claims and temp files are hidden names the mount's listings skip, as ``file://``'s do.
"""

from __future__ import annotations

import posixpath
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyspark_tstream.store.claims as claims_mod
from pyspark_tstream.errors import StorageError
from pyspark_tstream.store.backends.memory import MemoryBackend
from pyspark_tstream.store.localfs import memory_create

from .scheduler import Crash

if TYPE_CHECKING:
    from .world import World

#: A stalled holder's pause beyond the grace (ms): up to this much longer.
STALL_EXTRA_MS = 30_000
#: Polls of a watched claim at most this far apart in a run (seconds): the product's 50 ms
#: would spend the run's store-call budget on one grace.
POLL_MAX_S = 5.0


class _Path:
    """``os.path`` for the claim path, on the memory store."""

    def __init__(self, mount: _MountOs) -> None:
        self._m = mount
        self.split, self.join, self.dirname = posixpath.split, posixpath.join, posixpath.dirname

    def exists(self, path: str) -> bool:
        self._m.point("exists", path)
        return self._m.key(path) in self._m.fs.store


class _MountOs:
    """The ``os`` functions ``claim_create`` calls, served by the memory store; each call is a
    scheduling point, and a holder may die or stall before its rename."""

    O_CREAT, O_EXCL, O_WRONLY, O_RDONLY = 0o100, 0o200, 0o1, 0o0

    def __init__(self, world: World, fs: Any) -> None:
        self.world, self.fs = world, fs
        self.path = _Path(self)
        self._open: dict[int, str] = {}
        self.deaths: dict[str, int] = {}  # restarts of each actor after dying mid-publish

    def key(self, path: str) -> str:
        return str(self.fs._strip_protocol(path))

    def point(self, op: str, path: str) -> None:
        if self.world.sched.is_dead():  # a dead process cleans nothing up: its claim and temp stay
            raise Crash(f"{self.world.sched.actor_name()} is dead")
        self.world.sched.yield_point(f"mount {op}", path.split("/stream/", 1)[-1])

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        pass  # the memory store has no folders to make

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = len(self._open) + 1
        if flags == self.O_RDONLY:
            self.point("read claim", path)
            if self.key(path) not in self.fs.store:
                raise FileNotFoundError(path)
        else:
            self.point("claim", path)
            memory_create(self.fs, path, b"")  # FileExistsError when another holds it
            if not path.endswith(".0.claim"):  # a later generation: a claim taken over
                self.world.note("mount claims taken over")
        self._open[fd] = self.key(path)
        return fd

    def write(self, fd: int, data: bytes) -> int:
        self.fs.pipe_file(self._open[fd], bytes(data))  # the holder's record, written with its claim
        return len(data)

    def read(self, fd: int, n: int) -> bytes:
        got = self.fs.store.get(self._open[fd])
        return bytes(got.getvalue()[:n]) if got is not None else b""

    def close(self, fd: int) -> None:
        self._open.pop(fd, None)

    def unlink(self, path: str) -> None:
        self.point("unlink", path)
        if self.fs.store.pop(self.key(path), None) is None:
            raise FileNotFoundError(path)

    def replace(self, src: str, dst: str) -> None:
        self._before_rename(src, dst)
        if self.key(dst) in self.fs.store:
            self.world.note("mount renames onto an existing name")
        self.fs.store[self.key(dst)] = self.fs.store.pop(self.key(src))

    def rename_noreplace(self, src: str, dst: str) -> None:
        """``renameat2(RENAME_NOREPLACE)``: checked and applied as one step."""
        self._before_rename(src, dst)
        if self.key(dst) in self.fs.store:
            self.world.note("mount renames refused: the name exists")
            raise FileExistsError(dst)
        self.fs.store[self.key(dst)] = self.fs.store.pop(self.key(src))

    def _before_rename(self, src: str, dst: str) -> None:
        sched, profile = self.world.sched, self.world.profile
        r = sched.rng.random() if sched.actor_name() is not None else 1.0  # the driver's checks: no faults
        if r < profile.mount_die:  # dead between its claim and its rename: the claim stays
            self.world.note("mount holders dead before their rename")
            name = sched.actor_name() or ""
            self.deaths[name] = self.deaths.get(name, 0) + 1
            sched.trace.append((sched.actor_name() or "", "CRASH", src))
            sched.die()
            raise Crash(f"{sched.actor_name()} died holding the claim of {dst}")
        if r < profile.mount_die + profile.mount_stall:  # paused past the grace, after its checks
            self.world.note("mount holders stalled past the grace")
            sched.trace.append((sched.actor_name() or "", "STALL", dst))
            grace_ms = int(claims_mod.CLAIM_GRACE * 1000)
            sched.sleep_until(sched.now + grace_ms + 1 + sched.rng.randrange(STALL_EXTRA_MS))
        self.point("rename", dst)


class _Holders:
    """``store/holders.py`` for the claim path: the actors are processes of one machine, each
    restart after dying mid-publish a new one, so a holder is gone once its actor died."""

    def __init__(self, world: World, mount: _MountOs) -> None:
        self.world, self.mount = world, mount

    def identity(self) -> str:
        name = self.world.sched.actor_name() or "driver"
        return f"sim {name} {self.mount.deaths.get(name, 0)}"

    def local(self, holder: str) -> bool:
        return len(holder.split()) == 3 and holder.startswith("sim ")

    def gone(self, holder: str) -> bool:
        _, name, life = holder.split() if self.local(holder) else ("", "", "")
        return bool(name) and int(life) < self.mount.deaths.get(name, 0)


class _Clocks:
    """``time`` for the claim path: each actor's monotonic clock at its own rate; ``sleep`` on
    the simulated clock."""

    def __init__(self, world: World, rng: random.Random) -> None:
        self.world, self._rng, self._rates = world, rng, {}

    def monotonic(self) -> float:
        sched = self.world.sched
        name = sched.actor_name() or ""
        if name not in self._rates:
            skew = self.world.profile.mount_skew
            self._rates[name] = 1.0 + skew * (2 * self._rng.random() - 1)
        return float(sched.now * self._rates[name] / 1000)

    def sleep(self, seconds: float) -> None:
        sched = self.world.sched
        if sched.actor_name() is None:  # the driver, alone after the run: time just passes
            sched.now += max(1, round(seconds * 1000))
            return
        sched.sleep_until(sched.now + max(1, round(seconds * 1000)))


@contextmanager
def mounted(world: World) -> Iterator[None]:
    """Conditional creates through the claim path, listings without hidden names (nothing
    unless ``world.profile.mount``)."""
    if not world.profile.mount:
        yield
        return
    saved = (claims_mod.os, claims_mod.time, claims_mod._POLL_MAX, claims_mod.holders, claims_mod.rename_noreplace)
    exact = random.Random(world.seed ^ 0xE4AC).random() < 0.5  # the mount renames without replacing
    mount = _MountOs(world, _memory_fs())
    own = {name: MemoryBackend.__dict__.get(name) for name in ("create", "list_names", "list_sizes")}
    list_names, list_sizes = MemoryBackend.list_names, MemoryBackend.list_sizes

    def create(self: MemoryBackend, path: str, data: bytes) -> None:
        def write_temp(target: str, body: bytes) -> str:
            directory, base = posixpath.split(target)
            tmp = posixpath.join(directory, f".{base}.{world.sched.uuid4().hex}.tmp")
            self.fs.pipe_file(tmp, body)
            return tmp

        try:
            claims_mod.claim_create(path, data, write_temp, exact=exact)
        except StorageError as e:
            if e.path.endswith(".claim"):  # a live holder's claim past the grace: not taken over
                world.note("mount claims of live holders refused")
            raise

    def names(self: MemoryBackend, path: str) -> list[str]:
        return [n for n in list_names(self, path) if not posixpath.basename(n.rstrip("/")).startswith(".")]

    def sizes(self: MemoryBackend, path: str) -> dict[str, int]:
        return {n: s for n, s in list_sizes(self, path).items() if not n.startswith(".")}

    world.note("mount runs renaming without replace" if exact else "mount runs renaming with replace")
    claims_mod.os = mount  # type: ignore[assignment]
    claims_mod.holders = _Holders(world, mount)  # type: ignore[assignment]
    claims_mod.rename_noreplace = mount.rename_noreplace
    claims_mod.time = _Clocks(world, random.Random(world.seed ^ 0xC10C))  # type: ignore[assignment]
    claims_mod._POLL_MAX = POLL_MAX_S
    MemoryBackend.create = create  # type: ignore[method-assign]
    MemoryBackend.list_names = names  # type: ignore[method-assign]
    MemoryBackend.list_sizes = sizes  # type: ignore[method-assign]
    try:
        yield
    finally:
        (claims_mod.os, claims_mod.time, claims_mod._POLL_MAX, claims_mod.holders,  # type: ignore[assignment]
         claims_mod.rename_noreplace) = saved
        for name, value in own.items():
            if value is None:
                delattr(MemoryBackend, name)
            else:
                setattr(MemoryBackend, name, value)


def _memory_fs() -> Any:
    from fsspec.implementations.memory import MemoryFileSystem

    return MemoryFileSystem()

