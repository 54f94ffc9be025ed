"""Bad input fails at its entry with an error naming the argument, the bad value, the valid
range and a remedy; and a failed call leaves the stream as it was (docs/design.md §3.8)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pyarrow as pa
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import app as cli
from pyspark_tstream.conf.parsing import option_as_timestamp_ms
from pyspark_tstream.errors import (
    ConfigError,
    InvalidPathError,
    SchemaMismatchError,
    StreamNotFoundError,
    TimestampError,
)
from pyspark_tstream.store.storage import Store
from pyspark_tstream.timestamps import MAX_MS, pack, to_ms

#: Year 4000: below the 46-bit limit once documented, above what a signed 64-bit ``_tso`` holds.
YEAR_4000_MS = 64_060_588_800_000


@pytest.fixture
def mem() -> str:
    """A fresh in-memory stream URL."""
    return f"memory://bad-{uuid.uuid4().hex}/stream"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- times the hybrid clock cannot hold ------------------------------------------------------

def test_the_largest_time_fits_a_signed_bigint() -> None:
    assert pack(MAX_MS, (1 << 18) - 1) == (1 << 63) - 1
    assert to_ms(MAX_MS) == MAX_MS


@pytest.mark.parametrize("when", [YEAR_4000_MS, "4000-01-01", MAX_MS + 1], ids=["ms", "iso", "max+1"])
def test_times_past_the_hybrid_clock_are_refused(mem: str, when: Any) -> None:
    s = Stream.create(mem, segments=1)
    s.append([{"x": 1}])
    for call in (lambda: s.seek(when), lambda: s.read(start=when), lambda: s.read(end=when)):
        with pytest.raises(TimestampError, match=f"epoch ms 0..{MAX_MS}") as info:
            call()
        assert "3084" in str(info.value) and "4199" not in str(info.value)


def test_uncapped_client_time_past_the_clock_is_refused_not_rewritten(mem: str) -> None:
    s = Stream.create(mem, segments=1, timestamping_uncapped=True)
    s.append([{"t": 1_000}], timestamp="t")
    with pytest.raises(TimestampError, match=f"timestampColumn 't' holds {YEAR_4000_MS}.*3084"):
        s.append([{"t": 2_000}, {"t": YEAR_4000_MS}], timestamp="t")
    assert s.read()["t"].to_pylist() == [1_000]
    s.append([{"t": MAX_MS}], timestamp="t")  # the last millisecond still fits
    assert int(s.read()["_tso"][-1].as_py()) >> 18 == MAX_MS


def test_starting_timestamp_option_past_the_clock_names_the_option() -> None:
    with pytest.raises(ConfigError, match="startingTimestamp.*3084") as info:
        option_as_timestamp_ms({"startingTimestamp": str(YEAR_4000_MS)}, "startingTimestamp")
    assert info.value.option == "startingTimestamp"


def test_cli_read_time_past_the_clock_is_refused(mem: str, capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(mem, segments=1).append([{"x": 1}])
    code, out, err = run(capsys, "read", mem, "--timestamp", "4000-01-01")
    assert code != 0 and out == "" and "3084" in err


# -- a failed first write fixes nothing ------------------------------------------------------

def test_first_write_with_a_string_timestamp_column_creates_no_stream(mem: str) -> None:
    bad = pa.schema([("device", pa.string()), ("ts", pa.string())])
    with pytest.raises(TimestampError, match="timestampColumn 'ts' has type string"):
        Stream.for_write(Store(mem), bad, config={"segments": 1}, timestamp="ts")
    with pytest.raises(StreamNotFoundError):
        Stream.open(mem)
    good = pa.schema([("device", pa.string()), ("ts", pa.timestamp("ms", tz="UTC"))])
    stream, spec = Stream.for_write(Store(mem), good, config={"segments": 1}, timestamp="ts")
    assert spec.schema == good


def test_a_created_stream_takes_its_schema_from_the_first_commit_that_lands(mem: str) -> None:
    # the sink created the stream, then its tasks failed (a client time out of range): no commit
    first = pa.schema([("device", pa.string()), ("ts", pa.int64())])
    Stream.for_write(Store(mem), first, config={"segments": 1}, timestamp="ts")
    assert Stream.open(mem).schema is None
    s = Stream.open(mem)
    s.append(pa.table({"device": ["a"], "ts": pa.array([5], pa.timestamp("ms", tz="UTC"))}), timestamp="ts")
    assert s.schema.field("ts").type == pa.timestamp("ms", tz="UTC")


# -- a range that ends before it starts ------------------------------------------------------

@pytest.mark.parametrize("start, end", [(2_000, 1_000), ("1970-01-01T00:00:02Z", 1_000), ("-1m", "-5m")],
                         ids=["ms", "iso", "ago"])
def test_read_refuses_start_after_end(mem: str, start: Any, end: Any) -> None:
    s = Stream.create(mem, segments=1)
    s.append([{"x": 1}])
    for call in (lambda: s.read(start=start, end=end), lambda: s.to_reader(start=start, end=end)):
        with pytest.raises(ConfigError, match=r"start=.* is after end=.*swap them") as info:
            call()
        assert info.value.option == "end"
    assert s.read(start=1_000, end=1_000).num_rows == 0  # an empty range is fine


def test_cli_read_refuses_until_before_timestamp(mem: str, capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(mem, segments=1).append([{"x": 1}])
    code, out, err = run(capsys, "read", mem, "--timestamp", "2026-01-02T00:00:00Z", "--until", "2026-01-01")
    assert code != 0 and out == ""
    assert "--until 2026-01-01T00:00:00.000Z is before the start --timestamp gives" in err


# -- segments past the cap -------------------------------------------------------------------

def test_scale_refuses_more_active_segments_than_create_allows(mem: str) -> None:
    s = Stream.create(mem, segments=4)
    seg = s.state.segments[0].id
    with pytest.raises(ConfigError, match="split into 10000 parts: give 2 to 4096"):
        s.scale(split=seg, parts=10_000)
    with pytest.raises(ConfigError, match="would leave 4097 active segments, over the limit of 4096"):
        s.scale(split=seg, parts=4094)
    assert len(s.refresh().segments) == 4
    s.scale(split=seg, parts=4093)  # exactly the cap
    assert len(s.refresh().segments) == 4096


@pytest.mark.parametrize("limit", [-1, 1.5, True], ids=["negative", "float", "bool"])
def test_a_bad_limit_is_a_config_error_naming_limit(mem: str, limit: Any) -> None:
    s = Stream.create(mem, segments=1)
    s.append([{"x": 1}])
    for call in (lambda: s.read(limit=limit), lambda: s.to_reader(limit=limit)):
        with pytest.raises(ConfigError, match=r"limit=.* must be a non-negative integer") as info:
            call()
        assert info.value.option == "limit" and not isinstance(info.value, TimestampError)


# -- data without columns, JSON of mixed types -----------------------------------------------

@pytest.mark.parametrize("data, what", [([], "an empty list"), ([{}, {}], "a list of 2 record"),
                                        (pa.table({}), "a Table of 0 row")], ids=["list", "dicts", "table"])
def test_append_without_columns_says_what_was_passed(mem: str, data: Any, what: str) -> None:
    s = Stream.create(mem, segments=1)
    with pytest.raises(SchemaMismatchError, match=f"append got {what}.*at least one column"):
        s.append(data)


def test_cli_append_names_the_field_and_line_of_mixed_json_types(mem: str, tmp_path: Any,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(mem, segments=1)
    path = tmp_path / "in.jsonl"
    path.write_text('{"device": "d1", "value": 3}\n\n{"device": "d2", "value": null}\n'
                    '{"device": "d3", "value": "high"}\n')
    code, _, err = run(capsys, "append", mem, str(path))
    assert code == 1
    assert "input line 4: field 'value' is a JSON string, but line 1 has a number there" in err


# -- a user column named like the CLI's id ---------------------------------------------------

def test_cli_read_keeps_a_user_column_named_id(mem: str, capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(mem, segments=1).append([{"_id": "order-7", "_note": "x", "n": 1}])
    code, out, _ = run(capsys, "read", mem)
    row = json.loads(out)
    assert code == 0 and row["_id"] == "order-7" and row["_note"] == "x"
    assert row["__id"] == f"{row['_tso'] >> 18}-0@{row['_segment']}:0"
    code, out, _ = run(capsys, "read", mem, "--format", "table")
    assert out.split()[:4] == ["__id", "_id", "_note", "n"]


# -- negative epoch times --------------------------------------------------------------------

@pytest.mark.parametrize("key", ["startingTimestamp", "endingTimestamp"])
@pytest.mark.parametrize("raw", ["-5", "-15m", -5], ids=["digits", "duration", "int"])
def test_negative_timestamp_options_are_refused_pointing_to_starting_ago(key: str, raw: Any) -> None:
    with pytest.raises(ConfigError, match=f"{key}=.* is negative; .*startingAgo=") as info:
        option_as_timestamp_ms({key: raw}, key)
    assert info.value.option == key


# -- storage URLs and options ----------------------------------------------------------------

@pytest.mark.parametrize("url, match", [
    ("memory://bad/s", r"storage option 'secrett' is not one memory:// takes; its options are .*global_store"),
    ("s3://bucket/s", r"storage option 'secrett' is not one s3:// takes \(did you mean 'secret'\?\); its "
                      r"options are .*endpoint_url"),
], ids=["memory", "s3"])
def test_a_storage_option_typo_is_one_config_error(url: str, match: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        Stream.open(url, storage_options={"secrett": "hunter2"})
    assert info.value.option == "storage.secrett" and "hunter2" not in str(info.value)
    code, _, err = run(capsys, "info", url, "--storage-option", "secrett=hunter2")
    assert code == 2 and err.count("\n") == 1 and "'secrett'" in err and "hunter2" not in err


def test_spark_storage_option_typo_names_the_key() -> None:
    from pyspark_tstream.conf.options import SourceOptions

    opts = SourceOptions.from_options({"path": "s3://bucket/s", "storage.secrett": "x"})
    with pytest.raises(ConfigError, match="storage option 'secrett' is not one s3:// takes"):
        Store(opts.path, opts.storage_options)


@pytest.mark.parametrize("url, match", [
    # fsspec knows hdfs://, but tstream has no backend there (no known-atomic create): refused
    ("hdfs://namenode/x", r"hdfs:// is not a storage scheme tstream knows; it stores streams on "
                          r"file:// \(or a bare path\), memory://"),
    ("foo://x/y", r"foo:// is not a storage scheme tstream knows; it stores streams on file://"),
], ids=["hdfs", "unknown"])
def test_unsupported_schemes_say_which_are(url: str, match: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InvalidPathError, match=match):
        Stream.open(url)
    code, _, err = run(capsys, "read", url)
    assert code == 2 and "credentials" not in err and "storage.*" not in err


def test_a_stream_url_that_is_a_file_says_so(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("{}\n")
    for call in (lambda: Stream.open(str(path)), lambda: Stream.create(f"file://{path}")):
        with pytest.raises(InvalidPathError, match=f"file://{path} is a file, not a stream folder"):
            call()
    code, _, err = run(capsys, "info", str(path))
    assert code == 2 and "is a file, not a stream folder" in err


# -- what an append that stopped early had committed -----------------------------------------

def _jsonl(path: Any, n: int, bad_line: int | None = None) -> Any:
    path.write_text("".join("{oops\n" if i == bad_line else json.dumps({"n": i}) + "\n" for i in range(1, n + 1)))
    return path


def test_cli_append_error_says_what_was_committed_and_how_to_resume(mem: str, tmp_path: Any,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(mem, segments=1)
    path = _jsonl(tmp_path / "in.jsonl", 15, bad_line=11)
    code, _, err = run(capsys, "append", mem, str(path), "--batch-rows", "5")
    assert code == 1 and "input line 11 is not JSON" in err
    assert ("committed 10 records in 2 batches, the input before line 11, before stopping; rerunning the whole "
            "input would append those again: resume from input line 11") in err
    assert Stream.open(mem).read().num_rows == 10
    # with --writer/--batch, the rerun the note names resumes without duplicates
    code, _, err = run(capsys, "append", mem, str(path), "--batch-rows", "5", "--writer", "w", "--batch", "0")
    assert "rerun the same command (--writer w --batch 0 --batch-rows 5) to resume at batch 2" in err
    _jsonl(path, 15)
    code, out, _ = run(capsys, "append", mem, str(path), "--batch-rows", "5", "--writer", "w", "--batch", "0")
    assert code == 0 and "appended 5 records in 1 commit" in out and "2 batches already committed" in out
    assert Stream.open(mem).read()["n"].to_pylist() == list(range(1, 11)) * 2 + list(range(11, 16))


def test_cli_append_interrupted_says_what_was_committed(mem: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(mem, segments=1)
    path = _jsonl(tmp_path / "in.jsonl", 20)
    real = Stream.append
    calls = []

    def interrupted_third(self: Stream, *a: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *a, **kw)

    monkeypatch.setattr(Stream, "append", interrupted_third)
    code, _, err = run(capsys, "append", mem, str(path), "--batch-rows", "5", "--writer", "w", "--batch", "7")
    assert code == 130
    assert ("committed 10 records in 2 batches, the input before line 11, before stopping; the batch from input "
            "line 11 was being committed and may be committed too; rerun the same command (--writer w --batch 7 "
            "--batch-rows 5) to resume at batch 9") in err


def test_a_timestamp_option_error_offers_no_ago_text() -> None:
    with pytest.raises(ConfigError, match=r"use epoch ms \(1767225600000\) or ISO-8601") as info:
        option_as_timestamp_ms({"startingTimestamp": "yesterday"}, "startingTimestamp")
    assert "ago" not in str(info.value)
