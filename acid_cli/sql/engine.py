"""The statements `acid sql` runs on Spark SQL: SELECT, INSERT INTO ... SELECT, UPDATE, DELETE and MERGE.

Table names in the statement are resolved in the metastore and replaced by temporary views over
`spark_jobs.read.read_table` (with `row__id`), all read under one transaction's snapshot; writes go through
`spark_jobs.write`, each in its own transaction. The Spark master comes from `ACID_SPARK_MASTER` (default local[*]).
"""

from __future__ import annotations

from dataclasses import dataclass

from acid_cli.hiveql import ast
from acid_cli.hiveql.tokens import Token, TokenKind, tokenize
from acid_cli.sql.session import Session, result
from acid_core.errors import AcidError, UsageError

_REFERENCE_AFTER = ("FROM", "JOIN", "USING", "INTO", "UPDATE", "TABLE")


@dataclass(frozen=True, slots=True)
class _Reference:
    database: str
    table: str
    start: int
    end: int


def _tokens(text: str) -> list[Token]:
    return [t for t in tokenize(text) if t.kind is not TokenKind.END]


def _name(token: Token) -> str | None:
    return token.value.lower() if token.kind in (TokenKind.WORD, TokenKind.QUOTED_NAME) else None


def _references(tokens: list[Token], current_database: str) -> list[_Reference]:
    """`[db.]table` names following FROM, JOIN, USING, INTO, UPDATE or TABLE (not subqueries)."""
    found = []
    for index, token in enumerate(tokens[:-1]):
        if not token.is_word(*_REFERENCE_AFTER):
            continue
        first = tokens[index + 1]
        if _name(first) is None or first.is_word("SELECT", "TABLE"):
            continue
        if index + 3 < len(tokens) and tokens[index + 2].is_symbol(".") and _name(tokens[index + 3]):
            found.append(_Reference(_name(first), _name(tokens[index + 3]), first.start, tokens[index + 3].end))
        else:
            found.append(_Reference(current_database, _name(first), first.start, first.end))
    return found


def _view(reference: _Reference) -> str:
    return f"acid__{reference.database}__{reference.table}"


def _split_top_level(text: str, separator: str = ",") -> list[str]:
    parts, depth, start = [], 0, 0
    for token in _tokens(text):
        if token.is_symbol("("):
            depth += 1
        elif token.is_symbol(")"):
            depth -= 1
        elif token.is_symbol(separator) and depth == 0:
            parts.append(text[start:token.start].strip())
            start = token.end
    parts.append(text[start:].strip())
    return [p for p in parts if p]


class SparkEngine:
    """Runs engine statements for one `acid sql` session (the SparkSession is built on first use)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._spark = None

    @property
    def spark(self):
        if self._spark is None:
            from spark_jobs.session import build_session

            self._spark = build_session("acid-sql")
        return self._spark

    def close(self) -> None:
        if self._spark is not None:
            self._spark.stop()
            self._spark = None

    def _register(self, text: str, references: list[_Reference], txn_id: int | None) -> str:
        """Temporary views for every referenced table; returns the text with names replaced by the views."""
        from spark_jobs.read import read_table

        metastore = self.session.metastore
        for reference in {(r.database, r.table): r for r in references}.values():
            metastore.catalog.require_transactional(reference.database, reference.table)
            read_table(self.spark, metastore, reference.database, reference.table, include_row_id=True,
                       txn_id=txn_id).createOrReplaceTempView(_view(reference))
        for reference in sorted(references, key=lambda r: r.start, reverse=True):
            text = text[:reference.start] + _view(reference) + text[reference.end:]
        return text

    def _query(self, text: str):
        """A DataFrame for a query over ACID tables, read under one read-only transaction's snapshot."""
        txns = self.session.metastore.txns
        txn_id = txns.open_txn(agent_info="acid sql SELECT")
        try:
            frame = self.spark.sql(self._register(text, _references(_tokens(text), self.session.database), txn_id))
            frame = frame.localCheckpoint(eager=True)  # materialise while the snapshot's transaction is open
        finally:
            txns.commit(txn_id)
        return frame

    def execute(self, statement: ast.EngineStatement) -> None:
        handler = {"SELECT": self._select, "WITH": self._select, "FROM": self._select, "INSERT INTO": self._insert,
                   "UPDATE": self._update, "DELETE": self._delete, "MERGE": self._merge}.get(statement.kind)
        if handler is None:
            raise AcidError(f"{statement.kind} is not supported (it would replace data wholesale; use DELETE and "
                            "INSERT in transactions)")
        handler(statement.text)

    def _select(self, text: str) -> None:
        frame = self._query(text)
        rows = [tuple(row[i].asDict(recursive=True) if hasattr(row[i], "asDict") else row[i] for i in range(len(row)))
                for row in frame.collect()]
        self.session.show(result(frame.columns, frame.columns, rows))

    def _target(self, tokens: list[Token], index: int) -> tuple[str, str, int]:
        """(database, table, index after the name) for a table name starting at tokens[index]."""
        if index >= len(tokens) or _name(tokens[index]) is None:
            raise UsageError("expected a table name")
        if index + 2 < len(tokens) and tokens[index + 1].is_symbol(".") and _name(tokens[index + 2]):
            return _name(tokens[index]), _name(tokens[index + 2]), index + 3
        return self.session.database, _name(tokens[index]), index + 1

    def _insert(self, text: str) -> None:
        from spark_jobs.write import insert

        tokens = _tokens(text)
        index = 2 + (1 if tokens[2].is_word("TABLE") else 0)
        database, table, index = self._target(tokens, index)
        static: dict[str, str] = {}
        if index < len(tokens) and tokens[index].is_word("PARTITION"):
            close = next(i for i in range(index, len(tokens)) if tokens[i].is_symbol(")"))
            for item in _split_top_level(text[tokens[index + 1].end:tokens[close].start]):
                key, _, value = item.partition("=")
                if value.strip():
                    static[key.strip().strip("`").lower()] = _tokens(value.strip())[0].value
            index = close + 1
        columns: list[str] = []
        if index < len(tokens) and tokens[index].is_symbol("("):
            close = next(i for i in range(index, len(tokens)) if tokens[i].is_symbol(")"))
            columns = [c.strip().strip("`").lower() for c in _split_top_level(text[tokens[index].end:tokens[close].start])]
            index = close + 1
        frame = self._query(text[tokens[index].start:])
        info = self.session.metastore.catalog.get_table(database, table)
        dynamic = [k.name for k in info.partition_keys if k.name not in static]
        names = columns or [c.name for c in info.columns]
        expected = len(names) + (len(dynamic) if not columns else 0)
        if len(frame.columns) != expected:
            raise UsageError(f"INSERT INTO {info.full_name}: the query gives {len(frame.columns)} columns, "
                             f"{expected} expected ({names + ([] if columns else dynamic)})")
        frame = frame.toDF(*(names + ([] if columns else dynamic)))
        for column in info.columns:
            if column.name not in frame.columns:
                from pyspark.sql import functions as F

                frame = frame.withColumn(column.name, F.lit(None))
        summary = insert(self.session.metastore, database, table, frame, partition=static or None)
        self.session.say(f"Inserted {summary.inserted} rows into {info.full_name} (transaction {summary.txn_id}, "
                         f"write id {summary.write_id})")

    def _update(self, text: str) -> None:
        from spark_jobs.write import update

        tokens = _tokens(text)
        database, table, index = self._target(tokens, 1)
        if index >= len(tokens) or not tokens[index].is_word("SET"):
            raise UsageError("UPDATE needs SET column = expression, ...")
        where = next((i for i in range(index, len(tokens)) if tokens[i].is_word("WHERE")), None)
        body = text[tokens[index].end:tokens[where].start if where is not None else len(text)]
        assignments = {}
        for item in _split_top_level(body):
            column, _, expression = item.partition("=")
            assignments[column.strip().strip("`").lower()] = expression.strip()
        condition = text[tokens[where].end:].strip() if where is not None else "true"
        summary = update(self.spark, self.session.metastore, database, table, condition, assignments)
        self.session.say(f"Updated {summary.deleted} rows of {database}.{table} (transaction {summary.txn_id})")

    def _delete(self, text: str) -> None:
        from spark_jobs.write import delete

        tokens = _tokens(text)
        database, table, index = self._target(tokens, 2)
        condition = text[tokens[index].end:].strip() if index < len(tokens) and tokens[index].is_word("WHERE") else "true"
        summary = delete(self.spark, self.session.metastore, database, table, condition)
        self.session.say(f"Deleted {summary.deleted} rows of {database}.{table} (transaction {summary.txn_id})")

    def _merge(self, text: str) -> None:
        from spark_jobs.write import merge

        tokens = _tokens(text)
        database, table, index = self._target(tokens, 2)
        target_alias, index = self._alias(tokens, index, table)
        if index >= len(tokens) or not tokens[index].is_word("USING"):
            raise UsageError("MERGE needs USING source")
        index += 1
        if tokens[index].is_symbol("("):
            depth, close = 0, index
            for close in range(index, len(tokens)):
                depth += 1 if tokens[close].is_symbol("(") else -1 if tokens[close].is_symbol(")") else 0
                if depth == 0:
                    break
            source = self._query(text[tokens[index].end:tokens[close].start])
            source_alias, index = self._alias(tokens, close + 1, "s")
        else:
            source_db, source_table, after = self._target(tokens, index)
            source = self._query(f"SELECT * FROM {source_db}.{source_table}").drop("row__id")
            source_alias, index = self._alias(tokens, after, source_table)
        clauses = [i for i in range(index, len(tokens)) if tokens[i].is_word("WHEN")]
        on_end = clauses[0] if clauses else len(tokens)
        on = text[tokens[index].end:tokens[on_end].start].strip()
        options: dict = {}
        bounds = clauses + [len(tokens)]
        for start, end in zip(bounds, bounds[1:]):
            clause = text[tokens[start].start:tokens[end - 1].end]
            options.update(self._clause(clause, options))
        insert_values = options.get("not_matched_insert")
        if isinstance(insert_values, tuple):  # INSERT VALUES (...) without a column list: table columns in order
            info = self.session.metastore.catalog.get_table(database, table)
            names = [c.name for c in info.columns] + [k.name for k in info.partition_keys]
            if len(insert_values[1]) != len(names):
                raise UsageError(f"MERGE ... INSERT VALUES gives {len(insert_values[1])} values for {len(names)} "
                                 f"columns {names}")
            options["not_matched_insert"] = dict(zip(names, insert_values[1]))
        summary = merge(self.spark, self.session.metastore, database, table, source, on, target_alias=target_alias,
                        source_alias=source_alias, **options)
        self.session.say(f"Merged into {database}.{table}: {summary.inserted} rows inserted or updated, "
                         f"{summary.deleted} deleted or replaced (transaction {summary.txn_id})")

    @staticmethod
    def _alias(tokens: list[Token], index: int, default: str) -> tuple[str, int]:
        if index < len(tokens) and tokens[index].is_word("AS"):
            index += 1
        if index < len(tokens) and _name(tokens[index]) and not tokens[index].is_word("USING", "ON", "WHEN"):
            return _name(tokens[index]), index + 1
        return default, index

    @staticmethod
    def _clause(clause: str, seen: dict) -> dict:
        """One WHEN clause as keyword arguments of spark_jobs.write.merge."""
        tokens = _tokens(clause)
        not_matched = tokens[1].is_word("NOT")
        then = next(i for i, t in enumerate(tokens) if t.is_word("THEN"))
        condition = None
        if tokens[2 + not_matched].is_word("AND"):
            condition = clause[tokens[3 + not_matched].start:tokens[then].start].strip()
        action = tokens[then + 1]
        if not_matched:
            if not action.is_word("INSERT"):
                raise UsageError("WHEN NOT MATCHED needs THEN INSERT")
            values = next(i for i in range(then, len(tokens)) if tokens[i].is_word("VALUES"))
            names = None
            if tokens[then + 2].is_symbol("("):
                close = next(i for i in range(then + 2, values) if tokens[i].is_symbol(")"))
                names = [n.strip().strip("`").lower() for n in _split_top_level(clause[tokens[then + 2].end:tokens[close].start])]
            expressions = _split_top_level(clause[tokens[values + 1].end:tokens[-1].start])
            return {"not_matched_insert": ("__positional__", expressions) if names is None else dict(zip(names, expressions)),
                    "not_matched_condition": condition}
        if action.is_word("DELETE"):
            return {"matched_delete": True, "matched_delete_condition": condition,
                    "delete_first": "matched_update" not in seen}
        if action.is_word("UPDATE"):
            body = clause[tokens[then + 2].end:]
            assignments = {}
            for item in _split_top_level(body):
                column, _, expression = item.partition("=")
                assignments[column.strip().strip("`").split(".")[-1].lower()] = expression.strip()
            return {"matched_update": assignments, "matched_update_condition": condition}
        raise UsageError(f"unsupported WHEN clause: {clause[:60]}")
