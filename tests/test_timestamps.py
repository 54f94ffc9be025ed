"""Hybrid timestamps and the S2 timestamping rules, end to end through Stream.append/read."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pytest
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import TimestampError
from pyspark_tstream.timestamps import (
    apply_floor,
    count_raised,
    pack,
    parse_duration_ms,
    raw_hybrid,
    to_ms,
    tso_id,
)


def _ms(table: pa.Table) -> list[int]:
    return (table["_tso"].to_numpy() >> 18).tolist()


def _strictly_increasing(values: np.ndarray) -> bool:
    return bool(np.all(np.diff(values) > 0))


def test_s2_example_running_max(url: str) -> None:
    s = Stream.create(url, segments=1)
    s.append([{"n": i, "t": t} for i, t in enumerate([42, 44, 42, 50, 50, 48, 55])], timestamp="t")
    t = s.read()
    assert _ms(t) == [42, 44, 44, 50, 50, 50, 55]
    assert _strictly_increasing(t["_tso"].to_numpy())
    assert t["n"].to_pylist() == list(range(7))
    assert t["_seq"].to_pylist() == list(range(7))
    assert [v.timestamp() * 1000 for v in t["_timestamp"].to_pylist()] == [42, 44, 44, 50, 50, 50, 55]


def test_client_clock_behind_stream_keeps_ids_increasing(url: str) -> None:
    """Redis's clock-skew case: a later batch with earlier times is raised, never reordered."""
    s = Stream.create(url, segments=1)
    s.append([{"n": 0, "t": 1_000}, {"n": 1, "t": 2_000}], timestamp="t")
    ack = s.append([{"n": 2, "t": 1_500}, {"n": 3, "t": 1_600}, {"n": 4, "t": 2_500}], timestamp="t")
    assert ack.raised == 2
    t = s.read()
    tso = t["_tso"].to_numpy()
    assert _strictly_increasing(tso)
    # raised above the tick, which ends on a millisecond: into the next one
    assert _ms(t) == [1000, 2000, 2001, 2001, 2500]
    ids = [tso_id(v) for v in tso]
    assert ids[2] == "2001-0" and ids[3] == "2001-1"
    assert ack.first_id == "2001-0" and ack.last_id == "2500-0"


def test_arrival_cap_and_uncapped(url: str) -> None:
    future = to_ms("2200-01-01T00:00:00Z")
    capped = Stream.create(url + "-capped", segments=1)
    before = to_ms(datetime.now(timezone.utc))
    capped.append([{"t": future}], timestamp="t")
    got = _ms(capped.read(end=future + 1))[0]
    assert before <= got < future
    uncapped = Stream.create(url + "-uncapped", segments=1, timestamping_uncapped=True)
    uncapped.append([{"t": future}], timestamp="t")
    assert _ms(uncapped.read(end=future + 1)) == [future]


def test_arrival_mode_ignores_client_column(url: str) -> None:
    s = Stream.create(url, segments=1, timestamping="arrival")
    before = to_ms(datetime.now(timezone.utc))
    s.append([{"t": 5}, {"t": 6}], timestamp="t")
    assert all(m >= before for m in _ms(s.read()))


def test_client_prefer_fills_nulls_with_arrival(url: str) -> None:
    s = Stream.create(url, segments=1)
    before = to_ms(datetime.now(timezone.utc))
    s.append(pa.table({"t": pa.array([None, None], pa.int64())}), timestamp="t")
    assert all(m >= before for m in _ms(s.read()))


@pytest.mark.parametrize("case", ["null", "missing-option", "missing-column"])
def test_client_require_rejects_and_writes_nothing(url: str, case: str) -> None:
    s = Stream.create(url, segments=2, timestamping="client-require")
    s.append([{"x": 1, "t": 10}], timestamp="t")
    before = s.refresh().pos
    if case == "null":
        data = pa.table({"x": [2, 3], "t": pa.array([20, None], pa.int64())})
        with pytest.raises(TimestampError, match="timestampColumn 't' has 1 null.*client-require"):
            s.append(data, timestamp="t")
    elif case == "missing-option":
        with pytest.raises(TimestampError, match="client-require needs a client timestamp"):
            s.append([{"x": 2, "t": 20}])
    else:
        with pytest.raises(TimestampError, match="timestampColumn 'when' is not a column"):
            s.append([{"x": 2, "t": 20}], timestamp="when")
    assert s.refresh().pos == before
    assert s.read()["x"].to_pylist() == [1]


@pytest.mark.parametrize("bad", [-5, (1 << 45) + 10], ids=["negative", "past-3084"])
def test_out_of_range_client_timestamps(url: str, bad: int) -> None:
    s = Stream.create(url, segments=1, timestamping_uncapped=True)
    with pytest.raises(TimestampError, match=f"timestampColumn 't' holds {bad}"):
        s.append([{"t": 1}, {"t": bad}], timestamp="t")
    assert s.refresh().rows == 0


def test_timestamp_column_types(url: str) -> None:
    s = Stream.create(url, segments=1)
    ts = pa.array([datetime(2020, 1, 1, tzinfo=timezone.utc)], pa.timestamp("us", tz="UTC"))
    s.append(pa.table({"when": ts}), timestamp="when")
    assert _ms(s.read()) == [to_ms("2020-01-01T00:00:00Z")]
    other = Stream.create(url + "-2", segments=1)
    with pytest.raises(TimestampError, match="timestampColumn 'name' has type string"):
        other.append([{"name": "x"}], timestamp="name")


def test_raw_hybrid_is_running_max() -> None:
    ms = np.array([42, 44, 42, 50, 50, 48, 55])
    raw = raw_hybrid(ms)
    expect, prev = [], -1
    for m in ms:
        prev = max(int(m) << 18, prev + 1)
        expect.append(prev)
    assert raw.tolist() == expect


def test_floor_equals_running_max_rule() -> None:
    rng = np.random.default_rng(7)
    raw = raw_hybrid(rng.integers(0, 1000, 500))
    floor = int(raw[100])
    got = apply_floor(raw, floor)
    prev, expect = floor - 1, []
    for a in raw:
        prev = max(int(a), prev + 1)
        expect.append(prev)
    assert got.tolist() == expect
    assert count_raised(raw, floor) == int(np.count_nonzero(got != raw))


@pytest.mark.parametrize("text,ms", [("90s", 90_000), ("15m", 900_000), ("1h", 3_600_000), ("7d", 604_800_000),
                                     ("250ms", 250), ("2", 2000)])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


def test_time_parsing() -> None:
    assert to_ms("2026-11-01T00:00:00Z") == 1793491200000
    assert to_ms("1793491200000") == 1793491200000
    assert to_ms("-1h", now=10_000_000) == 10_000_000 - 3_600_000
    assert pack(5, 3) == (5 << 18) | 3
    with pytest.raises(TimestampError, match="startingX='soon' is not a timestamp"):
        to_ms("soon", option="startingX")
