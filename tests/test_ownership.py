"""A stream owns only what it wrote: creating one refuses a folder that holds other files (or
lies inside another stream), and orphan cleanup deletes only names the stream's writers make."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import InvalidPathError
from pyspark_tstream.store import layout
from pyspark_tstream.store.storage import Store

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string())])


def _user_files(root: Path) -> None:
    (root / "data" / "0").mkdir(parents=True)
    (root / "data" / "1").mkdir(parents=True)
    pq.write_table(pa.table({"x": [1, 2]}), root / "data" / "0" / "part-0000.parquet")
    (root / "data" / "1" / "notes.txt").write_text("mine")



def _vacuum_everything(s: Stream) -> int:
    return s.vacuum(orphans=True, orphan_grace_ms=0, unsafe_orphan_grace=True).orphans


@pytest.mark.parametrize("how", ["create", "open_or_create", "first write"])
def test_creating_a_stream_in_a_folder_of_other_files_is_refused(tmp_path: Path, how: str) -> None:
    _user_files(tmp_path / "s")
    url = f"file://{tmp_path}/s"
    with pytest.raises(InvalidPathError, match=r"already holds files that are not a tstream stream's \(data\): "
                                               r"a stream created there could later take them for its own; "
                                               r"create the stream in an empty or new folder"):
        if how == "create":
            Stream.create(url, schema=SCHEMA)
        elif how == "open_or_create":
            Stream.open_or_create(url, schema=SCHEMA)
        else:
            Stream.for_write(Store(url), SCHEMA, config={}, key="k")
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["data"]  # nothing written


def test_the_refusal_names_the_files(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    for i in range(7):
        (tmp_path / "s" / f"f{i}.csv").write_text("")
    with pytest.raises(InvalidPathError, match=r"\(f0.csv, f1.csv, f2.csv, f3.csv, f4.csv and 2 more\)"):
        Stream.create(f"file://{tmp_path}/s")


def test_creating_in_an_empty_folder_or_over_a_stream_is_as_before(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    s = Stream.create(f"file://{tmp_path}/s", schema=SCHEMA)
    s.append(pa.table({"id": [1], "k": ["a"]}, schema=SCHEMA))
    with pytest.raises(FileExistsError):
        Stream.create(f"file://{tmp_path}/s", schema=SCHEMA)
    assert Stream.open_or_create(f"file://{tmp_path}/s").read().num_rows == 1


def test_vacuum_orphans_deletes_only_the_streams_own_names(tmp_path: Path) -> None:
    """Files a user put in the data folders after creation stay; a failed write's chunk goes."""
    url = f"file://{tmp_path}/s"
    s = Stream.create(url, schema=SCHEMA, segments=2)
    s.append(pa.table({"id": [1, 2], "k": ["a", "b"]}, schema=SCHEMA), key="k")
    theirs = _user_files_after(tmp_path / "s")
    from pyspark_tstream.write.writing import write_batches

    lost = write_batches(s.write_spec(SCHEMA, key="k"), [pa.table({"id": [3], "k": ["c"]}, schema=SCHEMA)])
    assert _vacuum_everything(s) == len(lost)
    assert all(p.exists() for p in theirs)
    assert not any((tmp_path / "s" / c.path).exists() for c in lost)
    assert Stream.open(url).read().num_rows == 2


def _user_files_after(root: Path) -> list[Path]:
    (root / "data" / "0").mkdir(parents=True, exist_ok=True)
    (root / "data" / "1").mkdir(parents=True, exist_ok=True)
    (root / "data" / "x").mkdir(parents=True, exist_ok=True)
    files = [root / "data" / "0" / "part-0000.parquet", root / "data" / "1" / "notes.txt",
             root / "data" / "x" / "w-p0a0-0123456789abcdef0123456789abcdef.parquet"]
    for f in files:
        f.write_bytes(b"user data")
    return files


@pytest.mark.parametrize("inner", ["_tstream/s2", "_tstream/journal/x", "data/0/inner"])
def test_a_stream_inside_another_streams_folders_is_refused(tmp_path: Path, inner: str) -> None:
    outer = Stream.create(f"file://{tmp_path}/s", schema=SCHEMA, segments=1)
    outer.append(pa.table({"id": [1], "k": ["a"]}, schema=SCHEMA))
    with pytest.raises(InvalidPathError, match="create the stream outside any stream's folder"):
        Stream.create(f"file://{tmp_path}/s/{inner}", schema=SCHEMA)


def test_a_data_folder_of_no_stream_is_fine(tmp_path: Path) -> None:
    s = Stream.create(f"file://{tmp_path}/lake/data/0/s", schema=SCHEMA)
    assert s.state.pos == 0


def test_outer_vacuum_leaves_a_stream_made_inside_its_data_folder(tmp_path: Path) -> None:
    """A stream inside another's data folder (made before creation refused it) stays whole, and
    the outer vacuum does not fail on its folder."""
    outer = Stream.create(f"file://{tmp_path}/s", schema=SCHEMA, segments=1)
    outer.append(pa.table({"id": [1], "k": ["a"]}, schema=SCHEMA))
    inner_url = f"file://{tmp_path}/s/{layout.data_folder(0)}/inner"
    inner = Stream.create(f"file://{tmp_path}/elsewhere", schema=SCHEMA)
    inner.append(pa.table({"id": [5], "k": ["z"]}, schema=SCHEMA))
    (tmp_path / "elsewhere").rename(tmp_path / "s" / "data" / "0" / "inner")
    assert _vacuum_everything(Stream.open(f"file://{tmp_path}/s")) == 0
    assert Stream.open(inner_url).read()["id"].to_pylist() == [5]


def test_cli_create_refuses_a_folder_of_other_files_in_one_line(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark_tstream.cli import app as cli

    _user_files(tmp_path / "s")
    code = cli.main(["create", f"file://{tmp_path}/s"])
    err = capsys.readouterr().err
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert "already holds files that are not a tstream stream's (data)" in err
