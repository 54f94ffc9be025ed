"""Historical: wrote tests/golden/v1-first with commit 185c53f (the first commit, format 1).

Run once as ``PYTHONPATH=<site of that checkout> python tests/golden/gen_v1_first.py``; never
again. The journal as first written: appends with and without writer ids and batch ids (a
repeated batch committed once), a producer session, a heartbeat; no scale or groups yet.
"""

from __future__ import annotations

import os

from gen_common import SCHEMA, batch, out_dir, rows_json, write_expected
from pyspark_tstream.stream import Stream

path = out_dir("v1-first")
url = "file://" + os.path.join(path, "stream")
s = Stream.create(url, schema=SCHEMA, segments=2)
s.append(batch(0), key="key", timestamp="ts", writer_id="w1", batch_id=0)
s.append(batch(1), key="key", timestamp="ts")
s.append(batch(0), key="key", timestamp="ts", writer_id="w1", batch_id=0)  # a duplicate: no commit
with s.writer("p1") as p:
    p.append(batch(2), key="key", timestamp="ts", batch_id="x")
    p.heartbeat()
s.append(batch(3), key="key", timestamp="ts", writer_id="w1", batch_id=1)
table = s.read()
write_expected(path, {
    "commit": "185c53f", "format": 1, "group_format": None,
    "rows": rows_json(table),
    "state": {"pos": s.state.pos, "epoch": s.state.epoch, "head_tso": s.state.head_tso},
})
print("rows", table.num_rows, "pos", s.state.pos)
