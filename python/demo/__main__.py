"""``python -m pyspark_tstream.demo``: run the demo pipeline (``--url``, ``--rounds``)."""

from __future__ import annotations

from ..exits import exit_now
from .pipeline import main

main()
exit_now(0)  # the demo is done: an exit Arrow's thread pools cannot abort (pyspark_tstream.exits)
