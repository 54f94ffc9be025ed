"""``abfs://`` (``abfss://``, ``az://``): Azure Blob Storage and ADLS Gen2 through adlfs.

URLs come in the form Databricks users copy, ``abfss://container@account.dfs.core.windows.net/
path`` (the account is taken from the host; ``*.blob.core.windows.net`` works too), or as
``abfs://container/path`` / ``az://container/path`` with the account in the storage options
(``account_name``, or a ``connection_string``). Both ADLS Gen2 and plain Blob accounts are reached
through the Blob endpoint, which every account has.

Credentials are storage options: ``connection_string``, ``account_key``, ``sas_token``, a
service principal (``tenant_id``, ``client_id``, ``client_secret``), or none of them for the
default Azure credential chain (environment, managed identity, Azure CLI). Every secret value,
and the ``AccountKey``/``SharedAccessSignature``/``sig`` parts inside a connection string or SAS
token, is redacted from messages.

A commit is ``upload_blob(overwrite=False)`` (adlfs's ``pipe_file(mode="create")``): the
service applies it only if no blob has the name (``If-None-Match: *``) and answers 409
``BlobAlreadyExists`` otherwise, which adlfs raises as ``FileExistsError``. The Azure SDK's own
retry policy is switched off (its default waits seconds between tries): 503 ``ServerBusy``,
429, 500 and timeouts are retried by :class:`~pyspark_tstream.store.storage.Store` under
``storeRetryTimeout``.
"""

from __future__ import annotations

import re
from typing import Any

from .. import failures
from .objectstore import ObjectStoreBackend

__all__ = ["AzureBackend"]

#: ``account.dfs.core.windows.net`` (or ``.blob.``, or a sovereign cloud's suffix).
_ACCOUNT_HOST = re.compile(r"^(?P<account>[a-z0-9]{3,24})\.(?P<kind>dfs|blob)\.(?P<suffix>core\.[a-z0-9.]+)$")
_PUBLIC_SUFFIX = "core.windows.net"
#: HTTP statuses and Azure error codes a retry may cure.
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_TRANSIENT_CODES = frozenset({"ServerBusy", "OperationTimedOut", "InternalError", "ServiceUnavailable"})
#: Exception classes of azure-core that mean the request or its answer was lost on the way.
_TRANSIENT_TYPES = frozenset({"ServiceRequestError", "ServiceResponseError", "ServiceRequestTimeoutError",
                              "ServiceResponseTimeoutError", "IncompleteReadError"})
#: Secret parts inside a connection string or SAS token (``AccountKey=...;``, ``sig=...&``).
_SECRET_PARTS = re.compile(r"(?:AccountKey|SharedAccessSignature|sig)=([^;&]+)", re.IGNORECASE)


class AzureBackend(ObjectStoreBackend):
    """``abfs://``, ``abfss://``, ``az://``."""

    scheme = "abfs"
    aliases = ("abfss", "az")
    url_text = "abfs:// (abfss://, az://)"
    install_hint = "install 'pyspark-tstream[azure]' (adlfs)"
    error_modules = ("azure", "adlfs", "aiohttp", "fsspec", "urllib3", "http.")

    @classmethod
    def split_netloc(cls, netloc: str) -> tuple[str, dict[str, Any]]:
        if "@" not in netloc:
            if ":" in netloc:
                raise cls.credentials_in_url()
            return netloc, {}
        container, _, host = netloc.partition("@")
        if ":" in container or not container:
            raise cls.credentials_in_url()  # user:password@host, never echoed
        match = _ACCOUNT_HOST.match(host.lower())
        if match is None:
            raise ValueError(f"an abfss:// URL names its account as CONTAINER@ACCOUNT.dfs.core.windows.net "
                             f"(or .blob.core.windows.net), not {host!r}; or write abfs://CONTAINER/path "
                             "and pass storage.account_name")
        implied: dict[str, Any] = {"account_name": match["account"]}
        if match["suffix"] != _PUBLIC_SUFFIX:  # a sovereign cloud: adlfs defaults to the public one
            implied["account_host"] = f"{match['account']}.blob.{match['suffix']}"
        return container, implied

    def display(self) -> str:
        if "@" in self.netloc:  # the account-qualified form the URL was written in
            return f"abfss://{self.netloc}/{self.root.partition('/')[2]}".rstrip("/")
        return f"{self.scheme}://{self.root}"

    def secrets(self) -> tuple[str, ...]:
        found = set(super().secrets())
        for value in list(found):
            found.update(m for m in _SECRET_PARTS.findall(value) if len(m) >= failures.MIN_SECRET_LEN)
        return tuple(sorted(found, key=len, reverse=True))

    @classmethod
    def fs_class(cls) -> type:
        from adlfs import AzureBlobFileSystem

        return AzureBlobFileSystem  # type: ignore[no-any-return]  # adlfs is untyped

    def switch_off_retries(self, fs: Any) -> None:
        _no_sdk_retries(fs.service_client)

    # -- errors -------------------------------------------------------------------------------
    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, (FileNotFoundError, FileExistsError, PermissionError)):
            return False
        for cur in failures.chain(exc):
            status, code = _status_code(cur)
            if status in _TRANSIENT_STATUS or code in _TRANSIENT_CODES:
                return True
            if any(cls.__name__ in _TRANSIENT_TYPES for cls in type(cur).__mro__):
                return True
        return failures.is_transient(exc)

    def is_precondition_failed(self, exc: BaseException) -> bool:
        for cur in failures.chain(exc):
            if isinstance(cur, FileExistsError):
                return True
            status, code = _status_code(cur)
            if status == 412 or code in ("BlobAlreadyExists", "ConditionNotMet"):
                return True
        return False

    def is_store_answer(self, exc: BaseException) -> bool:
        return any(_status_code(cur)[1] is not None for cur in failures.chain(exc))


def _status_code(exc: BaseException) -> tuple[int | None, str | None]:
    """(HTTP status, Azure error code) of an azure-core ``HttpResponseError``; Nones otherwise."""
    status = getattr(exc, "status_code", None)
    code = getattr(exc, "error_code", None)
    return (status if isinstance(status, int) else None), (str(code) if code else None)


def _no_sdk_retries(client: Any) -> None:
    """Switch off the Azure SDK's retry policy on ``client``'s pipeline (shared by the container
    and blob clients it makes): Store owns retrying, and the SDK's default backs off for seconds."""
    for policy in getattr(client._pipeline, "_impl_policies", ()):
        if hasattr(policy, "total_retries"):
            policy.total_retries = 0
