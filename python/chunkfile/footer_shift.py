"""Moving Parquet footers by a byte offset, and joining them (format v5 shared files).

One job: rewrite the byte offsets a Parquet footer (Thrift ``FileMetaData``, compact protocol)
records. A format-v5 shared file (python/write/shared.py) is a run of complete little Parquet
files, one per segment's slice, then an *outer* footer naming every slice's row groups at their
place in the whole object, so the object is itself one Parquet file. pyarrow writes each slice's
offsets from where that slice starts and cannot move a footer, so the outer footer is built
here: every offset each slice's footer holds is moved by the slice's start, and the moved row
groups are joined into one footer (:func:`join`).

The footers are spliced, not decoded and re-encoded: one pass over each (:class:`_Scan`) finds
the offsets and re-encodes only those (a decoded tree cost 23 ms a 64-slice file); the pass
skips every compact-protocol type (bool, byte, i16, i32, i64, double, binary, list, set, map,
struct), so fields this module never names (statistics, size statistics, encodings, key-value
metadata) come through byte for byte. Only these fields are changed (ids from parquet.thrift):

* ``RowGroup``: 5 ``file_offset``, 7 ``ordinal`` (renumbered in the joined file);
* ``ColumnChunk``: 2 ``file_offset``, 4 ``offset_index_offset``, 6 ``column_index_offset``;
* ``ColumnMetaData`` (``ColumnChunk`` 3): 9 ``data_page_offset``, 10 ``index_page_offset``,
  11 ``dictionary_page_offset``, 14 ``bloom_filter_offset``.

Not handled: encrypted footers (tstream never writes them). Page indexes and bloom filters,
which tstream does not write either, hold offsets outside the footer that no shift reaches.
"""

from __future__ import annotations

import struct

from .footer import MAGIC

# compact-protocol type ids
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
_INTS = (I16, I32, I64)

#: Offsets moved by :func:`join`: struct name -> the i64 field ids holding file offsets.
ROW_GROUP_OFFSETS = (5,)
COLUMN_CHUNK_OFFSETS = (2, 4, 6)
COLUMN_META_OFFSETS = (9, 10, 11, 14)
#: FileMetaData fields: number of rows, row groups; RowGroup fields: columns, ordinal;
#: ColumnChunk: meta_data.
FILE_NUM_ROWS, FILE_ROW_GROUPS, FILE_SCHEMA = 3, 4, 2
RG_COLUMNS, RG_ORDINAL = 1, 7
CC_META = 3


def join(footers: list[tuple[bytes, int]]) -> bytes:
    """One ``FileMetaData`` naming the row groups of every ``(footer, start)``, in order, each
    moved by its ``start`` (where its bytes begin in the joined file): the first footer's
    schema, key-value metadata and writer, the rows summed, row-group ordinals renumbered.
    ValueError when the footers' schemas differ (the joined file would misread them).

    Spliced, not decoded and re-encoded: a task joins one footer per segment it wrote, and
    splicing is several times faster than a decoded tree."""
    if not footers:
        raise ValueError("no footer to join")
    scans = [_Scan(data, start) for data, start in footers]
    base, first = footers[0][0], scans[0]
    if first.rows is None or first.groups is None or first.rows[1] > first.groups[0]:
        raise ValueError("a footer without num_rows before its row groups")
    schema = base[first.schema[0]:first.schema[1]] if first.schema else b""
    parts: list[bytes] = []
    rows = count = 0
    for (data, _), scan in zip(footers, scans):
        if (data[scan.schema[0]:scan.schema[1]] if scan.schema else b"") != schema:
            raise ValueError("slices of one shared file have different Parquet schemas")
        if scan.rows is None or scan.groups is None:
            raise ValueError("a footer without num_rows or row groups")
        z, _ = _varint(data, scan.rows[0])
        rows += (z >> 1) ^ -(z & 1)
        edits = list(scan.edits)
        for a, b, g in scan.ordinals:
            # an ordinal is a row group's position in its file (an i16, used by encryption only)
            if count + g < 1 << 15:
                edits.append((a, b, _zigzag_bytes(count + g, 16)))
        edits.sort()
        parts.append(_spliced(data, edits, scan.groups[1], scan.groups[2]))
        count += scan.groups[3]
    header = bytes([count << 4 | STRUCT]) if count < 15 else bytes([0xF0 | STRUCT]) + _varint_bytes(count)
    return b"".join([base[:first.rows[0]], _zigzag_bytes(rows, 64), base[first.rows[1]:first.groups[0]], header,
                     *parts, base[first.groups[2]:]])


def _zigzag_bytes(n: int, bits: int) -> bytes:
    """The zigzag varint of ``n`` (an integer of ``bits`` bits)."""
    return _varint_bytes(((n << 1) ^ (n >> (bits - 1))) & ((1 << bits) - 1))


def _varint_bytes(n: int) -> bytes:
    """The unsigned varint of ``n``."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _spliced(data: bytes, edits: list[tuple[int, int, bytes]], lo: int, hi: int) -> bytes:
    """Bytes ``[lo, hi)`` of ``data`` with each ``(start, end, new)`` edit inside applied."""
    out, at = [], lo
    for a, b, new in edits:
        if lo <= a and b <= hi:
            out += [data[at:a], new]
            at = b
    out.append(data[at:hi])
    return b"".join(out)


def tail(footer: bytes) -> bytes:
    """What closes a Parquet file after its last row group: ``footer``, its length, ``PAR1``."""
    return footer + struct.pack("<I", len(footer)) + MAGIC


# the structs a scan tells apart: FileMetaData, RowGroup, ColumnChunk, ColumnMetaData, others
_FILE, _RG, _CC, _CMD, _OTHER = range(5)
_TARGETS = {_RG: ROW_GROUP_OFFSETS, _CC: COLUMN_CHUNK_OFFSETS, _CMD: COLUMN_META_OFFSETS}
_CHILDREN = {_FILE: {FILE_ROW_GROUPS: _RG}, _RG: {RG_COLUMNS: _CC}, _CC: {CC_META: _CMD}}


class _Scan:
    """One pass over a serialized ``FileMetaData``, finding what :func:`join` changes:
    ``edits`` (start, end, new bytes) moving each file offset by ``delta``; where the
    ``rows`` value and the ``schema`` list are (start, end); ``groups``: the row-group list
    (header start, first element, end, count); ``ordinals``: (start, end, row group index).
    Positions are passed around as plain ints (no reader object): the pass is most of a
    writer's footer work."""

    def __init__(self, data: bytes, delta: int) -> None:
        self.data, self.delta = bytes(data), delta
        self.edits: list[tuple[int, int, bytes]] = []
        self.ordinals: list[tuple[int, int, int]] = []
        self.rows: tuple[int, int] | None = None
        self.schema: tuple[int, int] | None = None
        self.groups: tuple[int, int, int, int] | None = None
        self.group = -1
        try:
            end = self._struct(0, _FILE)
        except IndexError as e:
            raise ValueError("truncated Thrift data") from e
        if end != len(data):
            raise ValueError(f"{len(data) - end} bytes after the Thrift struct")

    def _struct(self, at: int, kind: int) -> int:
        data, last = self.data, 0
        targets, children = _TARGETS.get(kind, ()), _CHILDREN.get(kind, {})
        while True:
            head = data[at]
            at += 1
            ttype = head & 0x0F
            if ttype == STOP:
                return at
            if head >> 4:
                fid = last + (head >> 4)
            else:
                z, at = _varint(data, at)
                fid = (z >> 1) ^ -(z & 1)
            last = fid
            child = children.get(fid)
            start = at
            if ttype == I64 and fid in targets:
                z, at = _varint(data, at)
                self.edits.append((start, at, _zigzag_bytes(((z >> 1) ^ -(z & 1)) + self.delta, 64)))
            elif kind == _RG and fid == RG_ORDINAL and ttype == I16:
                at = _skip(data, at, ttype)
                self.ordinals.append((start, at, self.group))
            elif child is not None and ttype == LIST:
                h = data[at]
                at += 1
                n = h >> 4
                if n == 15:
                    n, at = _varint(data, at)
                first = at
                for _ in range(n):
                    if child == _RG:
                        self.group += 1
                    at = self._struct(at, child)
                if kind == _FILE:
                    self.groups = (start, first, at, n)
            elif child is not None and ttype == STRUCT:
                at = self._struct(at, child)
            elif ttype in _INTS:  # skipped here, not by a call
                while data[at] & 0x80:
                    at += 1
                at += 1
                if kind == _FILE and fid == FILE_NUM_ROWS:
                    self.rows = (start, at)
            else:
                at = _skip(data, at, ttype)
                if kind == _FILE and fid == FILE_NUM_ROWS:
                    self.rows = (start, at)
                elif kind == _FILE and fid == FILE_SCHEMA:
                    self.schema = (start, at)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The unsigned varint at ``at`` and the position after it."""
    out = shift = 0
    while True:
        b = data[at]
        at += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, at
        shift += 7


def _skip(data: bytes, at: int, ttype: int) -> int:
    """The position after a value of ``ttype`` at ``at`` (a bool field's value is its type)."""
    if ttype in _INTS:
        while data[at] & 0x80:
            at += 1
        return at + 1
    if ttype == BINARY:
        n, at = _varint(data, at)
        if at + n > len(data):
            raise ValueError("truncated Thrift data")
        return at + n
    if ttype == STRUCT:
        while True:
            head = data[at]
            at += 1
            t = head & 0x0F
            if t == STOP:
                return at
            if not head >> 4:
                _, at = _varint(data, at)
            if t in _INTS:  # most fields: skipped here, not by a call (half the scan's time)
                while data[at] & 0x80:
                    at += 1
                at += 1
            elif t not in (TRUE, FALSE):
                at = _skip(data, at, t)
    if ttype in (TRUE, FALSE):
        return at
    if ttype == BYTE:
        return at + 1
    if ttype == DOUBLE:
        return at + 8
    if ttype in (LIST, SET):
        h = data[at]
        at += 1
        n, etype = h >> 4, h & 0x0F
        if n == 15:
            n, at = _varint(data, at)
        if etype in _INTS:
            for _ in range(n):
                while data[at] & 0x80:
                    at += 1
                at += 1
        elif etype in (TRUE, FALSE, BYTE):
            at += n
        else:
            for _ in range(n):
                at = _skip(data, at, etype)
        return at
    if ttype == MAP:
        n, at = _varint(data, at)
        if n:
            kv = data[at]
            at += 1
            for _ in range(n):
                for t in (kv >> 4, kv & 0x0F):
                    at = at + 1 if t in (TRUE, FALSE) else _skip(data, at, t)
        return at
    raise ValueError(f"unknown Thrift compact type {ttype}")
