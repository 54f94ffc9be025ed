"""Stream schemas: fixed at creation, widened only by additive columns under ``mergeSchema``.

The user schema excludes the system columns. Data chunks store the user columns plus one raw
hybrid-timestamp column (:data:`RAW_TSO`); readers add ``_timestamp``, ``_tso``, ``_segment`` and
``_seq`` after applying the chunk's floor.
"""

from __future__ import annotations

import base64
import functools

import pyarrow as pa

from .errors import SchemaMismatchError

RAW_TSO = "__tstream_raw_tso"
SYSTEM_COLUMNS = ("_timestamp", "_tso", "_segment", "_seq")
SYSTEM_FIELDS = (
    pa.field("_timestamp", pa.timestamp("ms", tz="UTC"), nullable=False),
    pa.field("_tso", pa.int64(), nullable=False),
    pa.field("_segment", pa.int64(), nullable=False),
    pa.field("_seq", pa.int64(), nullable=False),
)


def encode_schema(schema: pa.Schema) -> str:
    """Schema as base64 Arrow IPC (exact types, nullability and metadata survive)."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


@functools.lru_cache(maxsize=64)
def decode_schema(text: str) -> pa.Schema:
    """The user schema stored in the state (base64 Arrow IPC). Cached by text (a schema is
    immutable): a commit decoded the stream's schema twice, ~2 ms of a lone writer's commit."""
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def normalize(schema: pa.Schema) -> pa.Schema:
    """Canonical storage types: large_* → plain, dictionary-encoded → its values, no metadata
    (Spark's Arrow types differ)."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_dictionary(t):
            # an encoding, not a type: stored as its values (the chunk writer picks dictionary
            # pages by itself), so dictionary-encoded and plain data append to one stream
            t = t.value_type
        if pa.types.is_large_string(t):
            t = pa.string()
        elif pa.types.is_large_binary(t):
            t = pa.binary()
        fields.append(pa.field(f.name, t, nullable=True))
    return pa.schema(fields)


def user_schema(schema: pa.Schema) -> pa.Schema:
    """Drop system columns (re-writing a tstream read into another stream is common)."""
    drop = set(SYSTEM_COLUMNS) | {RAW_TSO}
    return pa.schema([f for f in schema if f.name not in drop])


#: The system columns that together identify a record: data holding all three is a tstream read's.
_RECORD_ID = ("_tso", "_segment", "_seq")


def check_reserved(schema: pa.Schema, *, timestamp: str | None = None) -> None:
    """SchemaMismatchError for a column named like a system column that is not a tstream read's.

    A tstream read's system columns are dropped when written (:func:`user_schema`): those with
    their system type that come with the read's record identity (int64 ``_tso``, ``_segment`` and
    ``_seq`` all in the data, as every read returns them unless a ``select`` dropped some), and a
    ``_timestamp`` given as the write's ``timestamp`` column (re-timing the records by the read's
    times). Any other column
    with such a name is the user's own, and would be silently lost: refused, naming it.
    """
    system = {f.name: f.type for f in SYSTEM_FIELDS}
    from_read = all(schema.get_field_index(n) >= 0 and schema.field(n).type == pa.int64() for n in _RECORD_ID)
    for f in schema:
        want = system.get(f.name)
        if want is None:
            continue
        typed = pa.types.is_timestamp(f.type) if f.name == "_timestamp" else f.type == want
        if typed and (from_read or f.name == timestamp):
            continue
        why = "" if typed else f" of type {f.type} (the system column's is {want})"
        raise SchemaMismatchError(
            f"column {f.name!r}{why} has a name tstream keeps for the columns every read adds "
            f"({', '.join(SYSTEM_COLUMNS)}); written, it would be dropped: rename it before writing (e.g. "
            f"withColumnRenamed({f.name!r}, {f.name.lstrip('_')!r})). A tstream read written back keeps working: "
            "its system columns (with _tso, _segment and _seq together) are dropped on purpose")


def full_schema(user: pa.Schema) -> pa.Schema:
    """What readers return: user columns then the system columns."""
    return pa.schema(list(user) + list(SYSTEM_FIELDS))


def check_names(schema: pa.Schema) -> None:
    """SchemaMismatchError unless the user columns are at least one and uniquely named."""
    names = [f.name for f in schema]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise SchemaMismatchError(f"duplicate column names {dups}; rename them before writing")
    if not names:
        raise SchemaMismatchError("data has no user columns; a stream needs at least one")


def reconcile(stream: pa.Schema, incoming: pa.Schema, *, merge: bool) -> pa.Schema:
    """The schema a write must use; raise naming the differing columns when it cannot.

    Columns may be reordered. With ``merge``, new nullable columns are appended (additive only).
    Returns the (possibly widened) stream schema.
    """
    have = {f.name: f for f in stream}
    got = {f.name: f for f in incoming}
    missing = [n for n in have if n not in got]
    extra = [n for n in got if n not in have]
    retyped = [f"{n} ({have[n].type} in the stream, {got[n].type} in the data)"
               for n in got if n in have and not _compatible(have[n].type, got[n].type)]
    problems = []
    if retyped:
        problems.append(f"columns with another type: {', '.join(retyped)}")
    if extra and not merge:
        problems.append(f"columns not in the stream: {extra} (set mergeSchema=true to add them)")
    if problems:
        raise SchemaMismatchError(
            "data does not match the stream schema: " + "; ".join(problems)
            + f". Stream schema: {', '.join(f'{f.name} {f.type}' for f in stream)}"
        )
    del missing  # missing columns are written as nulls: every stream column is nullable
    if extra:
        return pa.schema(list(stream) + [pa.field(n, got[n].type, nullable=True) for n in extra])
    return stream


def _compatible(stored: pa.DataType, given: pa.DataType) -> bool:
    if stored == given:
        return True
    if pa.types.is_dictionary(stored):  # a stream whose first write fixed a dictionary type
        return _compatible(stored.value_type, given)
    # null-typed columns (e.g. an all-None list of dicts) fit anything
    if pa.types.is_null(given):
        return True
    pairs = ((pa.types.is_string, pa.types.is_large_string), (pa.types.is_binary, pa.types.is_large_binary))
    for a, b in pairs:
        if (a(stored) or b(stored)) and (a(given) or b(given)):
            return True
    if pa.types.is_timestamp(stored) and pa.types.is_timestamp(given):
        return True
    if pa.types.is_integer(stored) and pa.types.is_integer(given):
        return True  # cast by conform: a value that does not fit fails the write, naming the column
    if pa.types.is_floating(stored) and pa.types.is_floating(given):
        return bool(given.bit_width <= stored.bit_width)  # float → double is exact; double → float is not
    return False


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Reorder, cast and null-fill ``table`` to exactly ``schema`` (vectorized casts only)."""
    cols = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaMismatchError(
                        f"column {f.name}: values of type {col.type} do not fit the stream's {f.type} ({e}); "
                        f"write values that fit {f.type} (a stream never changes a column's type)") from e
            cols.append(col)
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)
