"""History reads through Spark's own Parquet scan: ``read(spark, url, **options)``.

Invariant: returns exactly the rows, system columns and schema of
``spark.read.format("tstream").options(**options).load(url)``. The driver plans the read with the
core (same options, same bounds: :func:`.batch_reader.batch_range`, same chunks:
``Stream.plan``); the rows then come from ``spark.read.parquet`` over the planned chunk files,
so Spark's vectorized reader decodes them in the JVM, prunes columns and splits files across
tasks. No Python runs per row.

A record's system columns are a function of its chunk's description and its row number in the
Parquet file (``_metadata.row_index``), computed with Spark expressions:

* a chunk is rows ``[offset, offset + rows)`` of its file (a view of part of a macro-chunk, or
  all of an ordinary chunk), narrowed by the stream cuts of its segment;
* with ``j = row_index``: ``_tso = greatest(raw, floor - offset + j)`` (the floor counts the
  chunk's rows, as the Python read does; a macro-chunk view's floor is 0); ``_seq = seq - offset + j``;
  ``_timestamp = _tso >> 18`` (ms);
  records outside ``(lo, hi]`` are dropped.

Views of one macro-chunk share ``seq - offset`` and the floor, so each file has one numbering
and one row range in practice. A row finds its file's numbers by a lookup in literal maps (up
to :data:`LOOKUP_FILES` files) or a broadcast join (more files, or a file with several
numberings); Spark prunes both with the system columns when a query does not use them. Filters
are only added when some chunk needs them (a cut row range, a chunk straddling ``lo`` or
``hi``): a full read of whole chunks scans exactly like ``spark.read.parquet``.

Before Spark opens them, the driver checks each planned file's size and footer against the
journal (:func:`.file_checks.check_files`: a footer read per chunk file, in parallel): the Parquet
scan would otherwise return a foreign file's rows, which tstream's own read refuses. Spark's
reader checks each page's CRC32 (:data:`_VERIFY_PAGES`), so a damaged page fails the job with
Parquet's error.

Spark must reach the store itself, through its own Hadoop connector
(:func:`.hadoop.hadoop_location` maps the URL and the storage options to the connector's URL and
settings): ``file://`` works everywhere; ``s3://`` needs ``hadoop-aws`` (``s3a``), ``abfss://``,
``abfs://`` and ``az://`` need ``hadoop-azure`` (ABFS), ``gs://`` and ``gcs://`` the GCS
connector, and each fails clearly, naming the connector and how to add it, when Spark's
classpath lacks it (Databricks has all three); ``memory://`` is only visible to Python, so it
is refused.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..conf.options import SourceOptions
from ..errors import UnsupportedOperationError
from ..journal.entries import Chunk
from ..read.file_checks import check_files
from ..schema import RAW_TSO
from ..spark.arrow import spark_schema
from ..spark.hadoop import PYTHON_READ, HadoopLocation, hadoop_location
from ..timestamps import LOGICAL_BITS
from .batch_reader import batch_range

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["read"]

#: Columns of the broadcast chunk descriptions: file, then :data:`FileRows.NUMBERS`.
_DESC = ("__ts_file", "__ts_seg", "__ts_seq0", "__ts_floor", "__ts_first", "__ts_stop")
#: Characters Hadoop keeps as they are in a file URI (``_metadata.file_path`` is URI-encoded).
_URI_SAFE = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@/-]*")
#: The Hadoop setting of parquet-java's reader (a reader option reaches it) that checks page CRCs.
_VERIFY_PAGES = "parquet.page.verify-checksum.enabled"


@dataclass(frozen=True)
class FileRows:
    """Rows ``[first, stop)`` of the Parquet file ``path`` and the numbers their system columns
    come from: row ``j`` is record ``_seq = seq0 + j`` of segment ``seg``, with
    ``_tso = greatest(raw, floor + j)``. One row of the description table (:data:`_DESC`)."""

    path: str
    seg: int
    seq0: int  # _seq of the file's row 0 (a view's seq - offset)
    floor: int
    first: int
    stop: int

    #: The numbers a row looks up, in the order of the description table's columns after the file.
    NUMBERS: ClassVar[tuple[str, ...]] = ("seg", "seq0", "floor", "first", "stop")

    @classmethod
    def of(cls, c: Chunk, first: int, stop: int) -> FileRows:
        # a chunk's floor counts its own rows (tso_i = max(raw_i, floor + i)); a file row j is
        # chunk row j - offset. A floor of 0 (macro-chunk views) raises nothing, whatever the rows.
        return cls(c.path, c.seg, c.seq - c.offset, c.floor - c.offset if c.floor else 0, first, stop)

    def numbers(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in self.NUMBERS)

    def numbering(self) -> tuple[int, int, int]:
        """What views of one file share: segment, ``_seq`` of row 0, floor."""
        return self.seg, self.seq0, self.floor


@dataclass(frozen=True)
class Described:
    """A planned chunk and the rows of its file it owns after the stream cuts."""

    chunk: Chunk
    rows: FileRows

    @property
    def whole(self) -> bool:
        """Whether it takes every row of its file (no row-range filter needed): an ordinary
        chunk (floor != 0) is all of its file; a macro-chunk (floor 0) may be cut."""
        c = self.chunk
        return c.floor != 0 and c.offset == 0 and not c.shared and self.rows.first == 0 and \
            self.rows.stop == c.rows


def read(spark: SparkSession, url: str, **options: Any) -> DataFrame:
    """The records of the stream at ``url`` as a DataFrame on Spark's Parquet reader.

    Takes the options of ``spark.read.format("tstream")`` as keyword arguments
    (``startingTimestamp``, ``endingTimestamp``, ``startingOffsets``, ``endingOffsets``,
    ``startingAgo``, ``startingTail``, ``failOnDataLoss``, ``storage.<key>`` via
    ``**{"storage.endpoint_url": ...}``); values may be strings or Python values (a dict for a
    stream cut). The read covers the stream as it is when this is called (up to the tick).

    Examples
    --------
    >>> from pyspark_tstream import read_native
    >>> df = read_native(spark, "file:///data/telemetry", startingTimestamp="2026-11-01T00:00:00Z")
    >>> df.groupBy("device").count()
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    from ..api.stream import Stream
    from ..errors import SchemaMismatchError
    from ..store.storage import Store

    opts = SourceOptions.from_options({**{k: _option_text(v) for k, v in options.items()}, "path": url})
    store = Store(opts.path, opts.storage_options, retry=opts.retry)
    # the connector's settings go as reader options of this scan only (Spark keeps them out of
    # its plan strings), never into the session's Hadoop configuration
    location = hadoop_location(store.url, store.protocol, store.root, store.storage_options)
    _check_connector(spark, location, store.display_url)
    root, reader_options = location.root, dict(location.settings)
    stream = Stream.at(store)
    user = stream.schema
    if user is None:
        raise SchemaMismatchError(f"stream {stream.url} has no schema yet (nothing was written); write "
                                  "to it first")
    out_schema = spark_schema(user)
    lo, hi, start_cut, end_cut = batch_range(opts, stream)
    chunks = stream.plan(lo, hi) if hi > lo else []
    described = _descriptions(chunks, start_cut, end_cut)
    if not described:
        return spark.createDataFrame([], out_schema)
    # Spark's scan reads whatever file is there: a missing, cut-short or foreign one (another
    # chunk's, even of the same rows and bytes) fails here, as tstream's own read fails
    check_files(stream.store, [d.chunk for d in described])
    user_fields = [f for f in out_schema.fields if f.name not in ("_timestamp", "_tso", "_segment", "_seq")]
    scan_schema = StructType(user_fields + [StructField(RAW_TSO, LongType(), True)])
    files = sorted({d.chunk.path for d in described})  # chunks the cuts emptied are not scanned
    depth = _key_depth(files)
    users = [F.col(f"`{f.name}`") for f in user_fields]
    # Parquet's page CRCs (every chunk writer stores them): a damaged page fails the scan, as it
    # fails tstream's own read, instead of returning other values; pages without one pass
    scan = (spark.read.options(**reader_options, **{_VERIFY_PAGES: "true"}).schema(scan_schema)
            .parquet(*[posixpath.join(root, p) for p in files]))
    row, key = F.col("_metadata.row_index"), _file_key(depth)
    # a filter only where some chunk needs it: a full read of whole chunks filters nothing
    timed = any(not (lo < d.chunk.lo and d.chunk.hi <= hi) for d in described)
    if timed:
        # _tso >= raw, so this keeps every wanted row and lets Parquet skip row groups by the
        # raw column's statistics
        scan = scan.where(F.col(RAW_TSO) <= F.lit(hi))
    per_file = _per_file(described)
    cut = per_file is None or any(not d.whole for d in described)
    if per_file is not None and len(per_file) <= LOOKUP_FILES:
        # _metadata referenced only where used: Spark then reads only the fields a query needs
        seg, seq0, floor, first, stop = _looked_up(per_file, depth)
    else:
        # metadata columns do not resolve above a join: name them first (Spark then builds the
        # whole _metadata struct of every row, which costs ~0.1 CPU-s per million rows)
        scan = scan.select(*users, F.col(RAW_TSO), row.alias("__ts_row"), key.alias("__ts_key"))
        row = F.col("__ts_row")
        rows = list(per_file.values()) if per_file is not None else [d.rows for d in described]
        scan = _joined(spark, scan, [(_uri_key(r.path, depth), *r.numbers()) for r in rows],
                       unique=per_file is not None)
        # a left join's columns are nullable; the system columns are not
        seg, seq0, floor, first, stop = [F.coalesce(F.col(n), F.lit(0)) for n in _DESC[1:]]
    # the Python read's rule (reading.view_tsos), with the floor moved to count the file's rows
    tso = F.greatest(F.col(RAW_TSO), floor + row)
    if cut:
        scan = scan.where((row >= first) & (row < stop))
    if timed:
        scan = scan.where((tso > F.lit(lo)) & (tso <= F.lit(hi)))
    # unused system columns are pruned with their lookups: a query of user columns pays nothing
    return scan.select(*users, F.timestamp_millis(F.shiftright(tso, LOGICAL_BITS)).alias("_timestamp"),
                       tso.alias("_tso"), seg.alias("_segment"), (seq0 + row).alias("_seq"))


#: Up to this many files, a row finds its chunk's numbers by a lookup in literal maps (string
#: compares, pruned with the system columns); past it, by a broadcast hash join. Measured with
#: the system columns used (2M rows): at 64 files the lookup costs 1.13 CPU-s, the join 1.38; at
#: 256 files the lookup 2.82, the join 2.37.
LOOKUP_FILES = 64


def _per_file(described: Sequence[Described]) -> dict[str, FileRows] | None:
    """Per file, its one numbering and row range, which adjacent views of one macro-chunk
    share. None when a file needs several."""
    out: dict[str, FileRows] = {}
    for d in sorted(described, key=lambda d: (d.chunk.path, d.rows.first)):
        had = out.get(d.rows.path)
        if had is None:
            out[d.rows.path] = d.rows
        elif had.numbering() == d.rows.numbering() and had.stop == d.rows.first:  # the next adjacent view
            out[d.rows.path] = replace(had, stop=d.rows.stop)
        else:
            return None
    return out


def _looked_up(per_file: Mapping[str, FileRows], depth: int) -> list[Any]:
    """(seg, seq0, floor, first, stop) of a row's file: its index in a literal map of file names,
    then that element of literal arrays (a map of 64 names is a few string compares a row).

    Written as SQL text: a literal per py4j call would cost ~0.25 s of driver time per 16 files.
    """
    from pyspark.sql import functions as F

    paths = sorted(per_file)
    if len(paths) == 1:
        return [F.lit(v).cast("bigint") for v in per_file[paths[0]].numbers()]
    key = "_metadata.file_name" if depth == 1 else f"substring_index(_metadata.file_path, '/', -{depth})"
    index = "element_at(map({}), {})".format(
        ", ".join(f"{_sql_text(_uri_key(p, depth))}, {i}" for i, p in enumerate(paths, 1)), key)
    # coalesce: element_at is nullable to Spark, the system columns are not
    return [F.expr("coalesce(element_at(array({}), {}), 0L)".format(
        ", ".join(f"{int(getattr(per_file[p], name))}L" for p in paths), index)) for name in FileRows.NUMBERS]


def _joined(spark: Any, scan: Any, rows: Sequence[tuple[Any, ...]], unique: bool) -> Any:
    """``scan`` with each row's chunk numbers (:data:`_DESC`) from a broadcast join on the file name.

    With one description per file, a left join on a grouped (unique) table: Spark drops the join
    altogether when a query uses no system column. Else an inner join, one row per chunk.
    """
    from pyspark.sql import functions as F

    desc = _desc_frame(spark, rows)
    if unique:  # a grouping tells Spark the file names are unique (rows has one per file)
        desc = desc.groupBy(_DESC[0]).agg(*[F.min(n).alias(n) for n in _DESC[1:]])
    return scan.join(F.broadcast(desc), F.col("__ts_key") == F.col(_DESC[0]), "left" if unique else "inner")


def _option_text(value: Any) -> Any:
    """A keyword value as ``DataFrameReader.option`` would pass it (strings; JSON for cuts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return json.dumps({str(k): v for k, v in value.items()})
    return value if isinstance(value, str) else str(value)


def _descriptions(chunks: Sequence[Chunk], start_cut: Mapping[int, int],
                  end_cut: Mapping[int, int]) -> list[Described]:
    """Per chunk, the rows of its file it owns; chunks left with no rows are dropped.

    A chunk owns rows ``[offset, offset + rows)`` of its file; a segment's stream cuts narrow
    that to the rows with ``start_cut <= _seq < end_cut``.
    """
    out = []
    for c in chunks:
        offset = c.offset  # > 0: a view of part of a macro-chunk (v2) or a shared file's slice (v3)
        first, stop = offset, offset + c.rows
        if c.seg in start_cut:
            first = max(first, offset + start_cut[c.seg] - c.seq)
        if c.seg in end_cut:
            stop = min(stop, offset + end_cut[c.seg] - c.seq)
        if stop > first:
            out.append(Described(c, FileRows.of(c, first, stop)))
    return out


def _desc_frame(spark: Any, rows: Sequence[tuple[Any, ...]]) -> Any:
    """The chunk descriptions as an inline table (a local relation: broadcasting it runs no job)."""
    values = ", ".join(f"({_sql_text(key)}, {', '.join(str(int(x)) for x in numbers)})" for key, *numbers in rows)
    casts = ", ".join([_DESC[0]] + [f"CAST({n} AS BIGINT) AS {n}" for n in _DESC[1:]])
    return spark.sql(f"SELECT {casts} FROM VALUES {values} AS t({', '.join(_DESC)})")


def _sql_text(v: str) -> str:
    """A Spark SQL string literal of ``v``."""
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _key_depth(paths: Sequence[str]) -> int:
    """How many trailing path components tell the planned files apart (1: file names do)."""
    depth = 1
    while len({"/".join(p.split("/")[-depth:]) for p in paths}) < len(paths):
        depth += 1
    return depth


def _file_key(depth: int) -> Any:
    """The Spark expression naming a scanned row's file as :func:`_uri_key` names a chunk's."""
    from pyspark.sql import functions as F

    if depth == 1:
        return F.col("_metadata.file_name")
    return F.substring_index(F.col("_metadata.file_path"), "/", -depth)


def _uri_key(path: str, depth: int) -> str:
    """The last ``depth`` components of ``path`` as ``_metadata.file_path`` spells them."""
    tail = "/".join(path.split("/")[-depth:])
    if _URI_SAFE.fullmatch(tail):
        return tail
    from urllib.parse import quote

    return quote(tail, safe="/!$&'()*+,;=:@-._~")


def _check_connector(spark: Any, location: HadoopLocation, shown: str) -> None:
    """Refuse a read whose connector is not on Spark's classpath, naming it and how to add it."""
    c = location.connector
    if c is None or _on_classpath(spark, c.file_system):
        return
    raise UnsupportedOperationError(
        f"the native read of {shown} needs Spark to read the store itself, through the "
        f"{c.name} connector ({c.file_system}), which is not on Spark's classpath; add it "
        f"(e.g. {c.remedy}) or use {PYTHON_READ}")


def _on_classpath(spark: Any, class_name: str) -> bool:
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: the server decides; let the scan report it
        return True
    from py4j.protocol import Py4JJavaError

    try:
        jvm.java.lang.Class.forName(class_name)
        return True
    except Py4JJavaError:  # ClassNotFoundException
        return False
