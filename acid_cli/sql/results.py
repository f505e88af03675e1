"""What statements return to print: rows with their headers, and Hive's marker for a missing value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NO_VALUE = " --- "  # Hive's MetaStoreUtils.NO_VAL for missing values in SHOW output


@dataclass(frozen=True, slots=True)
class ResultSet:
    """Rows a statement returns: human headers, machine keys (for --format jsonl) and the rows."""

    headers: tuple[str, ...]
    keys: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


def shown(value: Any) -> Any:
    """Hive prints a missing value as ' --- '."""
    return NO_VALUE if value is None else value


def result(headers: Sequence[str], keys: Sequence[str], rows) -> ResultSet:
    return ResultSet(tuple(headers), tuple(keys), tuple(tuple(row) for row in rows))
