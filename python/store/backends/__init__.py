"""One backend per storage scheme, chosen from one table (:data:`BACKENDS`).

A backend owns everything that differs between stores: its filesystem's construction, how it
reads, lists, writes and creates-if-absent, and how its failures are classified. Adding a store
is one module here and one row in the table.
"""

from __future__ import annotations

from .azure import AzureBackend
from .base import Backend
from .gcs import GCSBackend
from .local import LocalBackend
from .memory import MemoryBackend
from .s3 import S3Backend

__all__ = ["BACKENDS", "Backend", "backend_class"]

#: Scheme -> backend class, in the order messages list them.
BACKENDS: dict[str, type[Backend]] = {
    b.scheme: b for b in (LocalBackend, MemoryBackend, S3Backend, AzureBackend, GCSBackend)}
#: Every spelling of a scheme in a URL -> the scheme.
SCHEME_OF: dict[str, str] = {**{a: b.scheme for b in BACKENDS.values() for a in b.aliases},
                             **{s: s for s in BACKENDS}}


def backend_class(scheme: str) -> type[Backend] | None:
    """The backend of ``scheme`` or one of its aliases; None if tstream stores nothing there."""
    canonical = SCHEME_OF.get(scheme)
    return BACKENDS[canonical] if canonical is not None else None
