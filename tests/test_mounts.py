"""``file://`` on mounts without hard links: the probe, the claim-and-rename commit path, the refusal.

These run on the local disk with ``link()`` made to fail as a Databricks Volume's does (ENOSYS),
so they are fast and need no FUSE; ``tests/test_mounts_rclone.py`` runs the same paths on a real
rclone mount (slow set).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import CallLog
from helpers import run_cli
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import StorageError, UnsupportedOperationError
from pyspark_tstream.store import claims, holders, layout, mounts
from pyspark_tstream.store.localfs import local_create
from pyspark_tstream.store.renames import rename_noreplace
from pyspark_tstream.store.storage import Store

_real_link = os.link


def _no_link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSYS, "Function not implemented", str(src))


@pytest.fixture
def no_links(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``link()`` fails as on a Databricks Volume; probes are forgotten before and after."""
    mounts.forget()
    monkeypatch.setattr(os, "link", _no_link)
    yield
    mounts.forget()  # the probe remembered the test disk's mount: other tests must link again


def _batch(writer: str, batch: int, rows: int = 5) -> pa.Table:
    return pa.table({"writer": [writer] * rows, "batch": [batch] * rows, "i": list(range(rows)),
                     "key": [f"k{i % 3}" for i in range(rows)]})


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*"))


def test_an_ordinary_disk_never_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_probe(directory: str) -> mounts.MountCapabilities:
        raise AssertionError(f"probed {directory}: an ordinary disk's creates must only link")

    mounts.forget()
    monkeypatch.setattr(mounts, "_probe", no_probe)
    s = Stream.create(f"file://{tmp_path}/s", segments=2)
    s.append(_batch("w", 1), key="key", writer_id="w", batch_id=1)
    assert Stream.open(f"file://{tmp_path}/s").read().num_rows == 5
    assert mounts.known(str(tmp_path)) is None


def test_a_stream_commits_and_reads_on_a_mount_without_hard_links(tmp_path: Path, no_links: None,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2)
    for b in range(3):
        s.append(_batch("w", b), key="key", writer_id="w", batch_id=b)
    assert s.append(_batch("w", 2), key="key", writer_id="w", batch_id=2).duplicate
    caps = mounts.known(str(tmp_path))
    assert caps is not None and not caps.hard_links and caps.exclusive_create and caps.rename
    assert "Function not implemented" in caps.link_error
    t = Stream.open(url).read()
    assert sorted(zip(t["writer"].to_pylist(), t["batch"].to_pylist())).count(("w", 2)) == 5
    assert t.num_rows == 15
    # every claim and temp file is gone once its object is published
    assert _hidden(tmp_path / "s") == []
    code, out, err = run_cli(capsys, "info", url, "--json")
    assert code == 0, err
    assert json.loads(out)["position"] == 3 and json.loads(out)["rows"] == 15


def test_calls_on_a_mount_without_hard_links_are_the_ordinary_disks(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim path lives inside the one create-if-absent call: store-call budgets do not move."""
    def calls(url: str) -> list[tuple[str, str]]:
        s = Stream.create(url, segments=2)
        log = CallLog()
        s.store.observer = log
        s.append(_batch("w", 1), key="key", writer_id="w", batch_id=1)
        return [(op, rel.rsplit("/", 1)[0]) for op, rel in log.calls]

    mounts.forget()
    ordinary = calls(f"file://{tmp_path}/disk/s")
    monkeypatch.setattr(os, "link", _no_link)
    try:
        on_mount = calls(f"file://{tmp_path}/mount/s")
        assert mounts.known(str(tmp_path)) is not None  # it did take the claim path
    finally:
        mounts.forget()
    assert on_mount == ordinary and ("put_if_absent", layout.entry(1).rsplit("/", 1)[0]) in ordinary


def test_one_of_many_racing_creates_wins(tmp_path: Path, no_links: None) -> None:
    store = Store(f"file://{tmp_path}/s")
    barrier = threading.Barrier(8)
    won: list[int] = []

    def create(i: int) -> None:
        barrier.wait()
        if store.put_if_absent("obj.json", f"{i}".encode()):
            won.append(i)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert store.read("obj.json") == f"{won[0]}".encode()
    assert store.list("") == ["obj.json"] and _hidden(tmp_path / "s") == []


def test_an_object_being_published_is_invisible_until_whole(tmp_path: Path, no_links: None) -> None:
    """While the claimer writes, readers and listings see nothing; a racing creator waits and
    reports the name taken once it exists."""
    store = Store(f"file://{tmp_path}/s")
    store.write("keep.json", b"{}")
    path = store.full("obj.json")
    writing, release = threading.Event(), threading.Event()
    real_write = claims_write_temp()

    def slow_write(p: str, data: bytes) -> str:
        tmp = real_write(p, data)
        writing.set()
        assert release.wait(10)
        return tmp

    holder = threading.Thread(target=claims.claim_create, args=(path, b'{"whole":true}', slow_write),
                              kwargs={"exact": False})
    holder.start()
    assert writing.wait(10)
    with pytest.raises(FileNotFoundError):
        store.read("obj.json")
    assert store.list("") == ["keep.json"]  # the claim and the temp are hidden
    racer: list[bool] = []
    t = threading.Thread(target=lambda: racer.append(store.put_if_absent("obj.json", b'{"other":1}')))
    t.start()
    t.join(0.3)
    assert t.is_alive()  # it waits for the holder instead of reporting a name that is not there
    release.set()
    holder.join(10)
    t.join(10)
    assert racer == [False] and store.read("obj.json") == b'{"whole":true}'


def claims_write_temp() -> Any:
    from pyspark_tstream.store.localfs import _write_temp

    return _write_temp


def test_a_claim_left_by_a_dead_committer_is_taken_over(tmp_path: Path, no_links: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claims, "CLAIM_GRACE", 0.3)
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, segments=2)
    s.append(_batch("w", 1), key="key", writer_id="w", batch_id=1)
    nxt = s.store.full(layout.entry(s.state.pos + 1))
    # a committer that claimed the next position and died before its rename
    os.close(os.open(claims.claim_path(nxt, 0), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    ack = Stream.open(url).append(_batch("w", 2), key="key", writer_id="w", batch_id=2)
    assert ack.pos == s.state.pos + 1 and not ack.duplicate
    assert Stream.open(url).read().num_rows == 10
    assert _hidden(tmp_path / "s") == []


@pytest.mark.parametrize("exact", [True, False], ids=["noreplace-rename", "plain-rename"])
def test_a_holder_stalled_past_the_grace_never_overwrites(tmp_path: Path, no_links: None,
                                                          monkeypatch: pytest.MonkeyPatch, exact: bool) -> None:
    """A holder paused past the grace between its last check and its rename (a GC pause, a
    suspended VM) never replaces what another creator published: where the mount renames
    without replacing, the claim is taken over and the stalled holder's rename fails with
    "exists"; where it cannot (rclone), the holder is alive, so the claim is not taken over and
    the waiting creator fails naming the claim (the stalled holder then publishes)."""
    monkeypatch.setattr(claims, "CLAIM_GRACE", 0.2)
    path = str(tmp_path / "obj.json")
    real_write = claims_write_temp()
    stalled, go = threading.Event(), threading.Event()
    outcome: list[str] = []

    def stalled_write(p: str, data: bytes) -> str:
        tmp = real_write(p, data)
        stalled.set()
        assert go.wait(10)
        return tmp

    def slow_holder() -> None:
        try:
            claims.claim_create(path, b"slow", stalled_write, exact=exact)
            outcome.append("created")
        except FileExistsError:
            outcome.append("exists")

    holder = threading.Thread(target=slow_holder)
    holder.start()
    assert stalled.wait(10)
    try:
        if exact:
            claims.claim_create(path, b"taker", real_write, exact=True)  # waits out the grace, takes over
        else:
            with pytest.raises(StorageError) as e:
                claims.claim_create(path, b"taker", real_write, exact=False)
            text = str(e.value)
            assert e.value.path == claims.claim_path(path, 0) and claims.claim_path(path, 0) in text
            assert f"process {os.getpid()} of this machine" in text and claims.UNSAFE_TAKEOVER_ENV in text
            assert not e.value.retriable
    finally:
        go.set()
        holder.join(10)
    assert outcome == (["exists"] if exact else ["created"])
    assert Path(path).read_bytes() == (b"taker" if exact else b"slow")
    assert sorted(os.listdir(tmp_path)) == ["obj.json"]


def _claimed_by(claim: str, holder: str) -> None:
    fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    os.write(fd, holder.encode())
    os.close(fd)


def test_a_claim_of_a_process_gone_is_taken_over_without_renaming_exactly(tmp_path: Path, no_links: None,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the mount cannot rename without replacing, a claim is taken over when the process it
    records is gone (it can rename nothing more); one of another machine is not, unless the
    operator says no committer can pause that long (``TSTREAM_UNSAFE_CLAIM_TAKEOVER=1``)."""
    monkeypatch.setattr(claims, "CLAIM_GRACE", 0.1)
    code = "from pyspark_tstream.store import holders; print(holders.identity())"
    dead = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert holders.local(dead) and holders.gone(dead) and not holders.gone(holders.identity())
    write = claims_write_temp()
    gone_path, far_path = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    _claimed_by(claims.claim_path(gone_path, 0), dead)
    claims.claim_create(gone_path, b"taker", write, exact=False)
    assert Path(gone_path).read_bytes() == b"taker"
    far = "0a1b2c3d-other-boot/4026531836 4242 123456"
    _claimed_by(claims.claim_path(far_path, 0), far)
    with pytest.raises(StorageError, match="another machine or container"):
        claims.claim_create(far_path, b"taker", write, exact=False)
    monkeypatch.setenv(claims.UNSAFE_TAKEOVER_ENV, "1")
    claims.claim_create(far_path, b"taker", write, exact=False)
    assert Path(far_path).read_bytes() == b"taker"
    assert sorted(os.listdir(tmp_path)) == ["a.json", "b.json"]


def test_a_rename_without_replace_fails_on_an_existing_name(tmp_path: Path) -> None:
    a, b, c = (str(tmp_path / n) for n in "abc")
    Path(a).write_bytes(b"A")
    Path(b).write_bytes(b"B")
    with pytest.raises(FileExistsError):
        rename_noreplace(a, b)
    assert Path(a).read_bytes() == b"A" and Path(b).read_bytes() == b"B"
    rename_noreplace(a, c)
    assert not Path(a).exists() and Path(c).read_bytes() == b"A"
    mounts.forget()
    assert mounts._probe(str(tmp_path)).noreplace_rename  # the local disk does


def _lacking_everything(directory: str) -> mounts.MountCapabilities:
    return mounts.MountCapabilities(mount="/Volumes/main/default/landing", fstype="fuse", hard_links=False,
                                    exclusive_create=False, rename=False,
                                    link_error="[Errno 38] Function not implemented")


def test_a_mount_that_cannot_commit_is_refused_naming_it(tmp_path: Path, no_links: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mounts, "_probe", _lacking_everything)
    url = f"file://{tmp_path}/s"
    with pytest.raises(UnsupportedOperationError) as e:
        Stream.create(url, segments=2)
    text = str(e.value)
    assert url in text and "/Volumes/main/default/landing" in text
    assert "hard links (link(): [Errno 38] Function not implemented)" in text
    assert "exclusive create (O_EXCL)" in text and "rename" in text
    assert "abfss://" in text and "s3://" in text and "gs://" in text and "storage.*" in text
    with pytest.raises(FileNotFoundError):
        Stream.open(url)  # no stream was made


def test_a_stream_opened_on_a_mount_that_cannot_commit_refuses_its_first_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"file://{tmp_path}/s"
    Stream.create(url, segments=2).append(_batch("w", 1), key="key", writer_id="w", batch_id=1)
    mounts.forget()
    monkeypatch.setattr(os, "link", _no_link)
    monkeypatch.setattr(mounts, "_probe", _lacking_everything)
    try:
        s = Stream.open(url)
        assert s.read().num_rows == 5  # reading needs none of it
        with pytest.raises(UnsupportedOperationError, match="lacks hard links"):
            s.append(_batch("w", 2), key="key", writer_id="w", batch_id=2)
        assert Stream.open(url).read().num_rows == 5
    finally:
        mounts.forget()


def test_a_link_failure_on_a_mount_with_links_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A transient EIO from link() on a disk whose probe links fine is the disk's error, not a mount's."""
    mounts.forget()
    calls = []

    def flaky(src: Any, dst: Any, *a: Any, **k: Any) -> None:
        calls.append(dst)
        if len(calls) == 1:
            raise OSError(errno.EIO, "Input/output error", str(src))
        _real_link(src, dst)

    monkeypatch.setattr(os, "link", flaky)
    try:
        with pytest.raises(OSError) as e:
            local_create(str(tmp_path / "obj.json"), b"x")
        assert e.value.errno == errno.EIO
        caps = mounts.known(str(tmp_path))
        assert caps is not None and caps.hard_links
        local_create(str(tmp_path / "obj.json"), b"y")
        assert (tmp_path / "obj.json").read_bytes() == b"y"
    finally:
        mounts.forget()


@pytest.mark.parametrize("read", ["local_read", "local_map"])
def test_a_read_that_meets_a_replace_on_a_mount_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           read: str) -> None:
    """rclone fails a read that meets another process's replace of the file with EIO; the next
    open reads it whole. An EIO that persists (a failing disk) is raised after a few tries."""
    from pyspark_tstream.store import localfs

    path = tmp_path / "head.json"
    path.write_bytes(b'{"pos":1}')
    opened: list[str] = []
    failures = [2]

    def flaky_open(p: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(p))
        if failures[0] > 0:
            failures[0] -= 1
            raise OSError(errno.EIO, "Input/output error", str(p))
        return open(p, *args, **kwargs)

    monkeypatch.setattr(localfs, "open", flaky_open, raising=False)
    monkeypatch.setattr(localfs, "EIO_RETRIES", (0.0,) * 3)
    assert bytes(getattr(localfs, read)(str(path))) == b'{"pos":1}'
    assert len(opened) == 3
    failures[0] = 10
    with pytest.raises(OSError) as e:
        getattr(localfs, read)(str(path))
    assert e.value.errno == errno.EIO and len(opened) == 3 + 4
    failures[0] = 1
    opened.clear()
    with pytest.raises(FileNotFoundError):  # only EIO is retried
        getattr(localfs, read)(str(tmp_path / "missing.json"))
    assert len(opened) == 2


def test_creates_after_the_probe_never_try_a_link_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a mount is known to lack links, its creates go straight to the claim path, also
    through a symlink to it (a failed link would cost a temp file written for nothing)."""
    links: list[str] = []

    def counted(src: Any, dst: Any, *a: Any, **k: Any) -> None:
        links.append(str(dst))
        _no_link(src, dst)

    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    mounts.forget()
    monkeypatch.setattr(os, "link", counted)
    try:
        store = Store(f"file://{tmp_path}/alias/s")
        assert store.put_if_absent("journal/0.json", b"0")
        assert len(links) == 2  # the create's own link, then the probe's
        assert store.put_if_absent("journal/1.json", b"1") and not store.put_if_absent("journal/1.json", b"x")
        assert len(links) == 2
        assert store.read("journal/1.json") == b"1"
    finally:
        mounts.forget()


def test_a_create_that_fails_to_write_frees_the_name_at_once(tmp_path: Path, no_links: None,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A store error while writing (a full disk) gives the claim back: the next create does not
    wait out the grace, which is only for committers that died."""
    monkeypatch.setattr(claims, "CLAIM_GRACE", 3600.0)
    path = str(tmp_path / "obj.json")
    local_create(str(tmp_path / "first.json"), b"{}")  # the probe has run: creates take the claim path

    def full_disk(p: str, data: bytes) -> str:
        raise OSError(errno.ENOSPC, "No space left on device", p)

    with pytest.raises(OSError, match="No space left"):
        claims.claim_create(path, b"lost", full_disk, exact=False)
    assert sorted(os.listdir(tmp_path)) == ["first.json"]
    local_create(path, b"next")
    assert Path(path).read_bytes() == b"next"
