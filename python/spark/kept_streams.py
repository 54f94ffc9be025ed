"""Streams a Spark worker opened for a batch read, kept while their head is unchanged.

Spark runs a batch read's ``schema`` and its ``reader``/``partitions`` in Python workers it
reuses from query to query (``spark.python.worker.reuse``), and each call opens the stream:
reads its head hint and decodes the newest journal entry, which names every chunk of the
newest commit (a 200-task write into 64 segments: 12,800 slices, most of the cost of planning
such a read). Like Delta's cache of table logs on the driver, :func:`open_kept` keeps the
streams a worker opened (the last :data:`KEPT_STREAMS`) and reuses one while the stream is
unchanged.

Invariant: :func:`open_kept` returns a stream at the state :meth:`Stream.open
<pyspark_tstream.api.stream.Stream.open>` would give. A kept stream is reused only when the
head hint holds exactly the bytes it held when the stream was opened (the same stream: a stream
deleted and created again at the same URL has another hint, whose entry names its own nonce;
and the same newest commit as far as the hint tells), and it is then refreshed (probing past
the hint for newer entries, as an open does). Any other hint, or none, opens the stream afresh.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..api.stream import Stream
    from ..store.failures import RetryPolicy

#: Streams a worker keeps (a worker plans one read at a time; a few cover reads of a few streams).
KEPT_STREAMS = 4

#: (URL, storage options, retry) -> (head hint bytes when opened, the stream opened), oldest first.
_KEPT: OrderedDict[tuple[str, str, str], tuple[bytes, Stream]] = OrderedDict()


def open_kept(url: str, storage_options: Mapping[str, Any] | None = None, *,
              retry: RetryPolicy | None = None) -> Stream:
    """The stream at ``url``, as :meth:`Stream.open <pyspark_tstream.api.stream.Stream.open>`
    opens it; the one this process opened before when its head hint is unchanged."""
    from ..api.stream import Stream
    from ..store import layout
    from ..store.storage import Store

    store = Store(url, storage_options, retry=retry)
    key = (url, repr(sorted((storage_options or {}).items())), repr(retry))
    try:
        head: bytes | None = store.read(layout.HEAD)
    except FileNotFoundError:
        head = None  # no hint (or no stream): the open finds the newest entry, or says why not
    kept = _KEPT.get(key)
    if head is not None and kept is not None and kept[0] == head:
        stream = kept[1]
        stream.refresh()
        _KEPT.move_to_end(key)
        return stream
    _KEPT.pop(key, None)
    stream = Stream.at(store)
    if head is not None:
        _KEPT[key] = (head, stream)
        while len(_KEPT) > KEPT_STREAMS:
            _KEPT.popitem(last=False)
    return stream


def forget() -> None:
    """Drop every kept stream (the next open of each reads its journal)."""
    _KEPT.clear()
