"""Local-file and in-memory primitives behind :class:`~pyspark_tstream.store.storage.Store`.

``file://`` publishes by writing a temp file, fsyncing it and hard-linking (create-if-absent)
or renaming (replace) it into place, so readers never see a torn object, and chunk files are
read memory-mapped; on a mount without hard links (:mod:`~pyspark_tstream.store.mounts`) a
create-if-absent claims the name and renames into place instead
(:mod:`~pyspark_tstream.store.claims`); ``memory://`` makes its check-and-store one step under a process-wide lock
and lists from one snapshot of its keys.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from . import mounts
from .claims import claim_create, is_claim_name
from .layout import stream_url

_MEMORY_LOCK = threading.Lock()


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is a temp or claim file of an unfinished publish (listings skip them)."""
    return name.startswith(".") and (name.endswith(".tmp") or is_claim_name(name))


def temp_path(path: str) -> str:
    """A unique hidden temp file beside ``path``."""
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.{uuid.uuid4().hex}.tmp")


def local_read(path: str) -> bytes:
    """The bytes of a local file (an ``EIO`` is retried a few times, see :data:`EIO_RETRIES`)."""
    # builtin open: the read path is hot and fsspec's LocalFileOpener adds ~5x the overhead
    try:
        return _read_whole(path)
    except OSError as e:
        if e.errno != errno.EIO:
            raise
        return _reread(path, e)


def _read_whole(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


#: Pauses (seconds) before the reads that retry one that failed with ``EIO``. A FUSE mount of a
#: cloud store fails a read that meets another process's replace of the same file (rclone's
#: cache: "invalid seek position" when the file's size changed under it) with ``EIO``, and a
#: fresh open a moment later reads the new file whole; a disk's real ``EIO`` fails again.
EIO_RETRIES = (0.01, 0.03, 0.1, 0.3, 1.0)


def _reread(path: str, first: OSError) -> bytes:
    failure = first
    for pause in EIO_RETRIES:
        time.sleep(pause)
        try:
            return _read_whole(path)
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            failure = e
    raise failure


def local_map(path: str) -> bytes:
    """A local file's bytes, memory-mapped read-only (a buffer, not a copy).

    Only for files never rewritten in place (chunks: tstream replaces files by rename, and an
    unlinked file stays mapped). An empty file is read instead (it cannot be mapped), and so is
    a file on a filesystem that cannot map files (some FUSE mounts: ``mmap`` fails with
    ``ENODEV``/``EINVAL``/``EACCES``); an ``EIO`` is retried as :func:`local_read` does.
    """
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            try:
                # the mapping outlives the descriptor; typed as bytes: callers only read it as a buffer
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # type: ignore[return-value]  # read as a buffer
            except OSError:
                return f.read()
    except OSError as e:
        if e.errno != errno.EIO:
            raise
        return _reread(path, e)


def _drop_temp(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass  # never created, or renamed into place


def _write_temp(path: str, data: bytes) -> str:
    """A new temp file beside ``path`` holding ``data``, fsynced; its name (the caller drops it)."""
    tmp = temp_path(path)
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _drop_temp(tmp)
        raise
    return tmp


def _publish(path: str, data: bytes, place: Callable[[str, str], None]) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync it, ``place`` it, drop the temp."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = _write_temp(path, data)
    try:
        place(tmp, path)
    finally:
        _drop_temp(tmp)


def local_create(path: str, data: bytes) -> None:
    """Atomic no-clobber publish: ``os.link`` raises ``FileExistsError`` if ``path`` exists.

    A ``link()`` failure that may mean "no hard links here" probes the mount once; where it has
    none, this and every later create under it claim the name and rename into place
    (:func:`~pyspark_tstream.store.claims.claim_create`), and a mount that cannot do that either
    is refused (the error names the stream and the mount).
    """
    caps = mounts.known(path)
    if caps is None:
        try:
            _publish(path, data, os.link)
            return
        except FileExistsError:
            raise
        except OSError as e:
            if e.errno not in mounts.NO_LINK_ERRNOS:
                raise
            caps = mounts.probe(os.path.dirname(path))
            if caps.hard_links:
                raise  # links work here: the failure was something else
    if not caps.can_commit:
        raise mounts.refusal(caps, stream_url(f"file://{path}"))
    if caps.hard_links:
        _publish(path, data, os.link)
    else:
        claim_create(path, data, _write_temp, exact=caps.noreplace_rename)


def local_replace(path: str, data: bytes) -> None:
    """Overwrite via rename so readers see the old or the new bytes, never a torn file."""
    _publish(path, data, os.replace)


def memory_create(fs: Any, path: str, data: bytes) -> None:
    """Create-if-absent on ``memory://``: ``FileExistsError`` if ``path`` exists."""
    # memory:// checks and stores in two steps; a process-wide lock makes that one step
    # (a dict lookup, not fs.exists: that scans every key for a missing path, O(objects))
    with _MEMORY_LOCK:
        if fs._strip_protocol(path) in fs.store:
            raise FileExistsError(errno.EEXIST, "exists", path)
        fs.pipe_file(path, data)


def memory_list(fs: Any, path: str) -> list[str]:
    """The full names directly under ``path`` on ``memory://`` (files and implied folders).

    Not ``fs.ls``: it snapshots the keys, then looks each one up again for its size, and raises
    ``KeyError`` for a key another thread deleted in between (one writer lists the pending
    group-commit requests while another deletes the ones it folded). Names only, from one
    snapshot: a name deleted after it is listed, as on S3, reads as missing.
    """
    own = fs._strip_protocol(path).rstrip("/")
    starter = own + "/"
    names = {starter + key[len(starter):].split("/", 1)[0]
             for key in (*tuple(fs.store), *tuple(fs.pseudo_dirs))
             if key.startswith(starter) and len(key) > len(starter)}
    return sorted(names)


def memory_missing(e: KeyError, protocol: str, uri: str) -> BaseException:
    """What a ``KeyError`` out of a store call means.

    On ``memory://`` it is an object another thread deleted between fsspec's check of its key
    and the lookup (``MemoryFileSystem.info``, behind sizes and modified times): "no such
    object", the answer a real store gives to the same race. Elsewhere it is a bug: ``e`` itself.
    """
    if protocol != "memory":
        return e
    missing = FileNotFoundError(errno.ENOENT, "no such object", uri)
    missing.__cause__ = e
    return missing
