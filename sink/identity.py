"""Which writer a streaming sink commits as: decided on the driver from what its checkpoint holds.

A streaming sink's commits are idempotent on (writer, micro-batch). The writer must be the
*checkpoint's*, not the path string's: a query restarted from a deleted and recreated checkpoint
at the same ``checkpointLocation`` starts again at batch 0, and were the writer the path's hash
that batch would be taken for a replay of the old query's batch 0 and never land.

Invariants:

* the same checkpoint always gives the same writer (a replayed batch stays a no-op): the writer
  is pinned in the checkpoint folder (:data:`MARKER`) the first time a writer is made for it, and
  read back from there by every later writer (PySpark makes one per micro-batch, and another,
  in another process, for each commit);
* a fresh checkpoint is a new writer: Spark's query id (the ``id`` of the checkpoint's
  ``metadata``, written when the query is created, before its first batch) names it;
* a checkpoint from before writers were pinned (no marker, batches Spark already committed) keeps
  the path-hash writer it has committed under, so its replays stay no-ops across the upgrade;
* a checkpoint Python cannot reach (a file system fsspec does not know, or no ``metadata`` where
  Spark keeps it) falls back to the path-hash writer, with a warning naming ``writerId``; any
  other failure to read it fails the micro-batch (Spark runs it again), never switches writers.

Runs where Spark asks for a writer: in a Python worker on the driver's machine, never in a task
(a task needs no writer id: only the driver's commit keys by it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ..errors import CorruptMetadataError
from ..keys import QUERY_WRITER_PREFIX, WRITER_ID

logger = logging.getLogger(__name__)

#: The file in the checkpoint folder that pins the sink's writer id (beside Spark's ``metadata``).
MARKER = "tstream-writer.json"
#: Spark's own file in the checkpoint folder: ``{"id": "<query id>"}``.
SPARK_METADATA = "metadata"
#: Spark's folder of committed micro-batches (files named by batch id).
SPARK_COMMITS = "commits"
#: Hadoop schemes fsspec knows under another name.
_FSSPEC_SCHEME = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasbs": "abfs", "gs": "gcs"}


def path_writer(checkpoint_location: str) -> str:
    """The writer id of sinks before ids were pinned: a hash of the checkpoint path string."""
    digest = hashlib.sha256(checkpoint_location.rstrip("/").encode()).hexdigest()[:16]
    return f"{QUERY_WRITER_PREFIX}{digest}"


def query_writer(query_id: str) -> str:
    """The writer id of the query whose checkpoint's ``metadata`` holds ``query_id``."""
    return f"{QUERY_WRITER_PREFIX}{query_id}"


def checkpoint_writer(checkpoint_location: str, stream_protocol: str = "file",
                      storage_options: Mapping[str, Any] | None = None) -> str:
    """The writer id of the streaming query checkpointed at ``checkpoint_location``.

    ``stream_protocol`` and ``storage_options`` are the stream's: a checkpoint on the same scheme
    is reached with the same options (the usual case: one bucket, one credential).
    """
    # only a checkpoint proved out of reach falls back: a failed read of one that is there
    # (a transient store error) fails the batch, since another writer id would commit it again
    try:
        fs, root = _checkpoint_fs(checkpoint_location, stream_protocol, storage_options or {})
        return _pinned_writer(fs, root, checkpoint_location)
    except (FileNotFoundError, ValueError, ImportError) as e:
        logger.warning(
            "tstream sink: cannot reach the checkpoint at %s from Python (%s: %s); its writer id is the "
            "path's hash, so a query restarted from a fresh checkpoint at this same path would have its "
            "first batches taken for replays; give each fresh checkpoint its own .option(%r, ...)",
            checkpoint_location, type(e).__name__, e, WRITER_ID)
        return path_writer(checkpoint_location)


def _checkpoint_fs(location: str, stream_protocol: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    import fsspec

    scheme = urlsplit(location).scheme
    if scheme in ("", "file") or len(scheme) == 1:  # a local path (or a Windows drive letter)
        fs = fsspec.filesystem("file")
        return fs, fs._strip_protocol(location)
    protocol = _FSSPEC_SCHEME.get(scheme, scheme)
    options = dict(storage_options) if protocol == _FSSPEC_SCHEME.get(stream_protocol, stream_protocol) else {}
    fs = fsspec.filesystem(protocol, **options)
    return fs, fs._strip_protocol(location)


def _pinned_writer(fs: Any, root: str, location: str) -> str:
    marker = posixpath.join(root, MARKER)
    try:
        pinned = _read_json(fs, marker)
        writer = None if pinned is None else pinned.get("writer")
    except ValueError:
        pinned, writer = {}, None
    if pinned is not None:
        if not isinstance(writer, str) or not writer.startswith(QUERY_WRITER_PREFIX):
            raise CorruptMetadataError(
                f"{marker} holds no writer id, so the sink cannot tell which of its batches are replays; "
                f"restore it, or start the query from a new checkpointLocation", path=marker)
        return writer
    spark = _read_json(fs, posixpath.join(root, SPARK_METADATA))
    if spark is None or not isinstance(spark.get("id"), str):
        raise FileNotFoundError(f"no Spark checkpoint metadata at {posixpath.join(root, SPARK_METADATA)}")
    if _has_commits(fs, posixpath.join(root, SPARK_COMMITS)):
        writer = path_writer(location)  # committed under the path's hash before writers were pinned
    else:
        writer = query_writer(spark["id"])
    data = json.dumps({"writer": writer, "query": spark["id"]}).encode()
    with fs.open(marker, "wb") as f:
        f.write(data)
    return writer


def _read_json(fs: Any, path: str) -> dict[str, Any] | None:
    try:
        with fs.open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    value = json.loads(text.decode().splitlines()[0]) if text.strip() else None
    return value if isinstance(value, dict) else None


def _has_commits(fs: Any, folder: str) -> bool:
    try:
        names = fs.ls(folder, detail=False)
    except FileNotFoundError:
        return False
    return any(posixpath.basename(n.rstrip("/")).isdigit() for n in names)
