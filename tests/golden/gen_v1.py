"""Historical: wrote tests/golden/v1 with commit f492a2f (the last journal format 1 code).

Run once as ``PYTHONPATH=<site of that checkout> python tests/golden/gen_v1.py``; never again.
Format 1: one floor chain per segment, writer ids with batch ids, a scale to epoch 1 (sealed map
shard, epoch record), a truncation and its garbage collection, a version-1 consumer group
(cursors ``[tso, segment]``) that read and acked.
"""

from __future__ import annotations

import os

from gen_common import SCHEMA, batch, out_dir, rows_json, write_expected
from pyspark_tstream.groups import Group
from pyspark_tstream.stream import Stream

path = out_dir("v1")
url = "file://" + os.path.join(path, "stream")
s = Stream.create(url, schema=SCHEMA, segments=2)
s.append(batch(0), key="key", timestamp="ts", writer_id="w1", batch_id=0)
s.append(batch(1), key="key", timestamp="ts", writer_id="w2", batch_id="b-1")
s.append(batch(2), key="key", timestamp="ts")
s.append(batch(1), key="key", timestamp="ts", writer_id="w2", batch_id="b-1")  # a duplicate: no commit
s.scale(split=0)
s.append(batch(3), key="key", timestamp="ts", writer_id="w1", batch_id=1)
s.append(batch(4), key="key", timestamp="ts", writer_id="w1", batch_id=2)
first = s.read()
cut_tso = sorted(first.column("_tso").to_pylist())[5]
s.truncate({int(k): int(v) for k, v in s.cut_at(int(first.column("_timestamp")[6].value)).items()})
s.vacuum(grace_ms=0)
g = Group.create(s, "g1", "0")
got = g.read("c1", count=4)
acked = got.slice(0, 2)
g.ack(acked)
s.append(batch(5), key="key", timestamp="ts", writer_id="w2", batch_id="b-2")
table = s.read()
write_expected(path, {
    "commit": "f492a2f", "format": 1, "group_format": 1,
    "rows": rows_json(table),
    "group": {"name": "g1", "delivered": rows_json(got), "acked": rows_json(acked),
              "pending": len(g.pending())},
    "state": {"pos": s.state.pos, "epoch": s.state.epoch, "head_tso": s.state.head_tso},
})
print("rows", table.num_rows, "pos", s.state.pos, "epoch", s.state.epoch)
