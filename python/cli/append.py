"""``tstream append``: JSON lines or Parquet in, one commit per batch, progress on stderr.

Each batch becomes one commit (``--writer ID --batch N`` gives batch ids N, N+1, ... so that
re-running the same command commits nothing twice), so a batch must already have the stream's column types: JSON
infers types per batch (``1`` is an integer, ``1.5`` a double, ISO text a string), so batches are
cast to the stream's schema where it has the column, and the ``--timestamp`` column is parsed
from ISO-8601 text. Errors name the input line (JSON) or row range and the column; an append
that stops early (an error, Ctrl-C) also says what it had committed and how to resume.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

import pyarrow as pa
import pyarrow.parquet as pq

from ..api.stream import Stream
from ..errors import ConfigError, SchemaMismatchError, TimestampError
from ..timestamps import to_ms, tso_id
from .common import add_command, add_progress, count_int, open_stream, positive_int
from .format import Progress

#: Rows per commit unless ``--batch-rows`` says otherwise.
BATCH_ROWS = 100_000


@dataclass(frozen=True)
class Batch:
    """A batch of input: the records, where it starts (``line 12``, ``row 1``), progress units,
    where the input after it starts."""

    table: pa.Table
    where: str
    done: int
    after: str  # where the input goes on after it (``line 21``, ``row 11``)


#: The first bytes of every Parquet file.
PARQUET_MAGIC = b"PAR1"


def input_format(path: str | None, given: str | None) -> str:
    """``jsonl`` or ``parquet``: as given, else by file extension (stdin: JSON lines)."""
    if given:
        return given
    if path and path != "-" and os.path.splitext(path)[1].lower() in (".parquet", ".pq"):
        return "parquet"
    return "jsonl"


def jsonl_batches(fh: BinaryIO, rows: int) -> Iterator[Batch]:
    """Batches of ``rows`` JSON objects, one per line (blank lines skipped)."""
    batch: list[dict[str, Any]] = []
    lines: list[int] = []
    line_no = done = 0
    for line_no, line in enumerate(fh, start=1):
        done += len(line)
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as e:
            if line_no == 1 and line.startswith(PARQUET_MAGIC):
                raise SchemaMismatchError(
                    "the input is a Parquet file (it starts with Parquet's PAR1 mark), not JSON lines; "
                    "pass --format parquet (or name the file .parquet)") from e
            raise SchemaMismatchError(f"input line {line_no} is not JSON: {e}") from e
        if not isinstance(value, dict):
            raise SchemaMismatchError(
                f"input line {line_no} is a JSON {type(value).__name__}, not an object; "
                "append takes one object per line, e.g. {\"device\": \"d1\", \"value\": 3}")
        batch.append(value)
        lines.append(line_no)
        if len(batch) >= rows:
            yield Batch(_from_rows(batch, lines), f"line {lines[0]}", done, f"line {lines[-1] + 1}")
            batch, lines = [], []
    if batch:
        yield Batch(_from_rows(batch, lines), f"line {lines[0]}", done, f"line {lines[-1] + 1}")


def _json_kind(value: Any) -> str | None:
    """The JSON type of a parsed value (integers and decimals are both numbers; null has none)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    kinds: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return kinds.get(type(value), type(value).__name__)


def _from_rows(rows: list[dict[str, Any]], lines: list[int]) -> pa.Table:
    """The records of input ``lines`` as a table; a field of two JSON types fails naming both lines."""
    try:
        return pa.Table.from_pylist(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        seen: dict[str, tuple[str, int]] = {}
        for row, line in zip(rows, lines):
            for name, value in row.items():
                kind = _json_kind(value)
                if kind is None:
                    continue
                if name not in seen:
                    seen[name] = (kind, line)
                elif seen[name][0] != kind:
                    raise SchemaMismatchError(
                        f"input line {line}: field {name!r} is a JSON {kind}, but line {seen[name][1]} "
                        f"has a {seen[name][0]} there; a field must keep one type (quote numbers, or "
                        "put the values in fields of their own)") from e
        raise SchemaMismatchError(  # a nested field differs: Arrow's message names its type
            f"input lines {lines[0]}..{lines[-1]} mix types within a field: {e}") from e


def parquet_batches(source: str | BinaryIO, rows: int) -> tuple[int, Iterator[Batch]]:
    """(total rows, batches of at most ``rows`` rows) of a Parquet file or stream."""
    if not isinstance(source, str):
        source = io.BytesIO(source.read())  # Parquet needs to seek to its footer
    try:
        pf = pq.ParquetFile(source)
    except (pa.ArrowInvalid, OSError) as e:
        raise SchemaMismatchError(f"input is not a Parquet file: {e}") from e

    def gen() -> Iterator[Batch]:
        done = 0
        for rb in pf.iter_batches(batch_size=rows):
            yield Batch(pa.Table.from_batches([rb]), f"row {done + 1}", done + rb.num_rows,
                        f"row {done + rb.num_rows + 1}")
            done += rb.num_rows

    return pf.metadata.num_rows, gen()


def conform_batch(batch: Batch, schema: pa.Schema | None, timestamp: str | None) -> pa.Table:
    """Cast ``batch`` to the stream's column types and parse the timestamp column's text."""
    table = batch.table
    if timestamp is not None and timestamp in table.column_names:
        col = table.column(timestamp)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            table = table.set_column(table.column_names.index(timestamp), timestamp,
                                     _parse_times(col, timestamp, batch.where))
    if schema is None:
        return table
    for f in schema:
        if f.name not in table.column_names:
            continue
        col = table.column(f.name)
        if col.type == f.type or (pa.types.is_integer(col.type) and pa.types.is_integer(f.type)):
            continue
        _check_json_kind(f, col.type, batch.where)
        try:
            cast = col.cast(f.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaMismatchError(
                f"column {f.name!r} in the input batch at {batch.where} is {col.type}, the "
                f"stream has {f.type}, and it does not convert: {e}") from e
        table = table.set_column(table.column_names.index(f.name), f.name, cast)
    return table


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_scalar(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
                or pa.types.is_boolean(t))


def _check_json_kind(f: pa.Field, given: pa.DataType, where: str) -> None:
    """Refuse JSON text for a number or boolean column and the reverse: the Python API refuses
    that change of type, and a cast would turn ``"7"`` into 7 (or 7 into ``"7"``) unseen. Text
    for a timestamp or date column is parsed (JSON has no time type)."""
    if (_is_text(given) and _is_scalar(f.type)) or (_is_scalar(given) and _is_text(f.type)):
        how = "without quotes" if _is_text(given) else "in quotes"
        raise SchemaMismatchError(
            f"column {f.name!r} in the input batch at {where} is JSON {'text' if _is_text(given) else 'numbers'} "
            f"({given}), the stream has {f.type}; write its values {how}, as the stream's type needs")


def _parse_times(col: pa.ChunkedArray, name: str, where: str) -> pa.ChunkedArray:
    """ISO-8601 (or epoch-ms digits) text → ``timestamp[ms, UTC]``; names the first bad value."""
    try:
        return col.cast(pa.timestamp("ms", tz="UTC"))
    except pa.ArrowInvalid:
        pass  # Arrow's cast knows ISO-8601 only; fall back to to_ms for digits and the error
    values = []
    for i, v in enumerate(col.to_pylist()):
        try:
            values.append(None if v is None else to_ms(v, option=name))
        except TimestampError as e:
            raise TimestampError(f"record {i + 1} of the input batch at {where}: {e}") from e
    return pa.chunked_array([pa.array(values, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))])


def _open_input(path: str | None) -> contextlib.AbstractContextManager[BinaryIO]:
    if path is None or path == "-":  # stdin is not ours to close
        return contextlib.nullcontext(cast(BinaryIO, sys.stdin.buffer))
    return open(path, "rb")


def _batches(fh: BinaryIO, args: argparse.Namespace) -> tuple[int | None, Iterator[Batch]]:
    """(progress total, batches): Parquet counts rows, a JSON file bytes, stdin nothing."""
    if input_format(args.file, args.format) == "parquet":
        return parquet_batches(fh, args.batch_rows)
    total = None if args.file in (None, "-") else os.path.getsize(args.file)
    return total, jsonl_batches(fh, args.batch_rows)


def stopped_note(done: dict[str, Any], at: dict[str, Any], exc: BaseException,
                 args: argparse.Namespace) -> str | None:
    """What an append that stopped early (an error, Ctrl-C) had committed, and how to resume
    without appending it twice; None when it had committed nothing. ``at``: the batches done,
    the input position after them (``resume``) and the batch being committed, if any."""
    unsure = at["committing"] is not None and isinstance(exc, (KeyboardInterrupt, OSError))
    batches = at["batches"]
    if not batches and not unsure:
        return None
    rows, n = done["records"], done["commits"]
    text = f"committed {rows:,} record{'s' * (rows != 1)} in {n} batch{'es' * (n != 1)}"
    if done["duplicates"]:
        text += f" (and skipped {done['duplicates']} committed before)"
    text += f", the input before {at['resume']}," if batches else ""
    text += " before stopping"
    if unsure:
        text += f"; the batch from input {at['committing']} was being committed and may be committed too"
    if args.batch is not None:
        return (f"{text}; rerun the same command (--writer {args.writer} --batch {args.batch} --batch-rows "
                f"{args.batch_rows}) to resume at batch {args.batch + batches}: batches already committed "
                "are skipped")
    start = at["resume"] or "its start"
    return (f"{text}; rerunning the whole input would append {'those' if batches else 'it'} again: resume from "
            f"input {start}, and pass --writer ID --batch 0 so that a rerun skips committed batches")


def append(stream: Stream, args: argparse.Namespace) -> dict[str, Any]:
    """Append the input named by ``args``; returns counts and the first/last ids written.

    Stopped early (an error, Ctrl-C), it says on stderr what it had committed and how to resume
    (:func:`stopped_note`), then lets the error go on."""
    done: dict[str, Any] = {"records": 0, "commits": 0, "duplicates": 0, "raised": 0}
    at: dict[str, Any] = {"batches": 0, "resume": None, "committing": None}
    try:
        return _append(stream, args, done, at)
    except (Exception, KeyboardInterrupt) as e:
        note = stopped_note(done, at, e, args)
        if note:
            sys.stderr.write(f"tstream: {note}\n")
        raise


def _append(stream: Stream, args: argparse.Namespace, done: dict[str, Any], at: dict[str, Any]) -> dict[str, Any]:
    first = last = None
    with _open_input(args.file) as fh:
        total, batches = _batches(fh, args)
        progress = Progress(total, enabled=args.progress or sys.stderr.isatty())
        for k, batch in enumerate(batches):
            table = conform_batch(batch, stream.schema, args.timestamp)
            at["committing"] = batch.where
            ack = stream.append(table, key=args.key, timestamp=args.timestamp, writer_id=args.writer,
                                batch_id=None if args.batch is None else args.batch + k,
                                merge_schema=args.merge_schema)
            at.update(batches=k + 1, resume=batch.after, committing=None)
            if ack.duplicate:
                done["duplicates"] += 1
            elif ack.rows and ack.first_tso is not None and ack.last_tso is not None:
                done["records"] += ack.rows
                done["commits"] += 1
                done["raised"] += ack.raised
                first = ack.first_tso if first is None else min(first, ack.first_tso)
                last = ack.last_tso if last is None else max(last, ack.last_tso)
            progress.update(table.num_rows, batch.done if total else None)
        progress.close()
    tick = stream.state.tick
    return {**done, "first_id": tso_id(first) if first else None, "last_id": tso_id(last) if last else None,
            "tick_id": tso_id(tick) if tick else None}


def run_append(args: argparse.Namespace) -> int:
    if args.batch is not None and args.writer is None:
        raise ConfigError("--batch N needs --writer ID: a batch id is only unique per writer", option="batch")
    summary = append(open_stream(args), args)
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
        return 0
    n = summary["commits"]
    rows = summary["records"]
    text = f"appended {rows:,} record{'s' * (rows != 1)} in {n} commit{'s' * (n != 1)}"
    if summary["first_id"]:
        text += f": ids {summary['first_id']} .. {summary['last_id']}"
    text += f"; tick {summary['tick_id'] or '-'}"
    if summary["raised"]:
        text += f"; {summary['raised']:,} timestamps raised (stream time never goes back)"
    if summary["duplicates"]:
        text += f"; {summary['duplicates']} batches already committed by writer {args.writer!r}, skipped"
    sys.stdout.write(text + "\n")
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``append`` to the top-level subparsers ``sub``."""
    p = add_command(sub, common, "append", run_append,
                    help="append JSON lines or Parquet",
                    description="Append records from JSON lines (stdin or a file) or a Parquet file, "
                                f"one commit per --batch-rows records (default {BATCH_ROWS:,}).",
                    epilog="examples:\n  cat events.jsonl | tstream append file:///tmp/s --key device\n"
                           "  tstream append file:///tmp/s events.parquet --timestamp t "
                           "--writer loader --batch 0\n"
                           "  (re-running the last one commits nothing twice: batch ids 0, 1, ...)")
    p.add_argument("file", nargs="?", help="input file; '-' or none reads stdin")
    p.add_argument("--format", choices=("jsonl", "parquet"), help="input format (default: by extension)")
    p.add_argument("--key", metavar="COL", help="routing key column")
    p.add_argument("--timestamp", metavar="COL", help="client timestamp column (ISO-8601, epoch ms or TIMESTAMP)")
    p.add_argument("--writer", metavar="ID", help="writer id (makes batches idempotent with --batch)")
    p.add_argument("--batch", metavar="N", type=count_int, help="batch id of the first commit (next: N+1, ...)")
    p.add_argument("--batch-rows", metavar="ROWS", type=positive_int, default=BATCH_ROWS)
    p.add_argument("--merge-schema", action="store_true", help="add new columns to the stream schema")
    add_progress(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")

