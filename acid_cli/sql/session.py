"""A `acid sql` session: the metastore, the current database, the Spark engine once needed, how results print."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TextIO

from acid_cli.output import to_json_value, write_table
from acid_cli.sql.engine import SparkEngine
from acid_cli.sql.results import NO_VALUE, ResultSet
from acid_core import settings
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import DEFAULT_DATABASE


@dataclass(slots=True)
class Session:
    metastore: Metastore
    out: TextIO
    output_format: str = "table"
    database: str = DEFAULT_DATABASE
    wait_poll_s: float = 1.0
    wait_timeout_ms: int = settings.WAIT_TIMEOUT.default_ms  # hive.compactor.wait.timeout
    messages: list[str] = field(default_factory=list)
    _engine: SparkEngine | None = None

    def engine(self) -> SparkEngine:
        """The Spark SQL engine for statements that need one (made on first use; it starts Spark on its first query)."""
        if self._engine is None:
            self._engine = SparkEngine(self.metastore)
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
        """An aligned table, or one JSON object a row in jsonl (a missing value: Hive's " --- " in the table, null
        in JSON)."""
        if self.output_format == "jsonl":
            for row in result.rows:
                record = {key: None if isinstance(value, str) and value == NO_VALUE else to_json_value(value)
                          for key, value in zip(result.keys, row)}
                self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            write_table(result.headers, result.rows, self.out)

