"""Create-if-absent on a local mount without hard links: claim the name, then rename into place.

Where ``link()`` fails (FUSE mounts of a cloud store: Databricks Volumes, rclone), the usual
``file://`` publish (write a temp file, ``link`` it into place) cannot work, and an ``O_EXCL``
create of the object itself would let readers see it half written. This path keeps the three
invariants of a create-if-absent with what such mounts do give, an exclusive create and a rename:

* **exactly one creator wins a name**: the winner is whoever creates the empty claim file
  ``.<name>.<generation>.claim`` with ``O_EXCL``; nobody else ever renames onto the name;
* **readers never see a partial object**: the winner writes a temp file, fsyncs it and renames it
  onto the name, so the name appears whole or not at all (claims and temps are hidden names that
  listings skip, :func:`is_claim_name`);
* **a creator that died never blocks the name**: a claim whose name has not appeared while an
  actor watched it for :data:`CLAIM_GRACE` seconds is void, and the actor that creates the claim
  of the next generation (``O_EXCL`` again: exactly one) takes the name over. Each actor times
  the grace on its own monotonic clock from when it first saw that claim, so no clock of the
  mount (modified times written by a cloud store) takes part. A creator whose write or rename
  fails (a full disk) gives its claim back at once: the grace is only for creators that died.

A claim is taken over only when its holder can no longer publish onto the name, because a
rename cannot be fenced by a lease (a holder paused for longer than any grace between its last
check and its rename would replace what the actor that took over published):

* the mount renames without replacing (``renameat2(RENAME_NOREPLACE)``, probed by
  :mod:`~pyspark_tstream.store.mounts`; ``exact``): the two renames onto one name are decided by
  the filesystem, the later one fails with ``FileExistsError``, and that holder reports the name
  taken as any loser does; or
* the holder the claim records (:mod:`~pyspark_tstream.store.holders`) is a process of this
  machine that is gone.

Otherwise (an rclone mount answers ``EINVAL`` to a rename without replace; a holder on another
machine, or alive and paused) the waiting creator fails after the grace with a
:class:`~pyspark_tstream.errors.StorageError` naming the claim and what to do: delete it once no
process commits to the stream, or set ``TSTREAM_UNSAFE_CLAIM_TAKEOVER=1`` to take such claims
over after the grace anyway (the price of a lease: a holder paused past the grace then
replaces an acknowledged commit). The winner removes its claims once the name exists: a late
claimer then finds the name there and reports it taken.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from os import environ

from ..errors import StorageError
from . import holders
from .renames import rename_noreplace

#: The environment variable that lets a creator take over a claim after the grace on a mount that
#: cannot rename without replacing, whatever its holder: safe only if no committer of the stream
#: can pause for longer than :data:`CLAIM_GRACE`.
UNSAFE_TAKEOVER_ENV = "TSTREAM_UNSAFE_CLAIM_TAKEOVER"

#: Seconds an actor watches a claim whose name never appears before it takes the name over. A
#: publish (temp write, fsync, rename) takes milliseconds to a few seconds on a cloud-backed mount;
#: a committer that died stalls the others that long, once.
CLAIM_GRACE = 60.0
#: Polling interval bounds while another actor holds the claim (seconds).
_POLL_FIRST, _POLL_MAX = 0.002, 0.05


def claim_path(path: str, generation: int) -> str:
    """The claim file of ``path``'s ``generation``: hidden beside it (listings skip it)."""
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.{generation}.claim")


def is_claim_name(name: str) -> bool:
    """Whether ``name`` is a claim file (listings skip them, like temp files)."""
    return name.startswith(".") and name.endswith(".claim")


def _take(claim: str) -> bool:
    """Create ``claim`` with ``O_EXCL``, recording this process as its holder: True if this
    call created it."""
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, holders.identity().encode())
    finally:
        os.close(fd)
    return True


def _holder(claim: str) -> str | None:
    """The holder ``claim`` records ("" if none is readable), or None once it is gone."""
    try:
        fd = os.open(claim, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, 4096).decode(errors="replace")
    finally:
        os.close(fd)


def _unsafe_takeover() -> bool:
    return environ.get(UNSAFE_TAKEOVER_ENV, "") not in ("", "0")


def _held(path: str, claim: str, holder: str) -> StorageError:
    """The error of a creator that may not take over ``claim`` after the grace."""
    who = (f"process {holder.split()[1]} of this machine, which is running (perhaps paused)"
           if holders.local(holder) else f"a process of another machine or container ({holder!r})" if holder
           else "a process that recorded nothing (it may have died as it claimed)")
    return StorageError(
        f"{path} was claimed by {who} and has not appeared for {CLAIM_GRACE:.0f} s; this mount cannot "
        "rename without replacing, so taking the claim over could let that holder, if it is paused rather "
        f"than dead, replace what this commit publishes. If no process commits to this stream any more, "
        f"delete the claim file {claim} and retry; or set {UNSAFE_TAKEOVER_ENV}=1 to take claims over after "
        "the grace (safe only if no committer can pause that long); or use the cloud URL behind the mount",
        path=claim)


def _drop(paths: list[str]) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass  # another actor cleaned it up


def claim_create(path: str, data: bytes, write_temp: Callable[[str, bytes], str], *, exact: bool) -> None:
    """Create ``path`` holding ``data`` if it is absent; ``FileExistsError`` once it exists.

    ``write_temp(path, data)`` writes and fsyncs a temp file beside ``path`` and returns its name.
    ``exact``: the mount renames without replacing (then claims are taken over after the grace;
    otherwise only those of holders certainly gone, and a :class:`StorageError` names the others).
    Returns only when this call created ``path``, and raises ``FileExistsError`` only when
    ``path`` exists (whoever created it): a caller that lost reads the winner's object at once.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    generation = 0
    watched: tuple[int, float] | None = None  # (generation, when this actor first saw it unfinished)
    poll = _POLL_FIRST
    while True:
        claim = claim_path(path, generation)
        if _take(claim):
            if _publish_claimed(path, data, generation, write_temp, exact):
                return
            generation += 1  # taken over while we wrote: the next generation's holder decides
            continue
        if os.path.exists(path):
            raise FileExistsError(errno.EEXIST, "exists", path)
        if os.path.exists(claim_path(path, generation + 1)):
            generation += 1  # another actor already took this claim over
            continue
        now = time.monotonic()
        if watched is None or watched[0] != generation:
            watched, poll = (generation, now), _POLL_FIRST
        elif now - watched[1] >= CLAIM_GRACE:
            holder = _holder(claim)
            if holder is None:
                continue  # given back meanwhile: claim it again
            if not (exact or holders.gone(holder) or _unsafe_takeover()):
                raise _held(path, claim, holder)
            generation += 1  # its holder cannot publish any more: claim the next generation
            continue
        time.sleep(poll)
        poll = min(poll * 2, _POLL_MAX)


def _publish_claimed(path: str, data: bytes, generation: int, write_temp: Callable[[str, bytes], str],
                     exact: bool) -> bool:
    """Publish ``data`` at ``path`` under claim ``generation``; False if the claim was taken over
    (or ``path`` appeared) before the rename, which then did not happen; ``FileExistsError``
    when an ``exact`` rename finds the name taken."""
    claims = [claim_path(path, g) for g in range(generation + 1)]
    if os.path.exists(path):  # a late claimer: the winner published and removed its claims
        _drop(claims[-1:])
        raise FileExistsError(errno.EEXIST, "exists", path)
    try:
        tmp = write_temp(path, data)
    except BaseException:
        _drop(claims[-1:])  # nothing was published: the next creator need not wait out the grace
        raise
    try:
        if os.path.exists(path) or os.path.exists(claim_path(path, generation + 1)):
            return False
        if exact:
            rename_noreplace(tmp, path)  # FileExistsError: the one that took the claim over won
        else:
            os.replace(tmp, path)
    except BaseException:
        _drop(claims[-1:])  # as above (a rename that failed did not happen)
        raise
    finally:
        _drop([tmp])
    _drop(claims)  # the name exists now: a late claimer finds it and reports it taken
    return True
