"""Stream cuts are checked against the stream wherever they enter (python/read/cuts.py).

A cut that names a segment the stream never had, a position past what a segment holds, no
segment at all, or another stream's segments is refused with ``InvalidCutError`` and changes
nothing; a valid cut truncates only what it names and the records older than the newest one it
removes.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.cli import main
from pyspark_tstream.errors import ConfigError, InvalidCutError
from pyspark_tstream.read.start import start_bound


def _filled(url: str, segments: int = 2, n: int = 100) -> Stream:
    s = Stream.create(url, segments=segments)
    s.append(pa.table({"key": [f"k{i % 8}" for i in range(n)], "v": list(range(n)),
                       "t": [T0 + i for i in range(n)]}), key="key", timestamp="t")
    return s


def _snapshot(s: Stream) -> tuple[int, int, list[tuple[int, int]]]:
    state = s.refresh()
    t = s.read()
    return state.head_tso, state.pos, sorted(zip(t["_segment"].to_pylist(), t["_seq"].to_pylist()))


@pytest.mark.parametrize("cut", [{99: 5}, {}, {"first": 10**6}, {"first": -1}, {"first": 0, 99: 0}],
                         ids=["unknown-segment", "empty", "past-the-end", "negative", "one-unknown"])
def test_a_bad_cut_is_refused_and_truncates_nothing(url: str, cut: dict) -> None:
    s = _filled(url)
    first = s.state.segments[0].id
    cut = {(first if k == "first" else k): v for k, v in cut.items()}
    before = _snapshot(s)
    with pytest.raises(InvalidCutError) as e:
        s.truncate(cut)
    assert isinstance(e.value, ConfigError) and e.value.option == "cut"
    assert e.value.condition == "TSTREAM_INVALID_CUT"
    assert s.url in str(e.value) and "cut_at" in str(e.value)
    assert _snapshot(s) == before
    s.vacuum(grace_ms=0)
    assert _snapshot(s)[2] == before[2]


def test_the_message_names_the_segment_and_what_it_holds(url: str) -> None:
    s = _filled(url)
    seg = s.state.segments[0]
    with pytest.raises(InvalidCutError, match=rf"position {10**6} of segment {seg.id} lies outside what it "
                                              rf"holds \(_seq 0 to {seg.next_seq - 1}"):
        s.truncate({seg.id: 10**6})
    with pytest.raises(InvalidCutError, match=r"segment 99 is not a segment of .*its active segments: \[0, 1\]"):
        s.truncate({99: 5})


def test_another_streams_cut_is_refused(url: str) -> None:
    s = _filled(url)
    other = _filled(url + "-other", segments=2)
    other.scale(split=other.state.segments[0].id, parts=3)  # epoch-1 segments this stream never had
    other.append(pa.table({"key": ["k1"], "v": [1], "t": [T0 + 500]}), key="key", timestamp="t")
    before = _snapshot(s)
    with pytest.raises(InvalidCutError, match="is not a segment of"):
        s.truncate(other.cut_at(T0 + 400))
    assert _snapshot(s) == before


def test_a_cut_at_a_segments_end_keeps_newer_records_of_segments_it_does_not_name(url: str) -> None:
    """The cut removes all of the segment it names, and elsewhere only what is older than the
    newest record it removed, never everything up to the tick."""
    s = Stream.create(url, segments=2)
    s.append(pa.table({"key": [f"k{i % 8}" for i in range(80)], "v": list(range(80)),
                       "t": [T0 + i for i in range(80)]}), key="key", timestamp="t")
    t = s.read()
    a = s.state.segments[0].id
    in_a = set(pc.filter(t["key"], pc.equal(t["_segment"], a)).to_pylist())
    later = [k for k in (f"k{i % 8}" for i in range(40)) if k not in in_a]
    assert later, "both segments got keys"
    s.append(pa.table({"key": later, "v": list(range(len(later))),
                       "t": [T0 + 1000 + i for i in range(len(later))]}), key="key", timestamp="t")
    newest_in_a = max(pc.filter(t["_tso"], pc.equal(t["_segment"], a)).to_pylist())
    s.truncate({a: s.state.segments[0].next_seq})
    left = s.read()
    assert pc.sum(pc.equal(left["_segment"], a)).as_py() in (None, 0)
    assert left.num_rows >= len(later)
    assert min(left["_tso"].to_pylist()) > newest_in_a
    everything_after = pc.filter(s.read(start=T0)["_tso"], pc.greater(s.read(start=T0)["_tso"], newest_in_a))
    assert left.num_rows == len(everything_after)


def test_a_sealed_segments_end_is_a_valid_cut_position(url: str) -> None:
    s = _filled(url)
    sealed = s.state.segments[0]
    s.scale(split=sealed.id, parts=2)
    assert sealed.id not in {x.id for x in s.state.segments}
    s.truncate({sealed.id: sealed.next_seq})  # accepted: the stream had it
    with pytest.raises(InvalidCutError, match="lies outside"):
        s.truncate({sealed.id: sealed.next_seq + 1})


def test_reads_refuse_a_cut_of_another_stream(url: str) -> None:
    s = _filled(url)
    for call in (lambda: s.read(start={99: 0}), lambda: s.read(end={99: 0}),
                 lambda: s.to_reader(start={99: 0}),
                 lambda: start_bound(s, "offsets", cut={s.state.segments[0].id: 10**6})):
        with pytest.raises(InvalidCutError):
            call()
    with pytest.raises(InvalidCutError, match="startingOffsets"):
        start_bound(s, "offsets", cut={99: 0})
    assert s.read(start=s.cut_at(T0)).num_rows == 100  # a cut of this stream still reads


def test_the_cli_refuses_a_bad_cut_and_keeps_every_record(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = _filled(url)
    before = _snapshot(s)
    code = main(["truncate", url, "--cut", '{"99": 5}', "--vacuum"])
    assert code != 0
    assert "segment 99 is not a segment of" in capsys.readouterr().err
    assert _snapshot(s) == before


def test_spark_reads_refuse_offsets_of_another_stream(url: str) -> None:
    """``startingOffsets``/``endingOffsets`` go through the same check (the batch range both the
    Spark batch read and the native read use; the streaming source's first offset calls
    ``start_bound``, tested above): an unknown segment no longer reads like ``latest``."""
    from pyspark_tstream.conf.options import SourceOptions
    from pyspark_tstream.datasource.batch_reader import batch_range

    s = _filled(url)
    first = s.state.segments[0]
    for key, value in (("startingOffsets", '{"99": 0}'), ("endingOffsets", '{"99": 0}'),
                       ("startingOffsets", f'{{"{first.id}": {first.next_seq + 5}}}')):
        with pytest.raises(InvalidCutError, match=key):
            batch_range(SourceOptions.from_options({"path": url, key: value}), s)
    lo, hi, start_cut, _ = batch_range(
        SourceOptions.from_options({"path": url, "startingOffsets": f'{{"{first.id}": 0}}'}), s)
    assert start_cut == {first.id: 0} and lo < hi


def test_checking_a_cut_of_active_segments_costs_no_store_call(url: str) -> None:
    """The check reads only what a sealed segment needs: a cut of active segments is checked
    against the state in hand, and cut_bound looks at the journal once for both."""
    from conftest import CallLog
    from pyspark_tstream.read.cuts import check_cut

    s = _filled(url)
    cut = s.cut_at(T0 + 50)
    log = CallLog()
    s.store.observer = log
    assert check_cut(s.store, s.state, cut, option="cut", url=s.url) == cut
    assert log.calls == []
    s.cut_bound(cut)
    # one look for the newest entry (a poll: the next slot and the one after it, one batched
    # call), then the chunks the cut crosses in one batch
    assert [op for op, _ in log.calls] == ["read_many", "read_many"], log.calls
    assert log.calls[0][0] == "read_many" and "_tstream/journal/" in log.calls[0][1], log.calls
