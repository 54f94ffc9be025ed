"""``gs://`` (``gcs://``): Google Cloud Storage through gcsfs.

Credentials are storage options: ``token`` (a service-account JSON file, ``"google_default"``
for application-default credentials, ``"anon"`` for an emulator or public bucket), ``project``,
and ``endpoint_url`` for an emulator (``fake-gcs-server``).

A commit is an upload with ``ifGenerationMatch=0`` (gcsfs's ``pipe_file(mode="create")``): the
service applies it only if no live object has the name and answers 412 otherwise, which gcsfs
raises as ``FileExistsError``. The filesystem is gcsfs's plain ``GCSFileSystem``, not the
``ExtendedGcsFileSystem`` gcsfs registers by default (``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT``): that
one asks each bucket's storage layout over gRPC before its first call, which against an emulator
waits out a 60 s timeout. gcsfs's own retry loop (six tries, up to 32 s apart) is switched off:
429, 5xx and dropped connections are retried by :class:`~pyspark_tstream.store.storage.Store`
under ``storeRetryTimeout``.
"""

from __future__ import annotations

from typing import Any

from .. import failures
from .objectstore import ObjectStoreBackend

__all__ = ["GCSBackend"]

#: HTTP statuses a retry may cure (gcsfs's own list).
_TRANSIENT_STATUS = frozenset({408, 429, 500, 501, 502, 503, 504})
#: Exception classes (requests, aiohttp, google-auth, gcsfs) that mean a request or its answer was
#: lost on the way, by name so that classifying an error imports nothing.
_TRANSIENT_TYPES = frozenset({"ChunkedEncodingError", "ConnectionError", "ReadTimeout", "Timeout", "ProxyError",
                              "SSLError", "ContentDecodingError", "RefreshError", "ClientError", "ChecksumError"})


class GCSBackend(ObjectStoreBackend):
    """``gs://``, ``gcs://``."""

    scheme = "gs"
    aliases = ("gcs",)
    url_text = "gs:// (gcs://)"
    install_hint = "install 'pyspark-tstream[gcs]' (gcsfs)"
    error_modules = ("gcsfs", "google", "requests", "aiohttp", "fsspec", "urllib3", "http.")

    @classmethod
    def split_netloc(cls, netloc: str) -> tuple[str, dict[str, Any]]:
        if "@" in netloc or ":" in netloc:
            raise cls.credentials_in_url()
        return netloc, {}

    @classmethod
    def fs_class(cls) -> type:
        """gcsfs's ``GCSFileSystem`` with its request retry loop unwrapped (Store retries): its
        retries are off by class, so :meth:`switch_off_retries` has nothing to do."""
        return _gcs_class()

    # -- errors -------------------------------------------------------------------------------
    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, (FileNotFoundError, FileExistsError, PermissionError)):
            return False
        for cur in failures.chain(exc):
            if _code(cur) in _TRANSIENT_STATUS:
                return True
            if any(cls.__name__ in _TRANSIENT_TYPES and cls.__module__.startswith(self.error_modules)
                   for cls in type(cur).__mro__):
                return True
        return failures.is_transient(exc)

    def is_precondition_failed(self, exc: BaseException) -> bool:
        return any(isinstance(cur, FileExistsError) or _code(cur) == 412 for cur in failures.chain(exc))

    def is_store_answer(self, exc: BaseException) -> bool:
        return any(_code(cur) is not None for cur in failures.chain(exc))


def _code(exc: BaseException) -> int | None:
    """The HTTP status of a gcsfs ``HttpError``; None otherwise."""
    if type(exc).__name__ != "HttpError":
        return None
    code = getattr(exc, "code", None)
    try:
        return int(code) if code is not None else None
    except (TypeError, ValueError):
        return None


_CLASS: list[type] = []


def _gcs_class() -> type:
    """gcsfs's ``GCSFileSystem`` with its request retry loop unwrapped (Store retries)."""
    if not _CLASS:
        from gcsfs.core import GCSFileSystem

        class _OneTryGCSFileSystem(GCSFileSystem):  # type: ignore[misc]  # gcsfs is untyped
            _request = GCSFileSystem._request.__wrapped__

        _CLASS.append(_OneTryGCSFileSystem)
    return _CLASS[0]
