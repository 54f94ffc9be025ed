"""Frozen, validated options of the tstream source and sink, built once on the driver.

``SourceOptions.from_options`` and ``SinkOptions.from_options`` take the raw option mapping
Spark gives a ``DataSource`` (string values, lower-cased keys) or a plain dict from Python, and
either return an immutable object or raise :class:`~pyspark_tstream.errors.ConfigError` naming the
option, the bad value and what is accepted, so a bad query fails when it starts, not in a task.

Unknown options: every key must be one of this side's options (``SOURCE_KEYS`` or
``SINK_KEYS``), a ``storage.<key>``, or a key Spark adds on its own (``checkpointLocation``,
``queryName``, ``paths``, and anything starting with ``spark.`` or ``__``). Anything else is a
typo or a misplaced option; the error lists the valid names and suggests the closest one.

Credentials: the ``repr`` of these objects (and every error message) masks the values of
storage options whose key names a credential and the user part of URLs; the objects themselves
keep the real values because workers need them to reach the store.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from .. import keys as K
from ..api.config import COMPRESSIONS, TIMESTAMPING_MODES, StreamConfig
from ..errors import ConfigError
from ..store.failures import RetryPolicy, is_secret_key
from .parsing import (
    MASK,
    config_error,
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

#: A stream cut: segment id → the ``_seq`` to start (or stop) at in that segment.
StreamCut = dict[int, int]

_STARTING_KEYS = (K.STARTING_OFFSETS, K.STARTING_TIMESTAMP, K.STARTING_AGO, K.STARTING_TAIL)
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


# --- raw-mapping helpers --------------------------------------------------------------------

def _normalized(options: Mapping[str, Any]) -> dict[str, Any]:
    """Lower-cased keys (as Spark gives them); two spellings of one key must agree."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        low = K.normalize(key)
        if low in out and out[low] != value:
            raise ConfigError(f"option {key!r} is given twice with different values (keys are "
                              "case-insensitive); keep one", option=key)
        out[low] = value
    return out


def _check_known(opts: Mapping[str, Any], valid: Sequence[str], other: Sequence[str],
                 side: str) -> None:
    """Reject keys that are neither ours (for this side), ``storage.*``, nor Spark's own."""
    by_low = {k.lower(): k for k in valid}
    other_low = {k.lower(): k for k in other}
    spark = {k.lower() for k in K.SPARK_KEYS}
    problems: list[tuple[str, str]] = []
    for key in sorted(opts):
        if (key in by_low or key in spark or key.startswith(K.SPARK_PREFIXES)
                or key.startswith(K.STORAGE_PREFIX)):
            continue
        if key in other_low:
            other_side = "write" if side == "read" else "read"
            problems.append((key, f"{other_low[key]} is a {other_side} option, not a {side} option"))
            continue
        close = difflib.get_close_matches(key, list(by_low), n=1, cutoff=0.6)
        hint = f" (did you mean {by_low[close[0]]}?)" if close else ""
        problems.append((key, f"unknown option {key!r}{hint}"))
    if problems:
        names = ", ".join([*valid, K.STORAGE_PREFIX + "<key>"])
        raise ConfigError(f"format('tstream') {side}: {'; '.join(p for _, p in problems)}. "
                          f"Valid {side} options: {names}", option=problems[0][0])


def _decode_storage_value(key: str, value: Any) -> Any:
    """Turn option text into the types fsspec expects; credentials stay verbatim, but for a JSON
    object (a GCS service account key, which gcsfs takes as a dict and would read as a file path)."""
    if isinstance(value, str) and is_secret_key(key):
        return _json_object(value)
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"  # "false" as a string would be truthy inside fsspec
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if text[:1] in ("{", "["):
        return option_as_json({key: text}, key)
    return value


def _json_object(text: str) -> Any:
    """``text`` decoded if it is a JSON object, else ``text`` itself: a credential's text is never
    echoed in a decoding error, and never becomes a bool or a number."""
    if not text.lstrip().startswith("{"):
        return text
    try:
        decoded = json.loads(text)
    except ValueError:
        return text
    return decoded if isinstance(decoded, dict) else text


def storage_options_from(options: Mapping[str, Any]) -> dict[str, Any]:
    """``storage.<key>`` options as fsspec keyword arguments (prefix removed, key case kept).

    Values ``true``/``false`` become booleans, integers become ints and text starting with
    ``{`` or ``[`` is decoded as JSON (``storage.client_kwargs={"region_name": "eu-west-1"}``);
    other text stays a string. Values of keys that name credentials (``key``, ``secret``,
    ``token``, ``password``...) are never decoded, but for a JSON object (a service account
    key). ``storage.accessKey``/``storage.secretKey`` are aliases of s3fs's ``key``/``secret``,
    and ``storage.account_secret``/``storage.connection_string_secret`` of adlfs's
    ``account_key``/``connection_string``, under names Spark's plan redaction recognizes.
    """
    out: dict[str, Any] = {}
    for raw_key, value in options.items():
        key = raw_key.strip()
        if not key.lower().startswith(K.STORAGE_PREFIX) or value is None:
            continue
        name = key[len(K.STORAGE_PREFIX):]
        if not name:
            raise ConfigError("option 'storage.' names no fsspec argument; use storage.<key>",
                              option=key)
        out[_STORAGE_ALIASES.get(name.lower(), name)] = _decode_storage_value(key, value)
    return out


#: Spark shows option values in streaming plans and its UI unless the key matches
#: ``spark.redaction.regex`` (``secret|password|token|access[.]?key|credential``), which misses
#: ``storage.key``, ``storage.account_key`` and ``storage.connection_string``: these aliases carry
#: the same fsspec option under a name Spark hides (``storage.sas_token``, ``storage.client_secret``
#: and gcsfs's ``storage.token`` it hides as they are).
_STORAGE_ALIASES = {"accesskey": "key", "access_key": "key", "secretkey": "secret", "secret_key": "secret",
                    "accountsecret": "account_key", "account_secret": "account_key",
                    "connectionstringsecret": "connection_string", "connection_string_secret": "connection_string"}


def _parse_cut(opts: Mapping[str, Any], key: str, words: Sequence[str]) -> str | StreamCut | None:
    """``earliest``/``latest`` (those in ``words``) or a JSON stream cut ``{"<segment>": seq}``."""
    raw = option_as_str(opts, key)
    if raw is None:
        return None
    if raw.lower() in words:
        return raw.lower()
    accepted = f"use {', '.join(words)} or a JSON stream cut like {{\"0\": 42, \"1\": 7}}"
    if not raw.startswith("{"):
        raise config_error(key, raw, f"is not a position; {accepted}")
    cut = option_as_json(opts, key)
    if not isinstance(cut, dict) or not cut:
        raise config_error(key, raw, f"names no segment; {accepted}")
    out: StreamCut = {}
    for seg, seq in cut.items():
        if not str(seg).isdigit() or isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise config_error(key, raw, f"has entry {seg!r}: {seq!r}; segment ids and sequence "
                               f"numbers are non-negative integers; {accepted}")
        out[int(seg)] = seq
    return out


def _group_name(opts: Mapping[str, Any]) -> str | None:
    """``consumerGroup``, checked now (it names a folder in the stream) so a bad one fails at start."""
    name = option_as_str(opts, K.CONSUMER_GROUP)
    if name is not None:
        from ..maps.grouplog import check_group_name

        try:
            check_group_name(name)
        except ValueError as e:
            raise ConfigError(f"{K.CONSUMER_GROUP}={name!r}: {e}", option=K.CONSUMER_GROUP, value=name) from e
    return name


def _twin(opts: Mapping[str, Any], ours: str, delta: str, parse: Any) -> tuple[Any, str | None]:
    """The value of option ``ours`` or of its Delta-named twin, and which key gave it."""
    mine, theirs = parse(opts, ours), parse(opts, delta)
    if mine is not None and theirs is not None and mine != theirs:
        raise ConfigError(f"{ours}={mine!r} and {delta}={theirs!r} disagree: {delta} is Delta's name for "
                          f"{ours}; give one of them", option=delta, value=theirs)
    if mine is not None:
        return mine, ours
    return theirs, (delta if theirs is not None else None)


def _writer_and_batch(opts: Mapping[str, Any]) -> tuple[str | None, int | None, str | None]:
    """``writerId`` and ``batchId`` (or Delta's ``txnAppId``/``txnVersion``): the writer id, the
    batch id, and the key that gave the batch id (``None``: no idempotent write).

    A batch id needs a writer (it counts per writer); ``txnAppId`` needs ``txnVersion`` as in
    Delta; ``writerId`` alone still just names the writer (lanes, declared writers).
    """
    writer, writer_key = _twin(opts, K.WRITER_ID, K.TXN_APP_ID, option_as_str)
    batch, batch_key = _twin(opts, K.BATCH_ID, K.TXN_VERSION,
                             lambda o, k: option_as_int(o, k, min_value=0))
    if batch_key is not None and writer is None:
        partner = K.TXN_APP_ID if batch_key == K.TXN_VERSION else K.WRITER_ID
        raise ConfigError(f"{batch_key}={batch} needs {partner}: batch ids count per writer; add "
                          f".option('{partner}', '<a name for this job, the same on every run>')",
                          option=batch_key, value=batch)
    if writer_key == K.TXN_APP_ID and batch is None:
        raise ConfigError(f"{K.TXN_APP_ID}={writer!r} needs {K.TXN_VERSION} (as in Delta): add "
                          f".option('{K.TXN_VERSION}', epoch_id), or use {K.WRITER_ID} to name the "
                          "writer of a write that is not idempotent", option=K.TXN_APP_ID, value=writer)
    if batch is not None and writer is not None and writer.startswith(K.QUERY_WRITER_PREFIX):
        raise ConfigError(f"{writer_key}={writer!r}: writer ids starting with {K.QUERY_WRITER_PREFIX!r} "
                          "are the streaming sink's own (derived from checkpointLocation); choose "
                          "another name", option=writer_key, value=writer)
    return writer, batch, batch_key


def _required_path(opts: Mapping[str, Any], side: str) -> str:
    path = option_as_str(opts, K.PATH)
    if path is None and K.PATHS.lower() in opts:
        raise config_error(K.PATHS, opts[K.PATHS.lower()],
                           "names several paths; tstream reads one stream, give one URL")
    if path is None:
        verb = "load(url)" if side == "read" else "start(url) or save(url)"
        raise ConfigError(f"no stream URL; use {verb} or .option('path', url)", option=K.PATH)
    return path


# --- repr masking -------------------------------------------------------------------------

def _masked(key: str, value: Any) -> Any:
    if is_secret_key(key) and value is not None:
        return MASK
    if isinstance(value, Mapping):
        return {k: _masked(str(k), v) for k, v in value.items()}
    if isinstance(value, str):
        return _URL_USERINFO.sub(MASK + "@", value)
    return value


def _safe_repr(obj: Any) -> str:
    parts = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.name == "storage_options":
            value = {k: _masked(k, v) for k, v in value.items()}
        else:
            value = _masked("", value)
        parts.append(f"{f.name}={value!r}")
    return f"{type(obj).__name__}({', '.join(parts)})"


def _retry_policy(timeout_ms: int) -> RetryPolicy:
    """The store retries of a Spark query: patient for ``storeRetryTimeout`` once the store answered."""
    shown = f"{timeout_ms // 1000}s" if timeout_ms % 1000 == 0 else f"{timeout_ms}ms"
    return RetryPolicy(patience=timeout_ms / 1000,
                       hint=f"the store kept failing for longer than {K.STORE_RETRY_TIMEOUT}={shown}; "
                            "raise it to wait out longer outages; the query resumes from its checkpoint "
                            "when restarted")


# --- the options objects ------------------------------------------------------------------

@dataclass(frozen=True, slots=True, repr=False)
class SourceOptions:
    """Validated options of ``spark.readStream`` / ``spark.read`` ``.format("tstream")``.

    Parameters
    ----------
    path : str
        Stream URL.
    starting_offsets : str or dict of int to int
        ``"earliest"``, ``"latest"`` or a stream cut {segment id: ``_seq``}.
    starting_timestamp_ms, starting_ago_ms, starting_tail : int or None
        The other starting positions; at most one starting position is set (an explicit
        ``startingOffsets=earliest`` counts as unset). ``starting_ago_ms`` is a duration the
        adapter subtracts from the time the query first starts.
    ending_timestamp_ms : int or None
        Batch reads: last ``_timestamp`` (epoch ms) to read.
    ending_offsets : str or dict of int to int or None
        Batch reads: ``"latest"`` or a stream cut to stop at.
    max_records_per_trigger, max_bytes_per_trigger, max_files_per_trigger : int or None
        Read limits per micro-batch; ``None`` means no limit.
    min_partitions, max_partitions : int or None
        Bounds on the Spark tasks of a read (see ``keys.MIN_PARTITIONS``).
    fail_on_data_loss : bool
        Fail (default) or skip and report when retention removed records still needed.
    consumer_group : str or None
        Consumer group the query commits its position to.
    store_retry_timeout_ms : int
        How long store calls keep retrying transient failures once the store answered.
    storage_options : dict
        fsspec keyword arguments (see :func:`storage_options_from`).
    metadata : str or None
        Batch reads: the metadata table to read instead of records (``keys.METADATA_KINDS``).
    starting_position, ending_position : int or None
        ``metadata=history``: the journal positions to list (inclusive).
    """

    path: str
    starting_offsets: str | StreamCut = K.STARTING_OFFSETS_DEFAULT
    starting_timestamp_ms: int | None = None
    starting_ago_ms: int | None = None
    starting_tail: int | None = None
    ending_timestamp_ms: int | None = None
    ending_offsets: str | StreamCut | None = None
    max_records_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    max_files_per_trigger: int | None = None
    min_partitions: int | None = None
    max_partitions: int | None = None
    fail_on_data_loss: bool = K.FAIL_ON_DATA_LOSS_DEFAULT
    consumer_group: str | None = None
    store_retry_timeout_ms: int = K.STORE_RETRY_TIMEOUT_DEFAULT
    storage_options: dict[str, Any] = field(default_factory=dict)
    metadata: str | None = None
    starting_position: int | None = None
    ending_position: int | None = None

    __repr__ = _safe_repr

    @property
    def retry(self) -> RetryPolicy:
        """How the query's store calls retry (``storeRetryTimeout``)."""
        return _retry_policy(self.store_retry_timeout_ms)

    def check_no_metadata(self) -> None:
        """Refuse ``metadata`` on ``readStream``: the tables are a batch read's."""
        if self.metadata is not None:
            raise ConfigError(f"{K.METADATA}={self.metadata!r} is a batch read: use spark.read, not "
                              f"spark.readStream, for a metadata table (valid kinds: "
                              f"{', '.join(K.METADATA_KINDS)})", option=K.METADATA, value=self.metadata)

    @property
    def starting_kind(self) -> str:
        """``earliest``, ``latest``, ``offsets``, ``timestamp``, ``ago`` or ``tail``."""
        if self.starting_timestamp_ms is not None:
            return "timestamp"
        if self.starting_ago_ms is not None:
            return "ago"
        if self.starting_tail is not None:
            return "tail"
        return self.starting_offsets if isinstance(self.starting_offsets, str) else "offsets"

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SourceOptions:
        """Parse and validate the raw (case-insensitive) source options."""
        opts = _normalized(options)
        _check_known(opts, K.SOURCE_KEYS, [k for k in K.SINK_KEYS if k not in K.SOURCE_KEYS],
                     "read")
        starting = _parse_cut(opts, K.STARTING_OFFSETS, ("earliest", "latest"))
        start_ts = option_as_timestamp_ms(opts, K.STARTING_TIMESTAMP)
        start_ago = option_as_duration_ms(opts, K.STARTING_AGO)
        start_tail = option_as_int(opts, K.STARTING_TAIL, min_value=0)
        # An explicit startingOffsets=earliest is the default, so it does not compete.
        explicit = (starting not in (None, K.STARTING_OFFSETS_DEFAULT), start_ts is not None,
                    start_ago is not None, start_tail is not None)
        chosen = [k for k, given in zip(_STARTING_KEYS, explicit, strict=True) if given]
        if len(chosen) > 1:
            raise ConfigError(f"{' and '.join(chosen)} both set where to start; give only one of "
                              f"{', '.join(_STARTING_KEYS)}", option=chosen[1])
        ending_ts = option_as_timestamp_ms(opts, K.ENDING_TIMESTAMP)
        ending_offsets = _parse_cut(opts, K.ENDING_OFFSETS, ("latest",))
        if ending_ts is not None and ending_offsets is not None:
            raise ConfigError(f"{K.ENDING_TIMESTAMP} and {K.ENDING_OFFSETS} both set where to "
                              "stop; give only one", option=K.ENDING_OFFSETS)
        if ending_ts is not None and start_ts is not None and ending_ts < start_ts:
            raise config_error(K.ENDING_TIMESTAMP, opts[K.ENDING_TIMESTAMP.lower()],
                               f"is before {K.STARTING_TIMESTAMP}={opts[K.STARTING_TIMESTAMP.lower()]!r}")
        min_parts = option_as_int(opts, K.MIN_PARTITIONS, min_value=1)
        max_parts = option_as_int(opts, K.MAX_PARTITIONS, min_value=1)
        if min_parts is not None and max_parts is not None and max_parts < min_parts:
            raise config_error(K.MAX_PARTITIONS, max_parts, f"is below {K.MIN_PARTITIONS}={min_parts}; "
                               f"raise {K.MAX_PARTITIONS} or lower {K.MIN_PARTITIONS}")
        return cls(
            path=_required_path(opts, "read"),
            starting_offsets=starting if starting is not None else K.STARTING_OFFSETS_DEFAULT,
            starting_timestamp_ms=start_ts,
            starting_ago_ms=start_ago,
            starting_tail=start_tail,
            ending_timestamp_ms=ending_ts,
            ending_offsets=ending_offsets,
            max_records_per_trigger=option_as_int(opts, K.MAX_RECORDS_PER_TRIGGER, min_value=1),
            max_bytes_per_trigger=option_as_bytes(opts, K.MAX_BYTES_PER_TRIGGER, min_value=1),
            max_files_per_trigger=option_as_int(opts, K.MAX_FILES_PER_TRIGGER, min_value=1),
            min_partitions=min_parts,
            max_partitions=max_parts,
            fail_on_data_loss=option_as_bool(opts, K.FAIL_ON_DATA_LOSS, K.FAIL_ON_DATA_LOSS_DEFAULT),
            consumer_group=_group_name(opts),
            store_retry_timeout_ms=option_as_duration_ms(opts, K.STORE_RETRY_TIMEOUT, K.STORE_RETRY_TIMEOUT_DEFAULT),
            storage_options=storage_options_from(options),
            **_metadata_options(opts),
        )


def _metadata_options(opts: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` (one of ``keys.METADATA_KINDS``) and the history range it may take."""
    kind = option_as_choice(opts, K.METADATA, None, K.METADATA_KINDS)
    first = option_as_int(opts, K.STARTING_POSITION, min_value=0)
    last = option_as_int(opts, K.ENDING_POSITION, min_value=0)
    for key, value in ((K.STARTING_POSITION, first), (K.ENDING_POSITION, last)):
        if value is not None and kind != "history":
            raise config_error(key, value, f"bounds {K.METADATA}=history only; add "
                               f".option('{K.METADATA}', 'history') or leave it out")
    return {"metadata": kind, "starting_position": first, "ending_position": last}


@dataclass(frozen=True, slots=True, repr=False)
class StreamConfigOptions:
    """Stream config given on a write; used when the write creates the stream.

    Parameters
    ----------
    config : StreamConfig
        The core's config (its defaults where an option was not given), validated by the core's
        own rules, so a query fails at start with the message a Python-API create would give.
    given : frozenset of str
        Core field names the user set explicitly; only these are checked against an existing
        stream's config, so a plain write to an existing stream never conflicts.
    """

    config: StreamConfig = field(default_factory=StreamConfig)
    given: frozenset[str] = frozenset()

    __repr__ = _safe_repr

    def to_config_dict(self) -> dict[str, Any]:
        """Plain primitives keyed by the core's ``StreamConfig`` field names."""
        return self.config.to_dict()

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> StreamConfigOptions:
        """Parse the stream-config keys of raw options (other keys are ignored here)."""
        opts = _normalized(options)
        values = {
            "segments": option_as_int(opts, K.SEGMENTS, K.SEGMENTS_DEFAULT, min_value=1),
            "timestamping": option_as_choice(opts, K.TIMESTAMPING, K.TIMESTAMPING_DEFAULT, TIMESTAMPING_MODES),
            "timestamping_uncapped": option_as_bool(opts, K.TIMESTAMPING_UNCAPPED, K.TIMESTAMPING_UNCAPPED_DEFAULT),
            "writers": tuple(option_as_list(opts, K.WRITERS, K.WRITERS_DEFAULT)),
            "writer_lease_ms": option_as_int(opts, K.WRITER_LEASE_MS, K.WRITER_LEASE_MS_DEFAULT, min_value=1),
            "writer_retention_ms": option_as_int(opts, K.WRITER_RETENTION_MS, K.WRITER_RETENTION_MS_DEFAULT,
                                                 min_value=1),
            "retention": option_as_str(opts, K.RETENTION),
            "scaling": option_as_str(opts, K.SCALING),
            "compression": option_as_choice(opts, K.COMPRESSION, K.COMPRESSION_DEFAULT, COMPRESSIONS),
            "compaction": option_as_str(opts, K.COMPACTION) or K.COMPACTION_DEFAULT,
        }
        given = frozenset(f for k, f in K.STREAM_CONFIG_FIELDS.items() if opts.get(k.lower()) is not None)
        return cls(config=StreamConfig.from_kwargs(values), given=given)


@dataclass(frozen=True, slots=True, repr=False)
class SinkOptions:
    """Validated options of ``df.writeStream`` / ``df.write`` ``.format("tstream")``.

    Parameters
    ----------
    path : str
        Stream URL (created by the first write if missing).
    key_column, timestamp_column : str or None
        Routing-key column and client-timestamp column.
    writer_id : str or None
        Explicit writer identity (``writerId`` or Delta's ``txnAppId``); ``None`` means derive
        it from ``checkpoint_location`` (a batch write without either is a one-shot writer).
    batch_id : int or None
        ``df.write`` only (``batchId`` or Delta's ``txnVersion``, with ``writer_id``): the
        write's batch number; one at or below the writer's last committed batch appends nothing.
    batch_option : str or None
        The key that gave ``batch_id``, for messages (a streaming sink refuses it).
    checkpoint_location, query_name : str or None
        What Spark passed for a streaming query.
    merge_schema : bool
        Allow additive schema changes.
    stream_config : StreamConfigOptions
        Config for creating the stream and checking an existing one.
    store_retry_timeout_ms : int
        How long store calls keep retrying transient failures once the store answered.
    storage_options : dict
        fsspec keyword arguments (see :func:`storage_options_from`).
    """

    path: str
    key_column: str | None = None
    timestamp_column: str | None = None
    writer_id: str | None = None
    batch_id: int | None = None
    batch_option: str | None = None
    checkpoint_location: str | None = None
    query_name: str | None = None
    merge_schema: bool = K.MERGE_SCHEMA_DEFAULT
    stream_config: StreamConfigOptions = field(default_factory=StreamConfigOptions)
    store_retry_timeout_ms: int = K.STORE_RETRY_TIMEOUT_DEFAULT
    storage_options: dict[str, Any] = field(default_factory=dict)

    __repr__ = _safe_repr

    @property
    def retry(self) -> RetryPolicy:
        """How the query's store calls retry (``storeRetryTimeout``)."""
        return _retry_policy(self.store_retry_timeout_ms)

    def check_streaming(self) -> None:
        """Refuse a batch id on ``df.writeStream``: the sink keys each commit by query and
        micro-batch itself, so a replayed micro-batch is a no-op already."""
        if self.batch_option is not None:
            raise ConfigError(
                f"{self.batch_option} is a df.write option: a streaming tstream sink keys each commit "
                f"by its query and micro-batch already (a replay is a no-op); remove {self.batch_option}, "
                f"or inside foreachBatch give it to df.write with epoch_id", option=self.batch_option,
                value=self.batch_id)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SinkOptions:
        """Parse and validate the raw (case-insensitive) sink options."""
        opts = _normalized(options)
        _check_known(opts, K.SINK_KEYS, [k for k in K.SOURCE_KEYS if k not in K.SINK_KEYS],
                     "write")
        writer_id, batch_id, batch_option = _writer_and_batch(opts)
        return cls(
            path=_required_path(opts, "write"),
            key_column=option_as_str(opts, K.KEY_COLUMN),
            timestamp_column=option_as_str(opts, K.TIMESTAMP_COLUMN),
            writer_id=writer_id,
            batch_id=batch_id,
            batch_option=batch_option,
            checkpoint_location=option_as_str(opts, K.CHECKPOINT_LOCATION),
            query_name=option_as_str(opts, K.QUERY_NAME),
            merge_schema=option_as_bool(opts, K.MERGE_SCHEMA, K.MERGE_SCHEMA_DEFAULT),
            stream_config=StreamConfigOptions.from_options(opts),
            store_retry_timeout_ms=option_as_duration_ms(opts, K.STORE_RETRY_TIMEOUT, K.STORE_RETRY_TIMEOUT_DEFAULT),
            storage_options=storage_options_from(options),
        )
