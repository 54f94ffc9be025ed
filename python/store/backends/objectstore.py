"""What the object-store backends (S3, Azure Blob, Google Cloud Storage) share.

Their filesystems are fsspec's async ones: many small reads and deletes go out concurrently on
the filesystem's event loop (at most :data:`CONCURRENCY` in flight), and a chunk is buffered and
uploaded in one request when its file is closed
(:attr:`~pyspark_tstream.store.backends.base.Backend.uploads_on_close`), so that upload is a
store call that is retried like any other. Each filesystem is our own instance
(``skip_instance_cache``), shared per process for equal options: fsspec's shared instance would
keep the listing caches and library retries this module switches off. Every object store's
filesystem is built the same way (:meth:`ObjectStoreBackend.new_fs`): listing caches off unless
the options say otherwise, then the library's own retries off, which each backend does its own
way (:meth:`ObjectStoreBackend.switch_off_retries`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from .base import FsspecBackend

__all__ = ["CONCURRENCY", "ObjectStoreBackend"]

#: How many small objects ``read_many`` and ``delete`` keep in flight at once.
CONCURRENCY = 32

_FS_CACHE: dict[tuple[int, str, str], Any] = {}
_FS_CACHE_LOCK = threading.Lock()


class ObjectStoreBackend(FsspecBackend):
    """An fsspec async object store: concurrent reads and deletes, upload on close."""

    uploads_on_close = True
    #: Keyword arguments of every whole-object read.
    cat_kwargs: dict[str, Any] = {}

    def make_fs(self) -> Any:
        token = json.dumps(self.options, sort_keys=True, default=repr)
        key = (os.getpid(), self.scheme, token)  # a forked Spark worker must not reuse a loop
        with _FS_CACHE_LOCK:
            fs = _FS_CACHE.get(key)
            if fs is None:
                fs = self.new_fs()
                _FS_CACHE[key] = fs
            return fs

    def new_fs(self) -> Any:
        """A fresh filesystem for these options, with the library's own retries off."""
        fs = self.fs_class()(skip_instance_cache=True, **self.fs_options())
        self.switch_off_retries(fs)
        return fs

    def fs_options(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`new_fs`'s filesystem: the storage options, with the
        listing cache off unless they set it (a cached listing would answer ``exists``/``size``
        from a stale listing and never see another writer's commit)."""
        opts = dict(self.options)
        opts.setdefault("use_listings_cache", False)
        return opts

    def switch_off_retries(self, fs: Any) -> None:
        """Switch off the retry loop of ``fs``'s library: :class:`~pyspark_tstream.store.storage.Store`
        owns retrying. The default does nothing, for a backend whose :meth:`fs_class` has none."""

    def read(self, path: str) -> bytes:
        return self.fs.cat_file(path, **self.cat_kwargs)  # type: ignore[no-any-return]  # fsspec is untyped

    def read_many(self, paths: Sequence[str], mapped: bool) -> list[bytes | BaseException]:
        from fsspec.asyn import sync

        return sync(self.fs.loop, _gather_cat, self.fs, list(paths), self.cat_kwargs)  # type: ignore[no-any-return]

    def delete(self, paths: Sequence[str]) -> dict[str, BaseException]:
        from fsspec.asyn import sync

        return sync(self.fs.loop, _gather_rm, self.fs, list(paths))  # type: ignore[no-any-return]


async def _gather_cat(fs: Any, paths: list[str], kwargs: dict[str, Any]) -> list[Any]:
    """GET ``paths`` concurrently on ``fs``'s loop; results or exceptions, in order."""
    import asyncio  # only object stores come here: a local read or write never loads asyncio

    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(path: str) -> bytes:
        async with gate:
            return await fs._cat_file(path, **kwargs)  # type: ignore[no-any-return]

    return await asyncio.gather(*(one(p) for p in paths), return_exceptions=True)


async def _gather_rm(fs: Any, paths: list[str]) -> dict[str, BaseException]:
    """DELETE ``paths`` concurrently (a missing one is already gone); the failures."""
    import asyncio

    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(path: str) -> None:
        async with gate:
            try:
                await fs._rm_file(path)
            except FileNotFoundError:
                pass  # already gone: the goal of a delete

    results = await asyncio.gather(*(one(p) for p in paths), return_exceptions=True)
    return {p: r for p, r in zip(paths, results) if isinstance(r, BaseException)}
