"""``file://``: local folders and mounts, through :mod:`~pyspark_tstream.store.localfs`.

A commit is a fully written, fsynced temp file hard-linked into place (``os.link`` fails when
the name exists), so readers never see a partial journal object; replacing is a rename. Reads
and writes use builtin files, not fsspec's: the read path is hot, and a sink task that never
imports fsspec (and asyncio) starts ~35 ms sooner.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..localfs import local_create, local_map, local_read, local_replace
from .base import Backend

__all__ = ["LocalBackend"]


class LocalBackend(Backend):
    """``file://`` (and bare paths)."""

    scheme = "file"
    aliases = ("local",)
    url_text = "file:// (or a bare path)"

    @classmethod
    def split_netloc(cls, netloc: str) -> tuple[str, dict[str, Any]]:
        if netloc not in ("", "localhost"):
            raise ValueError(f"a file URL names no host, but this one names {netloc!r}; write file:///absolute/path")
        return "", {}

    def display(self) -> str:
        return f"file://{self.root}"

    def read(self, path: str) -> bytes:
        return local_read(path)

    def read_many(self, paths: Sequence[str], mapped: bool) -> list[bytes | BaseException]:
        read = local_map if mapped else local_read
        out: list[bytes | BaseException] = []
        for p in paths:
            try:
                out.append(read(p))
            except OSError as e:
                out.append(e)
                break
        return out

    def write(self, path: str, data: bytes) -> None:
        local_replace(path, data)

    def create(self, path: str, data: bytes) -> None:
        local_create(path, data)

    def open_output(self, path: str) -> Any:
        # the builtin file fsspec's local filesystem would open too, without importing fsspec
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "wb")  # the caller closes it
