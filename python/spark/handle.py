"""The stream a driver-side reader or writer works on: opened once per process, pickled as a location.

Invariant: a :class:`StreamHandle` pickles as its :class:`~pyspark_tstream.store.storage.Store` (URL
and storage options) and nothing else, and opens the stream at most once in each process that
uses it. Spark pickles readers and writers to run ``read``/``write`` on executors (which need
only their partition or task spec) and to run a batch write's ``commit`` in another worker; an
opened stream (journal caches, the planner's index window, observers) is process-local state,
so it never travels: where a copy needs it again (the commit worker), the copy opens it. This
is the store's own rule (a ``Store`` pickles without its filesystem) one level up; the readers
and writers themselves pickle as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..api.stream import Stream
    from ..read.window import Window
    from ..store.storage import Store


class StreamHandle:
    """A stream, opened lazily, with the index window a micro-batch reader keeps over it.

    Parameters
    ----------
    store : Store
        Where the stream is; what the handle pickles as.
    stream : Stream, optional
        The stream already opened in this process (the data source opens it to check options).
    """

    def __init__(self, store: Store, stream: Stream | None = None) -> None:
        self.store = store
        self._stream = stream
        self._window: Window | None = None

    @classmethod
    def of(cls, stream: Stream) -> StreamHandle:
        """A handle on ``stream``, opened already."""
        return cls(stream.store, stream)

    @property
    def stream(self) -> Stream:
        """The stream, opened on first use in this process."""
        if self._stream is None:
            from ..api.stream import Stream

            self._stream = Stream.at(self.store)  # the store's retry policy, and that it was reached
        return self._stream

    @property
    def window(self) -> Window:
        """The bounded window of journal nodes the streaming source plans from (built on first use)."""
        if self._window is None:
            from functools import partial

            from ..read.reading import chunk_tsos
            from ..read.window import Window

            stream = self.stream
            self._window = Window(stream.journal, load=partial(chunk_tsos, stream.store))
        return self._window

    def reset_window(self) -> None:
        """Drop the window (a stopped query keeps no index nodes)."""
        self._window = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (StreamHandle, (self.store,))
