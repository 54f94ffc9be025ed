"""The journal's head hint, written off the commit's critical path.

One job: keep ``_tstream/head.json`` close to the newest entry this process committed without a
commit waiting for it. The hint is only a hint (docs/protocol.md §6): a stale one costs a reader
a probe, never a wrong answer, because it is only ever a copy of a committed entry. On an object
store each write is a round trip, a third of a commit's critical path, and on ``file://`` a
temp file's fsync and a rename (a round trip again on a FUSE mount, a local path at object-store
latency), so a background thread writes it: offers coalesce (only the newest pending entry is
written, never an older one after a newer one from this process), and a process that exits
waits a moment for the last one (``atexit``). It is written in line on ``memory://`` (nothing to
save) and when ``TSTREAM_UPKEEP=inline`` asks for it
(:func:`~pyspark_tstream.upkeep_mode.inline_from_env`), which keeps store-call counts and
crash-point tests deterministic.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Callable

from ..store import layout
from ..store.storage import Store
from ..upkeep_mode import inline_from_env

logger = logging.getLogger(__name__)

#: Seconds an exiting process waits for its last head hint.
EXIT_WAIT_S = 2.0
#: Backends whose writes cost nothing worth saving: hints are written in line there.
IN_LINE = ("memory",)

_LIVE: weakref.WeakSet[HeadHints] = weakref.WeakSet()


class HeadHints:
    """Writes head hints for one store, in the background but on :data:`IN_LINE` backends or
    when in-line upkeep is asked for (``background`` overrides both)."""

    def __init__(self, store: Store, background: bool | None = None) -> None:
        self.store = store
        self._background = background
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending: tuple[int, bytes] | None = None
        self._newest = -1  # the newest position offered (written or pending)
        self._running = False
        #: Other background work that must not delay a commit (deleting folded requests).
        self._chores: list[Callable[[], None]] = []
        _LIVE.add(self)

    @property
    def background(self) -> bool:
        """Whether hints and chores run on a background thread; decided at the first commit
        (a ConfigError naming ``TSTREAM_UPKEEP`` for a value it does not know), so that a handle
        that only reads never depends on it."""
        if self._background is None:
            self._background = self.store.protocol not in IN_LINE and not inline_from_env()
        return self._background

    @background.setter
    def background(self, value: bool) -> None:
        self._background = value

    def offer(self, pos: int, data: bytes) -> None:
        """Have the hint copy entry ``pos`` (``data``: its bytes) unless a newer one was offered."""
        if not self.background:
            self._write(data)
            return
        with self._lock:
            if pos <= self._newest:
                return
            self._newest = pos
            self._pending = (pos, data)
            self._start()

    def later(self, chore: Callable[[], None]) -> None:
        """Run ``chore`` off the critical path (in line when hints are); failures are logged."""
        if not self.background:
            self._run(chore)
            return
        with self._lock:
            self._chores.append(chore)
            self._start()

    def settle(self, timeout: float | None = None) -> None:
        """Wait until every offered hint and chore is done (tests, process exit)."""
        with self._lock:
            self._idle.wait_for(lambda: not self._running, timeout)

    def _start(self) -> None:
        if not self._running:
            self._running = True
            threading.Thread(target=self._drain, name="tstream-hints", daemon=True).start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                pending, self._pending = self._pending, None
                chores, self._chores = self._chores, []
                if pending is None and not chores:
                    self._running = False
                    self._idle.notify_all()
                    return
            if pending is not None:
                self._write(pending[1])
            for chore in chores:
                self._run(chore)

    def _write(self, data: bytes) -> None:
        # The entry already committed: a failed hint write only makes the next reader probe
        # one more position, so it must never turn a commit into an error.
        try:
            self.store.write(layout.HEAD, data)
        except Exception as e:  # noqa: BLE001 - see above
            logger.info("head hint %s not written (%s); readers probe past it", self.store.uri(layout.HEAD), e)

    def _run(self, chore: Callable[[], None]) -> None:
        try:
            chore()
        except Exception as e:  # noqa: BLE001 - background upkeep; a later run repeats it
            logger.info("tstream: background work on %s failed (%s); it is repeated later",
                        self.store.display_url, e)


@atexit.register
def _settle_all() -> None:
    for hints in list(_LIVE):
        hints.settle(EXIT_WAIT_S)
