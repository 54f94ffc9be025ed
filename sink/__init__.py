"""Spark sink adapters of ``format("tstream")``: tasks write chunks, the driver commits them."""

from ..spark.requirement import require_pyspark

require_pyspark()
