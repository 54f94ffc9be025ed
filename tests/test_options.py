"""Option parsing and validation: what a user sees when an option is right, wrong or misspelt.

No Spark session: Spark only hands the data source a case-insensitive dict of strings with
lower-cased keys, which ``CaseInsensitiveDict`` (pyspark's own, Spark-free) reproduces.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark_tstream import keys as K
from pyspark_tstream.api.config import StreamConfig
from pyspark_tstream.conf.options import SinkOptions, SourceOptions, StreamConfigOptions, storage_options_from
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

URL = "memory://streams/t"
NOV_1_2026_MS = 1_793_491_200_000


def spark_options(**options: str) -> CaseInsensitiveDict:
    """Options as Spark passes them: strings under lower-cased keys."""
    return CaseInsensitiveDict({"path": URL, **options})


def source(**options: str) -> SourceOptions:
    return SourceOptions.from_options(spark_options(**options))


def sink(**options: str) -> SinkOptions:
    return SinkOptions.from_options(spark_options(**options))


# --- parsers ------------------------------------------------------------------------------

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


# --- SourceOptions ------------------------------------------------------------------------

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


@pytest.mark.parametrize("build", [source, sink], ids=["source", "sink"])
def test_store_retry_timeout(build: Any, tmp_path: Any) -> None:
    """Both sides: how long a query's store calls wait out an outage, as a RetryPolicy's patience;
    the data source opens its stream with that policy."""
    assert build().retry.patience == K.STORE_RETRY_TIMEOUT_DEFAULT / 1000 == 120
    opts = build(storeRetryTimeout="5m")
    assert opts.store_retry_timeout_ms == 300_000 and opts.retry.patience == 300
    assert "storeRetryTimeout=300s" in opts.retry.hint
    assert build(storeRetryTimeout="0").retry.patience == 0  # the bounded attempts only
    assert "storeRetryTimeout=1500ms" in build(storeRetryTimeout="1500ms").retry.hint
    with pytest.raises(ConfigError, match="storeRetryTimeout='soon' is not a duration"):
        build(storeRetryTimeout="soon")
    with pytest.raises(ConfigError, match="storeRetryTimeout='5 parsecs' is not a duration"):
        build(storeRetryTimeout="5 parsecs")

    from pyspark_tstream.api.stream import Stream
    from pyspark_tstream.datasource.source import TStreamDataSource

    url = f"file://{tmp_path}/s"
    Stream.create(url, schema=pa.schema([("x", pa.int64())]))
    ds = TStreamDataSource(CaseInsensitiveDict({"path": url, "storeRetryTimeout": "45s"}))
    _, stream = ds._source()
    assert stream.store.retry.patience == 45 and stream.store.reached


# --- unknown options ----------------------------------------------------------------------

@pytest.mark.parametrize("typo,suggestion", [("startingTimestmap", "startingTimestamp"),
                                             ("maxRecordPerTrigger", "maxRecordsPerTrigger"),
                                             ("failondataloss_", "failOnDataLoss")],
                         ids=["swapped", "missing-s", "trailing"])
def test_misspelt_source_option_suggests_the_right_one(typo: str, suggestion: str) -> None:
    match = f"unknown option '{typo.lower()}' \\(did you mean {suggestion}\\?\\)"
    with pytest.raises(ConfigError, match=match) as info:
        source(**{typo: "1"})
    assert info.value.option == typo.lower()
    assert "Valid read options: path, startingOffsets" in str(info.value)
    assert "storage.<key>" in str(info.value)


def test_unrelated_option_lists_valid_ones_without_a_guess() -> None:
    with pytest.raises(ConfigError, match="unknown option 'header'. Valid read options:") as info:
        source(header="true")
    assert "did you mean" not in str(info.value)
    assert all(k in str(info.value) for k in K.SOURCE_KEYS)


def test_every_unknown_option_is_reported_at_once() -> None:
    with pytest.raises(ConfigError, match="unknown option 'bar'.*unknown option 'foo'"):
        source(foo="1", bar="2")


@pytest.mark.parametrize("build,key,match", [
    (source, "keyColumn", "keyColumn is a write option, not a read option"),
    (source, "segments", "segments is a write option, not a read option"),
    (sink, "startingOffsets", "startingOffsets is a read option, not a write option"),
    (sink, "maxFilesPerTrigger", "maxFilesPerTrigger is a read option, not a write option"),
], ids=["keyColumn-on-read", "segments-on-read", "startingOffsets-on-write", "limit-on-write"])
def test_option_of_the_other_side_is_an_error(build: Any, key: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build(**{key: "1"})


@pytest.mark.parametrize("build", [source, sink], ids=["source", "sink"])
def test_keys_spark_adds_are_accepted_silently(build: Any) -> None:
    build(checkpointLocation="/tmp/ckpt", queryName="q1", **{"spark.some.conf": "x",
                                                                "__partition_columns": "[]"})


def test_several_paths_are_an_error() -> None:
    with pytest.raises(ConfigError, match="paths=.* names several paths; tstream reads one stream"):
        SourceOptions.from_options(CaseInsensitiveDict({"paths": '["a", "b"]'}))


@pytest.mark.parametrize("build,match", [(SourceOptions.from_options, "use load\\(url\\)"),
                                         (SinkOptions.from_options, "use start\\(url\\) or save\\(url\\)")],
                         ids=["source", "sink"])
def test_missing_path(build: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=f"no stream URL; {match}"):
        build({})


def test_same_key_twice_with_different_values() -> None:
    with pytest.raises(ConfigError, match="given twice with different values"):
        SourceOptions.from_options({"path": URL, "startingTail": "1", "startingtail": "2"})


# --- storage options and credentials -------------------------------------------------------

def test_storage_options_strip_prefix_and_decode_values() -> None:
    opts = source(**{"storage.endpoint_url": "http://127.0.0.1:9000", "storage.anon": "false",
                     "storage.default_block_size": "1048576",
                     "storage.client_kwargs": '{"region_name": "eu-west-1"}',
                     "storage.version": "1.10"})
    assert opts.storage_options == {"endpoint_url": "http://127.0.0.1:9000", "anon": False,
                                    "default_block_size": 1 << 20,
                                    "client_kwargs": {"region_name": "eu-west-1"},
                                    "version": "1.10"}


def test_storage_credentials_are_never_decoded() -> None:
    got = storage_options_from({"storage.secret": "123456", "storage.token": "true",
                                "storage.password": "{x"})
    assert got == {"secret": "123456", "token": "true", "password": "{x"}


def test_a_credential_holding_a_json_object_is_that_object() -> None:
    """A GCS service account key passed as text reaches gcsfs as the dict it takes (text would
    be read as a file's path); other credentials, malformed JSON included, stay verbatim."""
    key = {"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nabc\n"}
    got = storage_options_from({"storage.token": json.dumps(key), "storage.sas_token": "{not json",
                                "storage.secret": '["a"]', "storage.account_key": " 12 "})
    assert got == {"token": key, "sas_token": "{not json", "secret": '["a"]', "account_key": " 12 "}


#: Azure's and GCS's credentials as Spark users pass them: the key id, tenant and account stay shown.
AZURE_GCS_SECRETS = {"storage.account_key": "azure-key-value-1", "storage.sas_token": "sv=2024&sig=sas-value-2",
                     "storage.connection_string": "AccountName=acct;AccountKey=conn-value-3",
                     "storage.client_secret": "principal-value-4", "storage.credential": "cred-value-5",
                     "storage.account_secret": "alias-value-6", "storage.token": json.dumps(
                         {"type": "service_account", "private_key": "gcs-value-7", "private_key_id": "gcs-id-8"})}


@pytest.mark.parametrize("build", [source, sink], ids=["source", "sink"])
def test_repr_never_shows_azure_or_gcs_credentials(build: Any) -> None:
    opts = build(**AZURE_GCS_SECRETS, **{"storage.account_name": "acct", "storage.client_id": "app-1",
                                         "storage.tenant_id": "tenant-1", "storage.project": "proj"})
    text = repr(opts) + str(opts)
    for value in ("value-1", "value-2", "value-3", "value-4", "value-5", "value-6", "value-7", "gcs-id-8"):
        assert value not in text, value
    for shown in ("'acct'", "'app-1'", "'tenant-1'", "'proj'"):
        assert shown in text
    assert opts.storage_options["sas_token"] == "sv=2024&sig=sas-value-2"  # workers get the real value


@pytest.mark.parametrize("alias,name", [("account_secret", "account_key"), ("accountSecret", "account_key"),
                                        ("connection_string_secret", "connection_string"),
                                        ("connectionStringSecret", "connection_string")])
def test_azure_credentials_have_names_spark_redacts(alias: str, name: str) -> None:
    """Spark shows a streaming source's option values in its plans unless the key matches
    ``spark.redaction.regex`` (its default below), which misses ``account_key`` and
    ``connection_string``; their aliases match it and are credentials to tstream too."""
    spark_default = re.compile(r"(?i)secret|password|token|access[.]?key|credential")
    assert not spark_default.search(f"storage.{name}")
    assert spark_default.search(f"storage.{alias}") and is_secret_key(f"storage.{alias}")
    assert storage_options_from({f"storage.{alias}": "12"}) == {name: "12"}  # verbatim, not an int


def test_storage_option_key_case_is_kept_from_python() -> None:
    assert storage_options_from({"storage.Endpoint_URL": "x", "path": URL}) == {"Endpoint_URL": "x"}


@pytest.mark.parametrize("options,match", [
    ({"storage.client_kwargs": "{bad"}, "storage.client_kwargs='\\{bad' is not valid JSON"),
    ({"storage.": "x"}, "names no fsspec argument"),
], ids=["bad-json", "empty-name"])
def test_bad_storage_options(options: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        source(**options)


SECRETS = {"storage.key": "AKIAEXAMPLEKEYID", "storage.secret": "s3cr3t-value",
           "storage.client_kwargs": '{"aws_session_token": "tok-value-123", "region_name": "eu"}'}


@pytest.mark.parametrize("build", [source, sink], ids=["source", "sink"])
def test_repr_and_str_never_show_credentials(build: Any) -> None:
    opts = build(**SECRETS)
    for text in (repr(opts), str(opts), f"{opts}", repr([opts])):
        for secret in ("AKIAEXAMPLEKEYID", "s3cr3t-value", "tok-value-123"):
            assert secret not in text
    assert "'region_name': 'eu'" in repr(opts)  # only credentials are masked
    assert opts.storage_options["secret"] == "s3cr3t-value"  # the object keeps what workers need


def test_repr_masks_credentials_inside_urls() -> None:
    opts = SourceOptions.from_options({"path": "s3://AKIA:s3cr3t@bucket/t",
                                       "storage.endpoint_url": "http://user:pw@127.0.0.1:9000"})
    assert "s3cr3t" not in repr(opts) and "user:pw" not in repr(opts)
    assert "s3://***@bucket/t" in repr(opts)


def test_options_pickle_for_workers_and_are_frozen() -> None:
    for opts in (source(**SECRETS, startingOffsets='{"0": 1}'), sink(**SECRETS, writers="a,b")):
        assert pickle.loads(pickle.dumps(opts)) == opts
        with pytest.raises(dataclasses.FrozenInstanceError):
            opts.path = "elsewhere"  # type: ignore[misc]


# --- SinkOptions and stream config ---------------------------------------------------------

def test_sink_defaults() -> None:
    opts = sink()
    assert (opts.path, opts.key_column, opts.timestamp_column, opts.writer_id) == (URL, None, None, None)
    assert opts.merge_schema is K.MERGE_SCHEMA_DEFAULT is False
    assert opts.stream_config == StreamConfigOptions()
    assert opts.stream_config.given == frozenset()
    assert opts.stream_config.to_config_dict() == {
        "segments": 4, "timestamping": "client-prefer", "timestamping_uncapped": False,
        "writers": [], "writer_lease_ms": 60_000, "writer_retention_ms": 7 * 24 * 3_600_000, "retention": None,
        "scaling": None, "compression": "snappy", "compaction": "target=128MB,min=16"}


def test_sink_options_as_a_streaming_query_passes_them() -> None:
    opts = sink(keyColumn="device", timestampColumn="ts", checkpointLocation="/ckpt/q1",
                queryName="q1", mergeSchema="true")
    assert (opts.key_column, opts.timestamp_column) == ("device", "ts")
    assert (opts.checkpoint_location, opts.query_name, opts.writer_id) == ("/ckpt/q1", "q1", None)
    assert opts.merge_schema is True
    assert sink(writerId="job-7").writer_id == "job-7"


def test_stream_config_records_what_was_given() -> None:
    config = sink(segments="8", timestamping="ARRIVAL", timestampingUncapped="true",
                  writers="a, b", writerLeaseMs="5000", writerRetentionMs="86400000", retention="7d",
                  scaling="records=100/s", compression="zstd", compaction="target=64MB,min=8").stream_config
    assert config.given == frozenset(K.STREAM_CONFIG_FIELDS.values())
    as_dict = config.to_config_dict()
    assert as_dict == {"segments": 8, "timestamping": "arrival", "timestamping_uncapped": True,
                       "writers": ["a", "b"], "writer_lease_ms": 5000, "writer_retention_ms": 86_400_000,
                       "retention": "7d",
                       "scaling": "records=100/s", "compression": "zstd",
                       "compaction": "target=64MB,min=8"}
    assert StreamConfig.from_kwargs(as_dict).to_dict() == as_dict  # the core takes it as is
    assert sink(segments="2").stream_config.given == frozenset({"segments"})


@pytest.mark.parametrize("key,raw,match", [
    ("timestamping", "server", "timestamping='server' is not one of client-prefer, client-require, arrival"),
    ("timestampingUncapped", "maybe", "timestampingUncapped='maybe' is not a boolean"),
    ("segments", "0", "segments='0' must be positive"),
    ("segments", "5000", "segments=5000 .*4096"),
    ("segments", "four", "segments='four' is not an integer"),
    ("writerLeaseMs", "1m", "writerLeaseMs='1m' is not an integer"),
    ("writerRetentionMs", "7d", "writerRetentionMs='7d' is not an integer"),
    ("writers", '[1]', "writers='\\[1\\]' is not a list of names"),
    ("compression", "brotli", "compression='brotli' is not one of"),
    ("mergeSchema", "yes", "mergeSchema='yes' is not a boolean"),
    ("keyColumn", " ", "keyColumn=' ' is empty"),
], ids=lambda v: str(v)[:24])
def test_bad_sink_options(key: str, raw: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        sink(**{key: raw})
    assert info.value.option == key


def test_misspelt_sink_option_suggests_the_right_one() -> None:
    with pytest.raises(ConfigError, match="unknown option 'keycolum' \\(did you mean keyColumn\\?\\). "
                                          "Valid write options: path, keyColumn"):
        sink(keyColum="device")


def test_storage_access_key_alias_maps_to_s3fs_key() -> None:
    from pyspark_tstream.conf.options import storage_options_from

    opts = storage_options_from({"storage.accesskey": "AKIA123", "storage.secretkey": "s3cr3t",
                                 "storage.endpoint_url": "http://127.0.0.1:9000"})
    assert opts == {"key": "AKIA123", "secret": "s3cr3t", "endpoint_url": "http://127.0.0.1:9000"}


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
