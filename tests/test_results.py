"""The public ``Stream`` methods return typed records whose ``to_dict()`` is the JSON the CLI prints."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark_tstream.api.results import CompactResult, Cut, ScaleResult, StreamInfo
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import app as cli
from pyspark_tstream.journal.op_info import GcInfo
from pyspark_tstream.journal.operations import Operation


def _public_methods() -> list[tuple[str, str]]:
    out = []
    for name, fn in inspect.getmembers(Stream, predicate=inspect.isfunction):
        if not name.startswith("_"):
            out.append((name, str(inspect.signature(fn).return_annotation)))
    return out


def test_no_public_stream_method_returns_a_bare_dict() -> None:
    bare = [(name, ret) for name, ret in _public_methods() if re.search(r"\bdict\b", ret)]
    assert not bare, f"public Stream methods annotated to return a bare dict (return a typed record): {bare}"


def _stream(tmp_path: Path) -> Stream:
    s = Stream.create(f"file://{tmp_path}/s", segments=2)
    for i in range(3):
        s.append(pa.table({"k": [f"k{j}" for j in range(20)], "n": list(range(i * 20, i * 20 + 20))}), key="k",
                 writer_id="w", batch_id=i)
    return s


def test_results_are_records_and_the_cli_prints_their_dicts(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    s = _stream(tmp_path)
    info = s.info()
    assert isinstance(info, StreamInfo) and info.rows == 60 and info.writers["w"].commits == 3
    assert cli.main(["info", s.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(s.info().to_dict()))
    with pytest.raises(TypeError):
        info["rows"]  # type: ignore[index]  # records, not dicts: attribute access
    cut = s.cut_at("2999-01-01T00:00:00Z")
    assert isinstance(cut, Cut) and cut == {g.id: g.next_seq for g in s.state.segments}
    assert cli.main(["cut", s.url, "2999-01-01T00:00:00Z"]) == 0
    assert json.loads(capsys.readouterr().out) == cut.to_dict()
    assert s.check_cut(dict(cut)) == cut
    scaled = s.scale(split=s.state.segments[0].id)
    assert isinstance(scaled, ScaleResult) and scaled.to_dict() == {
        "epoch": 1, "sealed": list(scaled.sealed), "created": list(scaled.created)}
    sealed = s.sealed_info(scaled.sealed[0])
    assert sealed is not None and sealed.to_dict()["successors"] == list(scaled.created)
    counts = s.compact()
    assert isinstance(counts, CompactResult) and counts.chunks == 6 and set(counts.to_dict()) == {
        "macros", "chunks", "rows", "bytes", "adopted", "lost", "unreadable"}
    s.truncate(cut)
    done = s.vacuum(grace_ms=0)
    assert isinstance(done, GcInfo) and done.chunks > 0 and done.to_dict()["chunks"] == done.chunks


def test_operation_names_are_an_enum_whose_text_is_stored(tmp_path: Path) -> None:
    s = _stream(tmp_path)
    s.scale(split=s.state.segments[0].id)
    ops = [s.journal.read_entry(p).op for p in range(s.state.pos + 1)]
    assert ops == [Operation.CREATE, Operation.APPEND, Operation.APPEND, Operation.APPEND, Operation.SCALE]
    assert json.dumps(Operation.SCALE) == '"scale"' and f"{Operation.SCALE}" == "scale"
