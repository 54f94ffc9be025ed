"""Options as Spark hands them to tstream's data source, for the option tests (``test_options_*``).

Spark passes a case-insensitive dict of strings with lower-cased keys, which ``CaseInsensitiveDict``
(pyspark's own, Spark-free) reproduces: these build the read and write options objects from one,
with no Spark session.
"""

from __future__ import annotations

from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark_tstream.conf.options import SinkOptions, SourceOptions

#: The stream URL every option test names.
URL = "memory://streams/t"
#: 2026-11-01T00:00:00Z in ms since the epoch: the timestamp the option tests spell several ways.
NOV_1_2026_MS = 1_793_491_200_000


def spark_options(**options: str) -> CaseInsensitiveDict:
    """Options as Spark passes them: strings under lower-cased keys."""
    return CaseInsensitiveDict({"path": URL, **options})


def source(**options: str) -> SourceOptions:
    return SourceOptions.from_options(spark_options(**options))


def sink(**options: str) -> SinkOptions:
    return SinkOptions.from_options(spark_options(**options))
