"""Rendering rows for people (an aligned table) and for machines (JSON lines), and errors for the terminal."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from acid_core.errors import AcidError, exit_status


def to_json_value(value: Any) -> Any:
    """A JSON-safe form of a column value: exact decimals and dates as strings, bytes as base64."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    return value


def write_jsonl(rows: Iterable[dict], out: TextIO) -> None:
    for row in rows:
        out.write(json.dumps({k: to_json_value(v) for k, v in row.items()}, ensure_ascii=False))
        out.write("\n")


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dict):
        return json.dumps(to_json_value(value), ensure_ascii=False)
    return str(to_json_value(value))


def write_table(header: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO, *,
                widths: list[int] | None = None) -> list[int]:
    """An aligned text table with a header rule, like Hive's CLI output; returns the column widths.

    Streamed output calls it once per batch: the first call (no `widths`) sizes the columns by its rows and writes
    the header; later calls pass the widths back and write rows only (a longer cell widens only its own line)."""
    cells = [[_cell(v) for v in row] for row in rows]
    first = widths is None
    if first:
        widths = [len(h) for h in header]
        for row in cells:
            widths = [max(w, len(c)) for w, c in zip(widths, row)]
        out.write("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip() + "\n")
        out.write("  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
    return widths


def report_error(prefix: str, error: AcidError) -> int:
    """Print `<prefix>: <error>` on standard error; the exit status: 2 for a usage error, else 1."""
    print(f"{prefix}: {error}", file=sys.stderr)
    return exit_status(error)
