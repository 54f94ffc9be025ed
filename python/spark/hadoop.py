"""Where Spark's own file systems find a stream, and the Hadoop settings that reach it.

:func:`hadoop_location` maps a tstream URL and its storage options (the ``storage.<key>``
options, fsspec's names) to the URL Spark's Hadoop connector expects and the per-query settings
(reader options) that carry the credentials: ``s3://`` to hadoop-aws's ``s3a``, ``abfss://``,
``abfs://`` and ``az://`` to hadoop-azure's ABFS (the ``dfs`` endpoint, which serves every
StorageV2 account, with or without a hierarchical namespace), ``gs://`` and ``gcs://`` to
Google's GCS connector. Pure: no Spark, no store call, no file read.

Invariants:

* a credential is a value of :attr:`HadoopLocation.settings` and nothing else: never in the
  root URL, a ``repr`` or an error message (messages name options, never their values);
* what Spark's connector cannot be told (an emulator endpoint ABFS does not speak, a Python
  credential object, two kinds of credential at once, half a service principal) is refused
  with the option's name and a remedy, rather than dropped and left to fail as an
  authorisation error deep in a Spark task;
* no option means no setting: the cluster's own configuration decides (an instance profile,
  a Unity Catalog credential, the VM's service account).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError, InvalidPathError, UnsupportedOperationError

__all__ = ["CONNECTORS", "PYTHON_READ", "Connector", "HadoopLocation", "hadoop_location"]

#: The read every refusal points to: it reaches the store from Python, through fsspec.
PYTHON_READ = "spark.read.format('tstream'), which reads the store from Python"


@dataclass(frozen=True)
class Connector:
    """A Hadoop file system Spark must have on its classpath to read a scheme itself."""

    name: str
    #: The class looked up on the JVM's classpath to tell whether the connector is there.
    file_system: str
    #: How to add it (a ``spark.jars.packages`` coordinate or a jar).
    remedy: str


CONNECTORS = {
    "s3a": Connector("hadoop-aws", "org.apache.hadoop.fs.s3a.S3AFileSystem",
                     "spark.jars.packages=org.apache.hadoop:hadoop-aws:<your Hadoop version>"),
    "abfs": Connector("hadoop-azure", "org.apache.hadoop.fs.azurebfs.AzureBlobFileSystem",
                      "spark.jars.packages=org.apache.hadoop:hadoop-azure:<your Hadoop version>"),
    "gs": Connector("GCS", "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
                    "spark.jars=<the shaded jar of com.google.cloud.bigdataoss:gcs-connector for Hadoop 3>"),
}


@dataclass(frozen=True)
class HadoopLocation:
    """A stream root as Spark's file systems name it and the reader options that reach it."""

    #: The stream root as a Hadoop URL (``abfss://container@account.dfs.core.windows.net/path``).
    root: str
    #: Hadoop settings, passed as reader options of the scan; values may be credentials.
    settings: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: The connector Spark needs on its classpath (None: Hadoop's own local file system).
    connector: Connector | None = None

    def __repr__(self) -> str:
        # the settings' names only: their values may be credentials
        return f"HadoopLocation(root={self.root!r}, settings={sorted(self.settings)!r})"


def hadoop_location(url: str, protocol: str, root: str, options: Mapping[str, Any]) -> HadoopLocation:
    """The Hadoop URL and settings of the stream at ``url``.

    ``protocol`` and ``root`` are the store's (``Store.protocol``/``Store.root``) for ``file``,
    ``memory`` and ``s3``; Azure and GCS URLs are read from ``url`` itself, in every form their
    fsspec backends take. ``options`` are the storage options (fsspec's names).
    """
    scheme = urlsplit(url).scheme.lower() if "://" in url else "file"
    if scheme in _AZURE_SCHEMES:
        return _azure(url, options)
    if scheme in _GCS_SCHEMES:
        return _gcs(url, options)
    if protocol == "file":
        return HadoopLocation("file://" + root)
    if protocol == "s3":
        return _s3(root, options)
    raise UnsupportedOperationError(
        f"the native read cannot read {protocol}://{root}: Spark's Parquet reader does not see "
        f"{protocol}:// stores; use spark.read.format('tstream') for them")


# -- S3 --------------------------------------------------------------------------------------------
#: s3fs storage options → Hadoop s3a settings.
_S3A_KEYS = {"endpoint_url": "fs.s3a.endpoint", "key": "fs.s3a.access.key",
             "secret": "fs.s3a.secret.key", "token": "fs.s3a.session.token"}


def _s3(root: str, options: Mapping[str, Any]) -> HadoopLocation:
    settings = {hadoop: str(options[k]) for k, hadoop in _S3A_KEYS.items() if options.get(k) is not None}
    if "fs.s3a.endpoint" in settings:  # an S3-compatible server: buckets are not host names there
        settings["fs.s3a.path.style.access"] = "true"
    return HadoopLocation("s3a://" + root, settings, CONNECTORS["s3a"])


# -- Azure -----------------------------------------------------------------------------------------
_AZURE_SCHEMES = ("abfs", "abfss", "az")
#: ``account.dfs.core.windows.net`` (or ``.blob.``), in Azure's public and sovereign clouds.
_AZURE_HOST = re.compile(r"(?P<account>[a-z0-9]{3,24})\.(?:dfs|blob)\.(?P<suffix>core\.[a-z0-9.-]+)")
_DEFAULT_SUFFIX = "core.windows.net"
_CLIENT_CREDS = "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"
_FIXED_SAS = "org.apache.hadoop.fs.azurebfs.sas.FixedSASTokenProvider"
_SERVICE_PRINCIPAL = ("tenant_id", "client_id", "client_secret")


def _azure(url: str, options: Mapping[str, Any]) -> HadoopLocation:
    """``abfss://container@account.dfs.core.windows.net/path``, ``abfs://container/path`` or
    ``az://container/path`` (account from ``account_name`` or the connection string) →
    ``abfss://container@account.dfs.<suffix>/path`` (``abfs://`` stays ``abfs://``)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    conn = _connection_string(options.get("connection_string"))
    if conn.get("usedevelopmentstorage", "").lower() == "true":
        raise _emulator("storage.connection_string (UseDevelopmentStorage=true)")
    container, _, host = parts.netloc.rpartition("@") if "@" in parts.netloc else (parts.netloc, "", "")
    if not container:
        raise InvalidPathError(f"{scheme}://{parts.netloc}{parts.path} names no container; write "
                               f"{scheme}://<container>@<account>.dfs.core.windows.net/<path>")
    account, suffix = None, None
    if host:
        m = _AZURE_HOST.fullmatch(host.lower())
        if m is None:
            raise InvalidPathError(
                f"{scheme}://{container}@{host} names no Azure storage account host; write "
                f"{scheme}://<container>@<account>.dfs.core.windows.net/<path>")
        account, suffix = m["account"], m["suffix"]
    given = options.get("account_name") or conn.get("accountname")
    if account and given and str(given).lower() != account:
        raise ConfigError(f"storage.account_name {given!r} differs from the account in the URL "
                          f"({account}); drop the option or make them agree", option="storage.account_name",
                          value=given)
    account = account or (str(given).lower() if given else None)
    if not account:
        raise ConfigError(
            f"the native read of {scheme}://{container}{parts.path} needs the storage account: write "
            f"abfss://{container}@<account>.dfs.core.windows.net{parts.path}, or pass storage.account_name",
            option="storage.account_name")
    # checked even when the URL names the host: an emulator endpoint in the options is where
    # the Python side goes, so mapping the URL to Azure itself would read another store
    endpoint_suffix = _endpoint_suffix(options, conn, account)
    suffix = suffix or endpoint_suffix
    path = parts.path.strip("/")
    dfs = f"{account}.dfs.{suffix}"
    root = f"{'abfs' if scheme == 'abfs' else 'abfss'}://{container}@{dfs}" + (f"/{path}" if path else "")
    return HadoopLocation(root, _azure_auth(dfs, options, conn), CONNECTORS["abfs"])


def _connection_string(value: Any) -> dict[str, str]:
    """An Azure connection string's fields (lower-cased names); never echoes the string."""
    if value is None:
        return {}
    out = {}
    for part in str(value).split(";"):
        name, sep, v = part.partition("=")
        if sep and name.strip():
            out[name.strip().lower()] = v.strip()
    if not out:
        raise ConfigError("storage.connection_string has no Name=value; fields (it is not shown here); "
                          "copy it from the storage account's Access keys page", option="storage.connection_string")
    return out


def _endpoint_suffix(options: Mapping[str, Any], conn: Mapping[str, str], account: str) -> str:
    """The cloud's endpoint suffix; an endpoint that is not Azure's (an emulator) is refused:
    Spark's ABFS connector speaks only the ``dfs`` endpoint, which Azurite does not serve."""
    for option, host in (("storage.account_host", options.get("account_host")),
                         ("storage.connection_string (BlobEndpoint)", urlsplit(conn.get("blobendpoint", "")).hostname),
                         ("storage.connection_string (DfsEndpoint)", urlsplit(conn.get("dfsendpoint", "")).hostname)):
        if host:
            m = _AZURE_HOST.fullmatch(str(host).lower())
            if m is None or m["account"] != account:
                raise _emulator(option)
            return m["suffix"]
    return conn.get("endpointsuffix") or _DEFAULT_SUFFIX


def _emulator(option: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"the native read cannot reach the Azure endpoint {option} names: Spark's ABFS connector "
        "reads only an account's dfs endpoint (<account>.dfs.core.windows.net), which storage "
        f"emulators such as Azurite do not serve; use {PYTHON_READ}")


def _azure_auth(dfs: str, options: Mapping[str, Any], conn: Mapping[str, str]) -> dict[str, str]:
    """ABFS settings of one account's credential: shared key, SAS or a service principal."""
    if options.get("credential") is not None:
        raise UnsupportedOperationError(
            "storage.credential (a Python credential object) cannot be handed to Spark's ABFS "
            "connector; pass storage.client_id, storage.client_secret and storage.tenant_id, or none "
            f"and let the cluster's configuration reach the account, or use {PYTHON_READ}")
    if options.get("anon"):
        raise UnsupportedOperationError(
            "storage.anon: Spark's ABFS connector has no anonymous access; pass a credential "
            f"(storage.account_key, storage.sas_token, a service principal) or use {PYTHON_READ}")
    key = options.get("account_key") or conn.get("accountkey")
    sas = options.get("sas_token") or conn.get("sharedaccesssignature")
    principal = {k: options.get(k) for k in _SERVICE_PRINCIPAL if options.get(k)}
    kinds = [name for name, given in (("an account key", key), ("a SAS token", sas),
                                      ("a service principal", principal)) if given]
    if len(kinds) > 1:
        raise ConfigError(f"the storage options give {' and '.join(kinds)}; Spark's ABFS connector "
                          "takes one credential per account: pass only one", option="storage")
    if principal and len(principal) < len(_SERVICE_PRINCIPAL):
        missing = [f"storage.{k}" for k in _SERVICE_PRINCIPAL if k not in principal]
        raise ConfigError(f"a service principal needs storage.tenant_id, storage.client_id and "
                          f"storage.client_secret; {', '.join(missing)} missing (for a managed identity, "
                          "pass none and configure the cluster)", option=missing[0])
    if key:
        return {f"fs.azure.account.auth.type.{dfs}": "SharedKey", f"fs.azure.account.key.{dfs}": str(key)}
    if sas:
        return {f"fs.azure.account.auth.type.{dfs}": "SAS", f"fs.azure.sas.token.provider.type.{dfs}": _FIXED_SAS,
                f"fs.azure.sas.fixed.token.{dfs}": str(sas).lstrip("?")}
    if principal:
        return {f"fs.azure.account.auth.type.{dfs}": "OAuth",
                f"fs.azure.account.oauth.provider.type.{dfs}": _CLIENT_CREDS,
                f"fs.azure.account.oauth2.client.id.{dfs}": str(principal["client_id"]),
                f"fs.azure.account.oauth2.client.secret.{dfs}": str(principal["client_secret"]),
                f"fs.azure.account.oauth2.client.endpoint.{dfs}":
                    f"https://login.microsoftonline.com/{principal['tenant_id']}/oauth2/token"}
    return {}


# -- Google Cloud Storage --------------------------------------------------------------------------
_GCS_SCHEMES = ("gs", "gcs")
#: gcsfs ``token`` keywords → the GCS connector's ``fs.gs.auth.type`` (connector 3.x).
_GCS_TOKEN_TYPES = {"google_default": "APPLICATION_DEFAULT", "cloud": "COMPUTE_ENGINE"}
#: A service account's key fields → the connector's settings (connector 2.x, Databricks' form).
_GCS_KEY_FIELDS = {"client_email": "fs.gs.auth.service.account.email",
                   "private_key_id": "fs.gs.auth.service.account.private.key.id",
                   "private_key": "fs.gs.auth.service.account.private.key"}


def _gcs(url: str, options: Mapping[str, Any]) -> HadoopLocation:
    """``gs://bucket/path`` or ``gcs://bucket/path`` → ``gs://bucket/path``."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    root = f"gs://{parts.netloc}" + (f"/{path}" if path else "")
    settings = _gcs_auth(options.get("token"))
    if options.get("project"):
        settings["fs.gs.project.id"] = str(options["project"])
    if options.get("endpoint_url"):  # an emulator (fake-gcs-server) or a private endpoint
        settings["fs.gs.storage.root.url"] = str(options["endpoint_url"]).rstrip("/") + "/"
    if options.get("requester_pays"):
        settings["fs.gs.requester.pays.mode"] = "ENABLED"
    return HadoopLocation(root, settings, CONNECTORS["gs"])


def _gcs_auth(token: Any) -> dict[str, str]:
    """The connector's settings of gcsfs's ``token``: a keyword, a key file's path, or a service
    account key (a dict or its JSON text)."""
    if token is None:
        return {}
    if isinstance(token, str) and token in _GCS_TOKEN_TYPES:
        return {"fs.gs.auth.type": _GCS_TOKEN_TYPES[token]}
    if token == "anon":
        # 3.x reads the type; 2.x needs the service account off and null credentials on
        return {"fs.gs.auth.type": "UNAUTHENTICATED", "fs.gs.auth.service.account.enable": "false",
                "fs.gs.auth.null.enable": "true"}
    if isinstance(token, str) and not token.lstrip().startswith("{"):
        if token == "browser":
            raise UnsupportedOperationError(
                "storage.token='browser' signs in interactively, which Spark's executors cannot do; "
                f"pass a service account key file, or none and let the cluster reach the bucket, or use {PYTHON_READ}")
        # a key file: it must exist at this path on every node of the cluster (the connector's rule)
        return {"fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE", "fs.gs.auth.service.account.enable": "true",
                "fs.gs.auth.service.account.json.keyfile": token}
    info = _service_account(token)
    return {"fs.gs.auth.service.account.enable": "true",
            **{hadoop: str(info[k]) for k, hadoop in _GCS_KEY_FIELDS.items()}}


def _service_account(token: Any) -> Mapping[str, Any]:
    """A service account key from ``token`` (a dict or JSON text); never echoes it."""
    info: Any = token
    if isinstance(token, str):
        try:
            info = json.loads(token)
        except ValueError:
            info = None
    if not isinstance(info, Mapping):
        raise UnsupportedOperationError(
            "storage.token (not shown) is no key file path, gcsfs keyword or service account key that "
            "Spark's GCS connector can be given; pass a service account key (JSON) or its file's path, "
            f"or use {PYTHON_READ}")
    missing = [k for k in _GCS_KEY_FIELDS if not info.get(k)]
    if info.get("type") != "service_account" or missing:
        raise UnsupportedOperationError(
            f"storage.token holds a key of type {info.get('type')!r}"
            + (f" without {', '.join(missing)}" if missing else "")
            + "; Spark's GCS connector takes a service account key (type 'service_account'): pass one, "
              f"or its file's path, or use {PYTHON_READ}")
    return info
