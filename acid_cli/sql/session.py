"""A `acid sql` session: the metastore, the current database, and how results are printed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence, TextIO

from acid_cli.output import to_json_value, write_table
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import DEFAULT_DATABASE

NO_VALUE = " --- "  # Hive's MetaStoreUtils.NO_VAL for missing values in SHOW output


@dataclass(frozen=True, slots=True)
class ResultSet:
    """Rows a statement returns: human headers, machine keys (for --format jsonl) and the rows."""

    headers: tuple[str, ...]
    keys: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass(slots=True)
class Session:
    metastore: Metastore
    out: TextIO
    output_format: str = "table"
    database: str = DEFAULT_DATABASE
    wait_poll_s: float = 1.0
    wait_timeout_ms: int = 300_000  # hive.compactor.wait.timeout
    messages: list[str] = field(default_factory=list)
    _engine: object = None

    def engine(self):
        """The Spark SQL engine for statements that need one (built on first use)."""
        if self._engine is None:
            from acid_cli.sql.engine import SparkEngine

            self._engine = SparkEngine(self)
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def qualify(self, table) -> tuple[str, str]:
        """(database, table) of a parsed `[db.]table` in this session."""
        return (table.database or self.database), table.table

    def say(self, message: str) -> None:
        """A status line: plain text, or `{"message": ...}` in jsonl."""
        if self.output_format == "jsonl":
            self.out.write(json.dumps({"message": message}) + "\n")
        else:
            self.out.write(message + "\n")

    def show(self, result: ResultSet) -> None:
        if self.output_format == "jsonl":
            for row in result.rows:
                record = {key: to_json_value(value) for key, value in zip(result.keys, row)}
                self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            write_table(result.headers, result.rows, self.out)


def shown(value: Any) -> Any:
    """Hive prints a missing value as ' --- '."""
    return NO_VALUE if value is None else value


def result(headers: Sequence[str], keys: Sequence[str], rows) -> ResultSet:
    return ResultSet(tuple(headers), tuple(keys), tuple(tuple(row) for row in rows))
