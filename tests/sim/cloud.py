"""The S3, Azure and GCS backends' failure semantics as a fault model of the simulated store.

For a run of profile ``backends`` the ``memory://`` store fails as a cloud store does, in the
errors the cloud libraries raise before tstream translates them, and the run's store classifies
them with the real backend's own rules (``store/backends/s3.py``, ``azure.py``, ``gcs.py``: the
classification methods are the backend class's, not copies), so the simulation checks that
translation as well as what every actor does with its outcome:

* a conditional create that loses answers as the service does: S3 412 ``PreconditionFailed``
  (a botocore ``ClientError`` that s3fs turns into ``FileExistsError`` when the answer names the
  ``If-None-Match`` condition, as AWS's does, and into ``OSError(EINVAL)`` when it does not, as
  SeaweedFS's), Azure 409 ``BlobAlreadyExists`` or 412 ``ConditionNotMet`` (azure-core's
  ``ResourceExistsError``/``HttpResponseError``), GCS 412 (gcsfs's ``HttpError``), which the
  store must take as "exists";
* S3's 409 ``ConditionalRequestConflict``: a conditional create that met another one in flight
  for the same key and was not applied (AWS: "retry the request"), drawn for a third of the
  transient failures of a conditional create;
* throttling and outages: S3 503 ``SlowDown``/``ServiceUnavailable`` or 500 ``InternalError``
  (the ``ClientError`` s3fs wraps in an ``OSError``), Azure 503 ``ServerBusy`` or 429, GCS 429
  or 503, a run of a few that the store's retries absorb (the product's 8 attempts), or one past
  them (a retriable ``StorageError`` for the caller's own retry loop);
* a create applied whose answer timed out (botocore's ``ReadTimeoutError`` under s3fs,
  azure-core's ``ServiceResponseError``, aiohttp's ``ServerTimeoutError`` under gcsfs): the
  retry meets the create's own object as a conflict, which the journal, the macro-maps and the
  group versions resolve by their nonces.

Which service a seed plays is drawn from the seed (:func:`flavour`). Every failure this model
raises is one a retry may cure or a lost create, so a store call that ends in a StorageError
not marked retriable fails the run: the backend's classification missed one.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark_tstream.errors import StorageError
from pyspark_tstream.store.backends.azure import AzureBackend
from pyspark_tstream.store.backends.gcs import GCSBackend
from pyspark_tstream.store.backends.memory import MemoryBackend
from pyspark_tstream.store.backends.s3 import S3Backend
from pyspark_tstream.store.storage import Store

#: The services a run may play.
FLAVOURS = ("s3", "azure", "gcs")
#: The classification a run's store takes from the real backend.
_CLASSIFIERS = ("is_backend_error", "is_transient", "is_precondition_failed", "is_store_answer")
_BACKENDS = {"s3": S3Backend, "azure": AzureBackend, "gcs": GCSBackend}


def flavour(seed: int, named: str) -> str:
    """The service seed ``seed`` plays: ``named``, or drawn when it is ``cloud``."""
    return FLAVOURS[random.Random(seed ^ 0xC10D).randrange(len(FLAVOURS))] if named == "cloud" else named


def _azure(status: int, code: str, message: str) -> BaseException:
    from azure.core.exceptions import HttpResponseError, ResourceExistsError

    cls = ResourceExistsError if status == 409 else HttpResponseError
    e = cls(message=f"{message} (status {status}, {code})")
    e.status_code = status  # set as the SDK sets them from the response it had
    e.error_code = code  # type: ignore[attr-defined]
    return e


def _gcs(status: int, message: str) -> BaseException:
    from gcsfs.retry import HttpError

    return HttpError({"code": status, "message": message})


def _s3(status: int, code: str, message: str, condition: str = "") -> BaseException:
    """What s3fs raises for S3's error answer: botocore's ``ClientError``, translated by s3fs's own
    ``translate_boto_error`` (an ``OSError`` or ``FileExistsError`` caused by the ``ClientError``)."""
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    error: dict[str, str] = {"Code": code, "Message": message}
    if condition:
        error["Condition"] = condition
    return translate_boto_error(ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}},
                                            "PutObject"))  # type: ignore[no-any-return]


def conflict(service: str, rng: random.Random, path: str) -> BaseException:
    """What the service answers a conditional create of an existing object."""
    if service == "s3":  # AWS names the condition; SeaweedFS leaves it out
        return _s3(412, "PreconditionFailed", f"At least one of the pre-conditions you specified did not hold: {path}",
                   "If-None-Match" if rng.random() < 0.5 else "")
    if service == "azure":
        return _azure(409, "BlobAlreadyExists", f"blob {path} exists") if rng.random() < 0.5 \
            else _azure(412, "ConditionNotMet", f"condition not met: {path}")
    return _gcs(412, f"precondition failed: {path}")


def request_conflict(what: str) -> BaseException:
    """S3's answer to a conditional create that met another in flight for the key (not applied)."""
    return _s3(409, "ConditionalRequestConflict",
               f"A conflicting conditional operation is currently in progress against this resource: {what}")


def throttled(service: str, rng: random.Random, what: str) -> BaseException:
    """A throttling or overload answer (a retry may cure it)."""
    if service == "s3":
        code = rng.choice(("SlowDown", "ServiceUnavailable", "InternalError"))
        return _s3(500 if code == "InternalError" else 503, code, f"please reduce your request rate: {what}")
    if service == "azure":
        return _azure(503, "ServerBusy", f"server busy: {what}") if rng.random() < 0.5 \
            else _azure(429, "TooManyRequests", f"too many requests: {what}")
    return _gcs(429 if rng.random() < 0.5 else 503, f"rate limited: {what}")


def timed_out(service: str, what: str) -> BaseException:
    """A request whose answer never came (it may have been applied)."""
    if service == "s3":  # aiobotocore's read timeout, which s3fs raises as it is
        from botocore.exceptions import ReadTimeoutError

        return ReadTimeoutError(endpoint_url=f"https://bucket.s3.amazonaws.com/{what.split(' ', 1)[-1]}")
    if service == "azure":
        from azure.core.exceptions import ServiceResponseError

        return ServiceResponseError(f"timed out waiting for the answer: {what}")
    import aiohttp

    return aiohttp.ServerTimeoutError(f"timed out waiting for the answer: {what}")


def errors(service: str, rng: random.Random,
           note: Callable[[str], None] = lambda what: None) -> Callable[[str, str, str], BaseException]:
    """The scheduler's faulty attempts as ``service`` raises them (``Scheduler.errors``): a
    transient failure is a throttle or a timeout (or, of an S3 conditional create, a 409
    ``ConditionalRequestConflict``), an outage a 503 on every attempt, a lost answer a timeout."""
    def raised(kind: str, op: str, rel: str) -> BaseException:
        what = f"{op} {rel}"
        if service == "s3" and kind == "transient" and op == "put_if_absent" and rng.random() < 1 / 3:
            note("S3 conditional request conflicts")
            return request_conflict(what)
        if kind == "ambiguous" or (kind == "transient" and rng.random() < 0.5):
            return timed_out(service, what)
        return throttled(service, rng, what)
    return raised


@contextmanager
def cloud_store(service: str, rng: random.Random) -> Iterator[None]:
    """``memory://`` classifies errors as ``service``'s backend does and answers a lost
    conditional create with that service's conflict error (nothing for an empty ``service``)."""
    if not service:
        yield
        return
    real = _BACKENDS[service]
    saved: dict[str, Any] = {name: MemoryBackend.__dict__.get(name) for name in (*_CLASSIFIERS, "create",
                                                                                  "error_modules")}
    create = MemoryBackend.create

    def conditional(self: MemoryBackend, path: str, data: bytes) -> None:
        try:
            create(self, path, data)
        except FileExistsError:
            answer = conflict(service, rng, path)
            raise answer from answer.__cause__  # s3fs's translation is caused by botocore's ClientError

    call = Store._call

    def translated(self: Store, op: str, rel: str, fn: Callable[[], Any]) -> Any:
        try:
            return call(self, op, rel, fn)
        except StorageError as e:
            if not e.retriable:  # every failure this model raises is one a retry may cure
                raise AssertionError(f"{op} {rel}: a {service} failure the store did not classify as "
                                     f"transient or as a lost create: {e}") from e
            raise

    for name in _CLASSIFIERS:
        setattr(MemoryBackend, name, real.__dict__.get(name, getattr(real, name)))
    MemoryBackend.error_modules = real.error_modules
    MemoryBackend.create = conditional  # type: ignore[method-assign]
    Store._call = translated  # type: ignore[method-assign]
    try:
        yield
    finally:
        Store._call = call  # type: ignore[method-assign]
        for name, value in saved.items():
            if value is None:
                delattr(MemoryBackend, name)
            else:
                setattr(MemoryBackend, name, value)
