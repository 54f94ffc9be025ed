"""Spark source adapters of ``format("tstream")``: thin translations of Spark calls into core calls."""

from ..spark.requirement import require_pyspark

require_pyspark()
