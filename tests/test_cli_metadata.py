"""``tstream history`` and ``tstream info --segments/--files``: the metadata tables
(``Stream.metadata``) of a stream with two writers, a split, a merge, a compaction, a truncation
and a consumer group, as a text table or JSON lines."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import run_cli
from metadata_history import Built, build


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(f"file://{tmp_path_factory.mktemp('meta-cli')}/s")


def _json(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_history_table_lists_each_commit(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "history", built.stream.url)
    assert code == 0
    header, *lines = out.splitlines()
    assert header.split() == ["position", "committed_at", "operation", "writer_id", "batch_id", "records", "files",
                              "bytes"]
    assert [(line.split()[2], line.split()[3]) for line in lines] == [
        (op, writer or "-") for op, writer in [("create", None), *built.ops]]


def test_history_json_and_range(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "history", built.stream.url, "--from", "1", "--to", "2", "--format", "json")
    assert code == 0
    rows = _json(out)
    assert [(r["position"], r["operation"], r["writer_id"], r["batch_id"], r["records"]) for r in rows] == [
        (1, "append", "alpha", "0", 20), (2, "append", "beta", "1", 20)]
    assert rows[0]["committed_at"].endswith("Z")
    expected = built.stream.metadata("history", starting_position=1, ending_position=2).to_pylist()
    assert [r["bytes"] for r in rows] == [r["bytes"] for r in expected]


def test_info_segments_and_files(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "info", built.stream.url, "--segments", "--format", "json")
    assert code == 0
    assert _json(out) == built.stream.metadata("segments").to_pylist()
    code, out, _ = run_cli(capsys, "info", built.stream.url, "--segments")
    header, *lines = out.splitlines()
    assert header.split()[:3] == ["segment", "epoch_start", "epoch_end"]
    assert len(lines) == built.stream.metadata("segments").num_rows
    code, out, _ = run_cli(capsys, "info", built.stream.url, "--files", "--format", "json")
    assert code == 0 and _json(out) == built.stream.metadata("files").to_pylist()


def test_bad_ranges_and_flags_are_usage_errors(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "history", built.stream.url, "--from", "5", "--to", "2")
    assert code == 2 and "endingPosition=2 is below startingPosition=5" in err
    code, _, err = run_cli(capsys, "info", built.stream.url, "--segments", "--files")
    assert code == 2 and "not allowed with argument" in err
