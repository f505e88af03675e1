"""`acid sql`: run HiveQL statements that need no query engine against the metastore and the warehouse.

The whole script is parsed before anything runs; statements then run in order, each on its own, and the first
failure stops the script with an error that names the statement (what earlier statements did stays done, as in Hive's
CLI). Statements that need a query engine (SELECT, INSERT ... SELECT, UPDATE, DELETE, MERGE) run on Spark SQL
(acid_cli.sql.engine), which starts only when a script has one.

Imports point one way: this module -> session -> engine -> results; ddl, admin and dml use the session.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from acid_cli.hiveql import ast, parse_script
from acid_cli.sql import admin, ddl, dml
from acid_cli.sql.results import ResultSet
from acid_cli.sql.session import Session
from acid_core.errors import AcidError
from acid_core.metastore import Metastore


class StatementError(AcidError):
    """A statement of an `acid sql` script failed; the message names it."""


HANDLERS: dict[type, Callable] = {
    ast.CreateDatabase: ddl.create_database, ast.DropDatabase: ddl.drop_database, ast.UseDatabase: ddl.use_database,
    ast.ShowDatabases: ddl.show_databases, ast.CreateTable: ddl.create_table, ast.DropTable: ddl.drop_table,
    ast.AlterTableSetProperties: ddl.set_properties, ast.AlterTableUnsetProperties: ddl.unset_properties,
    ast.ShowTables: ddl.show_tables, ast.ShowPartitions: ddl.show_partitions, ast.DescribeTable: ddl.describe_table,
    ast.ShowTableProperties: ddl.show_table_properties, ast.AlterTableCompact: admin.compact,
    ast.ShowCompactions: admin.show_compactions, ast.ShowTransactions: admin.show_transactions,
    ast.ShowLocks: admin.show_locks, ast.AbortTransactions: admin.abort_transactions,
    ast.AbortCompactions: admin.abort_compactions, ast.InsertValues: dml.insert_values,
}


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 80 else flat[:77] + "..."


def execute(session: Session, statement: ast.Statement) -> None:
    """Run one parsed statement.

    Raises:
        StatementError: the statement failed (or needs a query engine); the message names it and the problem.
    """
    try:
        if isinstance(statement, ast.EngineStatement):
            outcome = session.engine().execute(statement, database=session.database)
            if isinstance(outcome, ResultSet):
                session.show(outcome)
            else:
                session.say(outcome)
        else:
            HANDLERS[type(statement)](session, statement)
    except AcidError as exc:
        raise StatementError(f'statement "{_excerpt(statement.text)}" failed: {exc}') from exc


def run_script(text: str, *, metastore_url: str | None = None, output_format: str = "table",
               out: TextIO = sys.stdout, metastore: Metastore | None = None) -> int:
    """Parse and run a script; returns the exit status (0)."""
    statements = parse_script(text)
    store = metastore or Metastore(metastore_url)
    try:
        store.init()
        session = Session(store, out, output_format)
        try:
            for statement in statements:
                execute(session, statement)
        finally:
            session.close()
    finally:
        if metastore is None:
            store.close()
    return 0
