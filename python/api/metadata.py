"""A stream's metadata as Arrow tables: ``history``, ``segments``, ``epochs``, ``groups``, ``files``.

One job: the metadata tables behind ``Stream.metadata(kind)``, ``spark.read.format("tstream")
.option("metadata", kind)`` and ``tstream history`` / ``tstream info --segments/--files``: Delta's
``DESCRIBE HISTORY`` and Iceberg's metadata tables for a tstream stream. Each table is built
from the stored facts directly (journal entries and index nodes, the state, epoch records, the
sealed map, consumer-group logs), never from ``Stream.info()``, and reads what it returns:

* ``history``: one row per commit of journal positions ``startingPosition..endingPosition``
  (default: the newest :data:`HISTORY_LIMIT` positions); the commits a group-commit entry
  folded are a row each, sharing its position. One read per 32 flushed positions (an index
  node holds their entries' deltas), one batched read for the rest.
* ``segments``: every segment the stream had: the active ones from the state, the sealed ones
  from the epoch records (one read per ``EPOCH_CHUNK`` epochs) and the sealed map (one head
  read per shard they sit in).
* ``epochs``: one row per epoch, from the same epoch records.
* ``groups`` and ``files``: :mod:`.metadata_live` (they read the groups' logs and plan the
  live range).

Spark-free; the Spark adapter (``datasource/metadata.py``) only converts types.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .. import keys as K
from ..epochs.routing import fraction
from ..epochs.scaling import read_epochs
from ..errors import ConfigError, corrupt
from ..journal.compaction_state import compact_parts
from ..journal.entries import Chunk, check_folds
from ..journal.packing import expand
from ..journal.scale_records import SealedRecord
from ..journal.shapes import check_delta
from ..journal.state import StreamState, segment_epoch
from ..journal.timeindex import FANOUT, decode_node, first_open
from ..maps.sealed import shard_of
from ..store import layout
from .epochs import initial_segments

if TYPE_CHECKING:
    from .stream import Stream

__all__ = ["HISTORY_LIMIT", "KINDS", "SCHEMAS", "check_kind", "metadata_table"]

#: The tables, by name (``keys.METADATA_KINDS``: the option's one list of valid values).
KINDS: tuple[str, ...] = K.METADATA_KINDS
#: Positions ``history`` covers when no range is given: the newest this many.
HISTORY_LIMIT = 1_000

_TS = pa.timestamp("ms", tz="UTC")

#: Each table's columns (Arrow types; Spark sees long, double, timestamp, string, boolean, array<long>).
SCHEMAS: dict[str, pa.Schema] = {
    "history": pa.schema([
        pa.field("position", pa.int64(), nullable=False), pa.field("committed_at", _TS, nullable=False),
        pa.field("operation", pa.string(), nullable=False), pa.field("writer_id", pa.string()),
        pa.field("batch_id", pa.string()), pa.field("records", pa.int64(), nullable=False),
        pa.field("files", pa.int64(), nullable=False), pa.field("bytes", pa.int64(), nullable=False),
        pa.field("details", pa.string())]),
    "segments": pa.schema([
        pa.field("segment", pa.int64(), nullable=False), pa.field("epoch_start", pa.int64(), nullable=False),
        pa.field("epoch_end", pa.int64()), pa.field("key_lo", pa.float64(), nullable=False),
        pa.field("key_hi", pa.float64(), nullable=False), pa.field("records", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False), pa.field("active", pa.bool_(), nullable=False),
        pa.field("chunks", pa.int64(), nullable=False), pa.field("first_seq", pa.int64(), nullable=False),
        pa.field("next_seq", pa.int64(), nullable=False)]),
    "epochs": pa.schema([
        pa.field("epoch", pa.int64(), nullable=False), pa.field("started_at", _TS, nullable=False),
        pa.field("position", pa.int64(), nullable=False), pa.field("segments", pa.list_(pa.int64())),
        pa.field("sealed", pa.list_(pa.int64())), pa.field("created", pa.list_(pa.int64()))]),
    "groups": pa.schema([
        pa.field("group", pa.string(), nullable=False), pa.field("consumer", pa.string()),
        pa.field("pending", pa.int64(), nullable=False), pa.field("lag_records", pa.int64()),
        pa.field("delivered", pa.int64()), pa.field("acked", pa.int64()),
        pa.field("last_delivered_id", pa.string()), pa.field("idle_ms", pa.int64())]),
    "files": pa.schema([
        pa.field("path", pa.string(), nullable=False), pa.field("segment", pa.int64()),
        pa.field("records", pa.int64(), nullable=False), pa.field("bytes", pa.int64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False), pa.field("first_seq", pa.int64())]),
}


def check_kind(kind: Any, option: str = K.METADATA) -> str:
    """``kind`` if it names a table; otherwise a ConfigError naming ``option`` and the valid kinds."""
    if isinstance(kind, str) and kind.strip().lower() in KINDS:
        return kind.strip().lower()
    raise ConfigError(f"{option}={kind!r} is not a metadata table; valid kinds: {', '.join(KINDS)}",
                      option=option, value=kind)


def metadata_table(stream: Stream, kind: str, *, starting_position: int | None = None,
                   ending_position: int | None = None) -> pa.Table:
    """The metadata table ``kind`` (:data:`KINDS`) of ``stream`` after a refresh.

    ``starting_position``/``ending_position`` bound ``history`` (journal positions, inclusive);
    they are refused for the other tables, which have no range.
    """
    kind = check_kind(kind)
    if kind != "history" and (starting_position is not None or ending_position is not None):
        name = K.STARTING_POSITION if starting_position is not None else K.ENDING_POSITION
        raise ConfigError(f"{name} bounds the history table only, not {kind!r}; leave it out",
                          option=name, value=starting_position if starting_position is not None else ending_position)
    state = stream.refresh()
    if kind == "history":
        rows = history_rows(stream, state, starting_position, ending_position)
    elif kind == "segments":
        rows = segment_rows(stream, state)
    elif kind == "epochs":
        rows = epoch_rows(stream, state)
    else:
        from .metadata_live import file_rows, group_rows

        rows = group_rows(stream, state) if kind == "groups" else file_rows(stream, state)
    return pa.Table.from_pylist(rows, schema=SCHEMAS[kind])


# --- history -------------------------------------------------------------------------------

def history_range(state: StreamState, first: int | None, last: int | None) -> range:
    """The journal positions ``history`` reads: ``first..last`` clipped to the entries kept
    (entry 0 and ``meta_gc_pos..pos``), the newest :data:`HISTORY_LIMIT` when ``first`` is None."""
    for name, value in ((K.STARTING_POSITION, first), (K.ENDING_POSITION, last)):
        if value is not None and value < 0:
            raise ConfigError(f"{name}={value} must be a journal position (0 or more)", option=name, value=value)
    if first is not None and last is not None and last < first:
        raise ConfigError(f"{K.ENDING_POSITION}={last} is below {K.STARTING_POSITION}={first}; swap them",
                          option=K.ENDING_POSITION, value=last)
    hi = state.pos if last is None else min(last, state.pos)
    lo = max(hi - HISTORY_LIMIT + 1, 0) if first is None else first
    return range(lo, hi + 1)


def history_rows(stream: Stream, state: StreamState, first: int | None, last: int | None) -> list[dict[str, Any]]:
    """One row per commit of the positions :func:`history_range` names, oldest first."""
    wanted = history_range(state, first, last)
    kept = [p for p in wanted if p == 0 or p >= state.meta_gc_pos]
    return [row for d in raw_deltas(stream, state, kept) for row in commit_rows(d)]


def raw_deltas(stream: Stream, state: StreamState, positions: Sequence[int]) -> list[dict[str, Any]]:
    """What the entries at ``positions`` did, as stored (folds kept), in that order: from the
    level-1 index nodes that hold them where flushed and kept, else from the entries."""
    open0 = first_open(state)
    lowest_node = state.meta_gc_pos // FANOUT
    by_node = sorted({p // FANOUT for p in positions if p < open0 and p // FANOUT >= lowest_node})
    rels = [layout.index_node(1, n) for n in by_node]
    found: dict[int, dict[str, Any]] = {}
    for rel, data in zip(rels, stream.store.read_many(rels) if rels else []):
        node = decode_node(data, stream.store.uri(rel), 1)
        for d in node["entries"]:
            if isinstance(d, dict) and isinstance(d.get("pos"), int):
                found[d["pos"]] = d
    rest = [p for p in positions if p not in found]
    found.update(zip(rest, stream.journal.log.read_deltas(rest)))
    out = []
    for p in positions:
        try:
            check_delta(found[p])
            d = expand(found[p])  # packed chunks are checked as they are unpacked
            d["folds"] = check_folds(d.get("folds", []), len(d["chunks"]))
        except (ValueError, KeyError, TypeError) as e:
            raise corrupt("journal entry", stream.store.uri(layout.entry(p)), e, stream.store.display_url) from e
        out.append(d)
    return out


def commit_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """The history rows of one stored delta: one per folded commit, else one."""
    chunks = [Chunk.from_json(c) for c in d["chunks"]]
    op, info = str(d["op"]), d.get("info") or {}
    base = {"position": d["pos"], "committed_at": d["wall"], "operation": op}
    if not d["folds"]:
        return [{**base, **_counts(op, chunks, info), "writer_id": d.get("writer"),
                 "batch_id": _text(d.get("batch")), "details": _details(op, info)}]
    rows, at = [], 0
    for rid, writer, batch, n, fold_info in d["folds"]:
        mine, at = chunks[at:at + n], at + n
        rows.append({**base, **_counts(op, mine, fold_info), "writer_id": writer, "batch_id": _text(batch),
                     "details": json.dumps({"request": rid, **fold_info}, sort_keys=True)})
    return rows


def _counts(op: str, chunks: Sequence[Chunk], info: dict[str, Any]) -> dict[str, int]:
    """``records``/``files``/``bytes`` a commit added: a compaction's macro-chunks add files and
    bytes but no records; a data commit's files are its distinct paths (slices share one)."""
    if op == "compact":
        parts = [p for p in compact_parts(info) if p.macro]
        return {"records": 0, "files": len(parts), "bytes": sum(p.bytes for p in parts)}
    files: dict[str, int] = {}
    for c in chunks:
        files[c.path] = c.file_bytes if c.shared else files.get(c.path, 0) + c.bytes
    return {"records": sum(c.rows for c in chunks), "files": len(files), "bytes": sum(files.values())}


def _text(batch: Any) -> str | None:
    return None if batch is None else str(batch)


def _details(op: str, info: dict[str, Any]) -> str | None:
    """What the op did beyond its counts (its stored info as JSON; a compaction's summed)."""
    if op == "compact":
        parts = compact_parts(info)
        return json.dumps({"macros": sum(1 for p in parts if p.macro),
                           "segments": sorted({p.seg for p in parts})}, sort_keys=True)
    return json.dumps(info, sort_keys=True) if info else None


# --- segments and epochs -------------------------------------------------------------------

def _epoch_records(stream: Stream, state: StreamState) -> list[tuple[int, int, int, list[int], list[int], list[int]]]:
    """``(epoch, wall, position, segments, sealed, created)`` of every epoch, oldest first."""
    first_ids = [g.id for g in initial_segments(state.config.segments)]
    now = [g.id for g in state.segments]
    out: list[tuple[int, int, int, list[int], list[int], list[int]]] = [
        (0, state.created, 0, first_ids if state.epoch else now, [], first_ids)]
    for rec in read_epochs(stream.store, state, 1, state.epoch):
        segs = [i for i, _, _ in rec.segments] if rec.segments is not None else []
        out.append((rec.epoch, rec.wall if rec.wall is not None else state.created, rec.pos, segs,
                    list(rec.sealed), list(rec.created)))
    return out


def epoch_rows(stream: Stream, state: StreamState) -> list[dict[str, Any]]:
    """One row per epoch: when it began, at which journal position, its active segments."""
    return [{"epoch": e, "started_at": wall, "position": pos, "segments": segs, "sealed": sealed, "created": created}
            for e, wall, pos, segs, sealed, created in _epoch_records(stream, state)]


def segment_rows(stream: Stream, state: StreamState) -> list[dict[str, Any]]:
    """One row per segment the stream ever had, by id: sealed ones from the sealed map."""
    sealed_ids = sorted({s for *_, sealed, _ in _epoch_records(stream, state) for s in sealed})
    rows = [_sealed_row(r) for r in sealed_records(stream, state, sealed_ids)]
    rows.extend({"segment": g.id, "epoch_start": g.epoch, "epoch_end": None, "key_lo": fraction(g.lo),
                 "key_hi": fraction(g.hi), "records": g.rows, "bytes": g.bytes, "active": True, "chunks": g.chunks,
                 "first_seq": g.first_seq, "next_seq": g.next_seq} for g in state.segments)
    return sorted(rows, key=lambda r: (r["epoch_start"], r["key_lo"]))


def sealed_records(stream: Stream, state: StreamState, ids: Iterable[int]) -> list[SealedRecord]:
    """The sealed records of ``ids``: one sealed-map read per shard (pending ones from the state)."""
    pending = {r.id: r for r in state.pending_sealed}
    out = [pending[i] for i in ids if i in pending]
    shards: dict[int, list[int]] = {}
    for i in ids:
        if i not in pending:
            shards.setdefault(shard_of(i), []).append(i)
    for shard, members in sorted(shards.items()):
        version = stream.sealed_map.latest(shard)
        for i in members:
            rec = version.get(i)
            if rec is None:
                raise corrupt("sealed map", stream.store.uri(layout.sealed_head(shard)),
                              KeyError(f"sealed segment {i} has no record"), stream.store.display_url)
            out.append(rec)
    return out


def _sealed_row(r: SealedRecord) -> dict[str, Any]:
    return {"segment": r.id, "epoch_start": segment_epoch(r.id), "epoch_end": r.sealed_epoch,
            "key_lo": fraction(r.lo), "key_hi": fraction(r.hi), "records": r.rows, "bytes": r.bytes,
            "active": False, "chunks": r.chunks, "first_seq": r.first_seq, "next_seq": r.next_seq}

