"""``tstream scale | cut | truncate | trim | vacuum`` in-process through ``cli.main``."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from helpers import T0, run_cli
from pyspark_tstream.api.stream import Stream


def _stream_of_four_appends(url: str) -> Stream:
    s = Stream.create(url, segments=2)
    for b in range(4):
        s.append(pa.table({"k": [f"k{i}" for i in range(10)], "t": [T0 + b * 1000 + i for i in range(10)]}),
                 key="k", timestamp="t")
    return s


def test_scale_cut_truncate_trim_vacuum(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = _stream_of_four_appends(url)
    seg = s.state.segments[0].id
    code, out, _ = run_cli(capsys, "scale", url, "--split", str(seg), "--parts", "3")
    assert code == 0 and out.startswith("epoch 1: sealed [0], created ") and out.count("[0.") == 3
    created = s.successors(seg)
    assert len(created) == 3
    code, out, _ = run_cli(capsys, "scale", url, "--merge", *map(str, created[:2]))
    assert code == 0 and "epoch 2" in out
    code, out, _ = run_cli(capsys, "cut", url, str(T0 + 2_000))
    cut = {int(k): v for k, v in json.loads(out).items()}
    assert cut == Stream.open(url).cut_at(T0 + 2_000)
    code, out, _ = run_cli(capsys, "truncate", url, "--before", str(T0 + 2_000), "--vacuum")
    assert code == 0 and "deleted: " in out
    assert Stream.open(url).read().num_rows == 20
    code, out, _ = run_cli(capsys, "trim", url, "--maxlen", "5", "--grace-ms", "0")
    assert code == 0 and Stream.open(url).read().num_rows == 5
    code, out, err = run_cli(capsys, "vacuum", url, "--orphans", "--orphan-grace-ms", "0", "--unsafe-orphan-grace")
    assert code == 0 and "0 orphans" in out


def test_admin_errors_are_one_line(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _stream_of_four_appends(url)
    code, out, err = run_cli(capsys, "scale", url, "--split", "999")
    assert code == 2 and err.startswith("tstream: error: cannot split segment 999") and err.count("\n") == 1
    code, out, err = run_cli(capsys, "truncate", url, "--cut", "{not json")
    assert code != 0 and err.startswith("tstream: error:")
    code, out, err = run_cli(capsys, "scale", url)
    assert code == 2 and "--split" in err


def test_release_writer_lets_the_tick_move(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = Stream.create(url, segments=1, timestamping_uncapped=True)
    s.writer("slow").append(pa.table({"t": [T0]}), timestamp="t")
    s.append(pa.table({"t": [T0 + 5_000]}), timestamp="t")
    assert s.refresh().tick >> 18 == T0
    code, out, _ = run_cli(capsys, "release", url, "slow")
    assert code == 0 and out.startswith("released slow")
    assert Stream.open(url).state.tick >> 18 == T0 + 5_000
    code, _, err = run_cli(capsys, "release", url, "nobody")
    assert code != 0 and "no writer 'nobody'" in err
