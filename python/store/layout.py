"""Every path on the store, built in one place: the on-store tree of a stream.

Paths are relative to the stream root (the :class:`~pyspark_tstream.store.storage.Store` keeps
them under it). No other module spells a folder or file name of this tree: each kind of object
has one function or constant here, and the parsers and predicates its readers need sit next to
it, so the tree below is the whole of the layout (docs/protocol.md §1)::

    <root>/
      _tstream/                                          META
        head.json                                        HEAD: copy of the newest journal entry
        anchor.json                                      ANCHOR: {"pos": n}, oldest entry GC kept
        journal/<pos // 100000:06d>/<pos:012d>.json      entry(pos)
        checkpoints/<pos // 100000:06d>/<pos:012d>.json  checkpoint(pos): the whole state after entry pos
        index/<level>/<node:012d>.json                   index_node(level, node)
        sealed/<shard:06d>/<version:08d>.json            sealed_version(shard, v)
        sealed/<shard:06d>/head.json                     sealed_head(shard)
        epochs/<epoch // 100000:06d>/<epoch:012d>.json   epoch_record(epoch)
        epochs/chunks/<k:012d>.json                      epoch_chunk(k)
        groups/<name>/log/<pos // 100000:06d>/<pos:012d>.json   group_version(name, pos)
        groups/<name>/head.json                          group_head(name)
        macros/<number>/<bucket:06d>/<v:08d>.json        macro_version(number, bucket, v)
        macros/<number>/<bucket:06d>/head.json           macro_head(number, bucket)
        compact/m-<uuid>.json                            manifest(macro-chunk path)
        requests/<base:012d>-<id>.json                   commit_request(base, rid)
        write-created/<nonce>.json                       write_created(nonce)
      data/<number>/<tag>-<task>-<uuid>.parquet          data_chunk(number, tag, task, uid)
      data/<number>/reroute-<uuid>.parquet               reroute_chunk(number, uid)
      data/<number>/m-<uuid>.parquet                     macro_chunk(number, uid)

Segments are named by their number (:func:`~pyspark_tstream.journal.state.segment_number` of
an id), never by their id: a segment's folder outlives the epoch that created it. Numbered
series without bound (journal entries, epoch records, group versions) are grouped in folders
of :data:`FOLDER_SPAN`, so no folder grows with history; bounded ones (sealed shards, macro
buckets) are not. Changing anything here changes the on-store format: ``tests/test_layout.py``
pins every path, and no other module may hold these names (it scans the package).
"""

from __future__ import annotations

import re

#: The stream's metadata folder; everything but data files lives under it.
META = "_tstream"
#: Hint: the exact bytes of the newest journal entry.
HEAD = f"{META}/head.json"
#: ``{"pos": n}``: the oldest journal entry garbage collection kept.
ANCHOR = f"{META}/anchor.json"
#: Journal entries, one immutable object per position.
JOURNAL = f"{META}/journal"
#: Checkpoints of the whole stream state (format v6), one per checkpointed journal position.
CHECKPOINTS = f"{META}/checkpoints"
#: Time-index nodes, one folder per level.
INDEX = f"{META}/index"
#: Sealed-segment map shards.
SEALED = f"{META}/sealed"
#: Epoch records and epoch history chunks.
EPOCHS = f"{META}/epochs"
#: Consumer groups, one folder per group name.
GROUPS = f"{META}/groups"
#: Macro map: one folder per segment number, one per bucket below it.
MACROS = f"{META}/macros"
#: Compaction manifests.
MANIFESTS = f"{META}/compact"
#: Published commit requests waiting to be folded into a journal entry (group commit).
REQUESTS = f"{META}/requests"
#: Markers of the create entries a first write made (not ``Stream.create``), by entry nonce.
WRITE_CREATED = f"{META}/write-created"
#: Data files: one folder per segment number.
DATA = "data"

#: Numbered objects without bound are grouped in folders of this many.
FOLDER_SPAN = 100_000

_HINT = "head.json"
_JSON = ".json"
_PARQUET = ".parquet"
_MACRO_PREFIX = "m-"


def numbered(folder: str, n: int) -> str:
    """Object ``n`` of an unbounded numbered series: ``<folder>/<n // 100000:06d>/<n:012d>.json``."""
    return f"{folder}/{n // FOLDER_SPAN:06d}/{n:012d}{_JSON}"


def numbered_name(name: str) -> int | None:
    """The number of a listed ``<n>.json`` object name (entries, versions), None if it is not one
    (a head hint, a temporary file)."""
    stem = name[: -len(_JSON)] if name.endswith(_JSON) else ""
    return int(stem) if stem.isdigit() else None


def stream_url(uri: str) -> str:
    """The stream URL of a metadata object's URI (``<url>/_tstream/...`` → ``<url>``); the URI
    itself when it is not under a metadata folder. Error remedies name it (``tstream fsck URL``)."""
    marker = f"/{META}/"
    return uri.split(marker)[0] if marker in uri else uri


# -- journal and time index ----------------------------------------------------------------------
def entry(pos: int) -> str:
    """The journal entry at position ``pos`` (immutable)."""
    return numbered(JOURNAL, pos)


def checkpoint(pos: int) -> str:
    """The checkpoint of the whole stream state after journal entry ``pos`` (format v6)."""
    return numbered(CHECKPOINTS, pos)


#: Where ``repair`` sets aside a torn newest journal entry it drops (kept for inspection).
DAMAGED = f"{META}/damaged"


def damaged_entry(pos: int) -> str:
    """The set-aside copy of the unreadable journal entry that held position ``pos``."""
    return f"{DAMAGED}/{pos:012d}{_JSON}"


def journal_folder(name: str) -> str:
    """A listed folder of journal entries (``name`` as :data:`JOURNAL` lists it)."""
    return f"{JOURNAL}/{name}"


def commit_request(base: int, rid: str) -> str:
    """A published commit request (group commit): ``base`` is the journal position its writer
    knew, ``rid`` its id; both are in the name so a combiner or a vacuum can skip or collect it
    from a listing alone."""
    return f"{REQUESTS}/{base:012d}-{rid}{_JSON}"


def request_name(name: str) -> tuple[int, str] | None:
    """``(base, rid)`` of a listed request name (``<base:012d>-<id>.json``), None if it is not one."""
    stem = name[: -len(_JSON)] if name.endswith(_JSON) else ""
    base, _, rid = stem.partition("-")
    return (int(base), rid) if base.isdigit() and rid.isalnum() else None


def write_created(nonce: str) -> str:
    """The marker saying the create entry whose nonce is ``nonce`` was made by a first write, so
    its config holds only once a commit lands (:mod:`~pyspark_tstream.api.creation`)."""
    return f"{WRITE_CREATED}/{nonce}{_JSON}"


def index_node(level: int, node: int) -> str:
    """Time-index node ``node`` of ``level`` (1 and up)."""
    return f"{INDEX}/{level}/{node:012d}{_JSON}"


# -- sealed-segment map --------------------------------------------------------------------------
def sealed_folder(shard: int) -> str:
    """The folder of sealed-map shard ``shard``: its versions and head hint."""
    return f"{SEALED}/{shard:06d}"


def sealed_version(shard: int, v: int) -> str:
    """Version ``v`` of sealed-map shard ``shard`` (immutable)."""
    return f"{sealed_folder(shard)}/{v:08d}{_JSON}"


def sealed_head(shard: int) -> str:
    """The head hint of sealed-map shard ``shard``: a copy of its newest version."""
    return f"{sealed_folder(shard)}/{_HINT}"


# -- epochs --------------------------------------------------------------------------------------
def epoch_record(epoch: int) -> str:
    """The record of epoch ``epoch`` (one per scale, epoch >= 1)."""
    return numbered(EPOCHS, epoch)


def epoch_chunk(k: int) -> str:
    """Epoch history chunk ``k``: the records of a run of consecutive epochs."""
    return f"{EPOCHS}/chunks/{k:012d}{_JSON}"


# -- consumer groups -----------------------------------------------------------------------------
def group_folder(name: str) -> str:
    """The folder of consumer group ``name`` (a name checked to be one safe path part)."""
    return f"{GROUPS}/{name}"


def group_version(name: str, pos: int) -> str:
    """Version ``pos`` of consumer group ``name`` (immutable)."""
    return numbered(f"{group_folder(name)}/log", pos)


def group_head(name: str) -> str:
    """The head hint of consumer group ``name``: a copy of its newest version."""
    return f"{group_folder(name)}/{_HINT}"


# -- macro map and compaction manifests ----------------------------------------------------------
def macro_segment_folder(number: int) -> str:
    """The folder of segment ``number``'s macro-map buckets."""
    return f"{MACROS}/{number}"


def macro_bucket_folder(number: int, bucket: int) -> str:
    """The folder of a macro-map bucket: its versions and head hint."""
    return f"{macro_segment_folder(number)}/{bucket:06d}"


def macro_version(number: int, bucket: int, v: int) -> str:
    """Version ``v`` of a macro-map bucket (immutable)."""
    return f"{macro_bucket_folder(number, bucket)}/{v:08d}{_JSON}"


def macro_head(number: int, bucket: int) -> str:
    """A macro-map bucket's head hint: a copy of its newest version."""
    return f"{macro_bucket_folder(number, bucket)}/{_HINT}"


def macro_bucket_of(path: str) -> tuple[int, int] | None:
    """``(segment number, bucket)`` of a macro-map object's URI (a version or head hint under
    ``<url>/_tstream/macros/``), None if ``path`` is not one."""
    marker = f"/{MACROS}/"
    if marker not in path:
        return None
    parts = path.split(marker, 1)[1].split("/")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def manifest(macro_path: str) -> str:
    """The manifest of the compaction that wrote macro-chunk ``macro_path`` (named after it)."""
    name = macro_path.rsplit("/", 1)[-1]
    return f"{MANIFESTS}/{name.removesuffix(_PARQUET)}{_JSON}"


def manifest_file(name: str) -> str:
    """A listed manifest (``name`` as :data:`MANIFESTS` lists it)."""
    return f"{MANIFESTS}/{name}"


# -- data files ----------------------------------------------------------------------------------
def data_folder(number: int | str) -> str:
    """The data folder of segment ``number`` (or of a folder name :data:`DATA` lists)."""
    return f"{DATA}/{number}"


def data_file(folder: int | str, name: str) -> str:
    """A listed data file: ``name`` in the data folder ``folder``."""
    return f"{data_folder(folder)}/{name}"


def data_chunk(number: int, tag: str, task: str, uid: str) -> str:
    """A chunk a writer task writes for segment ``number`` (``tag``: the writer tag, ``task``:
    the task's id, ``uid``: 32 hex digits)."""
    return f"{data_folder(number)}/{tag}-{task}-{uid}{_PARQUET}"


def reroute_chunk(number: int, uid: str) -> str:
    """A chunk split off by key for segment ``number`` after a scale sealed its writer's segment."""
    return f"{data_folder(number)}/reroute-{uid}{_PARQUET}"


def macro_chunk(number: int, uid: str) -> str:
    """A macro-chunk compaction writes for segment ``number``."""
    return f"{data_folder(number)}/{_MACRO_PREFIX}{uid}{_PARQUET}"


def is_macro_chunk(rel: str) -> bool:
    """Whether data file ``rel`` is a macro-chunk compaction wrote (:func:`macro_chunk`)."""
    return rel.rsplit("/", 1)[-1].startswith(_MACRO_PREFIX)


#: The end of every data file name a stream's writers make (chunks, re-routed chunks,
#: macro-chunks): ``-<32 hex digits>.parquet``. Orphan cleanup deletes nothing else.
_OWN_DATA_NAME = re.compile(r"^[^/]+-[0-9a-f]{32}\.parquet$")


def is_own_data_name(name: str) -> bool:
    """Whether ``name`` (a name listed in a data folder) is one this stream's writers make
    (:func:`data_chunk`, :func:`reroute_chunk`, :func:`macro_chunk`): never a user's file
    (``part-0000.parquet``, ``notes.txt``) nor a folder (another stream inside this one)."""
    return bool(_OWN_DATA_NAME.match(name))


def is_data_file(rel: str) -> bool:
    """Whether ``rel`` names a data file of the stream (a chunk, re-routed chunk or
    macro-chunk), never metadata nor anything outside the root: what a manifest may list for
    deletion."""
    return rel.startswith(f"{DATA}/") and rel.endswith(_PARQUET) and ".." not in rel
