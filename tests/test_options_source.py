"""Read options (``SourceOptions``): defaults, where a read starts and ends, and read limits.

No Spark session: Spark only hands the data source a case-insensitive dict of strings with
lower-cased keys, which ``CaseInsensitiveDict`` (pyspark's own, Spark-free) reproduces;
``option_builders`` builds the options objects from such a dict.
"""

from __future__ import annotations

from typing import Any

import pytest
from option_builders import NOV_1_2026_MS, URL, source
from pyspark_tstream import keys as K
from pyspark_tstream.conf.options import SourceOptions
from pyspark_tstream.errors import ConfigError


def test_source_defaults() -> None:
    opts = source()
    assert opts.path == URL
    assert opts.starting_offsets == K.STARTING_OFFSETS_DEFAULT == "earliest"
    assert opts.starting_kind == "earliest"
    assert opts.fail_on_data_loss is K.FAIL_ON_DATA_LOSS_DEFAULT is True
    limits = (opts.max_records_per_trigger, opts.max_bytes_per_trigger, opts.max_files_per_trigger)
    assert limits == (None, None, None)
    assert (opts.ending_timestamp_ms, opts.ending_offsets, opts.consumer_group) == (None,) * 3
    assert opts.storage_options == {}


def test_source_accepts_a_plain_python_dict_in_any_case() -> None:
    opts = SourceOptions.from_options({"path": URL, "startingTail": 10, "MaxFilesPerTrigger": "2"})
    assert (opts.starting_tail, opts.max_files_per_trigger) == (10, 2)


@pytest.mark.parametrize("options,kind,field,value", [
    ({"startingOffsets": "latest"}, "latest", "starting_offsets", "latest"),
    ({"startingOffsets": "EARLIEST"}, "earliest", "starting_offsets", "earliest"),
    ({"startingOffsets": '{"0": 5, "4294967296": 0}'}, "offsets", "starting_offsets", {0: 5, 1 << 32: 0}),
    ({"startingTimestamp": "2026-11-01T00:00:00Z"}, "timestamp", "starting_timestamp_ms", NOV_1_2026_MS),
    ({"startingAgo": "1h"}, "ago", "starting_ago_ms", 3_600_000),
    ({"startingTail": "100"}, "tail", "starting_tail", 100),
    ({"startingOffsets": "earliest", "startingTail": "0"}, "tail", "starting_tail", 0),
], ids=["latest", "earliest-any-case", "cut", "timestamp", "ago", "tail", "explicit-default-plus-tail"])
def test_starting_position(options: dict[str, str], kind: str, field: str, value: Any) -> None:
    opts = source(**options)
    assert opts.starting_kind == kind
    assert getattr(opts, field) == value


@pytest.mark.parametrize("first,second", [
    ("startingOffsets", "startingTimestamp"), ("startingOffsets", "startingAgo"),
    ("startingOffsets", "startingTail"), ("startingTimestamp", "startingAgo"),
    ("startingTimestamp", "startingTail"), ("startingAgo", "startingTail"),
], ids=lambda v: v)
def test_two_starting_positions_are_an_error_naming_both(first: str, second: str) -> None:
    values = {"startingOffsets": "latest", "startingTimestamp": "1000", "startingAgo": "1h",
              "startingTail": "5"}
    with pytest.raises(ConfigError, match=f"{first} and {second} both set where to start") as info:
        source(**{first: values[first], second: values[second]})
    assert info.value.option == second


@pytest.mark.parametrize("raw,match", [
    ("newest", "is not a position; use earliest, latest or a JSON stream cut"),
    ("{}", "names no segment"),
    ("[1, 2]", "is not a position"),
    ('{"0": -1}', "has entry '0': -1; segment ids and sequence numbers are non-negative"),
    ('{"0": 1.5}', "has entry '0': 1.5"),
    ('{"0": true}', "has entry '0': True"),
    ('{"seg-a": 1}', "has entry 'seg-a': 1"),
    ('{"0": 1', "is not valid JSON"),
], ids=["word", "empty", "list", "negative", "float", "bool", "named-segment", "broken-json"])
def test_bad_starting_offsets(raw: str, match: str) -> None:
    with pytest.raises(ConfigError, match=f"startingOffsets=.* {match}"):
        source(startingOffsets=raw)


def test_ending_bounds_for_batch_reads() -> None:
    assert source(endingTimestamp="2026-11-01T00:00:00Z").ending_timestamp_ms == NOV_1_2026_MS
    assert source(endingOffsets="latest").ending_offsets == "latest"
    assert source(endingOffsets='{"1": 9}').ending_offsets == {1: 9}


@pytest.mark.parametrize("options,match", [
    ({"endingTimestamp": "2000", "endingOffsets": "latest"}, "endingTimestamp and endingOffsets both set"),
    ({"startingTimestamp": "2000", "endingTimestamp": "1000"},
     "endingTimestamp='1000' is before startingTimestamp='2000'"),
    ({"endingOffsets": "earliest"}, "endingOffsets='earliest' is not a position; use latest or a JSON"),
    ({"endingTimestamp": "tomorrow"}, "endingTimestamp='tomorrow' is not a timestamp"),
], ids=["both", "before-start", "earliest", "bad-timestamp"])
def test_bad_ending_bounds(options: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        source(**options)


def test_read_limits() -> None:
    opts = source(maxRecordsPerTrigger="1000", maxBytesPerTrigger="64MB", maxFilesPerTrigger="8")
    assert (opts.max_records_per_trigger, opts.max_bytes_per_trigger, opts.max_files_per_trigger) == (
        1000, 64 << 20, 8)


@pytest.mark.parametrize("key", ["maxRecordsPerTrigger", "maxBytesPerTrigger", "maxFilesPerTrigger"])
@pytest.mark.parametrize("raw", ["0", "-5"], ids=["zero", "negative"])
def test_read_limits_must_be_positive(key: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=key) as info:
        source(**{key: raw})
    assert info.value.option == key


def test_fail_on_data_loss_and_consumer_group() -> None:
    opts = source(failOnDataLoss="false", consumerGroup="billing")
    assert opts.fail_on_data_loss is False and opts.consumer_group == "billing"
    with pytest.raises(ConfigError, match="failOnDataLoss='no' is not a boolean; use true or false"):
        source(failOnDataLoss="no")
