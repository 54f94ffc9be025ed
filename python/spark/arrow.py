"""Spark ⇄ Arrow translation for the adapters: schemas, and batches shaped exactly as Spark expects.

Spark checks that every Arrow batch a Python source yields equals
``to_arrow_schema`` of its schema with UTC timestamps exactly: field nullability, ``timestamp[us, UTC]``
and ``string`` (not ``large_string``). :func:`to_spark_batch` makes a batch fit that target with
vectorized casts only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timezone
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import Row
    from pyspark.sql.types import StructType


def spark_schema(user: pa.Schema) -> StructType:
    """The Spark StructType of a stream: user columns, then the non-null system columns.

    Translated from :func:`~pyspark_tstream.schema.full_schema`, the one definition of the system
    columns (``timestamp[ms, UTC]`` becomes TIMESTAMP, ``int64`` BIGINT, nullability kept).
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    from ..schema import full_schema

    return from_arrow_schema(full_schema(user))


def arrow_target(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects for ``schema`` (a StructType)."""
    from .compat import arrow_schema

    return arrow_schema(schema)


def to_spark_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the columns, order, types and nullability of ``target``."""
    columns = []
    for f in target:
        idx = batch.schema.get_field_index(f.name)
        col = batch.column(idx) if idx >= 0 else pa.nulls(batch.num_rows, f.type)
        if col.type != f.type:
            col = _to_micros(col, f.type) or col.cast(f.type)
        columns.append(col)
    return pa.RecordBatch.from_arrays(columns, schema=target)


def _to_micros(col: pa.Array, target: pa.DataType) -> pa.Array | None:
    """A millisecond timestamp column without nulls as Spark's microseconds (None otherwise).

    Every batch a source yields has one (``_timestamp``). Doing it in numpy, not with
    ``cast``, keeps ``pyarrow.compute`` (~25 ms to import) out of a reading task's worker,
    which PySpark starts with only pyarrow and numpy loaded (``tests/test_startup.py``); see
    :mod:`pyspark_tstream.arrow_arrays` for why not ``pa.array``.
    """
    if not (pa.types.is_timestamp(col.type) and col.type.unit == "ms" and pa.types.is_timestamp(target)
            and target.unit == "us" and col.null_count == 0):
        return None
    import numpy as np

    from ..arrow_arrays import int64s, numbers

    ms = numbers(col.view(pa.int64()), np.int64)
    return int64s(np.multiply(ms, 1000)).view(target)


def user_arrow_schema(spark_struct: StructType) -> pa.Schema:
    """Arrow schema of the data a Spark query writes (what the sink stores)."""
    from .compat import arrow_schema

    return arrow_schema(spark_struct)


def rows_to_batch(rows: list[Row], schema: pa.Schema) -> pa.RecordBatch:
    """Spark Rows (what a PySpark 4.0 stream writer gets) as an Arrow batch of ``schema``.

    Columns are taken by position (a Row's fields follow the query's schema). PySpark hands a
    TIMESTAMP as a naive datetime in the worker's local time zone, so those are taken as local
    time (Arrow would take a naive datetime as UTC). Flat columns are built from numpy buffers
    (:func:`~pyspark_tstream.arrow_arrays.from_pylist`: ``pa.array`` of a list would import
    pandas into the worker, ~0.2 s); nested ones through ``pa.array``.
    """
    from ..arrow_arrays import from_pylist

    if not rows:
        return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
    columns = []
    # a Row is a tuple: zip transposes in C, where r[i] calls Row.__getitem__ (Python) per value
    for f, column in zip(schema, zip(*rows)):
        values = list(column)
        if pa.types.is_nested(f.type):
            convert = _converter(f.type)
            columns.append(pa.array(values if convert is None else [convert(v) for v in values], type=f.type))
        else:
            columns.append(from_pylist(values, f.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _converter(t: pa.DataType) -> Callable[[Any], Any] | None:
    """A function making one Python value of Arrow type ``t`` acceptable to ``pa.array``, or None."""
    if pa.types.is_timestamp(t) and t.tz is not None:
        return lambda v: v.astimezone(timezone.utc) if v is not None and v.tzinfo is None else v
    if pa.types.is_struct(t):
        subs = [(t.field(k).name, _converter(t.field(k).type)) for k in range(t.num_fields)]
        return lambda v: None if v is None else {
            n: (c(v[k]) if c is not None else v[k]) for k, (n, c) in enumerate(subs)}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        c = _converter(t.value_type)
        return None if c is None else (lambda v: None if v is None else [c(x) for x in v])
    if pa.types.is_map(t):
        kc, vc = _converter(t.key_type), _converter(t.item_type)
        return lambda v: None if v is None else [
            (kc(k) if kc else k, vc(x) if vc else x) for k, x in (v.items() if isinstance(v, dict) else v)]
    return None
