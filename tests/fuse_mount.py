"""An rclone FUSE mount for tests: a local folder mounted with no hard links, as a Databricks Volume.

``rclone mount SRC MNT --vfs-cache-mode writes`` gives a FUSE mount where ``link()`` fails (EIO),
``O_EXCL`` creates and renames work: the shape of a Unity Catalog Volume (``/Volumes/...``), where
``link()`` answers ENOSYS. The session fixture starts rclone in the background, waits until the
folder is a mount, checks that hard links really fail there, and unmounts and stops rclone by its
pid at the end. ``.ci/run`` installs ``rclone`` and ``fuse3``; a machine without them fails the
fixture with that remedy (never a skip).

Add it to a suite parametrized over stores as one more backend: the ``mount_url`` fixture yields a
fresh ``file://`` stream URL on the mount, e.g. ``request.getfixturevalue("mount_url")``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Seconds to wait for rclone to mount the folder.
MOUNT_TIMEOUT = 30.0


@dataclass(frozen=True)
class RcloneMount:
    """A running rclone mount: ``source`` is the folder behind ``mountpoint``."""

    source: Path
    mountpoint: Path
    pid: int

    def url(self, name: str = "") -> str:
        """A fresh ``file://`` stream URL on the mount."""
        return f"file://{self.mountpoint}/{name or uuid.uuid4().hex}/stream"


def _link_fails(folder: Path) -> bool:
    probe = folder / f"link-probe-{uuid.uuid4().hex}"
    probe.write_bytes(b"x")
    try:
        os.link(probe, f"{probe}.b")
    except OSError:
        return True
    finally:
        for p in (str(probe), f"{probe}.b"):
            if os.path.exists(p):
                os.unlink(p)
    return False


def start(scratch: Path) -> tuple[RcloneMount, subprocess.Popen[bytes]]:
    """Mount ``scratch/src`` on ``scratch/mnt`` with rclone (``--vfs-cache-mode writes``)."""
    missing = [tool for tool in ("rclone", "fusermount3") if shutil.which(tool) is None]
    if missing or not os.path.exists("/dev/fuse"):
        pytest.fail(f"the mount tests need rclone, fuse3 and /dev/fuse (missing: {missing or ['/dev/fuse']}); "
                    "`apt-get install -y rclone fuse3` as root (.ci/run does)")
    src, mnt, cache = scratch / "src", scratch / "mnt", scratch / "cache"
    for d in (src, mnt, cache):
        d.mkdir(parents=True)
    log = open(scratch / "rclone.log", "wb")  # noqa: SIM115 - rclone writes it until stop()
    proc = subprocess.Popen(
        ["rclone", "mount", str(src), str(mnt), "--vfs-cache-mode", "writes", "--cache-dir", str(cache),
         "--config", str(scratch / "rclone.conf"), "--log-level", "NOTICE"],
        stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not os.path.ismount(mnt):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(RcloneMount(src, mnt, proc.pid), proc)
            pytest.fail(f"rclone did not mount {mnt}: {(scratch / 'rclone.log').read_text()[-2000:]}")
        time.sleep(0.05)
    mount = RcloneMount(src, mnt, proc.pid)
    if not _link_fails(mnt):
        stop(mount, proc)
        pytest.fail(f"hard links work on the rclone mount {mnt}: it no longer models a mount without them")
    return mount, proc


def stop(mount: RcloneMount, proc: subprocess.Popen[bytes]) -> None:
    """Unmount and stop the rclone process (by its pid)."""
    if os.path.ismount(mount.mountpoint):
        subprocess.run(["fusermount3", "-u", "-z", str(mount.mountpoint)], check=False, capture_output=True)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def rclone_mount() -> Iterator[RcloneMount]:
    """A session's rclone mount of a temp folder (no hard links; O_EXCL and rename work)."""
    scratch = Path(tempfile.mkdtemp(prefix="tstream-rclone-"))
    mount, proc = start(scratch)
    try:
        yield mount
    finally:
        stop(mount, proc)
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def mount_url(rclone_mount: RcloneMount) -> str:
    """A fresh ``file://`` stream URL on the rclone mount (one more store for store-parametrized suites)."""
    return rclone_mount.url()
