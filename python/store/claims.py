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

A holder checks, just before its rename, that the name is still absent and that no next
generation exists; the one case this cannot exclude is a holder paused for longer than the grace
between that check and its rename (the price of a lease; :data:`CLAIM_GRACE` is far longer than a
publish takes). The winner removes its claims once the name exists: a late claimer then finds the
name there and reports it taken.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable

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
    """Create ``claim`` empty with ``O_EXCL``: True if this call created it."""
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def _drop(paths: list[str]) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass  # another actor cleaned it up


def claim_create(path: str, data: bytes, write_temp: Callable[[str, bytes], str]) -> None:
    """Create ``path`` holding ``data`` if it is absent; ``FileExistsError`` once it exists.

    ``write_temp(path, data)`` writes and fsyncs a temp file beside ``path`` and returns its name.
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
            if _publish_claimed(path, data, generation, write_temp):
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
            generation += 1  # the holder died (or stalled past the grace): claim the next generation
            continue
        time.sleep(poll)
        poll = min(poll * 2, _POLL_MAX)


def _publish_claimed(path: str, data: bytes, generation: int, write_temp: Callable[[str, bytes], str]) -> bool:
    """Publish ``data`` at ``path`` under claim ``generation``; False if the claim was taken over
    (or ``path`` appeared) before the rename, which then did not happen."""
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
        os.replace(tmp, path)
    except BaseException:
        _drop(claims[-1:])  # as above (a rename that failed did not happen)
        raise
    finally:
        _drop([tmp])
    _drop(claims)  # the name exists now: a late claimer finds it and reports it taken
    return True
