"""Group-commit requests as the tests build them: a writer's rows, a published request left
behind by a writer that lost its race, and what a stream holds (``tests/test_group_commit*.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.timestamps import now_ms
from pyspark_tstream.write.commit import CommitIntent, CommitRequest
from pyspark_tstream.write.group import Published, new_id
from pyspark_tstream.write.writing import write_batches


def rows(writer: str, batch: int, rows: int = 10) -> pa.Table:
    return pa.table({"writer": [writer] * rows, "batch": [batch] * rows, "i": list(range(rows))})


def in_threads(work: Callable[[int], None], n: int) -> None:
    """Run ``work(0) .. work(n - 1)`` in threads of their own, all at once, and wait for them."""
    threads = [threading.Thread(target=work, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def counts(s: Stream) -> dict[tuple[str, int], int]:
    t = s.read()
    out: dict[tuple[str, int], int] = {}
    for k in zip(t["writer"].to_pylist(), t["batch"].to_pylist()):
        out[k] = out.get(k, 0) + 1
    seqs = sorted(zip(t["_segment"].to_pylist(), t["_seq"].to_pylist()))
    for seg in {g for g, _ in seqs}:
        mine = [q for g, q in seqs if g == seg]
        assert mine == list(range(len(mine))), "_seq not dense"
    return out


def publish(s: Stream, writer: str, batch: int, rid: str | None = None) -> Published:
    """What a writer that lost a race leaves behind: its chunks, then its request object."""
    table = rows(writer, batch)
    chunks = write_batches(s.appending.write_spec(table.schema), [table], ordered=True)
    req = CommitRequest(chunks=chunks, intent=CommitIntent(writer_id=writer, batch_id=batch, schema=table.schema),
                        now=now_ms())
    item = Published.of(rid or new_id(), s.state.pos, req)
    s.store.write(item.path, item.encode())
    return item


def exists(s: Stream, rel: str) -> bool:
    try:
        s.store.read(rel)
        return True
    except (FileNotFoundError, KeyError):
        return False
