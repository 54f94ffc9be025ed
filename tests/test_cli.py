"""The ``tstream`` CLI (cli.py): commands in-process through ``cli.main``, and the console script."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import run_cli
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import app as cli
from pyspark_tstream.cli import read as cli_read


def lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_create_append_read_roundtrip(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "create", url, "--segments", "2", "--timestamping", "client-require")
    assert code == 0 and "2 segments, timestamping client-require" in out
    rows = [{"device": f"d{i % 3}", "temp": 20 + i, "t": f"2026-01-01T00:00:{i:02d}Z"} for i in range(5)]
    code, out, _ = run_cli(capsys, "append", url, str(write_jsonl(tmp_path / "in.jsonl", rows)),
                       "--key", "device", "--timestamp", "t")
    assert code == 0
    assert out.startswith("appended 5 records in 1 commit: ids 1767225600000-0 .. 1767225604000-0")
    code, out, _ = run_cli(capsys, "read", url)
    got = lines(out)
    assert [r["temp"] for r in got] == [20, 21, 22, 23, 24]
    # ids are <ms>-<logical>@<segment>:<seq>: unique in the stream (writer lanes may share a time)
    assert got[0]["_id"] == f"1767225600000-0@{got[0]['_segment']}:{got[0]['_seq']}"
    assert got[0]["_timestamp"] == "2026-01-01T00:00:00.000Z"
    assert set(got[0]) == {"_id", "device", "temp", "t", "_timestamp", "_tso", "_segment", "_seq"}
    assert Stream.open(url).read()["temp"].to_pylist() == [20, 21, 22, 23, 24]


def test_append_from_stdin_casts_to_the_stream_schema(url: str, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    Stream.create(url, segments=1).append([{"name": "a", "score": 1.5}])
    data = b'{"name": "b", "score": 2}\n\n{"name": "c", "score": 3}\n'  # JSON ints for a double column
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = run_cli(capsys, "append", url, "--json")
    assert code == 0 and json.loads(out)["records"] == 2
    t = Stream.open(url).read()
    assert t["score"].to_pylist() == [1.5, 2.0, 3.0] and t.schema.field("score").type == pa.float64()


def test_append_parquet_in_batches_is_idempotent(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "events.parquet"
    pq.write_table(pa.table({"k": [f"k{i % 5}" for i in range(250)], "v": list(range(250))}), path)
    run_cli(capsys, "create", url)
    argv = ["append", url, str(path), "--key", "k", "--writer", "loader", "--batch", "7", "--batch-rows", "100"]
    code, out, err = run_cli(capsys, *argv, "--progress")
    assert code == 0 and "appended 250 records in 3 commits" in out
    assert "\r" in err and "[##############################] 100%" in err and "250 records" in err
    code, out, _ = run_cli(capsys, *argv)  # the same batches again: nothing is committed twice
    assert code == 0 and "appended 0 records in 0 commits" in out and "3 batches already committed" in out
    s = Stream.open(url)
    assert sorted(s.read()["v"].to_pylist()) == list(range(250))
    assert s.info().writers["loader"].commits == 3


def test_read_ranges_tail_count_and_table(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = Stream.create(url, segments=3)
    s.append([{"k": f"k{i % 4}", "v": i, "t": 1_000_000 + i * 1000} for i in range(20)], key="k", timestamp="t")
    def values(*argv: str) -> list[int]:
        code, out, err = run_cli(capsys, "read", url, *argv)
        assert code == 0, err
        return [r["v"] for r in lines(out)]

    assert values() == list(range(20))
    assert values("--count", "3") == [0, 1, 2]
    assert values("--timestamp", "1005000") == list(range(5, 20))
    assert values("--timestamp", "1970-01-01T00:16:45Z", "--until", "1008000") == [5, 6, 7]
    assert values("--tail", "4") == [16, 17, 18, 19]
    assert values("--tail", "4", "--count", "2") == [16, 17]
    assert values("--ago", "1h") == []  # these records are from 1970
    code, out, _ = run_cli(capsys, "read", url, "--count", "2", "--format", "table")
    table = out.splitlines()
    assert code == 0
    assert table[0].split() == ["_id", "k", "v", "t", "_timestamp"] and len(table) == 3
    assert table[1].split()[0].startswith("1000000-0@") and table[2].split()[2] == "1"


def test_read_pages_through_long_ranges(url: str, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_read, "PAGE_ROWS", 7)  # many batches, printed as they are read
    s = Stream.create(url, segments=2, timestamping_uncapped=True)
    s.append([{"k": f"k{i}", "v": i, "t": 2_000_000 + i // 3} for i in range(50)], key="k", timestamp="t")
    code, out, _ = run_cli(capsys, "read", url)
    got = lines(out)
    assert code == 0
    assert sorted(r["v"] for r in got) == list(range(50))
    assert [(r["_tso"], r["_segment"]) for r in got] == sorted((r["_tso"], r["_segment"]) for r in got)


def test_follow_prints_new_records_as_the_tick_advances(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(url, segments=2).append([{"v": 0}])

    def later() -> None:
        time.sleep(0.3)
        Stream.open(url).append([{"v": 1}, {"v": 2}])

    producer = threading.Thread(target=later)
    producer.start()
    # ends on --count, not on a timer: a producer slowed by a loaded machine still gets seen.
    # No --max-wait: the follow must end by itself once it printed --count records (it runs in
    # a daemon thread, so a follow that never ends fails the test instead of hanging the suite)
    result: list[int] = []
    follower = threading.Thread(target=lambda: result.append(
        cli.main(["read", url, "--follow", "--count", "3", "--poll", "20"])), daemon=True)
    follower.start()
    follower.join(120)
    producer.join()
    assert not follower.is_alive(), "read --follow --count 3 kept waiting after its 3 records"
    out = capsys.readouterr().out
    assert result == [0]
    assert [r["v"] for r in lines(out)] == [0, 1, 2]
    code, out, _ = run_cli(capsys, "read", url, "--tail", "0", "--follow", "--max-wait", "200ms", "--poll", "20")
    assert code == 0 and out == ""  # --tail 0 --follow: only records that arrive later


def test_group_commands(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(url, segments=2).append([{"k": f"k{i}", "v": i} for i in range(6)], key="k")
    code, out, _ = run_cli(capsys, "group", url, "create", "billing", "--start", "0")
    assert code == 0 and "group billing: delivers records after 0-0" in out
    code, out, _ = run_cli(capsys, "group", url, "read", "billing", "alice", "--count", "4")
    alice = lines(out)
    assert code == 0 and len(alice) == 4 and all("@" in r["_id"] for r in alice)
    code, out, _ = run_cli(capsys, "group", url, "read", "billing", "bob", "--block", "50")
    bob = lines(out)
    assert {r["v"] for r in alice} | {r["v"] for r in bob} == set(range(6)) and len(bob) == 2
    code, out, _ = run_cli(capsys, "group", url, "ack", "billing", alice[0]["_id"], alice[1]["_id"], "999-0@0")
    assert code == 0 and out.strip() == "2"
    code, out, _ = run_cli(capsys, "group", url, "pending", "billing", "--json")
    pending = lines(out)
    assert [list(p) for p in pending] == [["id", "segment", "seq", "tso", "consumer", "idle_ms", "deliveries"]] * 4
    assert sorted(p["id"] for p in pending) == sorted([r["_id"] for r in alice[2:]] + [r["_id"] for r in bob])
    code, out, _ = run_cli(capsys, "group", url, "pending", "billing", "--consumer", "bob")
    assert out.splitlines()[0].split() == ["id", "consumer", "idle", "ms", "deliveries"]
    assert len(out.splitlines()) == 3
    code, out, _ = run_cli(capsys, "group", url, "claim", "billing", "carol", "--min-idle", "0", bob[0]["_id"])
    assert code == 0 and [r["_id"] for r in lines(out)] == [bob[0]["_id"]]
    code, out, _ = run_cli(capsys, "group", url, "claim", "billing", "carol", "--min-idle", "1h")
    assert code == 0 and out == ""
    code, out, _ = run_cli(capsys, "group", url, "info", "billing", "--json")
    info = json.loads(out)
    assert info["pending"] == 4 and info["acked"] == 2 and info["lag"] == 0
    assert [c["name"] for c in info["consumers"]] == ["alice", "bob", "carol"]
    assert list(info) == ["name", "last_delivered_id", "pending", "entries_read", "acked", "lag", "lag_ms",
                          "low_water_id", "committed_id", "consumers", "version", "created"]
    assert list(info["consumers"][0]) == ["name", "pending", "idle_ms", "inactive_ms"]
    code, out, _ = run_cli(capsys, "group", url, "info")
    assert out.splitlines()[1].split()[0] == "billing"
    assert [p.consumer for p in Group.open(Stream.open(url), "billing").pending()].count("carol") == 1


def test_info_text_and_json(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = Stream.create(url, segments=2, writers=["east"])
    with s.writer("east") as w:
        w.append([{"k": "a", "v": 1}], key="k")
        code, out, _ = run_cli(capsys, "info", url)
    assert code == 0
    assert out.startswith(f"stream   {s.url}\n")
    assert "schema   k string, v int64" in out
    assert "[0.0000, 0.5000)" in out and "[0.5000, 1.0000)" in out
    east = next(line for line in out.splitlines() if line.startswith("east"))
    assert east.split()[1] == "yes"
    code, out, _ = run_cli(capsys, "info", url, "--json")
    info = json.loads(out)
    assert info["rows"] == 1 and info["writers"]["east"]["live"] is False and len(info["segments"]) == 2


@pytest.mark.parametrize("argv, code, needle", [
    (["info", "{url}-missing"], 1, "no stream at"),
    (["create", "{url}"], 1, "already exists"),
    (["read", "{url}", "--ago", "yesterday"], 2, "--ago"),
    (["read", "{url}", "--count", "0"], 2, "not a positive integer"),
    (["read", "{url}", "--max-wait", "1s"], 2, "--follow"),
    (["append", "{url}", "{bad_json}"], 1, "input line 2 is not JSON"),
    (["append", "{url}", "{tmp}/nope.jsonl"], 1, "nope.jsonl"),
    (["append", "{url}", "{good_json}", "--batch", "1"], 2, "--batch N needs --writer"),
    (["group", "{url}", "create", "../escape"], 2, "group name '../escape' is not valid"),
    (["group", "{url}", "read", "missing", "c"], 1, "no consumer group 'missing'"),
    (["group", "{url}", "ack", "g", "garbage"], 2, "not of the form"),
    (["create", "{url}-2", "--segments", "5000"], 2, "segments=5000"),
    (["frobnicate"], 2, "invalid choice"),
    (["group", "{url}"], 2, "required"),
], ids=["missing", "exists", "bad-ago", "zero-count", "max-wait-alone", "bad-json", "no-file",
        "batch-without-writer", "bad-group", "missing-group", "bad-id", "bad-config", "bad-command",
        "no-action"])
def test_errors_are_one_line_without_traceback(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               argv: list[str], code: int, needle: str) -> None:
    Stream.create(url, segments=1).append([{"v": 1}])
    Group.create(Stream.open(url), "g")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"v": 2}\n{"v": \n')
    good = write_jsonl(tmp_path / "good.jsonl", [{"v": 3}])
    values = {"url": url, "bad_json": str(bad), "good_json": str(good), "tmp": str(tmp_path)}
    got, out, err = run_cli(capsys, *[a.format(**values) for a in argv])
    assert got == code
    assert err.count("\n") == 1 and err.startswith("tstream: error: ") and needle in err
    assert "Traceback" not in err and out == ""
    assert Stream.open(url).read()["v"].to_pylist() == [1]  # bad input changed nothing


def test_storage_option_text_is_never_echoed(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "info", url, "--storage-option", "hunter2-s3cr3t")
    assert code == 2 and "KEY=VALUE" in err and "hunter2" not in err


@pytest.mark.parametrize("url,given,typo,hint", [
    ("az://box/s", ["account_name=acct", "account_key=sEcReT-azure-1",
                    "connection_string=AccountName=acct;AccountKey=sEcReT-azure-2", "client_secret=sEcReT-azure-3",
                    "sas_token=sv=2024&sig=sEcReT-azure-4"], "acount_host=h", "account_host"),
    ("gs://bucket/s", ['token={"type": "service_account", "private_key": "sEcReT-gcs-1"}'], "projet=p", "project"),
], ids=["azure", "gcs"])
def test_azure_and_gcs_credentials_are_never_echoed(url: str, given: list[str], typo: str, hint: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt option next to credentials: the error names it and its fix, never a credential."""
    flags = [f for option in [*given, typo] for f in ("--storage-option", option)]
    code, out, err = run_cli(capsys, "info", url, *flags)
    assert code == 2 and out == "" and err.startswith("tstream: error: ")
    assert repr(typo.partition("=")[0]) in err and f"did you mean {hint!r}" in err, err
    assert "sEcReT" not in err


@pytest.mark.s3
def test_s3_storage_options_and_redaction(moto_server: str, fault_proxy: Any,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from s3servers import ACCESS_KEY, BUCKET, REGION

    secret = "sEcReT-value-42"
    fault_proxy.echo_in_errors = secret
    url = f"s3://{BUCKET}/cli-{time.time_ns()}/stream"
    opts = ["--storage-option", f"endpoint_url={fault_proxy.endpoint}", "--storage-option", f"key={ACCESS_KEY}",
            "--storage-option", f"secret={secret}",
            "--storage-option", json.dumps({"region_name": REGION}).join(["client_kwargs=", ""])]
    code, out, err = run_cli(capsys, "create", url, *opts)
    assert code == 0, err
    code, out, err = run_cli(capsys, "read", url, *opts)
    assert code == 0 and out == ""
    fault_proxy.plan("403")  # the server answers with an error that echoes the secret
    code, out, err = run_cli(capsys, "info", url, *opts)
    assert code == 1 and err.startswith("tstream: error: ") and err.count("\n") == 1
    assert secret not in err and "Access Denied" in err and "***" in err


def test_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0 and "examples:" in out and "tstream read file:///tmp/telemetry --tail 10 --follow" in out
    for command in ("create", "info", "append", "read", "group"):
        assert command in out
    code, out, _ = run_cli(capsys, "group", "u", "claim", "--help")
    assert code == 0 and "--min-idle" in out and "XCLAIM" in out


def test_console_script(tmp_path: Path) -> None:
    exe = shutil.which("tstream") or str(Path(sys.executable).parent / "tstream")
    assert os.access(exe, os.X_OK), "the tstream console script is not installed"
    url = (tmp_path / "s").as_uri()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}

    def sh(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *argv], input=stdin, capture_output=True, text=True, timeout=120, env=env,
                              check=False)

    assert sh("create", url, "--segments", "2").returncode == 0
    done = sh("append", url, "--key", "k", stdin='{"k": "a", "v": 1}\n{"k": "b", "v": 2}\n')
    assert done.returncode == 0 and "appended 2 records" in done.stdout and done.stderr == ""
    read = sh("read", url, "--format", "json")
    assert [json.loads(x)["v"] for x in read.stdout.splitlines()] == [1, 2]
    missing = sh("read", (tmp_path / "nope").as_uri())
    assert missing.returncode == 1 and missing.stderr.startswith("tstream: error: no stream at")
    assert "Traceback" not in missing.stderr
