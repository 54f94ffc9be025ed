"""Option value parsers: what each kind of value accepts, and errors that name the key and the value.

The typed parsers of ``conf/parsing.py`` (integers, booleans, durations, timestamps, choices,
lists, JSON, sizes), credential masking, and the size and ``key=value`` policy parsers the
retention, scaling and compaction options share. No Spark session.
"""

from __future__ import annotations

from typing import Any

import pytest
from option_builders import NOV_1_2026_MS
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark_tstream.conf.parsing import (
    config_error,
    is_secret_key,
    lookup,
    option_as_bool,
    option_as_bytes,
    option_as_choice,
    option_as_duration_ms,
    option_as_int,
    option_as_json,
    option_as_list,
    option_as_str,
    option_as_timestamp_ms,
)
from pyspark_tstream.errors import ConfigError


@pytest.mark.parametrize("opts", [
    {"maxFilesPerTrigger": "3"}, {"maxfilespertrigger": "3"}, {"MAXFILESPERTRIGGER": "3"},
    CaseInsensitiveDict({"maxFilesPerTrigger": "3"}),
], ids=["camel", "lower", "upper", "spark-dict"])
def test_lookup_ignores_key_case(opts: Any) -> None:
    assert lookup(opts, "maxFilesPerTrigger") == "3"
    assert option_as_int(opts, "maxFilesPerTrigger") == 3


def test_missing_or_none_means_default() -> None:
    assert option_as_int({}, "n", 7) == 7
    assert option_as_int({"n": None}, "n", 7) == 7
    assert option_as_list({}, "w") == []


@pytest.mark.parametrize("raw,expected", [("42", 42), (" 42 ", 42), ("-3", -3), (5, 5)],
                         ids=["text", "padded", "negative", "python-int"])
def test_option_as_int(raw: Any, expected: int) -> None:
    assert option_as_int({"n": raw}, "n") == expected


@pytest.mark.parametrize("raw,match", [
    ("ten", "n='ten' is not an integer; use decimal digits"),
    ("1.5", "is not an integer"),
    ("", "n='' is empty"),
    (True, "n=True is not an integer"),
    ("0", "n='0' must be positive"),
    ("11", "must be at most 10"),
], ids=["word", "float", "blank", "bool", "below-min", "above-max"])
def test_option_as_int_errors_name_key_and_value(raw: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        option_as_int({"n": raw}, "n", min_value=1, max_value=10)
    assert info.value.option == "n"
    assert info.value.value == raw


@pytest.mark.parametrize("raw,expected", [("true", True), ("FALSE", False), (" True ", True),
                                          (False, False)], ids=["true", "upper", "padded", "bool"])
def test_option_as_bool(raw: Any, expected: bool) -> None:
    assert option_as_bool({"b": raw}, "b") is expected


@pytest.mark.parametrize("raw", ["yes", "1", "t"], ids=["yes", "one", "t"])
def test_option_as_bool_accepts_only_true_false(raw: str) -> None:
    with pytest.raises(ConfigError, match=f"b='{raw}' is not a boolean; use true or false"):
        option_as_bool({"b": raw}, "b")


@pytest.mark.parametrize("raw,ms", [("90s", 90_000), ("15m", 900_000), ("1h", 3_600_000),
                                    ("7d", 604_800_000), ("250ms", 250), ("30", 30_000)],
                         ids=["seconds", "minutes", "hours", "days", "millis", "bare-seconds"])
def test_option_as_duration_ms(raw: str, ms: int) -> None:
    assert option_as_duration_ms({"startingAgo": raw}, "startingAgo") == ms


@pytest.mark.parametrize("raw", ["soon", "1 fortnight", "h1"], ids=["word", "unit", "reversed"])
def test_option_as_duration_ms_rejects(raw: str) -> None:
    with pytest.raises(ConfigError, match="startingAgo=.* is not a duration; use a number and a unit"):
        option_as_duration_ms({"startingAgo": raw}, "startingAgo")


@pytest.mark.parametrize("raw,ms", [
    (str(NOV_1_2026_MS), NOV_1_2026_MS),
    ("2026-11-01T00:00:00Z", NOV_1_2026_MS),
    ("2026-11-01T01:00:00+01:00", NOV_1_2026_MS),
    ("2026-11-01T00:00:00", NOV_1_2026_MS),
], ids=["epoch-ms", "iso-z", "iso-offset", "iso-naive-is-utc"])
def test_option_as_timestamp_ms(raw: str, ms: int) -> None:
    assert option_as_timestamp_ms({"t": raw}, "t", now=NOV_1_2026_MS) == ms


@pytest.mark.parametrize("raw", ["yesterday", "2026-13-01", "1e12"], ids=["word", "month-13", "float"])
def test_option_as_timestamp_ms_rejects(raw: str) -> None:
    with pytest.raises(ConfigError, match="startingTimestamp=.* is not a timestamp; use epoch ms"):
        option_as_timestamp_ms({"startingTimestamp": raw}, "startingTimestamp")


def test_option_as_timestamp_ms_rejects_out_of_range() -> None:
    with pytest.raises(ConfigError, match="startingTimestamp=.* is outside 1970"):
        option_as_timestamp_ms({"startingTimestamp": str(1 << 50)}, "startingTimestamp")


def test_option_as_choice_returns_canonical_spelling() -> None:
    modes = ("client-prefer", "client-require", "arrival")
    assert option_as_choice({"m": "Client-Require"}, "m", None, modes) == "client-require"
    with pytest.raises(ConfigError, match="m='server' is not one of client-prefer, client-require, arrival"):
        option_as_choice({"m": "server"}, "m", None, modes)


@pytest.mark.parametrize("raw,expected", [("a, b,,c ", ["a", "b", "c"]), ('["a", "b"]', ["a", "b"]),
                                          ("", []), (("x", "y"), ["x", "y"])],
                         ids=["commas", "json", "blank", "python-tuple"])
def test_option_as_list(raw: Any, expected: list[str]) -> None:
    assert option_as_list({"w": raw}, "w") == expected


def test_option_as_list_rejects_non_strings() -> None:
    with pytest.raises(ConfigError, match="w='\\[1, 2\\]' is not a list of names"):
        option_as_list({"w": "[1, 2]"}, "w")


def test_option_as_json() -> None:
    assert option_as_json({"j": '{"a": [1, 2]}'}, "j") == {"a": [1, 2]}
    with pytest.raises(ConfigError, match="j='\\{a: 1\\}' is not valid JSON .* at column 2"):
        option_as_json({"j": "{a: 1}"}, "j")


@pytest.mark.parametrize("raw,n", [("1024", 1024), ("64MB", 64 << 20), ("64m", 64 << 20),
                                   ("1g", 1 << 30), ("1GiB", 1 << 30), ("1.5k", 1536),
                                   ("10 b", 10), (2048, 2048)],
                         ids=["bytes", "MB", "m", "g", "GiB", "fraction", "b", "python-int"])
def test_option_as_bytes(raw: Any, n: int) -> None:
    assert option_as_bytes({"s": raw}, "s") == n


@pytest.mark.parametrize("raw,match", [("64 apples", "is not a size; use bytes or a unit"),
                                       ("iB", "is not a size"), ("0", "must be positive"),
                                       ("-1MB", "is not a size")],
                         ids=["unit", "no-number", "zero", "negative"])
def test_option_as_bytes_rejects(raw: str, match: str) -> None:
    with pytest.raises(ConfigError, match=f"maxBytesPerTrigger=.* {match}"):
        option_as_bytes({"maxBytesPerTrigger": raw}, "maxBytesPerTrigger")


def test_option_as_str_strips_and_rejects_blank() -> None:
    assert option_as_str({"k": " device "}, "k") == "device"
    with pytest.raises(ConfigError, match="k='  ' is empty; remove the option or give it a value"):
        option_as_str({"k": "  "}, "k")


@pytest.mark.parametrize("key,secret", [
    ("storage.key", True), ("storage.secret", True), ("storage.token", True),
    ("password", True), ("aws_secret_access_key", True), ("aws_access_key_id", True),
    ("account_key", True), ("sas_token", True), ("connection_string", True),
    ("keyColumn", False), ("storage.endpoint_url", False), ("storage.anon", False),
    ("keyfile_path", False), ("region_name", False),
], ids=lambda v: str(v))
def test_is_secret_key(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_config_error_masks_credentials() -> None:
    err = config_error("storage.secret", "hunter2", "is wrong")
    assert "hunter2" not in str(err) and err.value != "hunter2"
    assert "storage.secret=***" in str(err)


@pytest.mark.parametrize("text,size", [("64MB", 64 << 20), ("64m", 64 << 20), ("1GiB", 1 << 30), ("4096", 4096),
                                       ("1.5k", 1536), ("2tb", 2 << 40)])
def test_one_size_parser_for_every_size_in_config(text: str, size: int) -> None:
    """maxBytesPerTrigger, the retention size and the compaction target read sizes alike."""
    from pyspark_tstream.compaction.policy import CompactionPolicy
    from pyspark_tstream.conf.parsing import option_as_bytes
    from pyspark_tstream.maintain.retention import RetentionPolicy

    assert option_as_bytes({"maxbytespertrigger": text}, "maxBytesPerTrigger") == size
    assert RetentionPolicy.parse(f"size={text}").size == size
    policy = CompactionPolicy.parse(f"target={text},min=4")
    assert policy is not None and policy.target == size


@pytest.mark.parametrize("text", ["ib", "10 zb", "MB", "-1MB"])
def test_bad_sizes_are_refused_everywhere(text: str) -> None:
    from pyspark_tstream.compaction.policy import CompactionPolicy
    from pyspark_tstream.conf.parsing import option_as_bytes
    from pyspark_tstream.maintain.retention import RetentionPolicy

    with pytest.raises(ConfigError, match="maxBytesPerTrigger"):
        option_as_bytes({"maxbytespertrigger": text}, "maxBytesPerTrigger")
    with pytest.raises(ConfigError, match="retention"):
        RetentionPolicy.parse(f"size={text}")
    with pytest.raises(ConfigError, match="compaction"):
        CompactionPolicy.parse(f"target={text}")


def test_policy_texts_are_split_alike() -> None:
    """retention, scaling and compaction read ``key=value`` parts the same way (one splitter):
    keys in any case and with spaces around them, and an unreadable part quoted as written."""
    from pyspark_tstream.compaction.policy import CompactionPolicy
    from pyspark_tstream.epochs.scaling import ScalingPolicy
    from pyspark_tstream.maintain.retention import RetentionPolicy
    from pyspark_tstream.policytext import policy_parts

    assert [(p.key, p.sep, p.value) for p in policy_parts(" Age = 7d,7d,groups")] == [
        ("age", True, " 7d"), ("7d", False, ""), ("groups", False, "")]
    assert [(p.key, p.value) for p in policy_parts("records: 5/s", seps="=:")] == [("records", " 5/s")]
    assert RetentionPolicy.parse(" AGE = 1h , Count= 5") == RetentionPolicy(age_ms=3_600_000, count=5)
    assert CompactionPolicy.parse(" TARGET = 64m , Min=4") == CompactionPolicy(target=64 << 20, min=4)
    assert ScalingPolicy.parse("RECORDS : 10 /s, Factor=3") == ScalingPolicy(records=10.0, factor=3)
    with pytest.raises(ConfigError, match="unknown part ' Bogus=1'"):
        RetentionPolicy.parse("age=1h, Bogus=1")
    with pytest.raises(ConfigError, match="bad part 'Bogus=1'"):
        CompactionPolicy.parse("target=64m, Bogus=1 ")
    with pytest.raises(ConfigError, match="cannot read ' Bogus=1'"):
        ScalingPolicy.parse("records=5/s, Bogus=1")
