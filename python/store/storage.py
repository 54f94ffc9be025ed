"""The one boundary between tstream and a filesystem or object store.

Invariants kept here:

* every path tstream touches is relative to the stream root and cannot escape it;
* every operation goes to the scheme's backend (:mod:`~pyspark_tstream.store.backends`, one module
  per scheme), whose ``create`` is an atomic create-if-absent; schemes without a backend are
  refused rather than raced;
* backend errors are translated here, and only here, into builtins (``FileNotFoundError``) or
  :class:`~pyspark_tstream.errors.StorageError`, by the backend's own rules of what is transient,
  missing or a lost precondition; transient ones are retried here, and only here, a bounded
  number of times (the libraries' own retry loops are switched off: stacked, they made one 503
  storm cost 25 requests and 45 s);
* no credential reaches a ``repr``, :attr:`Store.display_url` or an error message;
* a ``Store`` pickles to its URL, options and retry policy, so Spark workers rebuild the
  filesystem lazily.

Every store call goes through :meth:`Store._call`, which feeds an optional observer. Tests use it
to count calls (cost budgets) and to inject faults between any two calls (crash points).
"""

from __future__ import annotations

import errno
import io
import logging
import os
import posixpath
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError, InvalidPathError, StorageError, TStreamError
from .backends import Backend, backend_class
from .failures import RetryPolicy
from .localfs import is_temp_name
from .schemes import PROTOCOL_ALIASES, check_store

__all__ = ["Observer", "Store", "check_relative", "split_url"]

#: Observer signature: ``(operation, relative_path)``; it may raise to simulate a fault.
Observer = Callable[[str, str], None]

logger = logging.getLogger(__name__)

#: Store calls that create or replace objects.
_WRITE_OPS = frozenset({"write", "put_if_absent", "open_output"})


def _url_for_message(url: str) -> str:
    """``url`` without user info, query or fragment: the parts that can carry credentials."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else parts.path


def split_url(url: str) -> tuple[str, str]:
    """Split a stream URL into (protocol, root path); reject URLs that escape their root.

    Bare paths mean ``file://``. ``..`` segments are refused everywhere: a stream name must not
    reach outside the folder it names. Credentials in the URL (``s3://key:secret@bucket``) are
    refused too, without echoing them: pass them as ``storage.key``/``storage.secret``.
    """
    protocol, path, _, _ = _parse_url(url)
    return protocol, path


def _parse_url(url: str) -> tuple[str, str, dict[str, Any], str]:
    """:func:`split_url`, plus the storage options the URL implies (an Azure account) and its
    ``netloc`` as written (for display)."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidPathError(f"stream URL must be a non-empty string, got {url!r}")
    url = url.strip()
    implied: dict[str, Any] = {}
    netloc = ""
    if "://" not in url:
        protocol, path = "file", url
    else:
        parts = urlsplit(url)
        protocol = parts.scheme.lower()
        protocol = PROTOCOL_ALIASES.get(protocol, protocol)
        backend = backend_class(protocol)
        netloc = parts.netloc
        if backend is not None:
            try:
                bucket, implied = backend.split_netloc(parts.netloc)
            except ValueError as e:  # the backend's message never echoes the netloc's credentials
                raise InvalidPathError(str(e)) from None
        else:
            bucket = parts.netloc
        if parts.query or parts.fragment:
            raise InvalidPathError(
                f"stream URL {_url_for_message(url)!r} has a query or fragment; pass settings "
                "as storage.* options"
            )
        path = parts.path if protocol == "file" else bucket + parts.path
    segments = path.replace("\\", "/").split("/")
    if any(seg == ".." for seg in segments):
        raise InvalidPathError(
            f"stream URL {url!r} contains '..'; name the stream folder directly"
        )
    if protocol == "file":
        path = os.path.abspath(path)
    else:
        path = path.strip("/")
        if not path:
            raise InvalidPathError(f"stream URL {url!r} names no bucket or folder")
    return protocol, path, implied, netloc


def check_relative(rel: str) -> str:
    """Validate a path inside the stream root: relative, no ``..``, no empty segments."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel:
        raise InvalidPathError(f"path {rel!r} must be relative to the stream root")
    for seg in rel.split("/"):
        if seg in ("", ".", ".."):
            raise InvalidPathError(f"path {rel!r} escapes or is not inside the stream root")
    return rel


class Store:
    """A stream root on some filesystem: relative-path reads, writes and atomic creates.

    Parameters
    ----------
    url : str
        Stream URL (a scheme of :data:`~pyspark_tstream.store.schemes.SCHEMES` or a bare local path).
    storage_options : mapping, optional
        Passed to the scheme's filesystem (e.g. ``endpoint_url``, ``key``, ``secret`` on s3://).
    retry : RetryPolicy, optional
        How transient failures are retried; the default suits object stores.
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None,
                 *, retry: RetryPolicy | None = None) -> None:
        self.protocol, self.root, implied, netloc = _parse_url(url)
        self.url = url
        self.storage_options = dict(storage_options or {})
        check_store(self.protocol, self.root, self.storage_options)
        self.retry = retry or RetryPolicy()
        # whether the store has answered a call (RetryPolicy.patience applies only then); a
        # pickled copy keeps it, so a Spark task of a query that reached the store is patient too
        self.reached = False
        self.observer: Observer | None = None
        for key, value in implied.items():
            if key in self.storage_options and self.storage_options[key] != value:
                raise ConfigError(f"storage option {key}={self.storage_options[key]!r} contradicts the stream URL, "
                                  f"which names {value!r}; drop the option or fix the URL", option=f"storage.{key}")
        backend = backend_class(self.protocol)
        assert backend is not None, self.protocol  # check_store refused every other scheme
        self.backend: Backend = backend({**implied, **self.storage_options}, self.root, netloc)

    # -- pickling: workers rebuild the filesystem, never inherit sockets or observers -----------
    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "storage_options": self.storage_options, "retry": self.retry,
                "reached": self.reached}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"], state["storage_options"],  # type: ignore[misc]  # unpickling runs the constructor
                      retry=state.get("retry"))
        self.reached = bool(state.get("reached"))

    def __repr__(self) -> str:
        return f"Store({self.display_url!r})"

    @property
    def display_url(self) -> str:
        """The URL without credentials, safe for messages and logs."""
        return self.backend.display()

    @property
    def fs(self) -> Any:
        """The fsspec filesystem, created on first use (so a pickled Store costs nothing)."""
        return self.backend.fs

    def full(self, rel: str) -> str:
        """Absolute path of ``rel`` as the filesystem names it."""
        return posixpath.join(self.root, check_relative(rel))

    def uri(self, rel: str) -> str:
        """A displayable URI of ``rel`` (no credentials)."""
        return f"{self.display_url}/{rel}"

    def _redact(self, text: str) -> str:
        return self.backend.redact(text)

    def _call(self, op: str, rel: str, fn: Callable[[], Any]) -> Any:
        """Run one store call: notify the observer, retry transient failures with backoff.

        ``FileNotFoundError`` comes out as itself (naming the display URI); a lost conditional
        create as ``FileExistsError``; every other store failure as :class:`StorageError`,
        ``retriable`` when it was transient and the attempts ran out. Errors that are not store
        failures (bugs) propagate unchanged.
        """
        if self.observer is not None:
            self.observer(op, rel)
        first_failure: float | None = None
        attempt = 0
        while True:
            try:
                result = fn()
                self.reached = True
                return result
            except FileNotFoundError as e:
                self.reached = True  # an answer, if not the one hoped for
                if _names_own_path(e, self.display_url):
                    raise  # read_many already named the missing member
                # a write meets "not found" only when the bucket (or folder) is missing
                what = ("no such bucket or folder to write into; create it first"
                        if op in _WRITE_OPS else "no such object")
                raise FileNotFoundError(errno.ENOENT, what, self.uri(rel)) from e
            except KeyError as e:  # memory:// only: an object deleted by another thread
                raise self.backend.missing_key(e, self.uri(rel))  # noqa: B904 (cause is set)
            except (FileExistsError, TStreamError):
                raise  # already in our vocabulary (a TStreamError here: building the fs failed)
            except Exception as e:
                if not self.backend.is_backend_error(e):
                    raise
                if op == "put_if_absent" and self.backend.is_precondition_failed(e):
                    if attempt:
                        logger.info("put_if_absent %s: exists on retry %d; the first attempt "
                                    "may have created it", self.uri(rel), attempt)
                    raise FileExistsError(errno.EEXIST, "exists", self.uri(rel)) from e
                transient = self.backend.is_transient(e)
                if transient and self.backend.is_store_answer(e):
                    # the store answered (503 SlowDown, 500 InternalError): the endpoint is right,
                    # so this is an outage to wait out, not a misconfiguration to report at once
                    self.reached = True
                now = time.monotonic()
                first_failure = now if first_failure is None else first_failure
                if not transient or not self.retry.may_retry(attempt, now - first_failure, self.reached):
                    raise StorageError(
                        f"{op} {self.uri(rel)} failed{self._gave_up(transient, attempt, now - first_failure)}: "
                        f"{type(e).__name__}: {self._redact(str(e))}",
                        path=self.uri(rel), retriable=transient,
                    ) from e
                logger.debug("retrying %s %s after %s", op, self.uri(rel), type(e).__name__)
            time.sleep(self.retry.delay(attempt))
            attempt += 1

    def _gave_up(self, transient: bool, attempt: int, seconds: float) -> str:
        """How long a failed call kept trying, for its error (nothing for a permanent failure)."""
        if not transient:
            return ""
        patient = attempt >= self.retry.attempts and self.retry.hint  # it waited past the attempts
        return f" after {attempt + 1} attempts over {seconds:.1f} s" + (f" ({self.retry.hint})" if patient else "")

    # -- reads ----------------------------------------------------------------------------------
    def read(self, rel: str) -> bytes:
        """Whole object in one request; ``FileNotFoundError`` if absent."""
        path = self.full(rel)
        return self._call("read", rel, lambda: self.backend.read(path))

    def read_many(self, rels: Sequence[str], *, mapped: bool = False) -> list[bytes]:
        """Several whole objects, in the order asked; ``FileNotFoundError`` if any is absent.

        ``mapped=True`` (for immutable objects such as chunk files): local files come back
        memory-mapped (read-only buffers, no copy) instead of read into new ``bytes``; a chunk
        decoded from the page cache then costs no copy and no fresh memory.

        On object stores the GETs run concurrently (at most 32 in flight) and a retry re-fetches
        only the objects that failed; duplicates are fetched once. It is one store call for the
        observer, labelled ``"<first> (+n)"``.
        """
        if not rels:
            return []
        unique = list(dict.fromkeys(rels))
        paths = {rel: self.full(rel) for rel in unique}
        label = rels[0] if len(rels) == 1 else f"{rels[0]} (+{len(rels) - 1})"
        got: dict[str, bytes] = {}

        def fetch() -> None:
            todo = [rel for rel in unique if rel not in got]
            results = self.backend.read_many([paths[rel] for rel in todo], mapped)
            failure: BaseException | None = None
            for rel, value in zip(todo, results):
                if isinstance(value, BaseException):
                    if isinstance(value, FileNotFoundError):
                        raise FileNotFoundError(errno.ENOENT, "no such object", self.uri(rel)) from value
                    failure = self._worse(failure, value)
                else:
                    got[rel] = value
            if failure is not None:
                raise failure

        self._call("read_many", label, fetch)
        return [got[rel] for rel in rels]

    def _worse(self, failure: BaseException | None, value: BaseException) -> BaseException:
        """The failure a batch reports: a permanent one must not hide behind a transient."""
        if failure is None or (self.backend.is_transient(failure) and not self.backend.is_transient(value)):
            return value
        return failure

    def read_present(self, rels: Sequence[str]) -> list[bytes | None]:
        """Several whole objects, in the order asked; None for each one that is absent.

        One batched call, like :meth:`read_many`, whatever is absent: a probe for an object that
        may not exist yet (the journal slot after the newest) rides along with reads of objects
        that do, at no extra round trip. (A backend that reads one object at a time stops at a
        failure; the objects after an absent one are read on in the same call.)
        """
        if not rels:
            return []
        unique = list(dict.fromkeys(rels))
        label = rels[0] if len(rels) == 1 else f"{rels[0]} (+{len(rels) - 1})"
        got: dict[str, bytes | None] = {}

        def fetch() -> None:
            while todo := [rel for rel in unique if rel not in got]:
                results = self.backend.read_many([self.full(rel) for rel in todo], False)
                if not results:
                    raise RuntimeError(f"the store answered nothing for {self.uri(todo[0])}")
                failure: BaseException | None = None
                for rel, value in zip(todo, results):
                    if isinstance(value, FileNotFoundError):
                        got[rel] = None
                    elif isinstance(value, BaseException):
                        failure = self._worse(failure, value)
                    else:
                        got[rel] = value
                if failure is not None:
                    raise failure

        self._call("read_many", label, fetch)
        return [got[rel] for rel in rels]

    def read_range(self, rel: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``rel`` in one request."""
        path = self.full(rel)
        return self._call("read_range", rel, lambda: self.backend.read_range(path, start, end))

    def exists(self, rel: str) -> bool:
        """Whether an object (or a folder with objects) exists at ``rel``."""
        path = self.full(rel)
        return bool(self._call("exists", rel, lambda: self.backend.exists(path)))

    def missing(self, rels: Sequence[str]) -> list[str]:
        """The objects of ``rels`` that do not exist, in the order asked: one store call for the
        observer (labelled like :meth:`read_many`), each object probed in it; a retry probes only
        the ones not answered yet. For the orphan fence's rare check (:mod:`.fence`)."""
        if not rels:
            return []
        unique = list(dict.fromkeys(rels))
        label = rels[0] if len(rels) == 1 else f"{rels[0]} (+{len(rels) - 1})"
        found: dict[str, bool] = {}

        def probe() -> None:
            for rel in unique:
                if rel not in found:
                    found[rel] = bool(self.backend.exists(self.full(rel)))

        self._call("exists", label, probe)
        return [rel for rel in unique if not found[rel]]

    def size(self, rel: str) -> int:
        """Size of ``rel`` in bytes; ``FileNotFoundError`` if absent."""
        path = self.full(rel)
        return int(self._call("size", rel, lambda: self.backend.size(path)))

    def modified_ms(self, rel: str) -> int:
        """Last-modified time of ``rel`` in epoch ms (for grace periods of cleanup)."""
        path = self.full(rel)
        return int(self._call("modified", rel, lambda: self.backend.modified_ms(path)))

    def list(self, rel: str = "") -> list[str]:
        """Sorted names directly under ``rel`` (the root if empty); [] if there is nothing.

        For admin and cleanup paths only: listing costs O(entries). Temp files of in-flight
        local writes are not listed; a folder emptied by deletes may still be (``file://`` and
        SeaweedFS keep real directories).
        """
        path = self.full(rel) if rel else self.root

        def ls() -> list[str]:
            try:
                entries = self.backend.list_names(path)
            except FileNotFoundError:
                return []
            own = path.strip("/")
            names = (posixpath.basename(str(e).rstrip("/")) for e in entries
                     if str(e).strip("/") != own)
            return sorted(n for n in names if not is_temp_name(n))

        return self._call("list", rel, ls)

    def list_sizes(self, rel: str) -> dict[str, int]:
        """The objects directly under ``rel`` and their sizes in bytes, by name; {} if there is
        nothing. One listing, like :meth:`list` (for admin paths only)."""
        path = self.full(rel)
        try:
            return self._call("list", rel, lambda: self.backend.list_sizes(path))
        except FileNotFoundError:
            return {}

    # -- writes ---------------------------------------------------------------------------------
    def write(self, rel: str, data: bytes) -> None:
        """Create or overwrite ``rel`` (hints and idempotent records only)."""
        path = self.full(rel)
        self._call("write", rel, lambda: self.backend.write(path, data))

    def put_if_absent(self, rel: str, data: bytes) -> bool:
        """Atomically create ``rel`` with ``data``; False if it already exists.

        A transient failure is retried like any other call, which leaves one ambiguity on
        object stores: the server applied the PUT but the answer was lost (dropped connection),
        so the retry gets 412 and this returns False although *this* call created the object.
        Storage cannot tell the two apart; the journal layer resolves it by re-reading the entry
        and comparing its commit nonce with its own.

        Each backend's :meth:`~pyspark_tstream.store.backends.base.Backend.create` is atomic
        (a hard link of a fsynced temp file, a lock, a conditional PUT); never a generic
        check-then-write.
        """
        path = self.full(rel)
        try:
            self._call("put_if_absent", rel, lambda: self.backend.create(path, data))
        except FileExistsError:
            return False
        return True

    def delete(self, rels: Iterable[str]) -> None:
        """Remove objects; missing ones are ignored (deletes are idempotent)."""
        rels = list(rels)
        if not rels:
            return
        # a retry deletes only what is left: retrying all n would fail n times as often each time
        pending = dict.fromkeys(self.full(r) for r in rels)

        def rm() -> None:
            failures = self.backend.delete(list(pending))
            for p in [p for p in pending if p not in failures]:
                del pending[p]
            if failures:
                raise next(iter(failures.values()))

        self._call("delete", rels[0] if len(rels) == 1 else f"{rels[0]} (+{len(rels) - 1})", rm)

    def open_output(self, rel: str) -> Any:
        """A writable binary file for a data chunk (unique names; never a commit point).

        On object stores the bytes are buffered and uploaded when the file is closed, and that
        upload is the store call (retried like any other): s3fs uploads from its own ``close``,
        outside this boundary, so a 503 or a dropped connection there would escape as a raw
        ``OSError`` with no retry.
        """
        path = self.full(rel)
        if self.backend.uploads_on_close:
            return _UploadOnClose(self, rel)
        return self._call("open_output", rel, lambda: self.backend.open_output(path))


class _UploadOnClose(io.BytesIO):
    """A chunk on its way to an object store: one retried PUT of the whole file on ``close``."""

    def __init__(self, store: Store, rel: str) -> None:
        super().__init__()
        self._store = store
        self._rel = rel

    def close(self) -> None:
        if self.closed:
            return
        data = self.getvalue()
        super().close()
        path = self._store.full(self._rel)
        self._store._call("open_output", self._rel, lambda: self._store.backend.write(path, data))

    def __del__(self) -> None:
        # dropped without close (an error on the way): IOBase would close, i.e. upload, here;
        # a partial orphan is not worth a PUT and its retries
        if not self.closed:
            io.BytesIO.close(self)


def _names_own_path(exc: OSError, display_url: str) -> bool:
    return isinstance(exc.filename, str) and exc.filename.startswith(display_url + "/")
