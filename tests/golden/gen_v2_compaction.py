"""Historical: wrote tests/golden/v2-summary3 (commit 10f1261) and v2-summary5 (commit b055278).

Run once each as ``PYTHONPATH=<site of that checkout> python tests/golden/gen_v2_compaction.py
<fixture> <commit>``. Format 2 as the compaction branch first wrote it: macro-chunks, manifests,
macro-map buckets, a ``compact`` entry whose ``state.compaction`` summaries have 3 fields (compacted
up to, last position, chunks: 10f1261) or 5 (plus map bucket and version: b055278), and a vacuum
that deleted the replaced chunks.
"""

from __future__ import annotations

import os
import sys

from gen_common import SCHEMA, batch, out_dir, rows_json, write_expected
from pyspark_tstream.stream import Stream

fixture, commit = sys.argv[1], sys.argv[2]
path = out_dir(fixture)
url = "file://" + os.path.join(path, "stream")
s = Stream.create(url, schema=SCHEMA, segments=2)
for b in range(4):
    s.append(batch(b), key="key", timestamp="ts", writer_id="w1", batch_id=b)
counts = s.compact(full=True)
s.append(batch(4), key="key", timestamp="ts", writer_id="w1", batch_id=4)
s.append(batch(5), key="key", timestamp="ts", writer_id="w2", batch_id="x")
s.vacuum(grace_ms=0)
table = s.read()
write_expected(path, {
    "commit": commit, "format": 2, "group_format": 1,
    "rows": rows_json(table), "compact": counts,
    "state": {"pos": s.state.pos, "epoch": s.state.epoch, "head_tso": s.state.head_tso},
})
print("rows", table.num_rows, "pos", s.state.pos, counts)
