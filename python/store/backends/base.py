"""What every store backend does: one scheme's filesystem behind one small interface.

:class:`~pyspark_tstream.store.storage.Store` keeps the stream root, retries, observers and
redaction, and asks a :class:`Backend` for each operation on an absolute path; so a new store is a
new module here, not a branch in every method of ``Store`` (pyiceberg's ``FileIO`` is the model).

Invariants every backend keeps:

* :meth:`Backend.create` is an atomic create-if-absent: exactly one of several racing callers
  succeeds, the others get ``FileExistsError``, and no reader ever sees a partial object;
* every operation raises ``FileNotFoundError`` for a missing object, never a library's own type;
* :meth:`Backend.is_transient` says which of the backend's failures a retry can cure, from
  exception types and status codes, never from message text;
* no backend retries on its own: :class:`~pyspark_tstream.store.storage.Store` owns retrying
  (stacked retry loops made one 503 storm cost 25 requests and 45 s);
* building a backend touches no network: the filesystem is created on first use.
"""

from __future__ import annotations

import posixpath
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote, quote_plus

from ...errors import StorageError
from .. import failures

__all__ = ["Backend", "FsspecBackend"]


class Backend(ABC):
    """One storage scheme: its filesystem, its operations on absolute paths, its error rules.

    Parameters
    ----------
    options : mapping
        The stream's storage options (``storage.<key>``), plus what the URL implies (an Azure
        account name); passed to the filesystem's constructor.
    root : str
        The stream root as the filesystem names it (``bucket/folder``, ``/abs/folder``).
    netloc : str
        The URL's host part as written (``container@account.dfs.core.windows.net``), for display.
    """

    #: The scheme a stream URL names (``Store.protocol``).
    scheme: ClassVar[str]
    #: Other spellings of :attr:`scheme` in URLs (``s3a``, ``abfss``).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: The URL form messages name.
    url_text: ClassVar[str]
    #: What to install when the filesystem's library is missing.
    install_hint: ClassVar[str] = ""
    #: Modules whose exceptions are store failures (anything else is a bug and propagates).
    error_modules: ClassVar[tuple[str, ...]] = ("fsspec",)
    #: Keywords the filesystem hands to the library beneath it (its signature does not list them).
    passed_on_keys: ClassVar[tuple[str, ...]] = ()
    #: Whether :meth:`Store.open_output` buffers a chunk and uploads it on close as one store
    #: call (object stores), rather than writing through a local file handle.
    uploads_on_close: ClassVar[bool] = False

    def __init__(self, options: Mapping[str, Any], root: str, netloc: str = "") -> None:
        self.options = dict(options)
        self.root = root
        self.netloc = netloc
        self._fs: Any = None
        self._secrets: tuple[str, ...] | None = None

    # -- URLs ---------------------------------------------------------------------------------
    @classmethod
    def split_netloc(cls, netloc: str) -> tuple[str, dict[str, Any]]:
        """The first path part a URL's ``netloc`` names (a bucket) and the storage options it
        implies. The default refuses ``@`` (``key:secret@bucket``, never echoed)."""
        if "@" in netloc:
            raise cls.credentials_in_url()
        return netloc, {}

    @classmethod
    def credentials_in_url(cls) -> ValueError:
        """The error for a URL whose bucket part holds credentials or a port (never echoed)."""
        return ValueError(f"a {cls.scheme}:// stream URL must not carry credentials or a port in its bucket "
                          "part; pass them as storage.key / storage.secret / storage.endpoint_url options")

    def display(self) -> str:
        """The stream root's URL as messages show it: no credentials."""
        return f"{self.scheme}://{self.root}"

    # -- the filesystem -----------------------------------------------------------------------
    @classmethod
    def fs_class(cls) -> type:
        """The fsspec filesystem class (its constructor's keywords are the valid options)."""
        import fsspec

        return fsspec.get_filesystem_class(cls.scheme)  # type: ignore[no-any-return]  # fsspec is untyped

    def make_fs(self) -> Any:
        """Build the filesystem (no network call)."""
        import fsspec

        return fsspec.filesystem(self.scheme, **self.options)

    @property
    def fs(self) -> Any:
        """The filesystem, built on first use (so an unpickled store costs nothing)."""
        if self._fs is None:
            try:
                self._fs = self.make_fs()
            except ImportError as e:
                raise StorageError(f"no filesystem for {self.scheme}:// ({self.redact(str(e))}); "
                                   f"{self.install_hint or 'install its fsspec implementation'}",
                                   path=self.display()) from e
            except (TypeError, ValueError) as e:
                raise StorageError(f"bad storage.* options for {self.scheme}://: {self.redact(str(e))}; "
                                   f"options given: {sorted(self.options)}", path=self.display()) from e
        return self._fs

    def secrets(self) -> tuple[str, ...]:
        """Credential strings to redact from every message, longest first: each secret option's
        value as given and URL-encoded (a library may echo a token inside a request URL)."""
        found = set(failures.secret_values(self.options))
        found.update(quoted for value in list(found) for quoted in (quote(value, safe=""), quote_plus(value)))
        return tuple(sorted(found, key=len, reverse=True))

    def redact(self, text: str) -> str:
        """``text`` with every credential of :meth:`secrets` replaced by ``***``."""
        if self._secrets is None:
            self._secrets = self.secrets()
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    # -- reads --------------------------------------------------------------------------------
    @abstractmethod
    def read(self, path: str) -> bytes:
        """The whole object."""

    @abstractmethod
    def read_many(self, paths: Sequence[str], mapped: bool) -> list[bytes | BaseException]:
        """Whole objects, in order; a failed one is its exception (a sequential backend stops
        at the first failure and returns the results so far, ending with it)."""

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` in one request."""
        return self.fs.cat_file(path, start=start, end=end)  # type: ignore[no-any-return]  # fsspec is untyped

    def exists(self, path: str) -> bool:
        """Whether an object (or a folder with objects) exists."""
        return bool(self.fs.exists(path))

    def size(self, path: str) -> int:
        """Size in bytes."""
        return int(self.fs.size(path))

    def modified_ms(self, path: str) -> int:
        """Last-modified time in epoch ms (0 when the store does not say)."""
        d = self.fs.info(path)
        value = d.get("mtime", d.get("LastModified", d.get("last_modified", d.get("updated", d.get("created")))))
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1000)
        if isinstance(value, str):
            from datetime import datetime

            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        return int(float(value) * 1000) if value is not None else 0

    def list_names(self, path: str) -> list[str]:
        """Full names directly under ``path`` (``FileNotFoundError`` if there is nothing)."""
        return [str(e) for e in self.fs.ls(path, detail=False)]

    def list_sizes(self, path: str) -> dict[str, int]:
        """Base names directly under ``path`` and their sizes (``FileNotFoundError`` if nothing)."""
        return {posixpath.basename(str(e["name"]).rstrip("/")): int(e.get("size") or 0)
                for e in self.fs.ls(path, detail=True)}

    # -- writes -------------------------------------------------------------------------------
    @abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Create or overwrite; readers see the old or the new bytes, never a mix."""

    @abstractmethod
    def create(self, path: str, data: bytes) -> None:
        """Atomic create-if-absent: ``FileExistsError`` if ``path`` exists."""

    def delete(self, paths: Sequence[str]) -> dict[str, BaseException]:
        """Remove objects (missing ones are already gone); the ones that failed, with why."""
        failed: dict[str, BaseException] = {}
        for p in paths:
            try:
                self.fs.rm_file(p)
            except FileNotFoundError:
                pass  # already gone: the goal of a delete
            except Exception as e:  # noqa: BLE001 - returned to Store._call, which classifies it
                failed[p] = e
        return failed

    def open_output(self, path: str) -> Any:
        """A writable binary file (only when not :attr:`uploads_on_close`)."""
        return self.fs.open(path, "wb")

    # -- errors -------------------------------------------------------------------------------
    def missing_key(self, exc: KeyError, uri: str) -> BaseException:
        """What a ``KeyError`` out of a call means: a bug, unless the backend says otherwise."""
        return exc

    def is_backend_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` comes from the store (not a bug of ours)."""
        return failures.is_backend_error(exc, self.error_modules)

    def is_transient(self, exc: BaseException) -> bool:
        """Whether a retry may cure ``exc`` (dropped connections, timeouts, throttling, 5xx)."""
        return failures.is_transient(exc)

    def is_precondition_failed(self, exc: BaseException) -> bool:
        """Whether ``exc`` says a conditional create lost because the object exists."""
        return failures.is_precondition_failed(exc)

    def is_store_answer(self, exc: BaseException) -> bool:
        """Whether ``exc`` carries an error the store itself sent (patience applies)."""
        return failures.is_store_answer(exc)


class FsspecBackend(Backend):
    """A backend whose every operation is an fsspec call (the object stores and ``memory://``)."""

    def read(self, path: str) -> bytes:
        return self.fs.cat_file(path)  # type: ignore[no-any-return]  # fsspec is untyped

    def read_many(self, paths: Sequence[str], mapped: bool) -> list[bytes | BaseException]:
        out: list[bytes | BaseException] = []
        for p in paths:
            try:
                out.append(self.read(p))
            except Exception as e:  # noqa: BLE001 - returned to Store._call, which classifies it
                out.append(e)
                break
        return out

    def write(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(path, data)

    def create(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(path, data, mode="create")
