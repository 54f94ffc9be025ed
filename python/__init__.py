"""tstream: timestamped streams as Parquet segment chunks on a filesystem or object store.

Import-light on purpose: PySpark imports every top-level ``pyspark_*`` module to discover Python
data sources, and one that raises disables discovery for all of them. ``Stream`` and friends load
lazily on first attribute access.
"""

from __future__ import annotations

from typing import Any

from .version import __version__

__all__ = ["DefaultSource", "Stream", "Ack", "TStreamError", "read_native", "register", "__version__"]

# Spark's discovery looks for ``DefaultSource`` here. Importing it loads pyspark.sql when
# pyspark is installed (docs/performance.md, "Figures behind code choices"); guarded so that a
# missing or broken pyspark never breaks discovery of other sources or the Spark-free API.
try:
    from .datasource.source import TStreamDataSource as DefaultSource
except Exception:  # noqa: BLE001  # pragma: no cover - never let discovery of other sources break
    pass


def __getattr__(name: str) -> Any:
    if name == "Stream":
        from .api.stream import Stream

        return Stream
    if name == "Ack":
        from .write.commit import Ack

        return Ack
    if name == "read_native":  # Spark's own Parquet scan (needs pyspark; see datasource/native.py)
        from .datasource.native import read

        return read
    if name == "register":  # register(spark): idempotent on every PySpark 4.x
        from .datasource.registration import register

        return register
    if name == "TStreamError":
        from .errors import TStreamError

        return TStreamError
    raise AttributeError(f"module 'pyspark_tstream' has no attribute {name!r}")
