"""Historical: wrote tests/golden/v4 with commit e637a53 (group commit, format 4).

Run once as ``PYTHONPATH=<site of that checkout> python tests/golden/gen_v4.py``; never again.
Format 4: an entry folding other writers' published requests (``folds``) and the state's
``folded`` ids; also a ``mergeSchema`` widening (``state.schema_changes``, an optional field
added at 7928be7 without a version of its own).
"""

from __future__ import annotations

import os

import pyarrow as pa
from gen_common import SCHEMA, batch, out_dir, rows_json, write_expected
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.timestamps import now_ms
from pyspark_tstream.write.commit import CommitRequest
from pyspark_tstream.write.group import Published, new_id
from pyspark_tstream.write.writing import write_batches


def publish(s: Stream, table: pa.Table, writer: str | None, batch_id: object) -> None:
    """What a writer that lost a race leaves behind: its chunks, then its request object."""
    chunks = write_batches(s.appending.write_spec(table.schema, key="key", timestamp="ts"), [table])
    req = CommitRequest(chunks=chunks, writer_id=writer, batch_id=batch_id, schema=table.schema, now=now_ms())
    item = Published.of(new_id(), s.state.pos, req)
    s.store.write(item.path, item.encode())


path = out_dir("v4")
url = "file://" + os.path.join(path, "stream")
s = Stream.create(url, schema=SCHEMA, segments=2)
s.append(batch(0), key="key", timestamp="ts", writer_id="a", batch_id=0)
other = Stream.open(url)
publish(other, batch(1), "b", 0)
publish(other, batch(2), None, None)
s.appending.group.contended = 1  # a writer that lost lately lists the requests before its attempt
s.append(batch(3), key="key", timestamp="ts", writer_id="a", batch_id=1)
folds = s.journal.read_entry(s.state.pos).folds
wide = batch(4).append_column("note", pa.array([f"n{i}" for i in range(6)]))
s.append(wide, key="key", timestamp="ts", writer_id="a", batch_id=2, merge_schema=True)
s.append(batch(5), key="key", timestamp="ts", writer_id="b", batch_id=1)
table = s.read()
write_expected(path, {
    "commit": "e637a53", "format": 4, "group_format": None,
    "rows": rows_json(table, extra=("note",)), "folds": len(folds),
    "state": {"pos": s.state.pos, "epoch": s.state.epoch, "head_tso": s.state.head_tso},
})
print("rows", table.num_rows, "pos", s.state.pos, "folds", folds)
