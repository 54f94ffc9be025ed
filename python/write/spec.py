"""What a writer task is given and what it hands back: :class:`WriteSpec` and :class:`ChunkInfo`.

Records only (they pickle to Spark workers and travel back to the driver in commit messages);
the writing itself is :mod:`.writing`'s job.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..codec import INT, STR, DictRecord, opt, record, stored, tuple_of
from ..epochs.routing import KEY_SPACE
from ..errors import SchemaMismatchError, TimestampError
from ..journal.state import Segment
from ..schema import check_reserved
from ..store.storage import Store


@record
@dataclass(frozen=True)
class ChunkInfo(DictRecord):
    """A written, not yet committed chunk (what a Spark task sends to the driver; stored in a
    published commit request, every field under its name, an absent one as its default)."""

    seg: int = stored(INT)
    path: str = stored(STR)
    rows: int = stored(INT)
    bytes: int = stored(INT)
    raw_lo: int = stored(INT)  # first raw hybrid timestamp
    raw_hi: int = stored(INT)  # last raw hybrid timestamp
    task: str = stored(STR, default="")
    key: str | None = stored(opt(STR), default=None)  # routing column, so a committer can re-route after a scale
    key_lo: int = stored(INT, default=0)  # the key range the chunk was routed to
    key_hi: int = stored(INT, default=KEY_SPACE)
    lane_raised: int = stored(INT, default=0)  # records the running max of ordered input raised inside the chunk
    capped: int = stored(INT, default=0)  # records whose client time the arrival cap lowered
    marks: tuple[int, ...] = stored(tuple_of(INT), default=())  # raw timestamps of the mark rows (timestamps.raw_marks)
    offset: int = stored(INT, default=0)  # a slice of a shared file (write/shared.py): its first row there
    file_bytes: int = stored(INT, default=0)  # ... and the size of that file (0: the chunk is all of its file)
    span_start: int = stored(INT, default=0)  # format v5: where the slice's own Parquet file starts in the shared file
    span_bytes: int = stored(INT, default=0)  # ... and its length (0: no span, a v3/v4 slice)


def fits(info: ChunkInfo, seg: Segment | None) -> bool:
    """Whether ``info`` may go to ``seg`` as routed: the segment is active and, for a keyed
    chunk, still owns the key range the chunk was routed to (a stream that a first write created
    and another one re-created before any commit reuses segment ids with other ranges,
    :mod:`~pyspark_tstream.api.creation`); otherwise the chunk is re-routed."""
    return seg is not None and (info.key is None or (seg.lo <= info.key_lo and info.key_hi <= seg.hi))


@dataclass(frozen=True)
class WriteSpec:
    """Everything a writer task needs; pickles to Spark workers.

    Built on the driver by :meth:`pyspark_tstream.api.stream.Stream.write_spec`.
    """

    store: Store
    schema: pa.Schema
    segment_ids: tuple[int, ...]
    bounds: tuple[int, ...]
    key: str | None = None
    timestamp: str | None = None
    timestamping: str = "client-prefer"
    uncapped: bool = False
    compression: str = "snappy"
    writer_tag: str = "w"

    def check_input(self, schema: pa.Schema) -> None:
        """Fail before any write if the key or timestamp column is unusable."""
        check_columns(schema, key=self.key, timestamp=self.timestamp)
        if self.timestamp is None and self.timestamping == "client-require":
            raise TimestampError(
                "timestamping=client-require needs a client timestamp: set timestampColumn "
                "(nothing was written)")


def check_columns(schema: pa.Schema, *, key: str | None, timestamp: str | None) -> None:
    """Fail if the data ``schema`` lacks the ``key`` column, or lacks or cannot hold the
    ``timestamp`` column (needs no stream: a first write checks it before creating one), or has
    a user column named like a system column (:func:`~pyspark_tstream.schema.check_reserved`)."""
    check_reserved(schema, timestamp=timestamp)
    names = schema.names
    if key is not None and key not in names:
        raise SchemaMismatchError(
            f"keyColumn {key!r} is not a column of the data; columns: {names}")
    if timestamp is not None:
        if timestamp not in names:
            raise TimestampError(
                f"timestampColumn {timestamp!r} is not a column of the data; columns: {names}")
        t = schema.field(timestamp).type
        if not (pa.types.is_timestamp(t) or pa.types.is_integer(t) or pa.types.is_date(t)):
            raise TimestampError(
                f"timestampColumn {timestamp!r} has type {t}; use a TIMESTAMP column or "
                "BIGINT epoch milliseconds")
