"""``python -m pyspark_tstream.demo``: run the demo pipeline (``--url``, ``--rounds``)."""

from __future__ import annotations

from pyspark_tstream.demo.pipeline import main

main()
