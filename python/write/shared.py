"""One data file for the small chunks of a task (format v3, "wide writes").

A Spark task behind a shuffle holds a few rows of every segment (200 tasks x 64 segments of a
1M-row write: ~78 rows each). Written as one file per segment, a commit made 12,800 files, and
each read paid a store call per file. What a task still buffers when it finishes (sorted runs,
and streamed segments that never filled a row group) instead goes into one file per task:

* each segment's rows are contiguous, in the order the writer stamped them (time within the
  writer's lane, docs/design.md §3.2), in row groups of their own (``write_table`` never merges
  a table into the previous row group), so a read of one segment fetches only its row groups;
* the file is split when it reaches :data:`SHARED_FILE_BYTES` (a few files when big);
* each segment's part is a *slice*: ``offset`` (its first row in the file), ``bytes`` (the
  compressed size of its row groups, from the footer) and ``file_bytes`` (the file's size);
  small slices carry no marks (:data:`SLICE_MARKS_MIN_ROWS`).

Segments that already streamed a file of their own keep it (those files hold at least a row
group). A task with one segment to write writes a plain chunk, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

#: A shared file is closed and another one opened once it holds this many bytes.
SHARED_FILE_BYTES = 256 << 20
#: Slices under this many rows carry no marks: 20 marks of a 78-row slice were 2/3 of its
#: journal bytes, and a planner cutting inside so small a slice reads its raw timestamps (one
#: ranged read of its row group) instead.
SLICE_MARKS_MIN_ROWS = 4096

#: Opens a plain chunk file for a segment index and its first rows: (output, ParquetWriter, path).
Open = Callable[[int, pa.Table], tuple[Any, Any, str]]


class _Part:
    """What :class:`ChunkWriter` sees as one segment's open chunk: writes go to the shared file."""

    def __init__(self, shared: SharedFiles) -> None:
        self.shared = shared
        self.rows = 0
        self.ended = False

    def write_table(self, table: pa.Table, row_group_size: int | None = None) -> None:
        self.shared.writer.write_table(table, row_group_size=row_group_size)
        self.rows += table.num_rows

    def close(self) -> None:
        # ChunkWriter closes a chunk's writer, then its output: both are this part
        if not self.ended:
            self.ended = True
            self.shared.end_part(self)

    def tell(self) -> int:
        return 0  # the slice's bytes come from the footer, once the file is closed


class SharedFiles:
    """The shared files of one task's :meth:`ChunkWriter.finish`: hands out :class:`_Part`
    outputs for segments, then fills in their slices (:meth:`slices`)."""

    def __init__(self, open_chunk: Open) -> None:
        self.open_chunk = open_chunk
        self.file: Any = None
        self.writer: Any = None
        self.rel = ""
        self.closed: list[tuple[str, int, Any, list[int]]] = []  # (path, size, metadata, rows per part)
        self.rows: list[int] = []  # rows of the parts of the open file, in order

    def open(self, idx: int, table: pa.Table) -> tuple[Any, Any, str]:
        """An output for segment ``idx``'s part, in the open shared file (opened on the first)."""
        if self.file is not None and self.file.tell() >= SHARED_FILE_BYTES:
            self._close()
        if self.file is None:
            self.file, self.writer, self.rel = self.open_chunk(idx, table)
        part = _Part(self)
        return part, part, self.rel

    def end_part(self, part: _Part) -> None:
        if part.rows:
            self.rows.append(part.rows)

    def _close(self) -> None:
        self.writer.close()
        size = self.file.tell()
        self.file.close()
        self.closed.append((self.rel, size, self.writer.writer.metadata, self.rows))
        self.file = self.writer = None
        self.rows = []

    def close(self) -> None:
        if self.file is not None:
            self._close()

    def abort(self) -> list[str]:
        """Close the open file without a footer's use; returns every path written."""
        if self.file is not None:
            try:
                self.writer.close()
            finally:
                self.file.close()
            self.closed.append((self.rel, 0, None, []))
            self.file = None
        return [c[0] for c in self.closed]

    def slices(self, done: Sequence[Any]) -> list[Any]:
        """``done`` (:class:`~.writing.ChunkInfo`, in the order written) with the chunks written
        into shared files made slices (offset, bytes, file_bytes from each file's footer)."""
        out = []
        where: dict[str, tuple[int, list[tuple[int, int]]]] = {}
        for rel, size, meta, rows in self.closed:
            where[rel] = (size, _part_bytes(meta, rows))
        seen: dict[str, int] = {}
        for c in done:
            if c.path not in where:
                out.append(c)
                continue
            size, parts = where[c.path]
            k = seen.get(c.path, 0)
            seen[c.path] = k + 1
            offset, nbytes = parts[k]
            out.append(replace(c, offset=offset, bytes=nbytes, file_bytes=size,
                               marks=c.marks if c.rows >= SLICE_MARKS_MIN_ROWS else ()))
        return out


def _part_bytes(meta: Any, rows: Sequence[int]) -> list[tuple[int, int]]:
    """(first row, compressed bytes of its row groups) of each part of ``rows`` rows, in order."""
    groups = []
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        groups.append((rg.num_rows, sum(rg.column(i).total_compressed_size for i in range(rg.num_columns))))
    out, g, at = [], 0, 0
    for n in rows:
        nbytes, left = 0, n
        while left > 0:
            r, b = groups[g]
            nbytes += b
            left -= r
            g += 1
        out.append((at, nbytes))
        at += n
    return out
