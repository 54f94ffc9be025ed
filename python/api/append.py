"""Appending to a stream: write specs, journal commits of written chunks, heartbeats, producers.

One job: turn records (or chunks the Spark sink wrote) into exactly one journal commit each.
A repeated ``(writer_id, batch_id)`` commits nothing and answers the original commit's
:class:`~pyspark_tstream.write.commit.Ack`; chunks routed to a segment that a scale sealed in the
meantime are re-routed to its successors before the commit is retried. What runs after a
data commit (auto-scaling, retention, compaction) is :mod:`~pyspark_tstream.api.upkeep`'s
job, reached through the ``after_commit`` hook: the data commit is durable before it runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import pyarrow as pa

from ..errors import CommitConflictError, SchemaMismatchError, SegmentSealedError
from ..journal.entries import Chunk, Entry
from ..journal.operations import Operation
from ..read.reading import chunks_tsos
from ..schema import check_names, normalize, user_schema
from ..store.fence import Fence
from ..timestamps import count_raised, now_ms, pack
from ..write.commit import Ack, CommitIntent, CommitRequest, check_schema_for_write
from ..write.fold import Published, publishable
from ..write.group import GroupCommit
from ..write.reroute import reroute
from ..write.spec import ChunkInfo, WriteSpec, fits
from ..write.writing import write_batches
from .context import StreamContext

logger = logging.getLogger(__name__)

#: Attempts at a commit whose segments keep being sealed under it.
SEALED_RETRIES = 100


def to_table(data: Any) -> pa.Table:
    """``data`` as a pyarrow Table: a Table, RecordBatch, list of dicts or pandas/polars frame."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, (list, tuple)):
        return pa.Table.from_pylist(list(data))
    if hasattr(data, "to_arrow") and not hasattr(data, "iloc"):
        return data.to_arrow()
    if hasattr(data, "iloc"):  # pandas
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TypeError(f"append takes a pyarrow Table/RecordBatch, a list of dicts or a pandas DataFrame, "
                    f"not {type(data).__name__}")


def check_has_columns(data: Any, table: pa.Table) -> None:
    """Refuse data without a column, saying what was passed (``table`` is ``to_table(data)``)."""
    if table.num_columns:
        return
    if isinstance(data, (list, tuple)):
        what = (f"an empty {type(data).__name__}" if not data
                else f"a {type(data).__name__} of {len(data)} record(s) without fields")
    else:
        what = f"a {type(data).__name__} of {table.num_rows} row(s) and no columns"
    raise SchemaMismatchError(
        f"append got {what}: nothing to write. Pass records with at least one column, e.g. "
        "[{'device': 'd1', 'value': 3}], a pyarrow Table or a pandas/polars DataFrame")


class Appender:
    """Appends and commits through a :class:`~pyspark_tstream.api.context.StreamContext`.

    ``after_commit(entry, later)`` runs after every commit that added chunks (never raising into
    it); ``later`` says the caller's latency matters and its process outlives the call
    (``Stream.append``; not ``commit``, the Spark sink's).
    """

    def __init__(self, ctx: StreamContext, after_commit: Callable[[Entry, bool], None] | None = None) -> None:
        self.ctx = ctx
        self.after_commit = after_commit
        #: Data commits go through group commit (write/group.py): folded with other writers'.
        self.group = GroupCommit(ctx.journal, self.count_raised)

    def write_spec(self, schema: pa.Schema, *, key: str | None = None, timestamp: str | None = None,
                   merge_schema: bool = False, writer_tag: str = "w") -> WriteSpec:
        """What writer tasks need to write chunks of data with ``schema`` (validated here)."""
        incoming = normalize(user_schema(schema))
        check_names(incoming)
        state = self.ctx.state
        target = check_schema_for_write(state, incoming, merge_schema)
        cfg = self.ctx.config
        segs = state.segments
        spec = WriteSpec(store=self.ctx.store, schema=target, segment_ids=tuple(s.id for s in segs),
                         bounds=tuple(s.lo for s in segs), key=key, timestamp=timestamp,
                         timestamping=cfg.timestamping, uncapped=cfg.timestamping_uncapped,
                         compression=cfg.compression, writer_tag=writer_tag)
        spec.check_input(schema)
        return spec

    def commit(self, chunks: Sequence[ChunkInfo], intent: CommitIntent, *, fresh: bool = False,
               written_ms: int | None = None) -> Ack:
        """Make ``chunks`` visible in one journal commit; a repeated (writer, batch) is a no-op.

        ``intent``: who commits and what (its ``monotonic``: batch ids of this writer only
        increase, so an integer batch id at or below its last committed one is a no-op too,
        Delta's ``txnVersion`` rule). ``fresh``: the chunks were written for this call and
        handed to no earlier commit, so a no-op deletes them (none may be named by a commit:
        they would otherwise wait for ``vacuum(orphans=True)``); without it a no-op keeps them,
        since a retry after a commit with an unknown outcome may hand over the very files that
        commit named. ``written_ms``: wall-clock epoch ms stamped before the first of ``chunks``
        was written (on any host): the orphan fence's start, :meth:`Fence.since_wall
        <pyspark_tstream.store.fence.Fence.since_wall>`; without it the caller answers for
        committing within the orphan grace.
        """
        fence = Fence.since_wall(self.ctx.store, "commit", written_ms) if written_ms is not None else None
        return self._commit(chunks, intent, fresh=fresh, fence=fence)

    def _commit(self, chunks: Sequence[ChunkInfo], intent: CommitIntent, *, fresh: bool = False,
                listed: Future[list[Published]] | None = None, upkeep_later: bool = False,
                fence: Fence | None = None) -> Ack:
        """:meth:`commit`; ``listed``: other writers' requests listed meanwhile
        (:meth:`GroupCommit.prefetch <pyspark_tstream.write.group.GroupCommit.prefetch>`);
        ``upkeep_later``: retention and compaction due after the commit run in the background
        (:mod:`~pyspark_tstream.api.upkeep`); ``fence``: since when the chunks were written
        (:mod:`~pyspark_tstream.store.fence`)."""
        h = self.ctx
        handed = list(chunks)
        if intent.schema is not None:
            intent = replace(intent, schema=normalize(user_schema(intent.schema)))
        req = CommitRequest(chunks=list(handed), intent=intent, now=now_ms(), count_raised=self.count_raised,
                            fence=fence)
        try:
            entry, created, handed = self._commit_once(req, handed, listed)
        finally:
            h.journal.forget()  # what this call asked (journal/holes.py) is stale for the next one
        if entry is None:
            return self.skipped(req, [*handed, *req.chunks] if fresh else [])
        if entry.pos > h.entry.pos:  # (a folded request's entry: its view, whose state is the entry's)
            h.entry = entry
        if created and entry.chunks and self.after_commit is not None:
            self.after_commit(entry, upkeep_later)
        return Ack.from_entry(entry)

    def _commit_once(self, req: CommitRequest, handed: list[ChunkInfo],
                     listed: Future[list[Published]] | None) -> tuple[Entry | None, bool, list[ChunkInfo]]:
        """The journal commit of ``req``, re-routed while its segments are sealed under it: the
        entry (None: a no-op), whether this call created it, and the chunks handed over that
        the caller may still delete."""
        h = self.ctx
        created = True
        for _ in range(SEALED_RETRIES):
            try:
                if publishable(req):
                    done = self.group.commit(req, h.state, listed)
                    entry, created, listed = done.entry, done.created, None
                    if done.keep:  # a published request's files stay (Committed.keep)
                        handed = [c for c in handed if c.path not in done.keep]
                        req.chunks = [c for c in req.chunks if c.path not in done.keep]
                else:
                    entry, _ = h.journal.commit(req, h.state)
                break
            except SegmentSealedError:
                # a scale (or a re-creation) committed since these chunks were routed: re-route them
                state = h.refresh()
                req.chunks = [r for c in req.chunks
                              for r in ([c] if fits(c, state.segment(c.seg)) else reroute(h.store, c, state.segments))]
        else:
            raise CommitConflictError("segments kept changing under this commit; retry it",
                                      expected=h.state.pos + 1)
        return entry, created, handed

    def skipped(self, req: CommitRequest, discard: Sequence[ChunkInfo] = ()) -> Ack:
        """A request that committed nothing (:meth:`CommitRequest.settled`): log it, delete the
        ``discard`` chunks (this attempt's own files) but any the earlier commit names, and
        answer with the earlier commit's ack."""
        pos = req.duplicate_pos
        h = self.ctx
        h.refresh()
        original = h.journal.try_entry(pos) if pos is not None and pos >= 0 else None
        named = {c.path for c in original.chunks} if original is not None else set()
        doomed = sorted({c.path for c in discard} - named)
        if doomed:
            h.store.delete(doomed)
        note = req.skip_text() + (f"; this attempt's {len(doomed)} chunk file(s) deleted" if doomed else "")
        logger.info("%s", note)
        if original is not None:
            ack = Ack.from_entry(original, duplicate=True)
        else:
            ack = Ack(pos=-1 if pos is None else pos, rows=0, tick=h.state.tick, duplicate=True,
                      writer_id=req.intent.writer_id, batch_id=req.intent.batch_id)
        ack.note = note
        return ack

    def count_raised(self, info: ChunkInfo, floor: int) -> int:
        """How many of a written chunk's records the commit's ``floor`` raises (for the ack).

        The chunk is read as a view with floor 0, whose final ``_tso`` is the raw column as
        written (raw hybrid timestamps are far above any row index), then floored here.
        """
        as_written = Chunk(seg=info.seg, path=info.path, rows=info.rows, bytes=info.bytes, seq=0,
                           floor=0, lo=info.raw_lo, hi=info.raw_hi, offset=info.offset,
                           file_bytes=info.file_bytes, span_start=info.span_start,
                           span_bytes=info.span_bytes)
        (raw,) = chunks_tsos(self.ctx.store, [as_written])
        return count_raised(raw, floor)

    def append(self, data: Any, key: str | None = None, timestamp: str | None = None,
               writer_id: str | None = None, batch_id: Any = None, *, merge_schema: bool = False,
               session: bool = False, monotonic: bool = False) -> Ack:
        """Append records in one atomic commit and return the S2-style :class:`Ack`.

        The public :meth:`~pyspark_tstream.api.stream.Stream.append` documents the arguments.
        """
        table = to_table(data)
        check_has_columns(data, table)
        # the newest state this handle saw, not a fresh read: a commit's critical path is its
        # data PUTs and one conditional create; a stale state costs a lost race, never a wrong
        # commit (the entry is rebuilt on the winner's state, a sealed segment re-routed)
        state = self.ctx.state
        probe = CommitRequest(intent=CommitIntent(writer_id=writer_id, batch_id=batch_id, monotonic=monotonic))
        if probe.settled(state):  # known already: write no files at all
            return self.skipped(probe)
        spec = self.write_spec(table.schema, key=key, timestamp=timestamp, merge_schema=merge_schema)
        # other writers' published requests are listed while the data is written (group commit),
        # and whether an entry lies past the slot the commit will try (journal/holes.py)
        listed = self.group.prefetch(state) if table.num_rows and self.group.background else None
        fence = Fence(self.ctx.store, "append").start()  # before the first file write
        self.ctx.journal.expect(state.pos + 1)
        try:
            chunks = write_batches(spec, [table], ordered=True) if table.num_rows else []
        except BaseException:
            self.ctx.journal.forget()
            raise
        if not chunks and writer_id is None:
            self.ctx.journal.forget()
            return Ack(pos=state.pos, rows=0, tick=state.tick)
        intent = CommitIntent(writer_id=writer_id, batch_id=batch_id, session=session, monotonic=monotonic,
                              schema=table.schema, merge_schema=merge_schema)
        return self._commit(chunks, intent, fresh=True, listed=listed, upkeep_later=True, fence=fence)

    def heartbeat(self, writer_id: str, tso: int | None = None) -> Ack:
        """A data-less tick record: ``writer_id`` is live and will not commit below ``tso``."""
        return self.commit([], CommitIntent(writer_id=writer_id, session=True, op=Operation.TICK,
                                            heartbeat=pack(now_ms()) if tso is None else tso))

    def tick(self) -> None:
        """A data-less commit that lets the journal drop writers whose lease expired."""
        self.commit([], CommitIntent(op=Operation.TICK))

    def writer(self, writer_id: str) -> Producer:
        """A producer session: holds the tick (until closed or its lease expires)."""
        return Producer(self, writer_id)


class Producer:
    """A writer session (Milvus proxy / S2 producer): while live, the tick waits for it.

    Use as a context manager; ``close`` ends the session so the tick stops waiting at once
    (otherwise it waits until ``writerLeaseMs`` passes without a commit or heartbeat).
    """

    def __init__(self, appender: Appender, writer_id: str) -> None:
        self.appender = appender
        self.writer_id = writer_id

    def append(self, data: Any, key: str | None = None, timestamp: str | None = None,
               batch_id: Any = None, *, merge_schema: bool = False) -> Ack:
        """``Stream.append`` as this session's writer: it holds the tick until ``close``."""
        return self.appender.append(data, key=key, timestamp=timestamp, writer_id=self.writer_id,
                                    batch_id=batch_id, merge_schema=merge_schema, session=True)

    def heartbeat(self, tso: int | None = None) -> Ack:
        """A data-less tick record: this writer is live and will not commit below ``tso`` (default: now)."""
        return self.appender.heartbeat(self.writer_id, tso)

    def close(self) -> None:
        """End the session: the tick stops waiting for this writer at once."""
        self.appender.commit([], CommitIntent(writer_id=self.writer_id, op=Operation.TICK, close=True))

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
