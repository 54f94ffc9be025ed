"""Option keys of ``format("tstream")``, each with its ``_DEFAULT`` twin.

Names are the public contract (docs/design.md §4) and are camelCase like Kafka's and Delta's options.
Spark lower-cases every key before the data source sees it, so code compares keys with
:func:`normalize`, never with ``==`` on the raw spelling. A key without a ``_DEFAULT`` twin has
no default: leaving it out means "not set".
"""

from __future__ import annotations

# --- both sides ---------------------------------------------------------------------------

#: Stream URL (``file://``, ``memory://``, ``s3://``...); Spark fills it from ``load(url)``,
#: ``start(url)`` and ``save(url)``.
PATH = "path"

#: Prefix of options passed to fsspec with the prefix removed (``storage.endpoint_url``).
STORAGE_PREFIX = "storage."

#: How long a query's store calls keep retrying transient failures (503 SlowDown, 500s,
#: dropped connections, timeouts) once the store has answered, before the call and so the
#: query fail (``90s``, ``5m``; ``0``: give up after the usual 8 attempts, 2.6-5.2 s). In ms.
STORE_RETRY_TIMEOUT = "storeRetryTimeout"
STORE_RETRY_TIMEOUT_DEFAULT = 120_000

# --- source (spark.readStream / spark.read) ----------------------------------------------

#: Where a new query starts: ``earliest``, ``latest`` or a JSON stream cut
#: ``{"<segment id>": <seq>}``.
STARTING_OFFSETS = "startingOffsets"
STARTING_OFFSETS_DEFAULT = "earliest"

#: Start at the first records with ``_timestamp >=`` this (epoch ms or ISO-8601).
STARTING_TIMESTAMP = "startingTimestamp"

#: Start at now minus this duration (``90s``, ``15m``, ``1h``, ``7d``).
STARTING_AGO = "startingAgo"

#: Start this many records (by ``_tso``) before the current tail.
STARTING_TAIL = "startingTail"

#: Batch reads only: last ``_timestamp`` to read (epoch ms or ISO-8601); default: the tick.
ENDING_TIMESTAMP = "endingTimestamp"

#: Batch reads only: ``latest`` or a JSON stream cut to stop at; default: the tick.
ENDING_OFFSETS = "endingOffsets"

#: Read limits per micro-batch (Spark ReadLimit); unset means no limit.
MAX_RECORDS_PER_TRIGGER = "maxRecordsPerTrigger"
MAX_BYTES_PER_TRIGGER = "maxBytesPerTrigger"
MAX_FILES_PER_TRIGGER = "maxFilesPerTrigger"

#: Bounds on the number of Spark tasks (partitions) a read or micro-batch is split into. Default:
#: one per ~128 MB of data, at least Spark's default parallelism when the planner can know it
#: (else 8) while each task still gets 8 MB; never more than the chunks read.
MIN_PARTITIONS = "minPartitions"
MAX_PARTITIONS = "maxPartitions"

#: Fail (``true``) or skip and report (``false``) when retention removed records still needed.
FAIL_ON_DATA_LOSS = "failOnDataLoss"
FAIL_ON_DATA_LOSS_DEFAULT = True

#: Commit the query's position to the stream under this consumer-group name.
CONSUMER_GROUP = "consumerGroup"

#: Batch reads only: read this metadata table of the stream instead of its records (one of
#: :data:`METADATA_KINDS`; python/api/metadata.py).
METADATA = "metadata"
METADATA_KINDS: tuple[str, ...] = ("history", "segments", "epochs", "groups", "files")

#: ``metadata=history`` only: the first and last journal positions to list (inclusive); default:
#: the newest 1,000 positions.
STARTING_POSITION = "startingPosition"
ENDING_POSITION = "endingPosition"

# --- sink (df.writeStream / df.write) ----------------------------------------------------

#: Routing-key column; without it rows spread evenly over the segments.
KEY_COLUMN = "keyColumn"

#: Client timestamp column (TIMESTAMP or epoch-ms BIGINT).
TIMESTAMP_COLUMN = "timestampColumn"

#: Writer identity; default: derived from ``checkpointLocation`` (none for a batch write).
WRITER_ID = "writerId"

#: ``df.write`` only, with ``writerId``: this write's batch number (a non-negative integer, e.g.
#: ``foreachBatch``'s ``epoch_id``). A batch id at or below the writer's last committed one
#: appends nothing (Delta's ``txnVersion`` rule). A streaming sink keys by query and batch itself.
BATCH_ID = "batchId"

#: Delta Lake's names of ``writerId``/``batchId``, accepted with the same meaning.
TXN_APP_ID = "txnAppId"
TXN_VERSION = "txnVersion"

#: Prefix of the writer ids a streaming sink derives from ``checkpointLocation``; reserved, so an
#: idempotent ``df.write`` can never share a streaming query's dedupe window.
QUERY_WRITER_PREFIX = "query-"

#: Allow additive schema changes (new nullable columns) on write.
MERGE_SCHEMA = "mergeSchema"
MERGE_SCHEMA_DEFAULT = False

# --- stream config (sink; used when a write creates the stream) ---------------------------

#: ``client-prefer`` | ``client-require`` | ``arrival``.
TIMESTAMPING = "timestamping"
TIMESTAMPING_DEFAULT = "client-prefer"

#: Keep client times later than arrival time instead of capping them.
TIMESTAMPING_UNCAPPED = "timestampingUncapped"
TIMESTAMPING_UNCAPPED_DEFAULT = False

#: Initial number of segments.
SEGMENTS = "segments"
SEGMENTS_DEFAULT = 4
#: Most active segments a stream has, at creation and after any scale (each is a row of the
#: state, which every commit rewrites: 4096 keep it well under 1 MB).
SEGMENTS_MAX = 4096

#: Auto-scaling policy (passed to the core as text).
SCALING = "scaling"

#: Retention policy (passed to the core as text).
RETENTION = "retention"

#: Declared writer ids, comma-separated: the tick waits for each one's first commit.
WRITERS = "writers"
WRITERS_DEFAULT: tuple[str, ...] = ()

#: A live writer silent this long (ms) is dropped from the tick.
WRITER_LEASE_MS = "writerLeaseMs"
WRITER_LEASE_MS_DEFAULT = 60_000

#: A writer silent this long (ms) leaves the stream state, its dedupe window and lanes with it:
#: a replay of one of its batches after that appends again (format v6).
WRITER_RETENTION_MS = "writerRetentionMs"
WRITER_RETENTION_MS_DEFAULT = 7 * 24 * 3_600_000

#: Parquet codec of data chunks (the core's ``StreamConfig.compression``).
COMPRESSION = "compression"
COMPRESSION_DEFAULT = "snappy"

#: Compaction of small chunks into macro-chunks: ``target=128MB,min=16`` or ``off``.
COMPACTION = "compaction"
COMPACTION_DEFAULT = "target=128MB,min=16"

# --- keys Spark itself passes -------------------------------------------------------------

#: Spark passes it to a streaming sink; the default writer id derives from it.
CHECKPOINT_LOCATION = "checkpointLocation"

#: Spark passes it to a streaming sink when the query is named.
QUERY_NAME = "queryName"

#: Spark passes it instead of ``path`` for ``load(["a", "b"])`` (JSON list).
PATHS = "paths"

#: Stream-config option → core ``StreamConfig`` field name (the one mapping: the core's
#: ``config.PUBLIC_NAMES`` is its inverse, and ``StreamConfig`` takes its defaults from here).
STREAM_CONFIG_FIELDS = {
    TIMESTAMPING: "timestamping",
    TIMESTAMPING_UNCAPPED: "timestamping_uncapped",
    SEGMENTS: "segments",
    SCALING: "scaling",
    RETENTION: "retention",
    WRITERS: "writers",
    WRITER_LEASE_MS: "writer_lease_ms",
    WRITER_RETENTION_MS: "writer_retention_ms",
    COMPRESSION: "compression",
    COMPACTION: "compaction",
}

SOURCE_KEYS: tuple[str, ...] = (
    PATH, STARTING_OFFSETS, STARTING_TIMESTAMP, STARTING_AGO, STARTING_TAIL, ENDING_TIMESTAMP,
    ENDING_OFFSETS, MAX_RECORDS_PER_TRIGGER, MAX_BYTES_PER_TRIGGER, MAX_FILES_PER_TRIGGER,
    MIN_PARTITIONS, MAX_PARTITIONS, FAIL_ON_DATA_LOSS, CONSUMER_GROUP, STORE_RETRY_TIMEOUT, METADATA,
    STARTING_POSITION, ENDING_POSITION,
)

SINK_KEYS: tuple[str, ...] = (
    PATH, KEY_COLUMN, TIMESTAMP_COLUMN, WRITER_ID, BATCH_ID, TXN_APP_ID, TXN_VERSION, MERGE_SCHEMA,
    STORE_RETRY_TIMEOUT, *STREAM_CONFIG_FIELDS,
)

#: Keys Spark adds on its own; accepted silently on both sides (the sink reads the first two).
SPARK_KEYS: tuple[str, ...] = (CHECKPOINT_LOCATION, QUERY_NAME, PATHS)

#: Prefixes of Spark-internal keys (``spark.*`` session-config style, ``__``-internal ones);
#: ignored so that a future Spark adding one does not break every tstream query.
SPARK_PREFIXES: tuple[str, ...] = ("spark.", "__")


def normalize(key: str) -> str:
    """The form Spark gives a key: lower-case. Compare keys only in this form."""
    return key.strip().lower()
