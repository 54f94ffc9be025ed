"""State changes (format v6): what one commit changed in the stream state, and applying it.

One job: the ``change`` of a v6 journal entry. Every field of the
:class:`~pyspark_tstream.journal.state.StreamState` whose stored form differs after the commit is
stored whole, except three that a commit usually changes a little of:

* ``writers``, stored per writer: the writers the commit changed (``writers``, each whole) and
  those it removed (``gone``, writer state that expired);
* ``segments``, when the same segments stay in the same order: ``segs``, one list per changed
  segment, ``[index, field, difference, field, difference, ...]`` (an append to 64 segments
  changes 5 of each one's 12 integers: 2 KiB, not 6.5);
* ``index``, when the commit only added open summaries at level 0: ``index+``, those rows.

A field that became absent (an optional one emptied) is listed in ``drop``. Applying the change to the state before
the entry gives the state after it, exactly: the change is computed from the two stored forms, so
every process that applies it holds the same state (and a checkpoint of it has the same bytes).

A commit's size and CPU are then O(what it changed + active segments + open index), not
O(writers): a writer that commits touches its own window and lanes only, and a lost race
re-encodes only the change on the winner's state.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import chain
from typing import Any

from ..codec import INT_TYPES
from .expiry import merged as merged_quiet
from .shapes import check_entry, need
from .state import StreamState, Writer

#: Keys of a change that are not state fields.
WRITERS, GONE, DROP, SEGS, INDEX_ADDED = "writers", "gone", "drop", "segs", "index+"


def _bare(state: StreamState) -> dict[str, Any]:
    """The stored form of ``state`` without its writers (the fields stored whole), in containers
    of its own: every ``to_json`` builds fresh lists and dicts of JSON types, so this is a copy
    a commit or a catch-up may change (a JSON round trip to copy it cost more than the rest of
    applying a change)."""
    d = replace(state, writers={}).to_json()
    del d[WRITERS]
    return d


def state_copy(state: StreamState) -> StreamState:
    """A private copy of ``state`` a commit may change: its fields through their stored form,
    its writers copy-on-write (shared until :meth:`StreamState.writer_to_change` copies the few
    the commit touches: copying every writer's window and lanes on every attempt made a commit's
    CPU grow with the writers)."""
    copy = StreamState.from_json({**_bare(state), WRITERS: {}})
    copy.writers = dict(state.writers)
    copy.edited = {}
    copy.quiet = state.quiet
    return copy


def change(before: StreamState, after: StreamState) -> dict[str, Any]:
    """What turned ``before`` into ``after`` (see the module docstring). When ``after`` is a
    :func:`state_copy` of ``before``, only the writers it edited are compared and encoded."""
    a, b = _bare(before), _bare(after)
    out: dict[str, Any] = {k: v for k, v in b.items() if a.get(k, _MISSING) != v}
    dropped = [k for k in a if k not in b]
    if dropped:
        out[DROP] = dropped
    if "segments" in out and [g[0] for g in a["segments"]] == [g[0] for g in b["segments"]]:
        out[SEGS] = [_segment_diff(i, o, n) for i, (o, n) in enumerate(zip(a["segments"], out.pop("segments")))
                     if o != n]
    if "index" in out:
        old_index, new_index = a["index"], out["index"]
        if old_index and len(old_index) == len(new_index) and old_index[1:] == new_index[1:] \
                and new_index[0][:len(old_index[0])] == old_index[0]:
            out[INDEX_ADDED] = out.pop("index")[0][len(old_index[0]):]
    old, new = before.writers, after.writers
    if after.edited is None:  # not a copy-on-write copy: any writer may differ
        changed = {wid: w.to_json() for wid, w in new.items() if old.get(wid) != w}
        gone = [wid for wid in old if wid not in new]
    else:
        edited = [wid for wid in after.edited if old.get(wid) != new.get(wid)]
        changed = {wid: new[wid].to_json() for wid in edited if wid in new}
        gone = [wid for wid in edited if wid not in new]
    if changed:
        out[WRITERS] = changed
    if gone:
        out[GONE] = gone
    return out


_MISSING = object()


def _segment_diff(i: int, old: list[int], new: list[int]) -> list[int]:
    row = [i]
    for j, (x, y) in enumerate(zip(old, new)):
        if x != y:
            row += [j, y - x]
    return row


def _apply_segs(segments: list[list[int]], rows: Any) -> None:
    need(isinstance(rows, list), "the change's segs")
    if _summed(segments, rows):
        return
    for row in rows:
        # one C-level type test a row: catching up applies every segment row of every entry
        need(type(row) is list and len(row) % 2 == 1 and INT_TYPES.issuperset(map(type, row)), "the change's segs")
        seg = segments[row[0]]
        pairs = iter(row)
        next(pairs)  # the segment's index: (field, difference) pairs follow, read without slicing
        for j, diff in zip(pairs, pairs):
            seg[j] += diff


#: Segment rows from which :func:`_summed` adds them up as arrays (fewer: the loop costs less).
SUMMED_ROWS = 32


def _summed(segments: list[list[int]], rows: list[Any]) -> bool:
    """Apply ``rows`` (segment rows of consecutive changes) to ``segments`` as one sum per
    (segment, field), when they have the shape every writer gives them (rows of integers, all
    of one length, into segments of one width, sums that stay in 64 bits): a catch-up over a
    checkpoint's entries at many segments then costs a few array operations, not a Python step
    per field of every row. False (nothing changed): apply them row by row, which reports what
    is wrong with them."""
    if len(rows) < SUMMED_ROWS or not segments or set(map(type, rows)) != {list}:
        return False
    lengths, widths = set(map(len, rows)), set(map(len, segments))
    if len(lengths) != 1 or len(widths) != 1 or not INT_TYPES.issuperset(map(type, chain.from_iterable(rows))):
        return False
    (length,), (width,) = lengths, widths
    if length % 2 != 1 or length < 3:
        return False
    import numpy as np  # here: reading the journal without many segments needs no numpy

    try:
        table = np.array(rows, dtype=np.int64)
    except OverflowError:
        return False
    at, fields, diffs = table[:, 0], table[:, 1::2], table[:, 2::2]
    n = len(segments)
    bound = max(int(diffs.max()), -int(diffs.min()))
    if int(at.min()) < -n or int(at.max()) >= n or int(fields.min()) < -width or int(fields.max()) >= width \
            or bound * len(rows) >= 2 ** 62:
        return False
    sums = np.zeros((n, width), dtype=np.int64)
    np.add.at(sums, (np.repeat(at % n, fields.shape[1]), (fields % width).ravel()), diffs.ravel())
    seg_at, field_at = np.nonzero(sums)
    for i, j, total in zip(seg_at.tolist(), field_at.tolist(), sums[seg_at, field_at].tolist()):
        segments[i][j] += total
    return True


def apply(before: StreamState, ch: dict[str, Any]) -> StreamState:
    """The state after a change ``ch`` of ``before`` (``before`` is left as it was; writers the
    change does not name are shared with it, so neither may be changed in place: a commit works
    on :func:`state_copy`). TypeError, KeyError or ValueError when ``ch`` is not a change (the
    caller reports corrupt metadata)."""
    return apply_all(before, [ch])


def apply_all(before: StreamState, changes: list[dict[str, Any]]) -> StreamState:
    """The state after the consecutive changes ``changes`` of ``before``, as :func:`apply` one
    after another, but the state's fields decoded once: catching up over many entries costs
    their changes, not a state per entry."""
    d = _bare(before)
    merged = dict(before.writers)
    changed: dict[str, Any] = {}
    touched: dict[str, None] = {}
    rows: list[Any] = []  # segment rows not applied yet: consecutive changes' are summed at once
    for ch in changes:
        need(isinstance(ch, dict), "the entry's change")
        if rows and ("segments" in ch or "segments" in ch.get(DROP, [])):
            _apply_segs(d["segments"], rows)  # before the segments are replaced
            rows = []
        for k in ch.get(DROP, []):
            d.pop(k, None)
        d.update((k, v) for k, v in ch.items() if k not in (WRITERS, GONE, DROP, SEGS, INDEX_ADDED))
        if SEGS in ch:
            need(isinstance(ch[SEGS], list), "the change's segs")
            rows += ch[SEGS]
        if INDEX_ADDED in ch:
            need(isinstance(ch[INDEX_ADDED], list) and bool(d["index"]), "the change's index+")
            d["index"][0].extend(ch[INDEX_ADDED])
        writers, gone = ch.get(WRITERS, {}), ch.get(GONE, [])
        need(isinstance(writers, dict) and isinstance(gone, list), "the change's writers")
        for wid in gone:
            merged.pop(wid, None)
            changed.pop(wid, None)
            touched[wid] = None
        changed.update(writers)
    if rows:
        _apply_segs(d["segments"], rows)
    # the fields are shape-checked as a whole state's are (a change is a partial state)
    check_entry({"pos": 0, "wall": 0, "op": "", "nonce": "", "chunks": [], "state": {**d, WRITERS: changed}})
    after = StreamState.from_json({**d, WRITERS: {}})
    for wid, w in changed.items():
        merged[wid] = Writer.from_json(w)
        touched[wid] = None
    after.writers = merged
    if before.quiet is not None:  # kept up to date from the writers the changes name alone
        after.quiet = merged_quiet(before.quiet, after, touched)
    return after
