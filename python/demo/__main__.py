"""``python -m pyspark_tstream.demo``: run the demo pipeline (``--url``, ``--rounds``)."""

from __future__ import annotations

from .pipeline import main

main()
