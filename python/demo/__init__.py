"""The Spark demo pipeline, kept out of the Spark-free core: ``python -m pyspark_tstream.demo``.

Three producers with skewed clocks write through the Spark sink; a tick-aligned consumer with a
zero-delay watermark drops nothing while a naive twin drops plenty (see :mod:`.pipeline`).
"""

from __future__ import annotations

from ..spark.requirement import require_pyspark

require_pyspark("the demo (python -m pyspark_tstream.demo)")

from .pipeline import main, run  # noqa: E402  # after the check: the pipeline imports PySpark

__all__ = ["main", "run"]
