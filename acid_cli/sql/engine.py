"""The statements `acid sql` runs on Spark SQL: SELECT, INSERT INTO ... SELECT, UPDATE, DELETE and MERGE.

`acid_cli.hiveql.spark_sql` reads a statement's parts with sqlglot. Every table it reads is resolved in the metastore
and stands in Spark's text as a temporary view over `spark_jobs.read.read_table` (with `row__id`); all of them are
read under one read-only transaction's snapshot, held open until the statement is done. Writes go through
`spark_jobs.write`, each in its own transaction. Partitions are pruned before anything is listed: a view holds only
the partitions the WHERE of the query blocks reading its table can take rows from, and UPDATE, DELETE and MERGE
read only those of their target that their condition can hold in. The engine returns what to print (rows or a
message) and knows nothing of the session that prints it. The Spark master comes from `ACID_SPARK_MASTER` (default
local[*]).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from acid_cli.hiveql import ast
from acid_cli.hiveql.spark_sql import parse_engine_statement
from acid_cli.sql.results import ResultSet, result
from acid_core.errors import NoSuchTxnError, TxnStateError, UsageError
from acid_core.metastore import Metastore
from acid_core.read.pruning import Predicate, any_of


class _Snapshot:
    """Temporary views over the tables one statement reads, all under one read-only transaction (opened on the
    first view, committed by `close`). A view holds the partitions of its table that some query block reading it
    may take rows from (`reads`: what each block's WHERE says of them); the others are neither listed nor read."""

    def __init__(self, spark, metastore: Metastore, database: str, agent: str,
                 reads: tuple[ast.TableRead, ...] = ()) -> None:
        self.spark = spark
        self.metastore = metastore
        self.database = database
        self.agent = agent
        self.reads = reads
        self.txn_id: int | None = None
        self.views: set[str] = set()

    def _predicate(self, database: str, table: str) -> Predicate | None:
        """What every read of the table allows (OR of the reads' predicates; None when one of them is unknown)."""
        predicates = [read.predicate for read in self.reads
                      if ((read.name.database or self.database), read.name.table) == (database, table)]
        return any_of(predicates) if predicates else None

    def view(self, name: ast.TableName) -> str:
        """The name of the view over a table (`acid__db__table`), registered on first use.

        Raises:
            NoSuchObjectError, NotTransactionalError: the table is unknown or not a full ACID table.
        """
        from spark_jobs.read import read_table

        database = name.database or self.database
        view = f"acid__{database}__{name.table}"
        if view not in self.views:
            self.metastore.catalog.require_transactional(database, name.table)
            if self.txn_id is None:
                self.txn_id = self.metastore.txns.open_txn(agent_info=self.agent)
            read_table(self.spark, self.metastore, database, name.table, include_row_id=True, txn_id=self.txn_id,
                       partition_predicate=self._predicate(database, name.table)).createOrReplaceTempView(view)
            self.views.add(view)
        return view

    def text(self, text: ast.SparkText | None) -> str | None:
        """Spark's text for a piece of the statement: its tables replaced by their views."""
        return None if text is None else text.render(self.view)

    def frame(self, text: ast.SparkText):
        """A query's DataFrame, materialised while the snapshot is held, so a write computes it once."""
        return self.spark.sql(self.text(text)).localCheckpoint(eager=True)

    def close(self) -> None:
        """Commit the read-only transaction. One that timed out meanwhile (hive.txn.timeout) wrote nothing, and a
        read whose files the cleaner then removed has failed already, so that is not an error of the statement."""
        if self.txn_id is not None:
            txn_id, self.txn_id = self.txn_id, None
            try:
                self.metastore.txns.commit(txn_id)
            except (TxnStateError, NoSuchTxnError):
                pass


class SparkEngine:
    """Runs engine statements against one metastore (the SparkSession is built on first use, or the one already
    running in this process is used: `run_script` from a notebook or a Spark job shares its session)."""

    def __init__(self, metastore: Metastore) -> None:
        self.metastore = metastore
        self._spark = None
        # a session found running: its runtime settings that build_session changes (None: this engine started it)
        self._found_settings: dict[str, str | None] | None = None

    @property
    def spark(self):
        if self._spark is None:
            from pyspark.sql import SparkSession

            from spark_jobs.session import DEFAULT_CONF, build_session

            found = SparkSession.getActiveSession()
            self._found_settings = None if found is None else {
                key: found.conf.get(key, None) for key in DEFAULT_CONF if found.conf.isModifiable(key)}
            self._spark = build_session("acid-sql")
        return self._spark

    def close(self) -> None:
        """Stop the session if this engine started it; one it found running is its owner's to stop, and gets back
        the runtime settings it had (the session time zone among them)."""
        if self._spark is not None and self._found_settings is None:
            self._spark.stop()
        elif self._spark is not None:
            for key, value in self._found_settings.items():
                if value is None:
                    self._spark.conf.unset(key)
                else:
                    self._spark.conf.set(key, value)
        self._spark = None
        self._found_settings = None

    def execute(self, statement: ast.EngineStatement, *, database: str) -> ResultSet | str:
        """Run one statement, unqualified names in `database`; returns the rows of a query or a message.

        Raises:
            UsageError: the statement does not parse or is of a form not supported (INSERT OVERWRITE among them).
            AcidError: reading or writing failed.
        """
        parsed = parse_engine_statement(statement.text)
        handler = {ast.SparkQuery: self._select, ast.SparkInsert: self._insert, ast.SparkUpdate: self._update,
                   ast.SparkDelete: self._delete, ast.SparkMerge: self._merge}[type(parsed)]
        with self._snapshot(database, f"acid sql {statement.kind}", parsed.reads) as snapshot:
            return handler(parsed, snapshot)

    @contextmanager
    def _snapshot(self, database: str, agent: str, reads: tuple[ast.TableRead, ...]) -> Iterator[_Snapshot]:
        snapshot = _Snapshot(self.spark, self.metastore, database, agent, reads)
        try:
            yield snapshot
        finally:
            snapshot.close()

    def _select(self, statement: ast.SparkQuery, snapshot: _Snapshot) -> ResultSet:
        frame = self.spark.sql(snapshot.text(statement.query))
        rows = [tuple(row[i].asDict(recursive=True) if hasattr(row[i], "asDict") else row[i] for i in range(len(row)))
                for row in frame.collect()]
        return result(frame.columns, frame.columns, rows)

    def _insert(self, statement: ast.SparkInsert, snapshot: _Snapshot) -> str:
        from pyspark.sql import functions as F

        from spark_jobs.write import insert

        database = statement.table.database or snapshot.database
        info = self.metastore.catalog.get_table(database, statement.table.table)
        keys = [k.name for k in info.partition_keys]
        static = statement.partition.to_dict() if statement.partition else {}
        unknown = [k for k in [*static, *statement.dynamic_keys] if k not in keys]
        if unknown:
            raise UsageError(f"INSERT INTO {info.full_name}: {unknown} are not partition keys (the keys are {keys})")
        frame = snapshot.frame(statement.query)
        columns = list(statement.columns)
        dynamic = [k for k in keys if k not in static]
        names = columns or [c.name for c in info.columns]
        expected = len(names) + (len(dynamic) if not columns else 0)
        if len(frame.columns) != expected:
            raise UsageError(f"INSERT INTO {info.full_name}: the query gives {len(frame.columns)} columns, "
                             f"{expected} expected ({names + ([] if columns else dynamic)})")
        frame = frame.toDF(*(names + ([] if columns else dynamic)))
        for column in info.columns:
            if column.name not in frame.columns:
                frame = frame.withColumn(column.name, F.lit(None))
        summary = insert(self.metastore, database, statement.table.table, frame, partition=static or None)
        return (f"Inserted {summary.inserted} rows into {info.full_name} (transaction {summary.txn_id}, "
                f"write id {summary.write_id})")

    def _update(self, statement: ast.SparkUpdate, snapshot: _Snapshot) -> str:
        from spark_jobs.write import update

        database, table = statement.table.database or snapshot.database, statement.table.table
        assignments = {column: snapshot.text(expression) for column, expression in statement.assignments}
        summary = update(self.spark, self.metastore, database, table, snapshot.text(statement.condition) or "true",
                         assignments)
        return f"Updated {summary.deleted} rows of {database}.{table} (transaction {summary.txn_id})"

    def _delete(self, statement: ast.SparkDelete, snapshot: _Snapshot) -> str:
        from spark_jobs.write import delete

        database, table = statement.table.database or snapshot.database, statement.table.table
        summary = delete(self.spark, self.metastore, database, table, snapshot.text(statement.condition) or "true")
        return f"Deleted {summary.deleted} rows of {database}.{table} (transaction {summary.txn_id})"

    def _merge(self, statement: ast.SparkMerge, snapshot: _Snapshot) -> str:
        from spark_jobs.write import merge

        database, table = statement.table.database or snapshot.database, statement.table.table
        if isinstance(statement.source, ast.SparkText):
            source = snapshot.frame(statement.source)
        else:
            source = self.spark.table(snapshot.view(statement.source)).drop("row__id").localCheckpoint(eager=True)
        options: dict = {}
        for clause in statement.clauses:
            condition = snapshot.text(clause.condition)
            if isinstance(clause, ast.MergeUpdate):
                options.update(matched_update={c: snapshot.text(e) for c, e in clause.assignments},
                               matched_update_condition=condition)
            elif isinstance(clause, ast.MergeDelete):
                options.update(matched_delete=True, matched_delete_condition=condition,
                               delete_first="matched_update" not in options)
            else:
                names = list(clause.columns)
                if not names:  # INSERT VALUES (...) without a column list: the table's columns in order
                    info = self.metastore.catalog.get_table(database, table)
                    names = [c.name for c in info.columns] + [k.name for k in info.partition_keys]
                    if len(clause.values) != len(names):
                        raise UsageError(f"MERGE ... INSERT VALUES gives {len(clause.values)} values for "
                                         f"{len(names)} columns {names}")
                options.update(not_matched_insert=dict(zip(names, (snapshot.text(v) for v in clause.values))),
                               not_matched_condition=condition)
        summary = merge(self.spark, self.metastore, database, table, source, snapshot.text(statement.on),
                        target_alias=statement.target_alias, source_alias=statement.source_alias, **options)
        return (f"Merged into {database}.{table}: {summary.inserted} rows inserted or updated, "
                f"{summary.deleted} deleted or replaced (transaction {summary.txn_id})")
