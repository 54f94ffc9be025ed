"""``memory://``: fsspec's process-wide in-memory filesystem, for tests and notebooks.

Create-if-absent is a check and a store made one step under a process-wide lock
(:func:`~pyspark_tstream.store.localfs.memory_create`); listings come from one snapshot of the
keys, and an object another thread deleted between fsspec's check and its lookup reads as
missing, as on a real store.
"""

from __future__ import annotations

from ..localfs import memory_create, memory_list, memory_missing
from .base import FsspecBackend

__all__ = ["MemoryBackend"]


class MemoryBackend(FsspecBackend):
    """``memory://``."""

    scheme = "memory"
    url_text = "memory://"

    def list_names(self, path: str) -> list[str]:
        return memory_list(self.fs, path)

    def create(self, path: str, data: bytes) -> None:
        memory_create(self.fs, path, data)

    def missing_key(self, exc: KeyError, uri: str) -> BaseException:
        return memory_missing(exc, self.scheme, uri)
