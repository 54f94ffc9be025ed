"""Write options (``SinkOptions``): defaults, what a streaming query passes, and the stream config
a first write creates the stream with.

No Spark session: Spark only hands the data source a case-insensitive dict of strings with
lower-cased keys, which ``CaseInsensitiveDict`` (pyspark's own, Spark-free) reproduces;
``option_builders`` builds the options objects from such a dict.
"""

from __future__ import annotations

import pytest
from option_builders import URL, sink
from pyspark_tstream import keys as K
from pyspark_tstream.api.config import StreamConfig
from pyspark_tstream.conf.options import StreamConfigOptions
from pyspark_tstream.errors import ConfigError


def test_sink_defaults() -> None:
    opts = sink()
    assert (opts.path, opts.key_column, opts.timestamp_column, opts.writer_id) == (URL, None, None, None)
    assert opts.merge_schema is K.MERGE_SCHEMA_DEFAULT is False
    assert opts.stream_config == StreamConfigOptions()
    assert opts.stream_config.given == frozenset()
    assert opts.stream_config.to_config_dict() == {
        "segments": 4, "timestamping": "client-prefer", "timestamping_uncapped": False,
        "writers": [], "writer_lease_ms": 60_000, "writer_retention_ms": 7 * 24 * 3_600_000, "retention": None,
        "scaling": None, "compression": "snappy", "compaction": "target=128MB,min=16"}


def test_sink_options_as_a_streaming_query_passes_them() -> None:
    opts = sink(keyColumn="device", timestampColumn="ts", checkpointLocation="/ckpt/q1",
                queryName="q1", mergeSchema="true")
    assert (opts.key_column, opts.timestamp_column) == ("device", "ts")
    assert (opts.checkpoint_location, opts.query_name, opts.writer_id) == ("/ckpt/q1", "q1", None)
    assert opts.merge_schema is True
    assert sink(writerId="job-7").writer_id == "job-7"


def test_stream_config_records_what_was_given() -> None:
    config = sink(segments="8", timestamping="ARRIVAL", timestampingUncapped="true",
                  writers="a, b", writerLeaseMs="5000", writerRetentionMs="86400000", retention="7d",
                  scaling="records=100/s", compression="zstd", compaction="target=64MB,min=8").stream_config
    assert config.given == frozenset(K.STREAM_CONFIG_FIELDS.values())
    as_dict = config.to_config_dict()
    assert as_dict == {"segments": 8, "timestamping": "arrival", "timestamping_uncapped": True,
                       "writers": ["a", "b"], "writer_lease_ms": 5000, "writer_retention_ms": 86_400_000,
                       "retention": "7d",
                       "scaling": "records=100/s", "compression": "zstd",
                       "compaction": "target=64MB,min=8"}
    assert StreamConfig.from_kwargs(as_dict).to_dict() == as_dict  # the core takes it as is
    assert sink(segments="2").stream_config.given == frozenset({"segments"})


@pytest.mark.parametrize("key,raw,match", [
    ("timestamping", "server", "timestamping='server' is not one of client-prefer, client-require, arrival"),
    ("timestampingUncapped", "maybe", "timestampingUncapped='maybe' is not a boolean"),
    ("segments", "0", "segments='0' must be positive"),
    ("segments", "5000", "segments=5000 .*4096"),
    ("segments", "four", "segments='four' is not an integer"),
    ("writerLeaseMs", "1m", "writerLeaseMs='1m' is not an integer"),
    ("writerRetentionMs", "7d", "writerRetentionMs='7d' is not an integer"),
    ("writers", '[1]', "writers='\\[1\\]' is not a list of names"),
    ("compression", "brotli", "compression='brotli' is not one of"),
    ("mergeSchema", "yes", "mergeSchema='yes' is not a boolean"),
    ("keyColumn", " ", "keyColumn=' ' is empty"),
], ids=lambda v: str(v)[:24])
def test_bad_sink_options(key: str, raw: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        sink(**{key: raw})
    assert info.value.option == key
