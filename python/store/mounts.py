"""Which local mounts lack hard links, found by one probe per mount and remembered per process.

``file://`` publishes a create-if-absent object by hard-linking a fsynced temp file into place
(:mod:`~pyspark_tstream.store.localfs`). Some mounts have no hard links (FUSE mounts of a cloud
store: Databricks Unity Catalog Volumes answer ``ENOSYS``, an rclone mount ``EIO``). The probe runs
only after a ``link()`` failed with such an error, so an ordinary disk never pays for it: it tries
a hard link, an exclusive (``O_EXCL``) create and a rename on probe files of its own in the folder
that failed, and the mount's answer is remembered for every path under its mount point.

A mount without hard links but with exclusive create and rename publishes through
:mod:`~pyspark_tstream.store.claims`; one that lacks either as well cannot keep a journal's
invariants and is refused with an error naming the mount, what it lacks and the remedy.
"""

from __future__ import annotations

import errno
import os
import threading
import uuid
from dataclasses import dataclass

from ..errors import UnsupportedOperationError
from .renames import rename_noreplace

#: ``link()`` errors that may mean "this filesystem has no hard links" (then the probe decides):
#: ENOSYS (Databricks Volumes: "Function not implemented"), EIO (rclone), EPERM (SMB and some
#: FUSE servers refuse links as not permitted), EOPNOTSUPP/ENOTSUP, EXDEV.
NO_LINK_ERRNOS = frozenset({errno.ENOSYS, errno.EIO, errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV})


@dataclass(frozen=True)
class MountCapabilities:
    """What a probe found a mount can do."""

    mount: str  #: the mount point the probed folder is under
    fstype: str  #: the filesystem type ``/proc/self/mounts`` names (``fuse.rclone``), or ``unknown``
    hard_links: bool
    exclusive_create: bool  #: a second ``O_EXCL`` create of a name raises ``FileExistsError``
    rename: bool
    link_error: str = ""  #: what ``link()`` answered when it failed
    #: a rename without replace (``renameat2(RENAME_NOREPLACE)``) works: onto an absent name it
    #: renames, onto an existing one it fails with ``FileExistsError`` (rclone: ``EINVAL``)
    noreplace_rename: bool = False

    @property
    def lacks(self) -> list[str]:
        """What the mount lacks, as the refusal says it."""
        out = [] if self.hard_links else [f"hard links (link(): {self.link_error})"]
        if not self.exclusive_create:
            out.append("exclusive create (O_EXCL)")
        if not self.rename:
            out.append("rename")
        return out

    @property
    def can_commit(self) -> bool:
        """Whether a journal can commit here: by hard link, or by claim and rename."""
        return self.hard_links or (self.exclusive_create and self.rename)


_LOCK = threading.Lock()
#: Mount point (and each probed folder as its caller spelt it) -> what the mount's probe found;
#: only mounts whose ``link()`` failed are ever probed.
_PROBED: dict[str, MountCapabilities] = {}


def mount_point(path: str) -> str:
    """The mount point ``path`` is under (``path`` itself when it is one)."""
    p = os.path.realpath(path)
    while not os.path.ismount(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def _fstype(mount: str) -> str:
    try:
        with open("/proc/self/mounts", encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[1].replace("\\040", " ") == mount:
                    return fields[2]
    except OSError:
        pass  # not Linux: the type only decorates the message
    return "unknown"


def known(path: str) -> MountCapabilities | None:
    """What an earlier probe found for the mount ``path`` is under, if one ran (no system call:
    a prefix match against the probed mount points and folders, none on a machine of ordinary
    disks)."""
    if not _PROBED:
        return None
    with _LOCK:
        for prefix, caps in _PROBED.items():
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return caps
    return None


def probe(directory: str) -> MountCapabilities:
    """Probe (once per mount and process) what the mount holding ``directory`` can do."""
    caps = known(os.path.realpath(directory))
    if caps is None:
        caps = _probe(directory)
    with _LOCK:
        caps = _PROBED.setdefault(caps.mount, caps)
        # the folder as its caller spells it too: a path through a symlink must not link (and
        # fail) again before every create
        _PROBED.setdefault(directory, caps)
        return caps


def _probe(directory: str) -> MountCapabilities:
    """Try a hard link, an exclusive create and a rename on probe files in ``directory``."""
    base = os.path.join(directory, f".tstream-probe.{uuid.uuid4().hex}")
    first, linked, renamed, kept = f"{base}.a.tmp", f"{base}.b.tmp", f"{base}.c.tmp", f"{base}.d.tmp"
    link_error = ""
    try:
        with open(first, "xb") as f:
            f.write(b"probe")
        try:
            os.link(first, linked)
            hard_links = True
        except OSError as e:
            hard_links, link_error = False, f"[Errno {e.errno}] {e.strerror}"
        try:
            os.close(os.open(first, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            exclusive = False  # it opened a name that exists: O_EXCL is ignored here
        except FileExistsError:
            exclusive = True
        except OSError:
            exclusive = False
        try:
            os.replace(first, renamed)
            renamed_ok = os.path.exists(renamed) and not os.path.exists(first)
        except OSError:
            renamed_ok = False
        noreplace = renamed_ok and _renames_without_replace(renamed, kept)
    finally:
        for p in (first, linked, renamed, kept):
            try:
                os.unlink(p)
            except OSError:
                pass  # absent, or the mount refuses: a hidden temp name listings skip
    mount = mount_point(directory)
    return MountCapabilities(mount=mount, fstype=_fstype(mount), hard_links=hard_links,
                             exclusive_create=exclusive, rename=renamed_ok, link_error=link_error,
                             noreplace_rename=noreplace)


def _renames_without_replace(src: str, dst: str) -> bool:
    """Whether a rename without replace of ``src`` onto an absent ``dst`` works and one back
    onto an existing name fails with ``FileExistsError`` (``src`` is renamed to ``dst``)."""
    try:
        rename_noreplace(src, dst)
        with open(src, "xb") as f:
            f.write(b"probe")
        rename_noreplace(src, dst)
    except FileExistsError:
        return os.path.exists(src) and os.path.exists(dst)
    except OSError:
        return False  # EINVAL (a FUSE server without it), ENOSYS (no renameat2): no
    return False  # it replaced the name


def refusal(caps: MountCapabilities, url: str) -> UnsupportedOperationError:
    """The error for a stream on a mount that cannot commit: the mount, what it lacks, the remedy."""
    return UnsupportedOperationError(
        f"{url} is on the mount {caps.mount} ({caps.fstype}), which lacks {' and '.join(caps.lacks)}: "
        "tstream cannot commit there without readers seeing half-written journal entries or two writers "
        "taking one position. Use the cloud URL behind the mount instead (for a Databricks Volume, the "
        "storage location of the volume: abfss://container@account.dfs.core.windows.net/..., s3://bucket/... "
        "or gs://bucket/...) with its credentials as storage.* options"
    )


def forget() -> None:
    """Drop every remembered probe (tests that fake a mount's answers)."""
    with _LOCK:
        _PROBED.clear()
