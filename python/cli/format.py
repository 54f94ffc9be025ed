"""How the ``tstream`` CLI prints: JSON lines, aligned tables, ``info`` text and progress bars.

Everything here writes to the file objects it is given, so the commands stay testable in-process
(pytest's capsys) and a progress bar never mixes into piped record output (it goes to stderr).
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TextIO

import pyarrow as pa

from ..maps.grouplog import entry_id
from ..schema import SYSTEM_COLUMNS
from ..timestamps import iso, physical

#: Cells wider than this are cut in table output (JSON output is never cut).
MAX_CELL = 40


def json_default(value: Any) -> Any:
    """JSON for the Arrow values ``to_pylist`` yields that ``json`` does not know."""
    if isinstance(value, datetime):
        spec = "milliseconds" if value.microsecond % 1000 == 0 and value.microsecond else "auto"
        return value.isoformat(timespec=spec).replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


def id_key(user: Sequence[str]) -> str:
    """The key of a printed record's id: ``_id``, with one more ``_`` in front while a user
    column has that name (the user's value is printed under its own name, never replaced)."""
    key = "_id"
    while key in user:
        key = "_" + key
    return key


def records(table: pa.Table) -> Iterable[dict[str, Any]]:
    """Rows as dicts: the id first (``<ms>-<logical>@<segment>:<seq>``, unique in the stream;
    keyed by :func:`id_key`), user columns, then ISO ``_timestamp`` and the other system columns."""
    user = [n for n in table.column_names if n not in SYSTEM_COLUMNS]
    key = id_key(user)
    for batch in table.to_batches(max_chunksize=4096):
        for row in batch.to_pylist():
            tso, seg = row["_tso"], row["_segment"]
            out = {key: entry_id(tso, seg, row["_seq"])}
            out.update((n, row[n]) for n in user)
            out.update(_timestamp=iso(physical(tso)), _tso=tso, _segment=seg, _seq=row["_seq"])
            yield out


def print_json_lines(rows: Iterable[dict[str, Any]], out: TextIO) -> int:
    """One JSON object per line; returns how many were written."""
    n = 0
    for row in rows:
        out.write(json.dumps(row, default=json_default, ensure_ascii=False) + "\n")
        n += 1
    out.flush()
    return n


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        text = value
    elif isinstance(value, (datetime, date, Decimal, bytes, bytearray)):
        text = json_default(value)
    else:
        text = json.dumps(value, default=json_default, ensure_ascii=False)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def print_table(rows: Sequence[dict[str, Any]], out: TextIO, *, columns: Sequence[str] | None = None,
                header: bool = True) -> None:
    """An aligned text table of ``rows`` (columns from the first row unless given)."""
    if not rows:
        return
    cols = list(columns or rows[0].keys())
    cells = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    lines = [cells] if not header else [[list(cols)], cells]
    for block in lines:
        out.writelines("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n" for row in block)
    out.flush()


def print_records(table: pa.Table, fmt: str, out: TextIO, *, header: bool = True) -> int:
    """Records as JSON lines or a table (``_timestamp`` and user columns, keyed by ``_id``)."""
    rows = records(table)
    if fmt == "json":
        return print_json_lines(rows, out)
    listed = [{k: v for k, v in r.items() if k not in ("_tso", "_segment", "_seq")} for r in rows]
    print_table(listed, out, header=header)
    return len(listed)


def human_bytes(n: int) -> str:
    """``1536`` → ``1.5 KiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def print_info(info: dict[str, Any], out: TextIO) -> None:
    """``tstream info``: a readable summary of :meth:`~pyspark_tstream.api.stream.Stream.info`."""
    cfg = info.get("config", {})
    tick = f"{info['tick_id']}  ({info['tick_time']})" if info.get("tick_time") else "- (nothing complete yet)"
    schema = ", ".join(info["schema"]) if info.get("schema") else "- (fixed by the first write)"
    lines = [
        ("stream", info["url"]),
        ("created", info.get("created") or "-"),
        ("schema", schema),
        ("config", (f"timestamping={cfg.get('timestamping')} "
                    f"uncapped={str(cfg.get('timestamping_uncapped')).lower()} "
                    f"writers={','.join(cfg.get('writers') or []) or '-'} lease={cfg.get('writer_lease_ms')}ms "
                    f"retention={cfg.get('retention') or '-'} compression={cfg.get('compression')}")),
        ("tick", tick),
        ("epoch", f"{info['epoch']}  ({len(info['segments'])} active segments, {info['sealed_segments']} sealed)"),
        ("records", (f"{info['rows']:,} in {info['chunks']:,} chunks, {human_bytes(info['bytes'])}; "
                     f"journal position {info['position']}")),
        ("first", f"{info['first_id']}  ({info['first_time']})" if info.get("first_id") else "-"),
        ("last", f"{info['last_id']}  ({info['last_time']})" if info.get("last_id") else "-"),
    ]
    width = max(len(k) for k, _ in lines)
    out.writelines(f"{key.ljust(width)}  {value}\n" for key, value in lines)
    out.write("\nsegments\n")
    print_table([{"segment": g["id"], "epoch": g["epoch"],
                  "key range": f"[{g['key_range'][0]:.4f}, {g['key_range'][1]:.4f})",
                  "records": f"{g['rows']:,}", "bytes": human_bytes(g["bytes"]), "chunks": g["chunks"],
                  "seq": f"{g['first_seq']}..{g['next_seq']}", "last id": g["last_id"]}
                 for g in info["segments"]], out)
    changes = info.get("schema_history", [])[1:]
    if changes:
        out.write("\nschema changes\n")
        print_table([{"position": c["position"], "time": c["time"], "added columns": ", ".join(c["columns"])}
                     for c in changes], out)
    if info.get("writers"):
        out.write("\nwriters\n")
        print_table([{"writer": wid, "live": "yes" if w["live"] else "no", "last id": w["last_id"],
                      "last commit": w["last_commit"], "commits": w["commits"], "records": f"{w['rows']:,}"}
                     for wid, w in sorted(info["writers"].items())], out)
    out.flush()


class Progress:
    """A one-line progress bar on a terminal: ``[####----]  52%  1,234 records  900 rec/s``.

    ``total`` is in whatever unit ``done`` counts (bytes of input, rows); None draws no bar.
    Redraws at most 10 times a second; disabled, it does nothing.
    """

    def __init__(self, total: int | None, *, enabled: bool, out: TextIO | None = None,
                 unit: str = "records") -> None:
        self.total = total if total and total > 0 else None
        self.unit = unit
        self.enabled = enabled
        self.out = out if out is not None else sys.stderr
        self.rows = 0
        self.done = 0
        self._start = time.monotonic()
        self._drawn = 0.0

    def update(self, rows: int, done: int | None = None) -> None:
        """``rows`` more records handled; ``done`` units of ``total`` so far."""
        self.rows += rows
        self.done = self.done + rows if done is None else done
        if self.enabled and time.monotonic() - self._drawn >= 0.1:
            self._draw()

    def _draw(self) -> None:
        self._drawn = time.monotonic()
        rate = self.rows / max(self._drawn - self._start, 1e-6)
        text = f"{self.rows:,} {self.unit}  {rate:,.0f} {self.unit[:3]}/s"
        if self.total:
            frac = min(self.done / self.total, 1.0)
            filled = int(frac * 30)
            text = f"[{'#' * filled}{'-' * (30 - filled)}] {frac:4.0%}  " + text
        self.out.write("\r" + text + "\x1b[K")
        self.out.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw()
            self.out.write("\n")
            self.out.flush()
