"""Inputs that were taken silently or failed unclearly: each is refused at its entry, naming the
option, column or file, the value and a remedy (docs/design.md §3.8)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import app as cli
from pyspark_tstream.conf.options import SinkOptions, SourceOptions
from pyspark_tstream.errors import ConfigError, SchemaMismatchError
from pyspark_tstream.maintain.retention import RetentionPolicy
from pyspark_tstream.store.storage import Store


@pytest.fixture
def mem() -> str:
    return f"memory://refused-{uuid.uuid4().hex}/stream"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- retention ------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("count=-5", r"retention='count=-5': count='-5' is not a record count \(a whole number, 0 or more"),
    ("count=abc", r"retention='count=abc': count='abc' is not a record count"),
    ("age=7d,age=1d", r"retention='age=7d,age=1d': age is given twice; give each of age, size, count, groups"),
    ("7d,age=1d", r"age is given twice"),
    ("groups=maybe", r"retention='groups=maybe': groups='maybe' is not true or false"),
    ("age=-7d", r"retention='age=-7d': age='-7d' is negative; a duration is 0 or more"),
])
def test_a_bad_retention_names_the_option_and_part(mem: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        Stream.create(mem, retention=text)
    assert info.value.option == "retention"
    assert RetentionPolicy.parse("age=7d,count=5,groups=false") == RetentionPolicy(
        age_ms=7 * 86_400_000, count=5, groups=False)


# --- durations and storage options ------------------------------------------------------------

@pytest.mark.parametrize("options", [SinkOptions, SourceOptions])
def test_a_negative_store_retry_timeout_is_refused(options: Any) -> None:
    with pytest.raises(ConfigError, match=r"storeRetryTimeout='-5s' is negative; a duration is 0 or more"):
        options.from_options({"path": "memory://x/s", "storeRetryTimeout": "-5s"})


@pytest.mark.parametrize(("url", "key", "value", "message"), [
    ("file:///tmp/refused", "auto_mkdir", "banana", r"storage option auto_mkdir='banana' is not true or false"),
    ("s3://bucket/s", "client_kwargs", "notjson", r"storage option client_kwargs is a str, not a JSON object; "
                                                  r"give it as \{\"name\": \"value\", ...\}"),
    ("s3://bucket/s", "endpoint_url", "5", r"storage option endpoint_url=5 is not text; give the URL"),
])
def test_a_storage_option_of_the_wrong_type_is_one_config_error(url: str, key: str, value: str, message: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    options = SinkOptions.from_options({"path": url, f"storage.{key}": value}).storage_options
    with pytest.raises(ConfigError, match=message) as info:
        Store(url, options)
    assert info.value.option == f"storage.{key}"
    code, out, err = run(capsys, "info", url, "--storage-option", f"{key}={value}")
    assert code != 0 and out == "" and len(err.strip().splitlines()) == 1  # one line, no traceback
    assert "storage option" in err


def test_python_storage_options_of_the_right_type_pass() -> None:
    Store("s3://bucket/s", {"client_kwargs": {"region_name": "eu-west-1"}, "endpoint_url": "http://127.0.0.1:9",
                            "anon": True})
    Store("file:///tmp/refused", {"auto_mkdir": True})


# --- columns ----------------------------------------------------------------------------------

@pytest.mark.parametrize("column", [pa.array(["a"]), pa.array([5], pa.int64()), pa.array([1.5])])
@pytest.mark.parametrize("name", ["_tso", "_seq", "_segment", "_timestamp"])
def test_a_user_column_named_like_a_system_column_is_refused(mem: str, name: str, column: pa.Array) -> None:
    s = Stream.create(mem)
    with pytest.raises(SchemaMismatchError, match=rf"column '{name}'.* has a name tstream keeps for the columns "
                                                  r"every read adds .* rename it before writing"):
        s.append(pa.table({"id": [1], name: column}))
    assert Stream.open(mem).state.pos == 0  # nothing written


def test_a_stream_created_with_such_a_column_is_refused(mem: str) -> None:
    with pytest.raises(SchemaMismatchError, match="column '_seq'"):
        Stream.create(mem, schema=pa.schema([("id", pa.int64()), ("_seq", pa.string())]))


def test_a_tstream_read_written_back_still_drops_its_system_columns(mem: str) -> None:
    src = Stream.create(mem)
    src.append(pa.table({"id": [1, 2], "t": pa.array([1_700_000_000_000, 1_700_000_000_001], pa.timestamp("ms"))}),
               timestamp="t")
    read = src.read()
    dst = Stream.create(mem + "-copy")
    dst.append(read)
    dst.append(read.select(["id", "t", "_timestamp"]), timestamp="_timestamp")  # re-timed by the read
    assert dst.schema.names == ["id", "t"] and dst.read(end=2**41).num_rows == 4


def test_a_dictionary_encoded_column_is_stored_as_its_values(mem: str) -> None:
    s = Stream.create(mem)
    encoded = pa.table({"id": [1, 2], "k": pa.array(["a", "b"]).dictionary_encode()})
    s.append(encoded)
    s.append(pa.table({"id": [3], "k": ["c"]}))  # plain and encoded data append to one stream
    s.append(encoded)
    assert s.schema.field("k").type == pa.string()
    assert Stream.open(mem).read()["k"].to_pylist() == ["a", "b", "c", "a", "b"]


# --- the CLI's inputs -------------------------------------------------------------------------

def test_cli_append_refuses_json_text_for_a_number_column(mem: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    Stream.create(mem).append(pa.table({"id": [1], "v": [2]}))
    (tmp_path / "in.jsonl").write_text('{"id": 2, "v": "7"}\n')
    code, _, err = run(capsys, "append", mem, str(tmp_path / "in.jsonl"))
    assert code != 0 and "column 'v' in the input batch at line 1 is JSON text (string), the stream has int64; " \
                          "write its values without quotes" in err
    (tmp_path / "in.jsonl").write_text('{"id": 2, "v": 7}\n')
    Stream.create(mem + "2").append(pa.table({"id": ["1"], "v": [2]}))
    code, _, err = run(capsys, "append", mem + "2", str(tmp_path / "in.jsonl"))
    assert code != 0 and "is JSON numbers (int64), the stream has string; write its values in quotes" in err
    assert Stream.open(mem).read()["v"].to_pylist() == [2]


def test_cli_append_says_a_jsonl_file_is_parquet(mem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pq.write_table(pa.table({"id": [1]}), tmp_path / "events.jsonl")
    Stream.create(mem)
    code, _, err = run(capsys, "append", mem, str(tmp_path / "events.jsonl"))
    assert code != 0 and "the input is a Parquet file (it starts with Parquet's PAR1 mark), not JSON lines; " \
                          "pass --format parquet" in err
    assert run(capsys, "append", mem, str(tmp_path / "events.jsonl"), "--format", "parquet")[0] == 0
