"""What the parts of a :class:`~pyspark_tstream.api.stream.Stream` share: store, journal, newest entry.

Every part (appending, reading, epochs, truncation, maintenance, upkeep) works through one
:class:`StreamContext`, never through the ``Stream``: a commit made by one part is seen at
once by the others, and each part can be built and tested alone from a context. The context
holds the newest journal entry this ``Stream`` object has seen; :meth:`StreamContext.refresh`
only ever moves it forward (another thread on the same object may already be ahead).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from ..epochs.scaling import write_epoch_record
from ..errors import corrupt
from ..journal.ahead import Also
from ..journal.entries import Entry
from ..journal.journal import Journal
from ..journal.state import StreamState
from ..maps.sealed import SealedMap
from ..schema import decode_schema
from ..store import layout
from ..store.storage import Store
from .config import StreamConfig

#: A journal-commit builder: ``build(private copy of the newest state, position)`` returns the
#: entry to commit, or None when nothing must be written (see ``Journal.commit``).
Build = Callable[[StreamState, int], "Entry | None"]


class StreamContext:
    """The store, journal and sealed map of one stream, and the newest entry seen through them."""

    def __init__(self, store: Store, entry: Entry, journal: Journal | None = None) -> None:
        self.store = store
        self.journal = journal if journal is not None else Journal(store)
        self.sealed_map = SealedMap(store)
        # committed facts written lazily by the next committer (see Journal.flushers)
        self.journal.flushers += [self.sealed_map.flush, lambda st: write_epoch_record(store, st)]
        self.entry = entry

    @property
    def state(self) -> StreamState:
        """The newest state this context has seen (call :meth:`refresh` to look again)."""
        return self.entry.state

    def refresh(self, ahead: Sequence[int] = (), also: Also | None = None) -> StreamState:
        """Catch up with the journal: 1 store call if nothing changed. ``ahead``: entries the
        caller reads next, fetched in that same call when this handle has not kept them;
        ``also``: other objects it reads next, fetched in it too."""
        pos = self.entry.pos + 1
        # the slot after the next rides in the same call: a poll cannot tell a lost entry from
        # the journal's end, and a handle behind one would stay there without an error
        nxt = self.journal.try_entry(pos, [*ahead, pos + 1], also)
        if nxt is None and self.journal.log.kept(pos + 1):
            gone = self.store.uri(layout.entry(pos))
            raise corrupt("journal entry", gone, FileNotFoundError(gone), layout.stream_url(gone))
        if nxt is not None:
            newest = self.journal.head(known=nxt)
            if newest.pos > self.entry.pos:  # another thread on this context may be ahead
                self.entry = newest
        return self.entry.state

    @property
    def url(self) -> str:
        """The stream's URL, without credentials."""
        return self.store.display_url

    @property
    def config(self) -> StreamConfig:
        """The stream config of the newest state seen."""
        return StreamConfig.from_record(self.state.config)

    @property
    def schema(self) -> pa.Schema | None:
        """User columns (without system columns), or None before the first write."""
        return decode_schema(self.state.schema) if self.state.schema else None

    def commit_op(self, build: Build) -> Entry | None:
        """Commit the entry ``build`` makes (retried on lost races); None if it chose not to."""
        entry, _ = self.journal.commit(build, self.state)
        if entry is not None:
            self.entry = entry
        else:
            self.refresh()
        return entry
