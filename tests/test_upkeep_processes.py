"""Background upkeep beside another process's orphan cleanup, in real processes on a folder stream.

The simulation schedules background upkeep as a thread of the appender's process
(``tests/sim/knobs.py``, profile ``upkeep``); this runs it for real: one process appends with
the product's default upkeep (compaction due at every other position, on its background
thread), another runs ``vacuum`` with orphan cleanup over and over with a short orphan grace
meanwhile. Every acknowledged record must read back once, and ``fsck`` must find the stream
sound: a background compaction's macro-chunks and manifests are never taken for orphans while
it runs within the grace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import CHILD_EXIT
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.api.upkeep import UPKEEP_ENV

#: Appends of the appender process, and rows in each.
APPENDS, ROWS = 32, 5

_APPENDER = """
import json, sys
import pyarrow as pa
from pyspark_tstream.api import upkeep
from pyspark_tstream.api.stream import Stream
upkeep.COMPACT_EVERY = 2  # compaction considered after every other position, on the upkeep thread
s = Stream.open(sys.argv[1])
assert not s.upkeep.inline
for b in range(int(sys.argv[2])):
    rows = int(sys.argv[3])
    t = pa.table({"k": [f"k{i % 3}" for i in range(rows)], "b": [b] * rows, "i": list(range(rows))})
    s.append(t, key="k", writer_id="w", batch_id=b)
    print(json.dumps(b), flush=True)  # acknowledged
""" + CHILD_EXIT

_VACUUMER = """
import json, os, sys
from pyspark_tstream.api.stream import Stream
stop, total, runs = sys.argv[2], {}, 0
while not os.path.exists(stop) or runs == 0:
    counts = Stream.open(sys.argv[1]).vacuum(grace_ms=200, orphans=True, orphan_grace_ms=2_000,
                                               unsafe_orphan_grace=True)
    runs += 1
    for k, v in counts.to_dict().items():
        total[k] = total.get(k, 0) + v
print(json.dumps({"runs": runs, **total}), flush=True)
""" + CHILD_EXIT


def test_background_compaction_beside_another_process_vacuuming_loses_nothing(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/s"
    Stream.create(url, segments=2, compaction="min=2")
    env = {k: v for k, v in os.environ.items() if k != UPKEEP_ENV}  # the product's default: background
    stop = tmp_path / "stop"
    vacuumer = subprocess.Popen([sys.executable, "-c", _VACUUMER, url, str(stop)], env=env,
                                stdout=subprocess.PIPE, text=True)
    try:
        appender = subprocess.run([sys.executable, "-c", _APPENDER, url, str(APPENDS), str(ROWS)], env=env,
                                  capture_output=True, text=True, timeout=300)
    finally:
        stop.touch()
        out, _ = vacuumer.communicate(timeout=300)
    assert appender.returncode == 0, appender.stderr
    acked = [json.loads(line) for line in appender.stdout.split()]
    assert acked == list(range(APPENDS))
    vacuumed = json.loads(out)
    assert vacuumed["runs"] >= 2, vacuumed

    s = Stream.open(url)
    entries = [s.journal.read_entry(p) for p in range(1, s.state.pos + 1)]
    assert sum(e.op == "compact" for e in entries) >= 2, "the appender's upkeep compacted too little"
    table = s.read()
    got = sorted(zip(table.column("b").to_pylist(), table.column("i").to_pylist(), strict=True))
    assert got == [(b, i) for b in acked for i in range(ROWS)]
    report = s.verify()
    assert report.ok, report.summary()
