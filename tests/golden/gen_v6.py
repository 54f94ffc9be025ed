"""Historical: wrote tests/golden/v6 with the commit that introduced format 6 (entries carry
their change, checkpoints, writer state that expires).

Run once as ``PYTHONPATH=<site of that checkout> python tests/golden/gen_v6.py``; never again.
Format 6: journal entries hold their commit's ``change`` of the state; checkpoints of the whole
state (``_tstream/checkpoints/``) named by ``state.checkpoint``; a writer silent longer than
``writer_retention_ms`` (here 1 s) leaves the state (``gone`` in a change); a checkpoint every 3
entries (``checkpoint.MAX_ENTRIES`` lowered for the fixture); a truncation and two vacuums, so
garbage collection deleted the entries below a checkpoint under the truncation.
"""

from __future__ import annotations

import os
import time

from gen_common import BASE_MS, SCHEMA, batch, out_dir, rows_json, write_expected
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal import checkpoint

checkpoint.MAX_ENTRIES = 3

path = out_dir("v6")
url = "file://" + os.path.join(path, "stream")
s = Stream.create(url, schema=SCHEMA, segments=2, writer_retention_ms=1000)
s.append(batch(0), key="key", timestamp="ts", writer_id="old", batch_id=0)
time.sleep(1.2)  # "old" is silent longer than the retention: the next commit drops it
for b in range(1, 8):
    s.append(batch(b), key="key", timestamp="ts", writer_id="a" if b % 2 else "b", batch_id=b)
assert "old" not in s.state.writers
s.truncate(BASE_MS + 4_000)  # batches 0 to 3
s.vacuum(grace_ms=0)
for b in range(8, 10):
    s.append(batch(b), key="key", timestamp="ts", writer_id="a", batch_id=b)
s.vacuum(grace_ms=0)
table = s.read()
write_expected(path, {
    "commit": "format 6 (deltas)", "format": 6, "group_format": None,
    "rows": rows_json(table), "writers": sorted(s.state.writers),
    "checkpoint": s.state.checkpoint.to_json() if s.state.checkpoint else None,
    "state": {"pos": s.state.pos, "epoch": s.state.epoch, "head_tso": s.state.head_tso},
})
print("rows", table.num_rows, "pos", s.state.pos, "checkpoint", s.state.checkpoint, "meta_gc", s.state.meta_gc_pos)
