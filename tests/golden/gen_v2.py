"""Historical: wrote tests/golden/v2 with commit 6cd9da4 (the merge that made format 2 one version).

Run once as ``PYTHONPATH=<site of that checkout> python tests/golden/gen_v2.py``; never again.
Format 2: writer lanes (two writers commit overlapping times into one segment, ``state.writers``
``lanes``), chunk marks, a scale, a compaction (macro-chunks, 6-field summaries), a truncation,
and a version-2 consumer group (cursors ``[tso, segment, seq]``) that read and acked.
"""

from __future__ import annotations

import os

from gen_common import SCHEMA, batch, out_dir, rows_json, write_expected
from pyspark_tstream.groups import Group
from pyspark_tstream.stream import Stream

path = out_dir("v2")
url = "file://" + os.path.join(path, "stream")
s = Stream.create(url, schema=SCHEMA, segments=2)
s.append(batch(0), key="key", timestamp="ts", writer_id="w1", batch_id=0)
s.append(batch(1), key="key", timestamp="ts", writer_id="w2", batch_id="b-1")
s.append(batch(2), key="key", timestamp="ts")
s.append(batch(4), key="key", timestamp="ts", writer_id="w1", batch_id=1)
s.append(batch(3), key="key", timestamp="ts", writer_id="w2", batch_id="b-2")  # earlier times: lanes
s.scale(split=0)
s.append(batch(5), key="key", timestamp="ts", writer_id="w1", batch_id=2)
counts = s.compact(full=True)
s.append(batch(6), key="key", timestamp="ts", writer_id="w2", batch_id="b-3")
first = s.read()
s.truncate({int(k): int(v) for k, v in s.cut_at(int(first.column("_timestamp")[4].value)).items()})
g = Group.create(s, "g2", "0")
got = g.read("c1", count=4)
acked = got.slice(0, 2)
g.ack(acked)
s.append(batch(7), key="key", timestamp="ts", writer_id="w1", batch_id=3)
table = s.read()
write_expected(path, {
    "commit": "6cd9da4", "format": 2, "group_format": 2,
    "rows": rows_json(table), "compact": counts,
    "group": {"name": "g2", "delivered": rows_json(got), "acked": rows_json(acked),
              "pending": len(g.pending())},
    "state": {"pos": s.state.pos, "epoch": s.state.epoch, "head_tso": s.state.head_tso},
})
print("rows", table.num_rows, "pos", s.state.pos, "epoch", s.state.epoch, counts)
