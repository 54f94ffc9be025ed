"""Historical: wrote tests/golden/v3 (commit fa3c0d5) and tests/golden/v5 (commit 44b33d9).

Run once each as ``PYTHONPATH=<site of that checkout> python tests/golden/gen_wide.py <fixture>
<commit> <format>``. Wide writes, Spark-free: each "task" is a ``write_batches`` call over rows of
every segment, as a sink task runs it, and a commit takes several tasks' chunks, as the sink's
driver does. So each task writes one shared file whose per-segment parts are slices
(``file_bytes``; at 44b33d9 also ``span_start``/``span_bytes``: each slice a Parquet file of its
own), and an entry of 8 or more chunks stores them packed.
"""

from __future__ import annotations

import os
import sys

from gen_common import SCHEMA, batch, out_dir, rows_json, write_expected
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.write.writing import write_batches

fixture, commit, fmt = sys.argv[1], sys.argv[2], int(sys.argv[3])
path = out_dir(fixture)
url = "file://" + os.path.join(path, "stream")
s = Stream.create(url, schema=SCHEMA, segments=4)
spec = s.write_spec(SCHEMA, key="key", timestamp="ts")
for b in range(2):  # two sink batches of three tasks each
    infos = []
    for t in range(3):
        infos += write_batches(spec, [batch(b * 3 + t, rows=12)], task=f"p{t}a0")
    s.commit(infos, writer_id="sink", batch_id=b)
s.append(batch(6), key="key", timestamp="ts", writer_id="w1", batch_id=0)
table = s.read()
write_expected(path, {
    "commit": commit, "format": fmt, "group_format": None,
    "rows": rows_json(table),
    "state": {"pos": s.state.pos, "epoch": s.state.epoch, "head_tso": s.state.head_tso},
})
print("rows", table.num_rows, "pos", s.state.pos)
