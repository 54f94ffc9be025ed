"""One data file for the small chunks of a task (format v3, "wide writes"; v5, self-contained slices).

A Spark task behind a shuffle holds a few rows of every segment (200 tasks x 64 segments of a
1M-row write: ~78 rows each). Written as one file per segment, a commit made 12,800 files, and
each read paid a store call per file; a ``Stream.append`` of 256 records to 64 segments made 64
files (64 PUTs on an object store). What a task or an append still buffers when it finishes
(sorted runs, and streamed segments that never filled a row group) instead goes into one file:

* each segment's part is a *slice*: its rows, in the order the writer stamped them (time within
  the writer's lane, docs/design.md §3.2), written as a complete little Parquet file of its own
  (``PAR1``, its row groups, its footer) appended to the shared object. Its bytes
  ``[span_start, span_start + span_bytes)`` read alone as a Parquet file, so a read of one
  segment is one ranged read of about its own bytes (format v5; a v3/v4 slice was row groups
  of one file with one footer, and its read fetched that footer first: several times its bytes);
* after the last slice comes an *outer* footer naming every slice's row groups at their place
  in the object (:mod:`~pyspark_tstream.chunkfile.footer_shift`), so the object is also one
  Parquet file whose rows are the slices' rows in order: Spark's Parquet scan (``read_native``),
  compaction, re-routing and fsck read it whole as before;
* the file is split when it reaches :data:`SHARED_FILE_BYTES` (a few files when big);
* a slice records ``offset`` (its first row in the whole file), ``bytes`` (the compressed size
  of its row groups), ``file_bytes`` (the file's size) and its span; small slices carry no
  marks (:data:`SLICE_MARKS_MIN_ROWS`).

A *small* shared file (at most :data:`ROW_RANGE_ROWS` rows and :data:`ROW_RANGE_BYTES` bytes
in memory: an append's leftovers, or a task's, across many segments) is instead one row group
holding every slice's rows, in order (format v3's layout: a slice is rows ``[offset, offset +
rows)`` of the file), with no span. Parquet's fixed cost per row group (footer entries, pages,
a decode each) made a few rows a segment cost several times the same rows in one row group to
open and decode; a read of one segment of so small a file reads it whole anyway. Builds that
read format v3 read these slices unchanged: they always selected a slice's rows by row number
inside the row groups covering them. Parts are held in memory until the file is known to be
small; past the limit they are written as self-contained slices as above.

Segments that already streamed a file of their own keep it (those files hold at least a row
group). A task or an append with one segment to write writes a plain chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ..chunkfile.footer import footer_of
from ..chunkfile.footer_shift import join, tail

#: A shared file is closed and another one opened once it holds this many bytes.
SHARED_FILE_BYTES = 256 << 20
#: Slices under this many rows carry no marks: 20 marks of a 78-row slice were 2/3 of its
#: journal bytes, and a planner cutting inside so small a slice reads its raw timestamps (one
#: ranged read of its row group) instead.
SLICE_MARKS_MIN_ROWS = 4096

#: A shared file of at most this many rows (and :data:`ROW_RANGE_BYTES`) is one row group, its
#: slices row ranges of it. A read of one segment decodes the whole row group: past this size
#: it costs more than the row groups of its own it replaces save a read of all segments.
ROW_RANGE_ROWS = 16_384
#: ... and at most this many bytes of rows in memory (wide rows reach it first).
ROW_RANGE_BYTES = 2 << 20

#: Opens a shared file's output for a segment index: (output, path).
OpenOutput = Callable[[int], tuple[Any, str]]
#: For a shared file's first rows: what opens a ParquetWriter on an output for each of its slices
#: (one schema and one choice of encodings per file, made once: as when the file had one writer).
OpenWriter = Callable[[pa.Table], Callable[[Any], Any]]


@dataclass(frozen=True)
class _Slice:
    """Where one part landed in its shared file."""

    rows: int
    first_row: int  # its first row in the whole file
    nbytes: int  # compressed bytes of its row groups
    span_start: int
    span_bytes: int
    footer: bytes  # its own footer (offsets from span_start)


class _Kept:
    """The shared output as a slice's ParquetWriter sees it: writes go through, ``close`` does
    not (the next slice and the outer footer follow)."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.closed = False
        self.caught: bytearray | None = None  # what the writer's close writes: its footer

    def write(self, data: Any) -> int:
        if self.caught is not None:
            self.caught += data
        written: int = self.f.write(data)
        return written

    def tell(self) -> int:
        at: int = self.f.tell()
        return at

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


class _Part:
    """What :class:`~pyspark_tstream.write.writing.ChunkWriter` sees as one segment's open chunk:
    a Parquet file of its own, written into the shared file from where it stands (its writer
    opened on the first rows)."""

    def __init__(self, shared: SharedFiles) -> None:
        self.shared = shared
        self.start = shared.file.tell()
        self.writer: Any = None
        self.kept: _Kept | None = None
        self.footer = b""
        self.rows = 0
        self.ended = False
        self.held: list[pa.Table] = []  # its rows while the file may still be one row group

    def write_table(self, table: pa.Table, row_group_size: int | None = None) -> None:
        self.rows += table.num_rows
        if self.shared.holding:
            self.held.append(table)
            self.shared.hold(table)
            return
        self._write(table, row_group_size)

    def _write(self, table: pa.Table, row_group_size: int | None = None) -> None:
        """Write rows into the slice's own Parquet file (opened on the first)."""
        if self.writer is None:
            # pyarrow records offsets from where its writer started, whatever the output's
            # tell(): the slice's bytes read alone as a Parquet file
            if self.shared.new_writer is None:
                self.shared.new_writer = self.shared.open_writer(table)
            self.kept = _Kept(self.shared.file)
            self.writer = self.shared.new_writer(self.kept)
        self.writer.write_table(table, row_group_size=row_group_size)

    def spill(self) -> None:
        """Write the rows held so far as a self-contained slice (the file outgrew one row group)."""
        self.start = self.shared.file.tell()
        held, self.held = self.held, []
        for table in held:
            self._write(table)

    def close(self) -> None:
        # ChunkWriter closes a chunk's writer, then its output: both are this part
        if not self.ended:
            self.ended = True
            if self.shared.holding:
                self.shared.end_held(self)
                return
            self._finish()

    def _finish(self) -> None:
        """Close the slice's own Parquet file and record it."""
        if self.writer is not None and self.kept is not None:
            self.kept.caught = bytearray()
            self.writer.close()
            # its footer, as written (a serialization of the writer's metadata costs as much again)
            self.footer = footer_of(bytes(self.kept.caught))
            self.kept.caught = None
        self.shared.end_part(self)

    def tell(self) -> int:
        return 0  # the slice's bytes come from its footer, once the file is closed


class SharedFiles:
    """The shared files of one task's :meth:`~pyspark_tstream.write.writing.ChunkWriter.finish`:
    hands out :class:`_Part` outputs for segments, then fills in their slices (:meth:`slices`)."""

    def __init__(self, open_output: OpenOutput, open_writer: OpenWriter) -> None:
        self.open_output, self.open_writer = open_output, open_writer
        self.file: Any = None
        self.new_writer: Callable[[Any], Any] | None = None  # the open file's (OpenWriter)
        self.rel = ""
        self.closed: list[tuple[str, int, list[_Slice]]] = []  # (path, size, its slices)
        self.parts: list[_Slice] = []  # slices of the open file, in order
        self.at_row = 0  # rows of the open file so far
        self.holding = True  # the open file may still be one row group: parts are held
        self.held: list[_Part] = []  # ended parts held, in order
        self.live: _Part | None = None  # the part being written
        self.held_rows = self.held_bytes = 0

    def open(self, idx: int, table: pa.Table) -> tuple[Any, Any, str]:
        """An output for segment ``idx``'s part, in the open shared file (opened on the first)."""
        if self.file is not None and self.file.tell() >= SHARED_FILE_BYTES:
            self._close()
        if self.file is None:
            self.file, self.rel = self.open_output(idx)
        part = _Part(self)
        self.live = part
        return part, part, self.rel

    def hold(self, table: pa.Table) -> None:
        """Count rows held; past the limits, write every part as a self-contained slice."""
        self.held_rows += table.num_rows
        self.held_bytes += table.nbytes
        if self.held_rows > ROW_RANGE_ROWS or self.held_bytes > ROW_RANGE_BYTES:
            self.holding = False
            for part in self.held:
                part.spill()
                part._finish()
            self.held = []
            if self.live is not None and not self.live.ended:
                self.live.spill()

    def end_held(self, part: _Part) -> None:
        """A part ended while its rows are held: its slice comes when the file is written."""
        if part.rows:
            self.held.append(part)
        if self.live is part:
            self.live = None

    def _write_held(self) -> None:
        """Write the held parts as one row group, each slice a row range of it (no span)."""
        tables = [t for part in self.held for t in part.held]
        if not tables:
            return
        whole = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        writer = self.open_writer(whole)(_Kept(self.file))  # the output closes with the file
        writer.write_table(whole, row_group_size=whole.num_rows)
        writer.close()
        nbytes = self.file.tell()
        for part in self.held:
            # a slice's share of the file's bytes, by its rows: what a read of it costs
            self.parts.append(_Slice(part.rows, self.at_row, max(1, nbytes * part.rows // whole.num_rows), 0, 0, b""))
            self.at_row += part.rows
            part.held = []
        self.held = []

    def end_part(self, part: _Part) -> None:
        if not part.rows:
            return
        meta = part.writer.writer.metadata
        nbytes = sum(meta.row_group(g).column(i).total_compressed_size
                     for g in range(meta.num_row_groups) for i in range(meta.num_columns))
        end = self.file.tell()
        self.parts.append(_Slice(part.rows, self.at_row, nbytes, part.start, end - part.start, part.footer))
        self.at_row += part.rows

    def _close(self) -> None:
        if self.holding:
            self._write_held()
        elif self.parts:
            # the outer footer: every slice's row groups at their place in the object
            self.file.write(tail(join([(p.footer, p.span_start) for p in self.parts])))
        size = self.file.tell()
        self.file.close()
        self.closed.append((self.rel, size, self.parts))
        self.file = self.new_writer = None
        self.parts, self.at_row = [], 0
        self.holding, self.held_rows, self.held_bytes = True, 0, 0

    def close(self) -> None:
        if self.file is not None:
            self._close()

    def abort(self) -> list[str]:
        """Close the open file without its outer footer; returns every path written."""
        if self.file is not None:
            self.file.close()
            self.closed.append((self.rel, 0, []))
            self.file = None
        return [c[0] for c in self.closed]

    def slices(self, done: Sequence[Any]) -> list[Any]:
        """``done`` (:class:`~.spec.ChunkInfo`, in the order written) with the chunks written
        into shared files made slices (offset, bytes, file_bytes and span)."""
        out = []
        where = {rel: (size, parts) for rel, size, parts in self.closed}
        seen: dict[str, int] = {}
        for c in done:
            if c.path not in where:
                out.append(c)
                continue
            size, parts = where[c.path]
            k = seen.get(c.path, 0)
            seen[c.path] = k + 1
            p = parts[k]
            out.append(replace(c, offset=p.first_row, bytes=p.nbytes, file_bytes=size, span_start=p.span_start,
                               span_bytes=p.span_bytes,
                               marks=c.marks if c.rows >= SLICE_MARKS_MIN_ROWS else ()))
        return out
