"""The macro map's document format: buckets without the ``partial`` mark keep the first form's
bytes and read as before, a partial bucket carries format 2 and reads every record, and a bucket
of a newer format is refused by name, never read as an older one or overwritten by repair.

Why the mark needs a format version (docs/protocol.md §12): a reader that ignores it reads a
partial bucket as all of the compacted history and skips the records it leaves to the journal.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from helpers import ORDER, ROOT, T0
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.errors import UnsupportedFormatError
from pyspark_tstream.journal import seal
from pyspark_tstream.journal.compaction_state import segment_summaries
from pyspark_tstream.journal.state import segment_number
from pyspark_tstream.maps.macromap import MACRO_FORMAT_VERSION, Bucket, Macro, MacroMap
from pyspark_tstream.read.compacted import plan_from_map
from pyspark_tstream.store import layout

#: A bucket version as the first form stored it (a golden fixture's, written before the mark).
GOLDEN_BUCKET = ROOT / "tests/golden/v2-summary3/stream/_tstream/macros/0/000000/00000000.json"


def _sliced_and_compacted(url: str) -> tuple[Stream, pa.Table]:
    """Two segments of ``Stream.append``'s shared files (slices), compacted once, nothing collected."""
    s = Stream.create(url, segments=2, compaction="off")
    for b in range(30):
        s.append(pa.table({"k": [f"k{(b * 7 + i) % 11}" for i in range(5)], "b": [b] * 5,
                           "t": [T0 + b * 100 + i for i in range(5)]}), key="k", timestamp="t")
    before = s.read()
    assert s.compact().macros == 2
    return Stream.open(url), before


def _named(s: Stream) -> dict[int, bytes]:
    """The bytes of the bucket version the state names, per segment (what plans read)."""
    return {seg: s.store.read(layout.macro_version(segment_number(seg), e.bucket, e.version))
            for seg, e in segment_summaries(s.refresh()).items() if e.bucket is not None and e.version is not None}


def _same(a: pa.Table, b: pa.Table) -> None:
    assert a.num_rows == b.num_rows and a.sort_by(ORDER).equals(b.sort_by(ORDER))


def test_a_bucket_without_the_mark_is_the_first_form() -> None:
    """Written byte for byte as before the mark; the first form's bytes read as a whole bucket."""
    macro = Macro(0, 5, "data/0/m-a.parquet", 100, 10, 20, True, 1)
    assert Bucket(3, 0, 7, (macro,)).to_bytes() == (
        b'{"seg":3,"bucket":0,"v":7,"macros":[[0,5,"data/0/m-a.parquet",100,10,20,1,1]]}')
    old = GOLDEN_BUCKET.read_bytes()
    assert b"format" not in old and b"partial" not in old
    version = MacroMap(Stream.create("memory://macro-format-golden/s").store).decode(old, "x.json")
    assert version.macros and not version.partial
    assert Bucket(version.seg, version.bucket, version.v, version.macros).to_bytes() == old.strip()


def test_unmarked_and_partial_buckets_both_read_every_record() -> None:
    url = "memory://macro-format-partial/s"
    s, before = _sliced_and_compacted(url)
    # unmarked: the first form, and plans read the compacted history from it
    assert all(b'"format"' not in data and b'"partial"' not in data for data in _named(s).values())
    st = s.refresh()
    assert plan_from_map(s.store, st, st.head_pos, 0, 1 << 62) is not None
    _same(before, s.read())
    # a macro-chunk of slices lost before vacuum: repair leaves the slices to the journal
    seg = min(segment_summaries(st))
    macro = next(m for m in MacroMap(s.store).latest(seg, 0).macros if m.floor == 0)
    s.store.delete([macro.path])
    assert Stream.open(url).repair().ok
    s = Stream.open(url)
    doc = json.loads(_named(s)[seg])
    assert (doc.get("partial"), doc.get("format")) == (1, MACRO_FORMAT_VERSION)
    assert MacroMap(s.store).latest(seg, 0).partial
    st = s.refresh()
    assert plan_from_map(s.store, st, st.head_pos, 0, 1 << 62) is None  # the plan walks the journal
    _same(before, s.read())
    assert s.verify().ok


def test_a_bucket_of_a_newer_format_is_refused_and_never_repaired_over() -> None:
    url = "memory://macro-format-newer/s"
    s, _ = _sliced_and_compacted(url)
    seg, data = next(iter(_named(s).items()))
    e = segment_summaries(s.refresh())[seg]
    rel = layout.macro_version(segment_number(seg), e.bucket or 0, e.version or 0)
    newer = seal.seal({**seal.unseal(data), "format": MACRO_FORMAT_VERSION + 1})  # sealed as a newer build would
    s.store.write(rel, newer)
    s.store.delete([layout.macro_head(segment_number(seg), e.bucket or 0)])
    with pytest.raises(UnsupportedFormatError, match="macro map bucket .* has format version 3, newer than this "
                                                     "pyspark-tstream reads \\(2\\); upgrade pyspark-tstream") as info:
        Stream.open(url).read()
    assert info.value.path == s.store.uri(rel) and info.value.version == MACRO_FORMAT_VERSION + 1
    with pytest.raises(UnsupportedFormatError):
        Stream.open(url).repair()
    assert s.store.read(rel) == newer


def test_a_repair_that_marks_a_bucket_partial_makes_older_tstreams_refuse_the_stream(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tstream older than the mark checks only the journal's version: the repair commits an
    entry (no records) at this format before it writes the partial bucket, so a format-5 reader
    refuses the stream instead of reading 91 of 200 records (measured with the release before)."""
    from pyspark_tstream.journal import entries, features
    from pyspark_tstream.maintain.repair import REPAIR_OP

    url = "memory://macro-format-refuse/s"
    s, before = _sliced_and_compacted(url)
    pos = s.refresh().pos
    macro = next(m for m in MacroMap(s.store).latest(min(segment_summaries(s.refresh())), 0).macros if m.floor == 0)
    s.store.delete([macro.path])
    report = Stream.open(url).repair()
    assert report.ok and any("partial" in line and f"journal entry {pos + 1} committed" in line
                             for line in report.repaired), report.repaired
    raw = json.loads(s.store.read(layout.entry(pos + 1)))
    assert (raw["op"], raw["v"], raw.get("chunks", [])) == (REPAIR_OP, entries.FORMAT_VERSION, [])
    after = Stream.open(url)
    _same(before, after.read())  # no record added or lost by the entry
    assert after.verify().ok
    known = features.VERSIONS[entries.ENTRY]  # what a release of format 5 checks: entries 1 to 5
    monkeypatch.setitem(features.VERSIONS, entries.ENTRY, {v: f for v, f in known.items() if v <= 5})
    with pytest.raises(UnsupportedFormatError):
        Stream.open(url).read()


def test_a_repair_with_no_partial_bucket_commits_nothing() -> None:
    url = "memory://macro-format-whole/s"
    s, _ = _sliced_and_compacted(url)
    seg = min(segment_summaries(s.refresh()))
    e = segment_summaries(s.refresh())[seg]
    pos = s.refresh().pos
    s.store.write(layout.macro_version(segment_number(seg), e.bucket or 0, e.version or 0), b"not json")
    report = Stream.open(url).repair()
    assert report.ok and report.repaired and not any("committed" in line for line in report.repaired)
    assert Stream.open(url).refresh().pos == pos
