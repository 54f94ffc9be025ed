"""Which stores have answered this machine before: a fresh process of a running query waits out
an outage instead of failing like a misconfigured one.

A store call retries an outage for ``storeRetryTimeout`` only once the store has answered
(:class:`~pyspark_tstream.store.failures.RetryPolicy`): a wrong endpoint, which never answers,
is reported in seconds. That fact lives in one process (``Store.reached``, carried to tasks by
pickling). PySpark, though, creates a streaming sink's writer for every micro-batch afresh, in a
new Python process on the driver: when the store stops answering at all (connections refused or
dropped: a store restarting, a network partition), that process has no answer of its own yet and
gave up after its 8 attempts, stopping a query that had been writing for weeks.

So each such writer leaves a memo on the driver's local disk once its store answered, and the
next one starts patient if a memo for the same store is younger than :data:`MEMO_MAX_AGE_S`.
A memo is an empty file named by a hash of the store's URL and its non-secret options (the
endpoint); writing or reading it is best effort: a disk that refuses only costs the patience.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..store.failures import is_secret_key

if TYPE_CHECKING:
    from ..store.storage import Store

#: A memo older than this is ignored: an endpoint unused for a day is checked afresh (fails fast).
MEMO_MAX_AGE_S = 24 * 3600
#: Where memos live; tests and locked-down drivers point it elsewhere.
MEMO_DIR_ENV = "TSTREAM_MEMO_DIR"


def memo_dir() -> str:
    """The folder of this user's memos (``$TSTREAM_MEMO_DIR``, else under the temp folder)."""
    return os.environ.get(MEMO_DIR_ENV) or os.path.join(
        tempfile.gettempdir(), f"tstream-{os.getuid() if hasattr(os, 'getuid') else 'user'}", "reached")


def memo_path(store: Store) -> str:
    """The memo file of ``store``: its URL and options without credentials, hashed."""
    text = json.dumps([store.display_url, _public(store.storage_options)], sort_keys=True, default=str)
    return os.path.join(memo_dir(), hashlib.sha256(text.encode()).hexdigest()[:32])


def _public(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` (nested too) without the credentials (:func:`~pyspark_tstream.store.failures.is_secret_key`)."""
    return {k: _public(v) if isinstance(v, Mapping) else v
            for k, v in options.items() if not is_secret_key(str(k))}


def remember(store: Store) -> None:
    """Note that ``store`` answered this machine now (no-op if it has not answered)."""
    if not store.reached:
        return
    path = memo_path(store)
    try:
        try:
            os.utime(path)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a"):
                pass
    except OSError:
        pass  # best effort: without the memo the next writer is only less patient


def answered_before(store: Store) -> bool:
    """Whether ``store`` answered a process on this machine within :data:`MEMO_MAX_AGE_S`."""
    try:
        return time.time() - os.stat(memo_path(store)).st_mtime < MEMO_MAX_AGE_S
    except OSError:
        return False
