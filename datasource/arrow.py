"""Spark ⇄ Arrow schemas for the adapters.

Spark checks that every Arrow batch a Python source yields equals
``to_arrow_schema(schema, timezone="UTC")`` exactly: field nullability, ``timestamp[us, UTC]``
and ``string`` (not ``large_string``). :func:`to_spark_batch` makes a batch fit that target with
vectorized casts only.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def spark_schema(user: pa.Schema) -> Any:
    """The Spark StructType of a stream: user columns, then the non-null system columns.

    Translated from :func:`~pyspark_tstream.schema.full_schema`, the one definition of the system
    columns (``timestamp[ms, UTC]`` becomes TIMESTAMP, ``int64`` BIGINT, nullability kept).
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    from pyspark_tstream.schema import full_schema

    return from_arrow_schema(full_schema(user))


def arrow_target(schema: Any) -> pa.Schema:
    """The exact Arrow schema Spark expects for ``schema`` (a StructType)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def to_spark_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the columns, order, types and nullability of ``target``."""
    columns = []
    for f in target:
        idx = batch.schema.get_field_index(f.name)
        col = batch.column(idx) if idx >= 0 else pa.nulls(batch.num_rows, f.type)
        if col.type != f.type:
            col = col.cast(f.type)
        columns.append(col)
    return pa.RecordBatch.from_arrays(columns, schema=target)


def user_arrow_schema(spark_struct: Any) -> pa.Schema:
    """Arrow schema of the data a Spark query writes (what the sink stores)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_struct, timezone="UTC")
