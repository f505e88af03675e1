"""The "Metrics and alerts" tables of docs/operations.md, parsed: shared by the fast check against the code
(`test_metrics_table.py`) and the Airflow metrics test (what arrived on the wire). Imported as
`support.metrics_docs`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
SECTION = "## Metrics and alerts"


@dataclass(frozen=True)
class Row:
    """One table row: its cells, and the backticked names of its first cell."""

    cells: tuple[str, ...]
    names: tuple[str, ...]


def _tables() -> list[list[Row]]:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n{SECTION}\n")
    following = re.search(r"\n#{1,2} ", text[start + 1:])  # the next heading of the same or a higher level
    end = start + 1 + following.start() if following else len(text)
    tables, current = [], None
    for line in text[start:end].splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = tuple(cell.strip() for cell in line.strip().strip("|").split("|"))
        if current is None:  # the header row opens a table
            current = []
            tables.append(current)
            continue
        if set(cells[0]) <= set("-: "):
            continue
        current.append(Row(cells, tuple(re.findall(r"`([^`]+)`", cells[0]))))
    return tables


def metrics_table() -> list[Row]:
    """The metrics table: name(s) | type | Hive constant(s) | sent by | meaning."""
    return _tables()[0]


def alerts_table() -> list[Row]:
    """The alerts table: kind | level and default threshold | sent by | source of the threshold."""
    return _tables()[1]


def documented_metrics() -> dict[str, str]:
    """Every metric name of the metrics table (after `acid.`) -> its kind (`gauge`, `counter` or `timer`)."""
    found = {}
    for row in metrics_table():
        kind = row.cells[1].split()[0].rstrip(",")
        for name in row.names:
            assert name not in found, f"{name} is in the metrics table of {PAGE.name} twice"
            found[name] = kind
    return found
