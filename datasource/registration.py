"""``register(spark)``: make ``format("tstream")`` available in a session, on every PySpark 4.x.

Invariant: calling it any number of times, on a session that already discovered the package or
not, leaves ``tstream`` registered and raises nothing. PySpark 4.0 refuses to register a name its
own discovery already registered (``DATA_SOURCE_ALREADY_EXISTS``); later versions replace it.
Either way the registered class is ours, so that refusal is success.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the ``tstream`` data source with ``spark`` (classic or Connect); idempotent."""
    from pyspark.errors import PySparkException

    from .source import TStreamDataSource

    try:
        spark.dataSource.register(TStreamDataSource)
    except PySparkException as e:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise
