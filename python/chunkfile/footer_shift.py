"""Moving Parquet footers by a byte offset, and joining them (format v5 shared files).

One job: rewrite the byte offsets a Parquet footer (Thrift ``FileMetaData``, compact protocol)
records. A format-v5 shared file (python/write/shared.py) is a run of complete little Parquet
files, one per segment's slice, then an *outer* footer naming every slice's row groups at their
place in the whole object, so the object is itself one Parquet file. pyarrow writes each slice's
offsets from where that slice starts and cannot move a footer, so the outer footer is built
here: each slice's footer is decoded, every offset it holds moved by the slice's start
(:func:`shift`), and the moved row groups are joined into one footer (:func:`join`).

The codec is generic (every compact-protocol type: bool, byte, i16, i32, i64, double, binary,
list, set, map, struct), so a footer with fields this module never names (statistics, size
statistics, encodings, key-value metadata) decodes and re-encodes byte for byte. Only these
fields are changed (ids from parquet.thrift):

* ``RowGroup``: 5 ``file_offset``;
* ``ColumnChunk``: 2 ``file_offset``, 4 ``offset_index_offset``, 6 ``column_index_offset``;
* ``ColumnMetaData`` (``ColumnChunk`` 3): 9 ``data_page_offset``, 10 ``index_page_offset``,
  11 ``dictionary_page_offset``, 14 ``bloom_filter_offset``.

Not handled: encrypted footers (tstream never writes them). Page indexes and bloom filters,
which tstream does not write either, hold offsets outside the footer that no shift reaches.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

# compact-protocol type ids
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
_INTS = (I16, I32, I64)

#: Offsets moved by :func:`shift`: struct name -> the i64 field ids holding file offsets.
ROW_GROUP_OFFSETS = (5,)
COLUMN_CHUNK_OFFSETS = (2, 4, 6)
COLUMN_META_OFFSETS = (9, 10, 11, 14)
#: FileMetaData fields: number of rows, row groups; RowGroup fields: columns, ordinal;
#: ColumnChunk: meta_data.
FILE_NUM_ROWS, FILE_ROW_GROUPS, FILE_SCHEMA = 3, 4, 2
RG_COLUMNS, RG_ORDINAL = 1, 7
CC_META = 3

MAGIC = b"PAR1"


@dataclass
class Field:
    """One field of a decoded struct: its id, its compact type and its value (for a bool field,
    a bool; a list or set, :class:`Seq`; a map, :class:`Map`; a struct, a ``list[Field]``)."""

    fid: int
    ttype: int
    value: Any


@dataclass
class Seq:
    """A list or set: element type and elements (bool elements kept as their stored byte)."""

    etype: int
    items: list[Any]


@dataclass
class Map:
    """A map: key and value types and the pairs, in stored order."""

    ktype: int
    vtype: int
    items: list[tuple[Any, Any]]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = memoryview(data), 0

    def byte(self) -> int:
        b = self.data[self.at]
        self.at += 1
        return b

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise ValueError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise ValueError("truncated Thrift data")
        out = bytes(self.data[self.at:self.at + n])
        self.at += n
        return out

    def value(self, ttype: int) -> Any:
        if ttype == BYTE:
            return self.byte()
        if ttype in _INTS:
            return self.zigzag()
        if ttype == DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if ttype == BINARY:
            return self.take(self.varint())
        if ttype in (LIST, SET):
            head = self.byte()
            n, etype = head >> 4, head & 0x0F
            if n == 15:
                n = self.varint()
            # a bool element is one byte (1 true, 2 or 0 false): kept as stored
            return Seq(etype, [self.byte() if etype in (TRUE, FALSE) else self.value(etype) for _ in range(n)])
        if ttype == MAP:
            n = self.varint()
            if not n:
                return Map(0, 0, [])
            kv = self.byte()
            k, v = kv >> 4, kv & 0x0F
            return Map(k, v, [(self._elem(k), self._elem(v)) for _ in range(n)])
        if ttype == STRUCT:
            return self.struct()
        raise ValueError(f"unknown Thrift compact type {ttype}")

    def _elem(self, ttype: int) -> Any:
        return self.byte() if ttype in (TRUE, FALSE) else self.value(ttype)

    def struct(self) -> list[Field]:
        fields: list[Field] = []
        last = 0
        while True:
            head = self.byte()
            ttype = head & 0x0F
            if ttype == STOP:
                return fields
            delta = head >> 4
            fid = last + delta if delta else self.zigzag()
            last = fid
            if ttype in (TRUE, FALSE):
                fields.append(Field(fid, ttype, ttype == TRUE))
            else:
                fields.append(Field(fid, ttype, self.value(ttype)))


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while True:
            if n < 0x80:
                self.out.append(n)
                return
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7

    def zigzag(self, n: int, bits: int) -> None:
        self.varint(((n << 1) ^ (n >> (bits - 1))) & ((1 << bits) - 1))

    def value(self, ttype: int, v: Any) -> None:
        if ttype == BYTE:
            self.out.append(v & 0xFF)
        elif ttype in _INTS:
            self.zigzag(v, {I16: 16, I32: 32, I64: 64}[ttype])
        elif ttype == DOUBLE:
            self.out += struct.pack("<d", v)
        elif ttype == BINARY:
            self.varint(len(v))
            self.out += v
        elif ttype in (LIST, SET):
            n = len(v.items)
            self.out.append((n << 4 | v.etype) if n < 15 else (0xF0 | v.etype))
            if n >= 15:
                self.varint(n)
            for item in v.items:
                self._elem(v.etype, item)
        elif ttype == MAP:
            self.varint(len(v.items))
            if v.items:
                self.out.append(v.ktype << 4 | v.vtype)
                for k, x in v.items:
                    self._elem(v.ktype, k)
                    self._elem(v.vtype, x)
        elif ttype == STRUCT:
            self.struct(v)
        else:
            raise ValueError(f"unknown Thrift compact type {ttype}")

    def _elem(self, ttype: int, v: Any) -> None:
        if ttype in (TRUE, FALSE):
            self.out.append(v)
        else:
            self.value(ttype, v)

    def struct(self, fields: list[Field]) -> None:
        last = 0
        for f in fields:
            ttype = (TRUE if f.value else FALSE) if f.ttype in (TRUE, FALSE) else f.ttype
            delta = f.fid - last
            if 0 < delta <= 15:
                self.out.append(delta << 4 | ttype)
            else:
                self.out.append(ttype)
                self.zigzag(f.fid, 16)
            last = f.fid
            if ttype not in (TRUE, FALSE):
                self.value(ttype, f.value)
        self.out.append(STOP)


def decode(data: bytes) -> list[Field]:
    """The Thrift struct (compact protocol) that ``data`` holds exactly; ValueError otherwise."""
    r = _Reader(data)
    try:
        fields = r.struct()
    except IndexError as e:
        raise ValueError("truncated Thrift data") from e
    if r.at != len(data):
        raise ValueError(f"{len(data) - r.at} bytes after the Thrift struct")
    return fields


def encode(fields: list[Field]) -> bytes:
    """The compact-protocol bytes of a decoded struct (those :func:`decode` read, for any
    struct a standard Thrift writer wrote)."""
    w = _Writer()
    w.struct(fields)
    return bytes(w.out)


def _get(fields: list[Field], fid: int) -> Field | None:
    return next((f for f in fields if f.fid == fid), None)


def _move(fields: list[Field], ids: tuple[int, ...], delta: int) -> None:
    for f in fields:
        if f.fid in ids:
            if f.ttype != I64:
                raise ValueError(f"field {f.fid} of a footer struct is type {f.ttype}, not i64")
            f.value += delta


def shift_fields(meta: list[Field], delta: int) -> list[Field]:
    """``meta`` (a decoded ``FileMetaData``) with every file offset moved by ``delta``, in
    place; returns it."""
    groups = _get(meta, FILE_ROW_GROUPS)
    for rg in groups.value.items if groups is not None else ():
        _move(rg, ROW_GROUP_OFFSETS, delta)
        columns = _get(rg, RG_COLUMNS)
        for cc in columns.value.items if columns is not None else ():
            _move(cc, COLUMN_CHUNK_OFFSETS, delta)
            cm = _get(cc, CC_META)
            if cm is not None:
                _move(cm.value, COLUMN_META_OFFSETS, delta)
    return meta


def shift(footer: bytes, delta: int) -> bytes:
    """A serialized ``FileMetaData`` with every file offset it records moved by ``delta``."""
    return encode(shift_fields(decode(footer), delta))


def footer_of(file_tail: bytes) -> bytes:
    """The serialized ``FileMetaData`` of a Parquet file (or its tail: ``... footer, length,
    PAR1``); ValueError when ``file_tail`` does not end as a Parquet file does."""
    if len(file_tail) < 8 or file_tail[-4:] != MAGIC:
        raise ValueError("not a Parquet file (no footer)")
    n = struct.unpack("<I", file_tail[-8:-4])[0]
    if n + 8 > len(file_tail):
        raise ValueError("the footer is longer than the bytes given")
    return file_tail[-8 - n:-8]


def join(footers: list[tuple[bytes, int]]) -> bytes:
    """One ``FileMetaData`` naming the row groups of every ``(footer, start)``, in order, each
    moved by its ``start`` (where its bytes begin in the joined file): the first footer's
    schema, key-value metadata and writer, the rows summed, row-group ordinals renumbered.
    ValueError when the footers' schemas differ (the joined file would misread them)."""
    if not footers:
        raise ValueError("no footer to join")
    base = decode(footers[0][0])
    schema = _get(base, FILE_SCHEMA)
    groups: list[Any] = []
    rows = 0
    for data, start in footers:
        meta = shift_fields(decode(data), start)
        if _get(meta, FILE_SCHEMA) != schema:
            raise ValueError("slices of one shared file have different Parquet schemas")
        got = _get(meta, FILE_ROW_GROUPS)
        groups += got.value.items if got is not None else []
        num = _get(meta, FILE_NUM_ROWS)
        rows += num.value if num is not None else 0
    for i, rg in enumerate(groups):
        # ordinals are a row group's position in its file (an i16, used by encryption only):
        # renumbered in the joined file, left out past what an i16 holds
        rg[:] = [f for f in rg if f.fid != RG_ORDINAL]
        if i < 1 << 15:
            rg.append(Field(RG_ORDINAL, I16, i))
            rg.sort(key=lambda f: f.fid)
    out = []
    for f in base:
        if f.fid == FILE_ROW_GROUPS:
            f = Field(f.fid, LIST, Seq(STRUCT, groups))
        elif f.fid == FILE_NUM_ROWS:
            f = Field(f.fid, I64, rows)
        out.append(f)
    return encode(out)


def tail(footer: bytes) -> bytes:
    """What closes a Parquet file after its last row group: ``footer``, its length, ``PAR1``."""
    return footer + struct.pack("<I", len(footer)) + MAGIC
