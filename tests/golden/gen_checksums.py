"""Historical: wrote tests/golden/v6-checksums with the commit that introduced metadata checksums
(the writer feature ``checksums``, python/journal/seal.py).

Run once as ``PYTHONPATH=<site of that checkout> python tests/golden/gen_checksums.py``; never
again. Format 6 with every metadata object sealed: journal entries, the head, checkpoints (one
every 3 entries: ``checkpoint.MAX_ENTRIES`` lowered for the fixture), a scale (epoch record,
sealed-map shard), consumer group ``g3`` that read 4 and acked 2 (versions and head), a
compaction (macro-map buckets, manifests) and appends after it.
"""

from __future__ import annotations

import os

from gen_common import SCHEMA, batch, out_dir, rows_json, write_expected
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal import checkpoint

checkpoint.MAX_ENTRIES = 3

path = out_dir("v6-checksums")
url = "file://" + os.path.join(path, "stream")
s = Stream.create(url, schema=SCHEMA, segments=2)
for b in range(6):
    s.append(batch(b), key="key", timestamp="ts", writer_id="a" if b % 2 else "b", batch_id=b)
s.scale(split=s.state.segments[0].id)
for b in range(6, 9):
    s.append(batch(b), key="key", timestamp="ts", writer_id="a", batch_id=b)
g = Group.create(s, "g3", start=0)
got = g.read("c1", count=4)
acked = got.slice(0, 2)
g.ack(acked)
s.compact(full=True)
for b in range(9, 11):
    s.append(batch(b), key="key", timestamp="ts", writer_id="b", batch_id=b)
table = s.read()
write_expected(path, {
    "commit": "metadata checksums (writer feature checksums)", "format": 6, "group_format": 2,
    "features": s.state.features, "rows": rows_json(table), "writers": sorted(s.state.writers),
    "group": {"name": "g3", "delivered": rows_json(got), "acked": rows_json(acked), "pending": len(g.pending())},
    "checkpoint": s.state.checkpoint.to_json() if s.state.checkpoint else None,
    "state": {"pos": s.state.pos, "epoch": s.state.epoch, "head_tso": s.state.head_tso},
})
print("rows", table.num_rows, "pos", s.state.pos, "checkpoint", s.state.checkpoint)
