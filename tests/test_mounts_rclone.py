"""``file://`` on a real FUSE mount without hard links (rclone, as a Databricks Volume): several
writer processes, a writer killed mid-publish, readers beside them, ``tstream info``.

Slow set: each case starts Python processes on a mount whose every call is a FUSE round trip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import commits_in
from fuse_mount import RcloneMount, rclone_mount  # noqa: F401 - the session fixture
from helpers import CHILD_EXIT, run_cli
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.store import mounts

pytestmark = pytest.mark.slow

#: A writer process: appends its batches with (writer, batch) ids, each batch sent twice (a retry
#: after an unknown outcome), and prints the acks. argv: url, writer, first batch, batches,
#: claim grace, and "crash" to die in the middle of writing its first journal entry's temp file.
_WRITER = """
import json, os, sys
import pyarrow as pa
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.store import claims, localfs
url, writer, first, batches, grace = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
claims.CLAIM_GRACE = grace
if sys.argv[6:] == ["crash"]:
    def die_mid_write(path, data):
        if "/journal/" not in path or not os.path.exists(claims.claim_path(path, 0)):
            return real(path, data)  # not yet on the claim path
        tmp = localfs.temp_path(path)
        with open(tmp, "xb") as f:
            f.write(data[: len(data) // 2])
            f.flush()
        os._exit(9)  # killed with the claim taken and half the entry written
    real, localfs._write_temp = localfs._write_temp, die_mid_write
s = Stream.open(url)
acks = []
for b in range(first, first + batches):
    rows = 10
    t = pa.table({"writer": [writer] * rows, "batch": [b] * rows, "i": list(range(rows)),
                  "key": [f"k{i % 3}" for i in range(rows)]})
    for _ in range(2):
        ack = s.append(t, key="key", writer_id=writer, batch_id=b)
        acks.append([ack.writer_id, ack.batch_id, ack.pos, ack.duplicate])
print(json.dumps(acks))
""" + CHILD_EXIT


def _writer(url: str, writer: str, first: int, batches: int, grace: float, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _WRITER, url, writer, str(first), str(batches), str(grace), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _acks(proc: subprocess.Popen[str]) -> list[list[Any]]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    acks: list[list[Any]] = json.loads(out.strip().splitlines()[-1])
    return acks


class _Reader:
    """Reads the stream over and over beside the writers: any error (a half-written entry) is kept."""

    def __init__(self, url: str) -> None:
        self.url, self.errors, self.rows = url, [], [0]  # type: ignore[var-annotated]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        s = Stream.open(self.url)
        while not self.stop.is_set():
            try:
                s.refresh()
                self.rows.append(s.read().num_rows)
            except BaseException as e:  # noqa: BLE001 - asserted by the test
                self.errors.append(e)
                return

    def finish(self) -> list[int]:
        self.stop.set()
        self.thread.join(60)
        assert not self.errors, self.errors
        return self.rows


def _check_exactly_once(url: str, pairs: set[tuple[str, int]], acks: list[list[Any]]) -> None:
    winners = [a for a in acks if not a[3]]
    assert sorted((w, b) for w, b, _, _ in winners) == sorted(pairs)  # one commit per (writer, batch)
    won_at = {(w, b): pos for w, b, pos, _ in winners}
    assert all(won_at[(w, b)] == pos for w, b, pos, _ in acks)  # the retry learns where its batch went
    s = Stream.open(url)
    entries = [e for e in s.journal.log.read_entries(range(1, s.state.pos + 1)) if e.op != "compact"]
    assert sorted((w, b) for w, b, _, _ in commits_in(entries)) == sorted(pairs)
    t = s.read()
    assert t.num_rows == 10 * len(pairs)
    counts = t.group_by(["writer", "batch"]).aggregate([("i", "count_distinct"), ("i", "count")])
    assert counts.num_rows == len(pairs) and set(counts["i_count"].to_pylist()) == {10}
    assert set(counts["i_count_distinct"].to_pylist()) == {10}


def _hidden_left(url: str) -> list[str]:
    root = Path(url.removeprefix("file://"))
    return sorted(p.name for p in root.rglob(".*.claim"))


def test_link_fails_on_the_mount_and_the_probe_says_so(rclone_mount: RcloneMount) -> None:  # noqa: F811
    mounts.forget()
    try:
        url = rclone_mount.url()
        Stream.create(url, segments=2)
        caps = mounts.known(str(rclone_mount.mountpoint))
        assert caps is not None and caps.mount == str(rclone_mount.mountpoint) and caps.fstype == "fuse.rclone"
        assert not caps.hard_links and caps.exclusive_create and caps.rename
        # rclone's FUSE server has no rename without replace (the kernel answers EINVAL), so a
        # claim is taken over only when its holder is gone (store/claims.py)
        assert not caps.noreplace_rename
    finally:
        mounts.forget()
    with pytest.raises(OSError):
        os.link(rclone_mount.mountpoint / "x", rclone_mount.mountpoint / "y")


def test_four_writer_processes_commit_every_batch_exactly_once(rclone_mount: RcloneMount) -> None:  # noqa: F811
    url = rclone_mount.url()
    Stream.create(url, segments=4, compaction="off")
    reader = _Reader(url)
    writers = [_writer(url, f"w{k}", 0, 4, 60.0) for k in range(4)]
    acks = [a for p in writers for a in _acks(p)]
    rows = reader.finish()
    _check_exactly_once(url, {(f"w{k}", b) for k in range(4) for b in range(4)}, acks)
    assert rows == sorted(rows) and len(rows) > 1  # readers saw the stream grow, never a torn entry
    assert _hidden_left(url) == []


def test_a_writer_killed_mid_publish_never_blocks_the_others(rclone_mount: RcloneMount) -> None:  # noqa: F811
    url = rclone_mount.url()
    Stream.create(url, segments=4, compaction="off")
    grace = 2.0
    crashed = _writer(url, "w0", 0, 1, grace, "crash")
    crashed.communicate(timeout=120)
    assert crashed.returncode == 9
    assert len(_hidden_left(url)) == 1  # it died holding the claim of the next position
    reader = _Reader(url)
    began = time.monotonic()
    others = [_writer(url, f"w{k}", 0, 3, grace) for k in range(1, 4)]
    acks = [a for p in others for a in _acks(p)]
    assert time.monotonic() - began < 300  # a hang guard: the claim is taken over after the grace
    retried = _acks(_writer(url, "w0", 0, 3, grace))  # the killed writer replays from its batch 0
    reader.finish()
    _check_exactly_once(url, {(f"w{k}", b) for k in range(4) for b in range(3)}, acks + retried)
    assert _hidden_left(url) == []


def test_tstream_info_on_the_mount(rclone_mount: RcloneMount, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    url = rclone_mount.url()
    s = Stream.create(url, segments=2)
    s.append(pa.table({"key": ["a", "b"], "v": [1, 2]}), key="key", writer_id="w", batch_id=1)
    code, out, err = run_cli(capsys, "info", url, "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["position"] == 1 and info["rows"] == 2


@pytest.mark.spark
def test_spark_write_then_available_now_read_round_trips_on_the_mount(
        rclone_mount: RcloneMount, spark: Any, tmp_path: Path) -> None:  # noqa: F811
    """A batch ``df.write`` (its tasks and commit in Spark's Python workers, each probing the mount
    itself) and a streaming availableNow copy out of it, both on the mount."""
    src, dst = rclone_mount.url("spark-src"), rclone_mount.url("spark-dst")
    events = spark.range(0, 300).selectExpr("id", "concat('dev-', cast(id % 7 as string)) as key",
                                            "timestamp_millis(1700000000000 + id * 10) as t")
    for part in (events.where("id < 150"), events.where("id >= 150")):
        part.write.format("tstream").mode("append").option("keyColumn", "key").option("timestampColumn", "t") \
            .option("segments", "2").save(src)
    q = (spark.readStream.format("tstream").load(src).drop("_timestamp", "_tso", "_segment", "_seq")
         .writeStream.format("tstream").option("checkpointLocation", str(tmp_path / "ckpt"))
         .option("keyColumn", "key").option("timestampColumn", "t")
         .trigger(availableNow=True).start(dst))
    q.awaitTermination()
    assert q.exception() is None
    assert sorted(Stream.open(src).read()["id"].to_pylist()) == list(range(300))
    assert sorted(Stream.open(dst).read()["id"].to_pylist()) == list(range(300))
    assert sorted(r.id for r in spark.read.format("tstream").load(dst).select("id").collect()) == list(range(300))
    assert _hidden_left(src) == [] and _hidden_left(dst) == []
