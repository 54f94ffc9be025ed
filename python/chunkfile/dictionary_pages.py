"""Reading dictionary-encoded string columns of chunk files through their dictionary.

Decoding such a column straight to strings appends every value to a builder; decoding it as a
dictionary and then taking the values by index copies them in one vectorised pass, at about half
the CPU (the benchmark's ``key`` column: 13 -> 6 ns per row). But if a writer fell back to plain
pages (its dictionary outgrew :data:`DICTIONARY_PAGE_BYTES`), a dictionary read hashes every
plain value and costs 2-3 times more; Parquet's footer does not say whether a column chunk fell
back, so :func:`dictionary_read_columns` picks only chunks that cannot have. Either way the
values read are the same: this is speed, never correctness.

Shared by the chunk writers (:mod:`.writing`, :mod:`.compaction`), which pass the limit, and the
reader (:mod:`.reading`), which relies on it; neither imports the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ..arrow_arrays import is_text

if TYPE_CHECKING:
    import pyarrow.parquet as pq

#: The largest dictionary page a chunk writer builds before it falls back to plain pages
#: (pyarrow's default, passed explicitly because readers rely on it).
DICTIONARY_PAGE_BYTES = 1 << 20


def dictionary_read_columns(group: pq.RowGroupMetaData, schema: pa.Schema) -> list[str]:
    """Top-level string and binary columns of a row group to read as a dictionary.

    Those with a dictionary page and at most :data:`DICTIONARY_PAGE_BYTES` uncompressed in all:
    their dictionary is smaller still, so no page of theirs fell back to plain.
    """
    out = []
    for i in range(group.num_columns):
        col = group.column(i)
        name = col.path_in_schema  # a nested column's ("a.list.element") names no top-level field
        if col.has_dictionary_page and col.total_uncompressed_size <= DICTIONARY_PAGE_BYTES and \
                schema.get_field_index(name) >= 0 and is_text(schema.field(name).type):
            out.append(name)
    return out


def decode_dictionaries(table: pa.Table, names: tuple[str, ...]) -> pa.Table:
    """``table`` with its dictionary columns ``names`` decoded to their value type (a reader's
    :func:`~pyspark_tstream.schema.conform` then gives every column the stream's type)."""
    # pyarrow.compute's engine, without the time its module spends building Python wrappers
    # for every kernel on import (a task imports no pyarrow.compute: tests/test_startup.py)
    from pyarrow._compute import call_function

    for n in names:
        i = table.schema.get_field_index(n)
        col = table.column(i)
        values = pa.chunked_array([call_function("take", [c.dictionary, c.indices]) for c in col.chunks],
                                  col.type.value_type)
        table = table.set_column(i, table.schema.field(i).with_type(values.type), values)
    return table
