"""The demo (``python -m pyspark_tstream.demo``, in ``demo/``): a small run on the shared Spark session.

The demo's event times come from seeded, simulated clocks, so its numbers are exact: tstream
drops nothing and its streaming windows equal the batch answer, while the naive twin (Spark's
file source with the same zero-delay watermark) drops records, exactly as many as predicted.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark_tstream import demo
from pyspark_tstream.api.stream import Stream

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_demo_drops_nothing_and_matches_batch(spark: Any, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/stream"
    lines: list[str] = []
    out = demo.run(url, rounds=3, spark=spark, workdir=str(tmp_path / "work"), echo=lines.append)

    # every live record reached the consumer, in tick-aligned batches, and none was dropped
    assert out["records"] > 300 and out["consumed"] == out["records"]
    assert out["dropped"] == 0 and out["spark_dropped"] == 0 and out["duplicates"] == 0
    assert out["raised"] == 0, "writer lanes: no record moved (the demo prints it)"
    assert any(line.startswith("moved    0 of ") for line in lines)
    # streaming == batch == ground truth for every closed window; only the newest stays open
    assert out["closed_windows"] == len(out["truth"]) - 1
    assert out["mismatched"] == 0
    for start, count in out["streamed"].items():
        assert count == out["batch"][start] == out["truth"][start], start
    assert sum(out["batch"].values()) == out["records"], "startingAgo skipped the backfill"
    # batches end on ticks that only move forward; each starts where the previous one ended
    data = [b for b in out["batches"] if b["rows"]]
    assert [b["end"] for b in data] == sorted(b["end"] for b in data)
    assert all(b["start"] == a["end"] for a, b in itertools.pairwise(data))
    assert out["ticks"] == sorted(out["ticks"]) and out["ticks"][0] > 0
    # the naive zero-delay watermark drops records, exactly the ones behind its watermark
    assert out["naive_late"] > 0 and out["naive_dropped"] > 0
    assert out["naive_dropped"] == out["naive_predicted"]
    assert out["naive_short_windows"] > 0
    # the printout tells the story
    text = "\n".join(lines)
    assert "tick" in text and "closes [" in text and "0 of" in text and "dropped" in text
    assert Stream.open(url).info().rows == out["records"] + out["backfill"]


def test_demo_refuses_an_existing_stream(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/stream"
    Stream.create(url)
    with pytest.raises(ValueError, match="already holds a stream"):
        demo.run(url, rounds=1)
    with pytest.raises(ValueError, match="rounds"):
        demo.run(f"file://{tmp_path}/other", rounds=0)


def test_demo_runs_as_a_module_outside_the_core() -> None:
    """``python -m pyspark_tstream.demo`` works, and the demo is not part of the Spark-free core."""
    done = subprocess.run([sys.executable, "-m", "pyspark_tstream.demo", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--rounds" in done.stdout
    assert Path(demo.__file__).parent.name == "demo" and not (Path(demo.__file__).parents[1] / "demo.py").exists()
