"""The Spark demo pipeline, kept out of the Spark-free core: ``python -m pyspark_tstream.demo``.

Three producers with skewed clocks write through the Spark sink; a tick-aligned consumer with a
zero-delay watermark drops nothing while a naive twin drops plenty (see :mod:`.pipeline`).
"""

from __future__ import annotations

from .pipeline import main, run

__all__ = ["main", "run"]
