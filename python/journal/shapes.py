"""Shape checks of metadata objects before they are trusted: a wrong shape raises ``TypeError``.

The decoder that calls them turns that into a ``CorruptMetadataError`` (``errors.corrupt``).

A wrong-shaped object (truncated, foreign, hand-edited) must fail where it is decoded, naming the
object and a remedy that exists, never as a ``KeyError``/``TypeError`` or a wrong answer later.
"""

from __future__ import annotations

from typing import Any

from .summary import FIRST_SUMMARY_COLUMNS


def need(ok: bool, what: str) -> None:
    """Raise ``TypeError`` naming ``what`` unless ``ok``."""
    if not ok:
        raise TypeError(f"{what} has the wrong type")


def is_int(v: Any) -> bool:
    """A JSON integer (``True``/``False`` are not)."""
    # exactly int, as json.loads makes them: one type test (opening a stream checks ~300 ints)
    return type(v) is int


def _sound_chunk(c: list[Any]) -> bool:
    """Whether ``c`` passes every check of :func:`check_chunk`, in one expression of exact type
    tests (a read of fresh data at 64 segments checks ~60 chunks an append)."""
    n = len(c)
    return (8 <= n <= 14 and type(c[1]) is str and type(c[0]) is int and type(c[2]) is int
            and type(c[3]) is int and type(c[4]) is int and type(c[5]) is int and type(c[6]) is int
            and type(c[7]) is int and (n < 9 or (type(c[8]) is int and c[8] >= 0))
            and (n < 10 or type(c[9]) is bool)
            and (n < 11 or (type(c[10]) is list and all(type(m) is int for m in c[10])))
            and (n < 12 or (type(c[11]) is int and c[11] >= 0))
            and (n < 13 or (type(c[12]) is int and c[12] >= 0))
            and (n < 14 or (type(c[13]) is int and c[13] >= 0 and c[12] + c[13] <= c[11])))


def check_chunk(c: Any) -> None:
    """A chunk reference: 8 fields, then the optional format-v2 ``offset``, ``sorted``, ``marks``
    the format-v3 ``file_bytes`` and the format-v5 ``span_start`` and ``span_bytes``."""
    if type(c) is list and _sound_chunk(c):
        return
    need(isinstance(c, list) and 8 <= len(c) <= 14 and isinstance(c[1], str)
         and all(is_int(v) for i, v in enumerate(c[:8]) if i != 1), "a chunk")
    need(len(c) < 9 or (is_int(c[8]) and c[8] >= 0), "a chunk's offset")
    need(len(c) < 10 or isinstance(c[9], bool), "a chunk's sorted flag")
    need(len(c) < 11 or (isinstance(c[10], list) and all(is_int(m) for m in c[10])), "a chunk's marks")
    need(len(c) < 12 or (is_int(c[11]) and c[11] >= 0), "a chunk's file_bytes")
    need(len(c) < 13 or (is_int(c[12]) and c[12] >= 0), "a chunk's span_start")
    need(len(c) < 14 or (is_int(c[13]) and c[13] >= 0 and c[12] + c[13] <= c[11]), "a chunk's span_bytes")


def check_delta(d: Any) -> None:
    """Shape of what a journal entry did (position, op, chunks, info), without its state. A
    packed entry's chunks (``packed``) are checked as they are unpacked
    (:func:`~pyspark_tstream.journal.packing.unpack`): check the stored entry, then expand it."""
    need(isinstance(d, dict), "the entry")
    for k in ("pos", "wall"):
        need(is_int(d.get(k)), k)
    need(isinstance(d.get("op"), str) and isinstance(d.get("nonce"), str), "op/nonce")
    need(isinstance(d.get("chunks"), list), "chunks")
    for c in d["chunks"]:
        check_chunk(c)
    need(isinstance(d.get("info", {}), dict), "info")


def check_entry(d: Any) -> None:
    """Shape of a journal entry (and its state) before it is trusted: a wrong-shaped object
    must fail here, not as a wrong answer later."""
    check_delta(d)
    st = d.get("state")
    need(isinstance(st, dict), "state")
    for k in ("pos", "epoch", "tick", "max_tso", "wall", "created"):
        need(is_int(st.get(k)), f"state.{k}")
    for k in ("rows", "bytes", "chunks", "next_number", "head_pos", "head_tso", "sealed", "first_tso",
              "gc_pos", "meta_gc_pos"):
        need(is_int(st.get(k, 0)), f"state.{k}")
    need(isinstance(st.get("schema"), str) and isinstance(st.get("config"), dict), "state.schema/config")
    need(isinstance(st.get("segments"), list) and all(
        isinstance(g, list) and len(g) >= 3 and all(is_int(x) for x in g) for g in st["segments"]),
        "state.segments")
    need(isinstance(st.get("writers"), dict) and all(
        isinstance(w, dict) and is_int(w.get("tso")) and is_int(w.get("wall")) and isinstance(w.get("live"), bool)
        and isinstance(w.get("batches", []), list) for w in st["writers"].values()), "state.writers")
    need(isinstance(st.get("index"), list) and all(
        isinstance(level, list) and all(
            isinstance(i, list) and len(i) >= FIRST_SUMMARY_COLUMNS and all(is_int(x) for x in i)
                                        for i in level) for level in st["index"]), "state.index")
    need(isinstance(st.get("schema_changes", []), list) and all(
        isinstance(c, list) and len(c) == 4 and all(is_int(x) for x in c[:3]) and isinstance(c[3], list)
        and all(isinstance(n, str) for n in c[3]) for c in st.get("schema_changes", [])), "state.schema_changes")
    need(isinstance(st.get("folded", []), list) and all(
        isinstance(f, list) and len(f) == 2 and is_int(f[0]) and isinstance(f[1], list)
        and all(isinstance(i, str) for i in f[1]) for f in st.get("folded", [])), "state.folded")
    need(isinstance(st.get("pending_sealed", []), list) and isinstance(st.get("truncations", []), list)
          and isinstance(st.get("pending_epoch") or {}, dict), "state.pending_*")
