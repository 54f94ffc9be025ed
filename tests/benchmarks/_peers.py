"""The systems ``bench_peers.py`` compares, and its records: one class per library, each doing
every phase the way that library's docs show (a fresh handle for every read: cold).

The records are a function of their index only, so any slice can be rebuilt to check an answer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

KEYS = 64
PAYLOAD_BYTES = 100
SMALL_ROWS = 100
COLUMNS = ["key", "ts", "value", "payload"]


#: Payload bytes, as incompressible as a user's (seeded: every run writes the same bytes).
_POOL = np.frombuffer(np.random.default_rng(7).bytes(4093 * PAYLOAD_BYTES), dtype=np.uint8).reshape(4093, PAYLOAD_BYTES)


class WrongAnswer(Exception):
    """A system returned other records than the ones written: the run fails (exit 1)."""


# -- records -----------------------------------------------------------------------------------
def records(first: int, n: int, base_ts: int) -> pa.Table:
    """Records ``first .. first + n - 1``: ``ts = base_ts + index`` (unique), the rest derived
    from the index, so any slice can be rebuilt to check an answer."""
    idx = np.arange(first, first + n, dtype=np.int64)
    keys = pa.array([f"key-{i:02d}" for i in range(KEYS)]).take(pa.array(idx % KEYS))
    body = _POOL[idx % len(_POOL)]  # a function of the index only: any slice rebuilds the same
    body[:, :8] = idx.view(np.uint8).reshape(n, 8)  # and unique per record
    offsets = np.arange(0, (n + 1) * PAYLOAD_BYTES, PAYLOAD_BYTES, dtype=np.int32)
    payload = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(body.tobytes())])
    return pa.table({"key": keys, "ts": pa.array(base_ts + idx), "value": pa.array(idx * 0.5),
                     "payload": payload})


def normalized(table: Any) -> pa.Table:
    """The user columns of an answer, in ``ts`` order, with one type per column."""
    t = table if isinstance(table, pa.Table) else pa.table(table)
    t = t.select(COLUMNS)
    t = t.cast(pa.schema([("key", pa.string()), ("ts", pa.int64()), ("value", pa.float64()),
                          ("payload", pa.binary())]))
    return t.sort_by("ts").combine_chunks()


def check_same(system: str, what: str, got: Any, expected: pa.Table) -> None:
    g, e = normalized(got), normalized(expected)
    if g.num_rows != e.num_rows:
        raise WrongAnswer(f"{system} {what}: {g.num_rows} records, expected {e.num_rows}")
    if not g.equals(e):
        raise WrongAnswer(f"{system} {what}: the records differ from those written")


# -- the systems ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Where:
    """Where a round's tables live: a folder, or an S3 prefix and each library's options."""

    root: str  # a local folder or s3://bucket/prefix
    s3: dict[str, str] | None = None  # endpoint, key, secret, region

    def url(self, name: str) -> str:
        return f"{self.root}/{name}" if self.s3 else f"file://{self.root}/{name}"


class System(ABC):
    """One library's way of doing each phase (a fresh handle for every read: cold)."""

    name = ""

    def __init__(self, where: Where, table: str) -> None:
        self.where, self.table = where, table

    @abstractmethod
    def create(self, schema: pa.Schema) -> None:
        ...

    @abstractmethod
    def append(self, data: pa.Table) -> None:
        ...

    def settle(self) -> None:
        """Wait for work the library left running after an append (none by default)."""
        return None

    @abstractmethod
    def scan(self) -> int:
        ...

    @abstractmethod
    def seek(self, t: int, n: int) -> pa.Table:
        ...

    @abstractmethod
    def tail(self, n: int) -> pa.Table:
        ...


class Tstream(System):
    name = "tstream"

    def _opts(self) -> dict[str, Any]:
        s3 = self.where.s3
        if not s3:
            return {}
        return {"endpoint_url": s3["endpoint"], "key": s3["key"], "secret": s3["secret"],
                "client_kwargs": {"region_name": s3["region"]}}

    def _open(self) -> Any:
        from pyspark_tstream.api.stream import Stream

        return Stream.open(self.where.url(self.table), storage_options=self._opts())

    def create(self, schema: pa.Schema) -> None:
        from pyspark_tstream.api.stream import Stream

        self.stream = Stream.create(self.where.url(self.table), segments=4, storage_options=self._opts())

    def append(self, data: pa.Table) -> None:
        if not hasattr(self, "stream"):
            self.stream = self._open()
        self.stream.append(data, key="key", timestamp="ts")

    def settle(self) -> None:
        if hasattr(self, "stream"):
            self.stream.upkeep.settle(60)

    def scan(self) -> int:
        return int(self._open().read(columns=COLUMNS).num_rows)

    def seek(self, t: int, n: int) -> pa.Table:
        return self._open().read(start=t, limit=n, columns=COLUMNS)

    def tail(self, n: int) -> pa.Table:
        return self._open().read(tail=n, columns=COLUMNS)


class DeltaRs(System):
    name = "delta-rs"

    def _opts(self) -> dict[str, str]:
        s3 = self.where.s3
        if not s3:
            return {}
        return {"AWS_ENDPOINT_URL": s3["endpoint"], "AWS_ACCESS_KEY_ID": s3["key"],
                "AWS_SECRET_ACCESS_KEY": s3["secret"], "AWS_REGION": s3["region"], "AWS_ALLOW_HTTP": "true",
                # safe concurrent commits on S3: each log entry is an If-None-Match put
                "AWS_CONDITIONAL_PUT": "etag"}

    def _uri(self) -> str:
        return self.where.url(self.table) if self.where.s3 else f"{self.where.root}/{self.table}"

    def _open(self) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(self._uri(), storage_options=self._opts())

    def create(self, schema: pa.Schema) -> None:
        from deltalake import DeltaTable

        DeltaTable.create(self._uri(), schema, storage_options=self._opts())

    def append(self, data: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self._uri(), data, mode="append", storage_options=self._opts())

    def scan(self) -> int:
        return int(self._open().to_pyarrow_table().num_rows)

    # DataFusion's QueryBuilder would be the shorter spelling, but its ranged GETs never
    # complete through the latency proxy; the pyarrow dataset prunes files by the log's stats too
    def seek(self, t: int, n: int) -> pa.Table:
        import pyarrow.compute as pc

        got = self._open().to_pyarrow_dataset().to_table(filter=pc.field("ts") >= t)
        return got.sort_by("ts").slice(0, n)

    def tail(self, n: int) -> pa.Table:
        import pyarrow.compute as pc

        dt = self._open()
        # the files holding the newest n records are among the newest by max(ts) summing >= n
        # records; every record they hold is at or after their least min(ts)
        files = pa.table(dt.get_add_actions(flatten=True)).sort_by([("max.ts", "descending")])
        total, bound = 0, None
        for rows, low in zip(files["num_records"].to_pylist(), files["min.ts"].to_pylist()):
            total += rows
            bound = low if bound is None else min(bound, low)
            if total >= n:
                break
        got = dt.to_pyarrow_dataset().to_table(filter=pc.field("ts") >= (bound or 0))
        return got.sort_by([("ts", "descending")]).slice(0, n)


class PyIceberg(System):
    name = "pyiceberg"

    def _catalog(self) -> Any:
        from pyiceberg.catalog.sql import SqlCatalog

        props = {"uri": f"sqlite:///{self.where.s3['catalog'] if self.where.s3 else self.where.root + '/catalog.db'}",
                 "warehouse": self.where.url("iceberg")}
        if s3 := self.where.s3:
            props.update({"s3.endpoint": s3["endpoint"], "s3.access-key-id": s3["key"],
                          "s3.secret-access-key": s3["secret"], "s3.region": s3["region"]})
        return SqlCatalog("bench", **props)

    def _load(self) -> Any:
        return self._catalog().load_table(f"bench.{self.table}")

    def create(self, schema: pa.Schema) -> None:
        catalog = self._catalog()
        catalog.create_namespace_if_not_exists("bench")
        catalog.create_table(f"bench.{self.table}", schema=schema)

    def append(self, data: pa.Table) -> None:
        if not hasattr(self, "tbl"):
            self.tbl = self._load()
        self.tbl.append(data)  # the table object follows its own commits

    def scan(self) -> int:
        return int(self._load().scan().to_arrow().num_rows)

    def seek(self, t: int, n: int) -> pa.Table:
        from pyiceberg.expressions import GreaterThanOrEqual

        got = self._load().scan(row_filter=GreaterThanOrEqual("ts", t)).to_arrow()
        return got.sort_by("ts").slice(0, n)

    def tail(self, n: int) -> pa.Table:
        got = self._load().scan().to_arrow()  # no ordered limit without a query engine
        return got.sort_by([("ts", "descending")]).slice(0, n)


KINDS: dict[str, type[System]] = {"tstream": Tstream, "delta-rs": DeltaRs, "pyiceberg": PyIceberg}
