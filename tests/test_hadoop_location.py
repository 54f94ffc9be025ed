"""``hadoop_location``: a tstream URL and its storage options as Spark's own connectors take them.

No Spark here: the mapping is a pure function. Every URL form a user may copy (Databricks'
``abfss://container@account.dfs.core.windows.net/path``, fsspec's ``az://container/path`` with
an account option, ``gcs://``), every credential option, and every refusal; each refusal and
each ``repr`` is checked to carry no credential.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark_tstream.errors import ConfigError, InvalidPathError, TStreamError, UnsupportedOperationError
from pyspark_tstream.spark.hadoop import CONNECTORS, HadoopLocation, hadoop_location

SECRET = "s3cr3t-VALUE-42"
HOST = "acct.dfs.core.windows.net"
SA_KEY = {"type": "service_account", "client_email": "reader@proj.iam.gserviceaccount.com",
          "private_key_id": "kid-123", "project_id": "proj",
          "private_key": f"-----BEGIN PRIVATE KEY-----\n{SECRET}\n-----END PRIVATE KEY-----\n"}


def _at(url: str, protocol: str = "", root: str = "", **options: Any) -> HadoopLocation:
    return hadoop_location(url, protocol, root, options)


# -- URL forms ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("url,options,root", [
    ("abfss://box@acct.dfs.core.windows.net/a/s", {}, f"abfss://box@{HOST}/a/s"),
    ("abfs://box@acct.dfs.core.windows.net/a/s/", {}, f"abfs://box@{HOST}/a/s"),
    ("ABFSS://box@ACCT.dfs.core.windows.net/s", {}, f"abfss://box@{HOST}/s"),
    ("az://box@acct.blob.core.windows.net/s", {}, f"abfss://box@{HOST}/s"),
    ("az://box/a/s", {"account_name": "acct"}, f"abfss://box@{HOST}/a/s"),
    ("abfs://box/s", {"account_name": "acct"}, f"abfs://box@{HOST}/s"),
    ("abfss://box", {"account_name": "acct"}, f"abfss://box@{HOST}"),
    ("az://box/s", {"connection_string": "AccountName=acct;AccountKey=k3y"}, f"abfss://box@{HOST}/s"),
    ("az://box/s", {"connection_string": "AccountName=acct;EndpointSuffix=core.chinacloudapi.cn"},
     "abfss://box@acct.dfs.core.chinacloudapi.cn/s"),
    ("abfss://box@acct.dfs.core.usgovcloudapi.net/s", {}, "abfss://box@acct.dfs.core.usgovcloudapi.net/s"),
    ("az://box/s", {"account_name": "acct", "account_host": "acct.blob.core.windows.net"},
     f"abfss://box@{HOST}/s"),
    ("az://box/s", {"connection_string": "DefaultEndpointsProtocol=https;AccountName=acct;"
                                         "BlobEndpoint=https://acct.blob.core.windows.net/"}, f"abfss://box@{HOST}/s"),
], ids=["abfss", "abfs-kept", "case", "az-blob-host", "az-account", "abfs-account", "container-root",
        "conn-account", "conn-suffix", "gov-cloud", "account-host", "conn-blob-endpoint"])
def test_azure_urls_become_the_abfs_url_of_the_accounts_dfs_endpoint(url: str, options: dict[str, Any],
                                                                      root: str) -> None:
    got = _at(url, **options)
    assert got.root == root
    assert got.connector == CONNECTORS["abfs"]
    assert got.connector.name == "hadoop-azure" and "azurebfs" in got.connector.file_system


@pytest.mark.parametrize("url,root", [("gs://bucket/a/s", "gs://bucket/a/s"), ("gcs://bucket/s/", "gs://bucket/s"),
                                      ("gs://bucket", "gs://bucket")])
def test_gcs_urls_become_gs_urls(url: str, root: str) -> None:
    got = _at(url)
    assert (got.root, dict(got.settings)) == (root, {})
    assert got.connector == CONNECTORS["gs"] and "GoogleHadoopFileSystem" in got.connector.file_system


def test_file_and_s3_roots() -> None:
    local = _at("/data/s", "file", "/data/s")
    assert (local.root, dict(local.settings), local.connector) == ("file:///data/s", {}, None)
    s3 = _at("s3n://bucket/s", "s3", "bucket/s")
    assert (s3.root, dict(s3.settings), s3.connector) == ("s3a://bucket/s", {}, CONNECTORS["s3a"])


def test_memory_is_refused() -> None:
    with pytest.raises(UnsupportedOperationError, match=r"memory:// stores; use spark.read.format\('tstream'\)"):
        _at("memory://m/s", "memory", "m/s")


# -- credentials ---------------------------------------------------------------------------------
def test_s3_options_map_to_s3a_settings() -> None:
    got = _at("s3://bucket/s", "s3", "bucket/s", endpoint_url="http://127.0.0.1:9000", key="AKIA1",
              secret=SECRET, token="tok-1", anon=False, client_kwargs={"region_name": "eu"})
    assert dict(got.settings) == {"fs.s3a.endpoint": "http://127.0.0.1:9000", "fs.s3a.access.key": "AKIA1",
                                  "fs.s3a.secret.key": SECRET, "fs.s3a.session.token": "tok-1",
                                  "fs.s3a.path.style.access": "true"}
    # on AWS itself (no endpoint) buckets stay host names
    assert dict(_at("s3://b/s", "s3", "b/s", key="AKIA1", secret=SECRET).settings) == {
        "fs.s3a.access.key": "AKIA1", "fs.s3a.secret.key": SECRET}


_KEY = {f"fs.azure.account.auth.type.{HOST}": "SharedKey", f"fs.azure.account.key.{HOST}": SECRET}
_SAS = {f"fs.azure.account.auth.type.{HOST}": "SAS",
        f"fs.azure.sas.token.provider.type.{HOST}": "org.apache.hadoop.fs.azurebfs.sas.FixedSASTokenProvider",
        f"fs.azure.sas.fixed.token.{HOST}": f"sv=2024&sig={SECRET}"}
_PRINCIPAL = {f"fs.azure.account.auth.type.{HOST}": "OAuth",
              f"fs.azure.account.oauth.provider.type.{HOST}":
                  "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider",
              f"fs.azure.account.oauth2.client.id.{HOST}": "app-1",
              f"fs.azure.account.oauth2.client.secret.{HOST}": SECRET,
              f"fs.azure.account.oauth2.client.endpoint.{HOST}":
                  "https://login.microsoftonline.com/tenant-1/oauth2/token"}


@pytest.mark.parametrize("options,settings", [
    ({}, {}),
    ({"account_key": SECRET}, _KEY),
    ({"connection_string": f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={SECRET};"
                           "EndpointSuffix=core.windows.net"}, _KEY),
    ({"sas_token": f"?sv=2024&sig={SECRET}"}, _SAS),
    ({"sas_token": f"sv=2024&sig={SECRET}"}, _SAS),
    ({"connection_string": f"BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2024&sig={SECRET}"},
     _SAS),
    ({"tenant_id": "tenant-1", "client_id": "app-1", "client_secret": SECRET}, _PRINCIPAL),
    ({"account_key": SECRET, "blocksize": 1 << 20, "max_concurrency": 4, "anon": False}, _KEY),
], ids=["none", "account-key", "conn-key", "sas-with-?", "sas", "conn-sas", "service-principal",
        "python-only-options-ignored"])
def test_azure_credentials_map_to_abfs_settings(options: dict[str, Any], settings: dict[str, str]) -> None:
    got = _at("abfss://box@acct.dfs.core.windows.net/s", **options)
    assert dict(got.settings) == settings
    assert SECRET not in repr(got) and SECRET not in got.root


_BAD_AZURE = [
    ("az:///box/s", {"account_name": "acct"}, InvalidPathError, "az:///box/s names no container"),
    ("abfss://box@acct.example.com/s", {"account_key": SECRET}, InvalidPathError,
     "names no Azure storage account host; write abfss://<container>@<account>.dfs.core.windows.net"),
    ("az://box/s", {"account_key": SECRET}, ConfigError, "needs the storage account: write "
     "abfss://box@<account>.dfs.core.windows.net/s, or pass storage.account_name"),
    ("abfss://box@acct.dfs.core.windows.net/s", {"account_name": "other", "account_key": SECRET}, ConfigError,
     "storage.account_name 'other' differs from the account in the URL \\(acct\\)"),
    ("az://box/s", {"connection_string": f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
                                         f"AccountKey={SECRET};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"},
     UnsupportedOperationError, "storage.connection_string \\(BlobEndpoint\\) names: Spark's ABFS connector reads "
     "only an account's dfs endpoint.*Azurite"),
    ("abfs://box@devstoreaccount1.dfs.core.windows.net/s", {"connection_string": f"AccountKey={SECRET};"
                                                            "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1"},
     UnsupportedOperationError, "storage.connection_string \\(BlobEndpoint\\) names"),
    ("az://box/s", {"connection_string": "UseDevelopmentStorage=true"}, UnsupportedOperationError,
     "UseDevelopmentStorage=true"),
    ("az://box/s", {"account_name": "acct", "account_host": "127.0.0.1:10000", "account_key": SECRET},
     UnsupportedOperationError, "storage.account_host names"),
    ("az://box/s", {"connection_string": SECRET}, ConfigError, "has no Name=value; fields \\(it is not shown here\\)"),
    ("az://box/s", {"account_name": "acct", "credential": object()}, UnsupportedOperationError,
     "storage.credential \\(a Python credential object\\) cannot be handed to Spark's ABFS connector; pass "
     "storage.client_id, storage.client_secret and storage.tenant_id"),
    ("az://box/s", {"account_name": "acct", "anon": True}, UnsupportedOperationError, "no anonymous access"),
    ("az://box/s", {"account_name": "acct", "account_key": SECRET, "sas_token": SECRET + "x"}, ConfigError,
     "give an account key and a SAS token; Spark's ABFS connector takes one credential per account"),
    ("az://box/s", {"account_name": "acct", "client_id": "app-1", "client_secret": SECRET}, ConfigError,
     "storage.tenant_id missing"),
    ("az://box/s", {"account_name": "acct", "tenant_id": "t", "client_secret": SECRET}, ConfigError,
     "storage.client_id missing"),
]


@pytest.mark.parametrize("url,options,error,match", _BAD_AZURE, ids=[
    "no-container", "foreign-host", "no-account", "two-accounts", "emulator-endpoint", "emulator-behind-an-azure-url",
    "dev-storage", "emulator-host", "garbled-connection-string", "credential-object", "anon", "two-credentials",
    "principal-without-tenant", "principal-without-client"])
def test_what_abfs_cannot_be_told_is_refused_without_showing_a_secret(
        url: str, options: dict[str, Any], error: type[TStreamError], match: str) -> None:
    with pytest.raises(error, match=match) as info:
        _at(url, **options)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value.args)
    assert "spark.read.format('tstream')" in str(info.value) or error is not UnsupportedOperationError


_KEYFILE = {"fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE", "fs.gs.auth.service.account.enable": "true",
            "fs.gs.auth.service.account.json.keyfile": "/dbfs/keys/reader.json"}
_INLINE_KEY = {"fs.gs.auth.service.account.enable": "true",
               "fs.gs.auth.service.account.email": "reader@proj.iam.gserviceaccount.com",
               "fs.gs.auth.service.account.private.key.id": "kid-123",
               "fs.gs.auth.service.account.private.key": SA_KEY["private_key"]}


@pytest.mark.parametrize("options,settings", [
    ({"token": "google_default"}, {"fs.gs.auth.type": "APPLICATION_DEFAULT"}),
    ({"token": "cloud"}, {"fs.gs.auth.type": "COMPUTE_ENGINE"}),
    ({"token": "/dbfs/keys/reader.json"}, _KEYFILE),
    ({"token": SA_KEY}, _INLINE_KEY),
    ({"token": json.dumps(SA_KEY)}, _INLINE_KEY),
    ({"token": "anon", "endpoint_url": "http://127.0.0.1:4443"},
     {"fs.gs.auth.type": "UNAUTHENTICATED", "fs.gs.auth.service.account.enable": "false",
      "fs.gs.auth.null.enable": "true", "fs.gs.storage.root.url": "http://127.0.0.1:4443/"}),
    ({"project": "proj", "requester_pays": True, "consistency": "md5"},
     {"fs.gs.project.id": "proj", "fs.gs.requester.pays.mode": "ENABLED"}),
], ids=["application-default", "metadata-server", "key-file", "key-dict", "key-json", "emulator", "project"])
def test_gcs_options_map_to_connector_settings(options: dict[str, Any], settings: dict[str, str]) -> None:
    got = _at("gs://bucket/s", **options)
    assert dict(got.settings) == settings
    assert SECRET not in repr(got) and SECRET not in got.root


@pytest.mark.parametrize("token,match", [
    ("browser", "signs in interactively"),
    ({**SA_KEY, "type": "authorized_user"}, "a key of type 'authorized_user'; Spark's GCS connector takes a "
                                             "service account key"),
    ({k: v for k, v in SA_KEY.items() if k != "private_key_id"}, "without private_key_id"),
    ("{" + SECRET, "storage.token \\(not shown\\) is no key file path"),
    (object(), "storage.token \\(not shown\\) is no key file path"),
], ids=["browser", "user-credentials", "key-without-id", "garbled-json", "credentials-object"])
def test_what_the_gcs_connector_cannot_be_told_is_refused_without_showing_a_secret(token: Any, match: str) -> None:
    with pytest.raises(UnsupportedOperationError, match=match) as info:
        _at("gs://bucket/s", token=token)
    assert SECRET not in str(info.value) and "spark.read.format('tstream')" in str(info.value)


def test_each_connector_names_its_jar_and_the_class_spark_loads() -> None:
    assert {k: (c.name, c.file_system) for k, c in CONNECTORS.items()} == {
        "s3a": ("hadoop-aws", "org.apache.hadoop.fs.s3a.S3AFileSystem"),
        "abfs": ("hadoop-azure", "org.apache.hadoop.fs.azurebfs.AzureBlobFileSystem"),
        "gs": ("GCS", "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem")}
    assert "org.apache.hadoop:hadoop-azure:" in CONNECTORS["abfs"].remedy
    assert "gcs-connector" in CONNECTORS["gs"].remedy
