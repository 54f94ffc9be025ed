"""Option names: misspelt, unknown, of the other side, duplicated or missing, and what a user is
told (the key, a suggestion, the valid keys); keys Spark itself adds pass silently.

No Spark session: Spark only hands the data source a case-insensitive dict of strings with
lower-cased keys, which ``CaseInsensitiveDict`` (pyspark's own, Spark-free) reproduces;
``option_builders`` builds the options objects from such a dict.
"""

from __future__ import annotations

from typing import Any

import pytest
from option_builders import URL, sink, source
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark_tstream import keys as K
from pyspark_tstream.conf.options import SinkOptions, SourceOptions
from pyspark_tstream.errors import ConfigError


@pytest.mark.parametrize("typo,suggestion", [("startingTimestmap", "startingTimestamp"),
                                             ("maxRecordPerTrigger", "maxRecordsPerTrigger"),
                                             ("failondataloss_", "failOnDataLoss")],
                         ids=["swapped", "missing-s", "trailing"])
def test_misspelt_source_option_suggests_the_right_one(typo: str, suggestion: str) -> None:
    match = f"unknown option '{typo.lower()}' \\(did you mean {suggestion}\\?\\)"
    with pytest.raises(ConfigError, match=match) as info:
        source(**{typo: "1"})
    assert info.value.option == typo.lower()
    assert "Valid read options: path, startingOffsets" in str(info.value)
    assert "storage.<key>" in str(info.value)


def test_unrelated_option_lists_valid_ones_without_a_guess() -> None:
    with pytest.raises(ConfigError, match="unknown option 'header'. Valid read options:") as info:
        source(header="true")
    assert "did you mean" not in str(info.value)
    assert all(k in str(info.value) for k in K.SOURCE_KEYS)


def test_every_unknown_option_is_reported_at_once() -> None:
    with pytest.raises(ConfigError, match="unknown option 'bar'.*unknown option 'foo'"):
        source(foo="1", bar="2")


@pytest.mark.parametrize("build,key,match", [
    (source, "keyColumn", "keyColumn is a write option, not a read option"),
    (source, "segments", "segments is a write option, not a read option"),
    (sink, "startingOffsets", "startingOffsets is a read option, not a write option"),
    (sink, "maxFilesPerTrigger", "maxFilesPerTrigger is a read option, not a write option"),
], ids=["keyColumn-on-read", "segments-on-read", "startingOffsets-on-write", "limit-on-write"])
def test_option_of_the_other_side_is_an_error(build: Any, key: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build(**{key: "1"})


@pytest.mark.parametrize("build", [source, sink], ids=["source", "sink"])
def test_keys_spark_adds_are_accepted_silently(build: Any) -> None:
    build(checkpointLocation="/tmp/ckpt", queryName="q1", **{"spark.some.conf": "x",
                                                                "__partition_columns": "[]"})


def test_several_paths_are_an_error() -> None:
    with pytest.raises(ConfigError, match="paths=.* names several paths; tstream reads one stream"):
        SourceOptions.from_options(CaseInsensitiveDict({"paths": '["a", "b"]'}))


@pytest.mark.parametrize("build,match", [(SourceOptions.from_options, "use load\\(url\\)"),
                                         (SinkOptions.from_options, "use start\\(url\\) or save\\(url\\)")],
                         ids=["source", "sink"])
def test_missing_path(build: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=f"no stream URL; {match}"):
        build({})


def test_same_key_twice_with_different_values() -> None:
    with pytest.raises(ConfigError, match="given twice with different values"):
        SourceOptions.from_options({"path": URL, "startingTail": "1", "startingtail": "2"})


def test_misspelt_sink_option_suggests_the_right_one() -> None:
    with pytest.raises(ConfigError, match="unknown option 'keycolum' \\(did you mean keyColumn\\?\\). "
                                          "Valid write options: path, keyColumn"):
        sink(keyColum="device")
