"""Spark sink adapters of ``format("tstream")``: tasks write chunks, the driver commits them."""
