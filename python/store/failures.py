"""How store failures are classified and retried, and which option values are secrets.

Decided from exception types and S3 error codes, never from message text, and without importing
the backend libraries (``file://`` users may not have botocore or aiohttp installed). These are
the rules of ``s3://`` and of every store (connection failures, timeouts); the Azure and GCS
backends add their services' status and error codes (``store/backends/azure.py``, ``gcs.py``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

#: A key naming a credential contains one of these anywhere, or one of the words below as a
#: whole ``._-``-separated word (so ``key``/``access_key_id`` are secret, ``keyColumn`` is not).
_SECRET_PARTS = ("secret", "password", "passwd", "token", "credential", "connection_string",
                 "private", "signature")
_SECRET_WORDS = frozenset({"key", "pwd", "sas", "auth", "authorization"})
#: Shorter values are not redacted from text (they would mask ordinary words).
MIN_SECRET_LEN = 3

#: S3 error codes a retry may cure. ``ConditionalRequestConflict`` (409) answers a conditional
#: create that met another in flight for the same key: it was not applied, and AWS says to retry
#: (the retry wins, or meets the other's object as 412 ``PreconditionFailed``).
_TRANSIENT_CODES = frozenset({
    "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling",
    "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "BandwidthLimitExceeded",
    "ConditionalRequestConflict",
    "500", "502", "503", "504",
})
_TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
#: Connection-level failures of botocore, aiohttp, urllib3 and fsspec, by class name, so that
#: classifying an error never imports those libraries (``file://`` users may not have them).
_TRANSIENT_TYPES = frozenset({
    "HTTPClientError", "EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError",
    "ConnectTimeoutError", "ProxyConnectionError", "ResponseStreamingError", "IncompleteRead",
    "IncompleteReadError", "ResponseParserError", "ClientPayloadError", "ServerDisconnectedError",
    "ClientConnectionError", "ClientOSError", "ServerTimeoutError", "FSTimeoutError",
    "ProtocolError",
})
#: Libraries whose exceptions are store failures on ``s3://`` (anything else is a bug and propagates
#: as is); each backend names its own (:attr:`~pyspark_tstream.store.backends.base.Backend.error_modules`).
S3_MODULES = ("botocore", "aiobotocore", "aiohttp", "s3fs", "fsspec", "urllib3", "http.")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retry of transient store failures: ``attempts`` tries in all, jittered backoff.

    The delay before retry ``n`` (from 0) is drawn from ``[d/2, d]`` with
    ``d = min(max_delay, base_delay * 2**n)``: the defaults wait 2.6–5.2 s in all over 8
    attempts, enough for dropped connections and a burst of SlowDown (S3 asks clients to back
    off for seconds; Hadoop's S3A retries for longer). A streaming query's driver-side calls
    (``latestOffset``, planning, a sink's commit) have no retry loop above them but Spark's,
    which fails the query: 5 attempts within 0.75 s (the earlier default) let a soak at a 3 %
    fault rate lose a query's ``latestOffset`` to one read. A longer outage surfaces as a retriable
    :class:`~pyspark_tstream.errors.StorageError` for the caller's own retry loop (a Spark task retry, a commit retry).

    ``patience`` (seconds) rides out longer outages once the store has answered (a success,
    or an S3 error response: :func:`is_store_answer`): a
    :class:`~pyspark_tstream.store.storage.Store` that has completed a call keeps retrying a transient
    failure past ``attempts`` until ``patience`` seconds have passed since the call first
    failed, at ``max_delay``. Spark queries set it from ``storeRetryTimeout`` (a streaming
    query runs for weeks and has no retry loop above it but Spark's, which stops the query);
    a store that never answered (a wrong endpoint) still fails after ``attempts``. ``hint``
    ends the error of a call that ran out of patience (which option to raise).
    """

    attempts: int = 8
    base_delay: float = 0.05
    max_delay: float = 2.0
    patience: float = 0.0
    hint: str = ""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError(f"RetryPolicy.attempts must be >= 1, got {self.attempts}",
                              option="attempts", value=self.attempts)
        if self.patience < 0:
            raise ConfigError(f"RetryPolicy.patience must be >= 0 seconds, got {self.patience}",
                              option="patience", value=self.patience)

    def may_retry(self, attempt: int, failing_for: float, reached: bool) -> bool:
        """Whether to retry after failed attempt ``attempt`` (0-based) of a call that has been
        failing for ``failing_for`` seconds, on a store that has answered before (``reached``)."""
        if attempt < self.attempts - 1:
            return True
        return reached and failing_for + self.max_delay <= self.patience

    def delay(self, retry: int) -> float:
        """Seconds to sleep before retry number ``retry`` (0-based)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** retry))
        return random.uniform(ceiling / 2, ceiling)


def is_secret_key(key: str) -> bool:
    """Whether an option named ``key`` holds a credential: its value is never shown (storage
    options in store errors and CLI output, Spark option values in config errors)."""
    low = key.lower()
    if any(part in low for part in _SECRET_PARTS):
        return True
    return any(word in _SECRET_WORDS for word in re.split(r"[._\-\s]", low))


def secret_values(options: Mapping[str, Any]) -> tuple[str, ...]:
    """Credential strings inside ``options`` (nested too), longest first, for redaction."""
    found: set[str] = set()
    for key, value in options.items():
        if isinstance(value, Mapping):
            found.update(secret_values(value))
        elif value is not None and not isinstance(value, bool) and len(str(value)) >= MIN_SECRET_LEN \
                and is_secret_key(str(key)):
            found.add(str(value))
    return tuple(sorted(found, key=len, reverse=True))


def chain(exc: BaseException) -> Iterable[BaseException]:
    """``exc`` and the exceptions it was raised from (s3fs wraps botocore errors as causes)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)


def _response(exc: BaseException) -> tuple[str | None, int | None]:
    """(S3 error code, HTTP status) of a botocore ``ClientError``; (None, None) otherwise."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None, None
    code = (response.get("Error") or {}).get("Code")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return (str(code) if code is not None else None), status


def is_precondition_failed(exc: BaseException) -> bool:
    """True when ``exc`` says a conditional create lost because the object exists.

    moto and AWS raise ``FileExistsError`` through s3fs; SeaweedFS omits the ``<Condition>``
    element, so s3fs raises ``OSError(EINVAL)`` caused by a ``PreconditionFailed`` ClientError.
    """
    for cur in chain(exc):
        if isinstance(cur, FileExistsError):
            return True
        code, status = _response(cur)
        if code in ("PreconditionFailed", "412") or status == 412:
            return True
    return False


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: dropped connections, timeouts, 429/5xx, SlowDown.

    Decided from exception types and S3 error codes, never from message text (a path such as
    ``chunks/00500.parquet`` must not look like an HTTP 500).
    """
    if isinstance(exc, (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError,
                        NotADirectoryError)):
        return False
    for cur in chain(exc):
        if isinstance(cur, (ConnectionError, TimeoutError)):
            return True
        if any(cls.__name__ in _TRANSIENT_TYPES for cls in type(cur).__mro__):
            return True
        code, status = _response(cur)
        if code in _TRANSIENT_CODES or status in _TRANSIENT_STATUS:
            return True
    return False


def is_store_answer(exc: BaseException) -> bool:
    """True when ``exc`` carries an error the store itself sent: an S3 error response with its
    own code (``SlowDown``, ``InternalError``, ``ServiceUnavailable``, ...).

    Such a store is at the configured endpoint and answering, if only to say it is overloaded or
    down for now, so a retry policy's patience applies to it (a store that has answered).
    Connection failures, timeouts and a bare HTTP status without an S3 error code (a gateway's
    502/504 page: the store behind it may be unreachable or the endpoint wrong) are not answers.
    """
    for cur in chain(exc):
        code, _ = _response(cur)
        if code is not None and not code.isdigit():
            return True
    return False


def is_backend_error(exc: BaseException, modules: tuple[str, ...] = S3_MODULES) -> bool:
    """Whether ``exc`` comes from the store: an ``OSError``, or an error of one of ``modules``."""
    if isinstance(exc, OSError):
        return True
    return any(cls.__module__.startswith(modules) for cls in type(exc).__mro__)
