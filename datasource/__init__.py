"""Spark source adapters of ``format("tstream")``: thin translations of Spark calls into core calls."""
