"""Options that reach the store: ``storage.*`` fsspec arguments, credentials (never shown in a
repr, kept for workers) and ``storeRetryTimeout``.

No Spark session: Spark only hands the data source a case-insensitive dict of strings with
lower-cased keys, which ``CaseInsensitiveDict`` (pyspark's own, Spark-free) reproduces;
``option_builders`` builds the options objects from such a dict.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
from typing import Any

import pyarrow as pa
import pytest
from option_builders import URL, sink, source
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark_tstream import keys as K
from pyspark_tstream.conf.options import SourceOptions, storage_options_from
from pyspark_tstream.conf.parsing import is_secret_key
from pyspark_tstream.errors import ConfigError


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


def test_storage_access_key_alias_maps_to_s3fs_key() -> None:
    from pyspark_tstream.conf.options import storage_options_from

    opts = storage_options_from({"storage.accesskey": "AKIA123", "storage.secretkey": "s3cr3t",
                                 "storage.endpoint_url": "http://127.0.0.1:9000"})
    assert opts == {"key": "AKIA123", "secret": "s3cr3t", "endpoint_url": "http://127.0.0.1:9000"}


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
