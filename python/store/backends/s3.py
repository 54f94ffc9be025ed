"""``s3://`` (``s3a://``, ``s3n://``) through s3fs: AWS S3 and S3-compatible servers.

A commit is a conditional PUT (``If-None-Match: *``, s3fs's ``pipe_file(mode="create")``), never
s3fs's ``open(p, "xb")``, which commits an empty file with an unconditional PUT when nothing was
written. The filesystem is configured so that every answer is fresh and every failure reaches
:class:`~pyspark_tstream.store.storage.Store`'s one retry loop: listing caches off (s3fs would
answer ``exists``/``size`` from a stale listing forever and never see another process's commit),
botocore's and s3fs's retries off, and a connection pool as large as ``read_many``'s concurrency;
options the caller sets explicitly win. Failures are classified by S3 error code and HTTP status
(:mod:`~pyspark_tstream.store.failures`).
"""

from __future__ import annotations

from typing import Any

from .. import failures
from .objectstore import CONCURRENCY, ObjectStoreBackend

__all__ = ["S3Backend"]


class S3Backend(ObjectStoreBackend):
    """``s3://``."""

    scheme = "s3"
    aliases = ("s3a", "s3n")
    url_text = "s3:// (s3a://, s3n://)"
    install_hint = "install 'pyspark-tstream[s3]' (s3fs)"
    error_modules = failures.S3_MODULES
    passed_on_keys = ("profile", "session_vars", "event_hooks", "include_builtin_handlers")
    # one GET per read: with s3fs's default max_concurrency a whole-object read is HEAD+GET and a
    # miss is HEAD+LIST, which doubles the cost of every poll and journal read
    cat_kwargs = {"max_concurrency": 1}

    @classmethod
    def split_netloc(cls, netloc: str) -> tuple[str, dict[str, Any]]:
        # bucket names never hold '@' or ':', so either means "key:secret@" or a port
        if "@" in netloc or ":" in netloc:
            raise cls.credentials_in_url()
        return netloc, {}

    def fs_options(self) -> dict[str, Any]:
        opts = super().fs_options()
        config = dict(opts.get("config_kwargs") or {})
        config.setdefault("retries", {"total_max_attempts": 1})
        # botocore's default pool of 10 connections would cap read_many's concurrency
        config.setdefault("max_pool_connections", CONCURRENCY)
        opts["config_kwargs"] = config
        return opts

    def switch_off_retries(self, fs: Any) -> None:
        fs.retries = 1
