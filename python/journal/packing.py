"""Packed chunk lists (format v3): an entry's many chunk references in a few hundred kB, not MBs.

One job: encode and decode the ``packed`` field of a journal entry (and of the deltas index
nodes copy). A wide write commits one chunk reference per (task, segment) slice: 200 tasks x
64 segments is 12,800 of them. As positional lists (:class:`~pyspark_tstream.journal.entries.Chunk`)
they took ~370 bytes each, twice (the entry and the head hint): 9.5 MB for one commit. Packed,
the references become columns, each delta-coded against what it usually equals, then zlib and
base64:

* files once, in a table; a chunk names its file by index (``path``), and a shared file's size
  (``file_bytes``) is stored with it;
* ``seq`` against the previous chunk of the same segment's ``seq + rows`` (dense numbering: 0),
  ``floor`` against that chunk's floor (one floor per segment and commit: 0);
* ``offset`` against the previous slice of the same file's ``offset + rows`` (slices are
  contiguous: 0); ``lo`` against the previous chunk's ``lo``, ``hi`` against ``lo``;
* ``sorted`` as the indices of the unsorted chunks; ``marks`` as stored (differences);
* format v5, only when some chunk has a span: ``span_start`` against the previous slice of the
  same file's span end (slices follow each other: 0), ``span_bytes`` against ``bytes`` (the
  slice's own footer, a few hundred bytes; null for a chunk without a span).

The decoded lists are the full positional lists, so everything that reads chunk lists reads
packed ones through :func:`unpack` unchanged. Works on stored lists, not on ``Chunk`` objects,
so it does not import the entry module that uses it.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Sequence
from itertools import accumulate, chain, repeat
from operator import add
from typing import Any

from ..codec import need

#: Positions in a chunk's stored list (``Chunk.STORED``).
SEG, PATH, ROWS, BYTES, SEQ, FLOOR, LO, HI, OFFSET, SORTED, MARKS, FILE_BYTES, SPAN_START, SPAN_BYTES = range(14)
#: The stored defaults of the trailing optional fields (``Chunk``'s defaults), by position.
_DEFAULTS: tuple[Any, ...] = (0, True, [], 0, 0, 0)


def _full(c: Sequence[Any]) -> list[Any]:
    return list(c) + list(_DEFAULTS[len(c) - OFFSET:]) if len(c) < SPAN_BYTES + 1 else list(c)


def pack(chunks: Sequence[Sequence[Any]]) -> str:
    """The packed text of stored chunk lists (see the module docstring)."""
    files: dict[str, int] = {}
    sizes: list[int] = []
    cols: dict[str, list[Any]] = {k: [] for k in ("f", "s", "r", "b", "q", "fl", "lo", "hi", "o", "m")}
    unsorted: list[int] = []
    seg_next: dict[int, tuple[int, int]] = {}  # seg -> (expected seq, floor)
    file_next: dict[int, int] = {}  # file index -> expected offset
    span_next: dict[int, int] = {}  # file index -> expected span start
    spans: dict[str, list[Any]] = {"ss": [], "sb": []}
    prev_lo = 0
    for i, raw in enumerate(chunks):
        c = _full(raw)
        f = files.setdefault(c[PATH], len(files))
        if f == len(sizes):
            sizes.append(c[FILE_BYTES])
        seq0, floor0 = seg_next.get(c[SEG], (0, 0))
        cols["f"].append(f)
        cols["s"].append(c[SEG])
        cols["r"].append(c[ROWS])
        cols["b"].append(c[BYTES])
        cols["q"].append(c[SEQ] - seq0)
        cols["fl"].append(c[FLOOR] - floor0)
        cols["lo"].append(c[LO] - prev_lo)
        cols["hi"].append(c[HI] - c[LO])
        cols["o"].append(c[OFFSET] - file_next.get(f, 0))
        cols["m"].append(c[MARKS])
        spans["ss"].append(c[SPAN_START] - span_next.get(f, 0))
        spans["sb"].append(c[SPAN_BYTES] - c[BYTES] if c[SPAN_BYTES] else None)
        if c[SPAN_BYTES]:
            span_next[f] = c[SPAN_START] + c[SPAN_BYTES]
        if not c[SORTED]:
            unsorted.append(i)
        seg_next[c[SEG]] = (c[SEQ] + c[ROWS], c[FLOOR])
        file_next[f] = c[OFFSET] + c[ROWS]
        prev_lo = c[LO]
    doc = {"files": list(files), "sizes": sizes, "unsorted": unsorted, **cols}
    if any(spans["ss"]) or any(b is not None for b in spans["sb"]):
        doc.update(spans)  # format v5 (a v4 pack has neither column)
    text = json.dumps(doc, separators=(",", ":")).encode()
    return base64.b64encode(zlib.compress(text, 9)).decode("ascii")


def _all(values: Sequence[Any], *types: type) -> bool:
    """Whether every value is exactly of one of ``types`` (one pass in C, not a test a value)."""
    return set(map(type, values)) <= set(types)


def unpack(text: str) -> list[list[Any]]:
    """The full stored chunk lists of a packed text, each passing
    :func:`~pyspark_tstream.journal.shapes.check_chunk` (checked here a column at a time, so a
    decoder need not check them a chunk at a time); ValueError (or KeyError, TypeError,
    IndexError) when it is not one (the caller reports corrupt metadata)."""
    doc = json.loads(zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True)))
    files, sizes, unsorted = doc["files"], doc["sizes"], set(doc["unsorted"])
    n = len(doc["f"])
    if any(len(doc[k]) != n for k in ("s", "r", "b", "q", "fl", "lo", "hi", "o", "m")):
        raise ValueError("packed chunk columns of different lengths")
    starts, extra = doc.get("ss", [0] * n), doc.get("sb", [None] * n)
    if len(starts) != n or len(extra) != n:
        raise ValueError("packed span columns of different lengths")
    need(_all(files, str) and _all(sizes, int) and all(b >= 0 for b in sizes)
         and all(_all(doc[k], int) for k in ("f", "s", "r", "b", "q", "fl", "lo", "hi", "o")) and _all(starts, int)
         and _all(extra, int, type(None)) and _all(doc["m"], list) and all(_all(m, int) for m in doc["m"] if m),
         "a packed chunk list")
    fresh = _one_file_a_slice_a_segment(doc, files, sizes, unsorted, starts, extra)
    if fresh is not None:
        return fresh
    span_next: dict[int, int] = {}
    out: list[list[Any]] = []
    seg_next: dict[int, tuple[int, int]] = {}
    file_next: dict[int, int] = {}
    lo = 0
    # the columns zipped, not indexed a chunk at a time: a read of fresh data at many segments
    # unpacks a chunk a slice
    for i, (f, seg, rows, size, q, fl, dlo, dhi, o, marks, start, more) in enumerate(zip(
            doc["f"], doc["s"], doc["r"], doc["b"], doc["q"], doc["fl"], doc["lo"], doc["hi"], doc["o"], doc["m"],
            starts, extra)):
        seq0, floor0 = seg_next.get(seg, (0, 0))
        seq, floor = seq0 + q, floor0 + fl
        lo += dlo
        offset = file_next.get(f, 0) + o
        span_start = span_next.get(f, 0) + start
        span_bytes = 0 if more is None else size + more
        if span_bytes:
            span_next[f] = span_start + span_bytes
        file_bytes = sizes[f]
        if offset < 0 or span_start < 0 or span_bytes < 0 or span_start + span_bytes > file_bytes:
            need(False, "a chunk's offset or span")
        out.append([seg, files[f], rows, size, seq, floor, lo, lo + dhi, offset, i not in unsorted, marks,
                    file_bytes, span_start, span_bytes])
        seg_next[seg] = (seq + rows, floor)
        file_next[f] = offset + rows
    return out


def _one_file_a_slice_a_segment(doc: dict[str, Any], files: list[str], sizes: list[int], unsorted: set[int],
                                starts: list[int], extra: list[int | None]) -> list[list[Any]] | None:
    """:func:`unpack`'s lists of the usual commit (one shared file, one slice per segment, no
    spans: an append), column by column in C, not a chunk at a time; None for any other.
    Each segment's first chunk stores its ``seq`` and ``floor`` whole, and the slices of the
    one file follow each other, so only ``lo`` and ``offset`` accumulate."""
    seg, rows = doc["s"], doc["r"]
    n = len(seg)
    if n == 0 or len(files) != 1 or set(doc["f"]) != {0} or len(set(seg)) != n or any(starts) \
            or extra.count(None) != n:
        return None
    lo = list(accumulate(doc["lo"]))
    offset = list(accumulate(chain(doc["o"][:1], map(add, doc["o"][1:], rows))))
    if min(offset) < 0:
        need(False, "a chunk's offset or span")
    ordered = [i not in unsorted for i in range(n)] if unsorted else repeat(True)
    return list(map(list, zip(seg, repeat(files[0]), rows, doc["b"], doc["q"], doc["fl"], lo, map(add, lo, doc["hi"]),
                              offset, ordered, doc["m"], repeat(sizes[0]), repeat(0), repeat(0))))


def expand(d: Any) -> Any:
    """A stored entry or delta with its ``packed`` chunks decoded into its ``chunks`` list (the
    object itself when nothing is packed)."""
    if isinstance(d, dict) and "packed" in d:
        d = {**d, "chunks": unpack(d["packed"])}
        del d["packed"]
    return d
