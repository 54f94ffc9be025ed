"""A rename that never replaces: Linux ``renameat2(RENAME_NOREPLACE)``, through ctypes.

``os.rename`` takes no flags, and a plain rename onto an existing name replaces it. On a mount
without hard links (:mod:`~pyspark_tstream.store.claims`) the rename that publishes an object is
the one step a holder paused past the claim grace could use to replace what the actor that took
its claim over published; a rename without replace fails with ``FileExistsError`` instead, checked
and applied as one step by the filesystem. Whether a mount does it is probed
(:mod:`~pyspark_tstream.store.mounts`): a FUSE server that does not implement it makes the kernel
answer ``EINVAL`` whenever the name is absent (rclone's mount does), and other systems have no
``renameat2`` at all (:class:`NoReplaceUnsupported` then).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from typing import Any

#: ``renameat2``'s flag (linux/fs.h).
RENAME_NOREPLACE = 1
#: ``renameat2``'s "relative to the working folder" (fcntl.h).
_AT_FDCWD = -100
#: Errors that say this filesystem (or system) cannot rename without replacing.
UNSUPPORTED_ERRNOS = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP})


class NoReplaceUnsupported(OSError):
    """The system or the filesystem cannot rename without replacing."""


_libc: Any = None


def _renameat2() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else False
    fn = getattr(_libc, "renameat2", None) if _libc else None
    if fn is None:
        raise NoReplaceUnsupported(errno.ENOSYS, f"no renameat2 on {sys.platform} (glibc 2.28 or later has it)")
    return fn


def rename_noreplace(src: str, dst: str) -> None:
    """Rename ``src`` to ``dst`` unless ``dst`` exists (``FileExistsError``), as one step.

    Raises :class:`NoReplaceUnsupported` where the system or the filesystem cannot (nothing was
    renamed then), and ``OSError`` for any other failure.
    """
    fn = _renameat2()
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), RENAME_NOREPLACE) == 0:
        return
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        raise FileExistsError(err, os.strerror(err), dst)
    if err in UNSUPPORTED_ERRNOS:
        raise NoReplaceUnsupported(err, f"rename without replace: {os.strerror(err)}", dst)
    raise OSError(err, os.strerror(err), dst)
