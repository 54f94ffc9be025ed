"""Historical: wrote tests/golden/epochs with commit 7e1c0d9 (epoch history chunks, format 2).

Run once as ``PYTHONPATH=<site of that checkout> python tests/golden/gen_epochs.py``; never
again. 33 scales of a one-segment stream, each sealing the segment and creating its successor
over the whole key range, between a first and a last batch: epoch records 1..33 and the history
chunk of epochs 0..31 (``epochs/chunks/0``, which carries its own ``"v"``).
"""

from __future__ import annotations

import os

from gen_common import SCHEMA, batch, out_dir, rows_json, write_expected
from pyspark_tstream.stream import Stream

path = out_dir("epochs")
url = "file://" + os.path.join(path, "stream")
s = Stream.create(url, schema=SCHEMA, segments=1)
s.append(batch(0), key="key", timestamp="ts", writer_id="w1", batch_id=0)
for e in range(33):
    s.scale(seal=[s.state.segments[0].id], ranges=[(0.0, 1.0)])
s.append(batch(1), key="key", timestamp="ts", writer_id="w1", batch_id=1)
table = s.read()
write_expected(path, {
    "commit": "7e1c0d9", "format": 2, "group_format": None,
    "rows": rows_json(table),
    "state": {"pos": s.state.pos, "epoch": s.state.epoch, "head_tso": s.state.head_tso},
})
print("rows", table.num_rows, "pos", s.state.pos, "epoch", s.state.epoch)
