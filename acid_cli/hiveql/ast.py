"""The statements `acid sql` runs, as frozen value objects: what the parser produces and the executor consumes.

Names are normalized as Hive's metastore stores them: database, table, column and partition-key names are lowercase
(backquotes removed); string values (comments, locations, property keys and values, pool names) are kept as written.
Every statement carries its source text in `.text` (from its first token to its last, without the `;`) so that an
error raised while running it can name it; `.text` takes no part in equality, so two spellings of one statement
compare equal.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from dataclasses import dataclass, field

from acid_core.read.pruning import Predicate


def _source_text():
    return field(default="", compare=False, repr=False, kw_only=True)


class Statement:
    """Base of every parsed statement; each subclass has a `text` attribute holding its source text."""

    __slots__ = ()
    text: str


# ---------------------------------------------------------------------------------------------------------------
# Parts of statements


@dataclass(frozen=True, slots=True)
class TableName:
    """A `[db.]table` reference; `database` is None when the statement leaves it to the current database."""

    table: str
    database: str | None = None

    def qualified(self, current_database: str) -> str:
        """`db.table`, using `current_database` when the statement named none."""
        return f"{self.database or current_database}.{self.table}"

    def __str__(self) -> str:
        return f"{self.database}.{self.table}" if self.database else self.table


@dataclass(frozen=True, slots=True)
class PartitionValue:
    """One `key=value` of a partition spec: the value is a string as in Hive; `quoted` if it was a string literal."""

    key: str
    value: str
    quoted: bool


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """`PARTITION (k='v', k2=3, ...)` in the order written; keys are unique."""

    values: tuple[PartitionValue, ...]

    def to_dict(self) -> dict[str, str]:
        """`{key: value}` in the order written."""
        return {item.key: item.value for item in self.values}


@dataclass(frozen=True, slots=True)
class Column:
    """A column definition: lowercase name, normalized lowercase Hive type (`decimal(10,2)`, `map<string,int>`)."""

    name: str
    type: str
    comment: str | None = None


@dataclass(frozen=True, slots=True)
class OrderItem:
    """One `column [ASC|DESC]` of an ORDER BY (column name lowercase, not checked against any schema)."""

    column: str
    descending: bool = False


@dataclass(frozen=True, slots=True)
class Cast:
    """`CAST(literal AS type)` in INSERT ... VALUES: the literal as parsed and the normalized target type."""

    value: Literal
    type: str


Literal = None | bool | int | decimal.Decimal | str | datetime.date | datetime.datetime | Cast
"""A value in INSERT ... VALUES: NULL, TRUE/FALSE, an integer, a decimal.Decimal (a number with a point or exponent),
a string, DATE '...' (datetime.date), TIMESTAMP '...' (datetime.datetime) or a CAST. The executor converts it to the
column's type."""

Properties = tuple[tuple[str, str], ...]
"""`('k'='v', ...)` as (key, value) pairs in the order written; keys are unique."""


# ---------------------------------------------------------------------------------------------------------------
# Databases


@dataclass(frozen=True, slots=True)
class CreateDatabase(Statement):
    """`CREATE (DATABASE|SCHEMA) [IF NOT EXISTS] name [COMMENT 'c'] [LOCATION 'l'] [WITH DBPROPERTIES (...)]`."""

    name: str
    if_not_exists: bool = False
    comment: str | None = None
    location: str | None = None
    properties: Properties = ()
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class DropDatabase(Statement):
    """`DROP (DATABASE|SCHEMA) [IF EXISTS] name [RESTRICT|CASCADE]`."""

    name: str
    if_exists: bool = False
    cascade: bool = False
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class UseDatabase(Statement):
    """`USE db`."""

    name: str
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class ShowDatabases(Statement):
    """`SHOW (DATABASES|SCHEMAS) [LIKE 'pattern']`."""

    pattern: str | None = None
    text: str = _source_text()


# ---------------------------------------------------------------------------------------------------------------
# Tables


@dataclass(frozen=True, slots=True)
class CreateTable(Statement):
    """`CREATE TABLE` with the clauses Hive allows for an ACID table, in Hive's order.

    `stored_as` is "orc" or None (not given); `buckets` is None unless CLUSTERED BY was given.
    """

    table: TableName
    columns: tuple[Column, ...]
    if_not_exists: bool = False
    comment: str | None = None
    partition_columns: tuple[Column, ...] = ()
    bucket_columns: tuple[str, ...] = ()
    buckets: int | None = None
    stored_as: str | None = None
    location: str | None = None
    properties: Properties = ()
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class DropTable(Statement):
    """`DROP TABLE [IF EXISTS] [db.]t [PURGE]`."""

    table: TableName
    if_exists: bool = False
    purge: bool = False
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class AlterTableSetProperties(Statement):
    """`ALTER TABLE [db.]t SET TBLPROPERTIES ('k'='v', ...)`."""

    table: TableName
    properties: Properties
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class AlterTableUnsetProperties(Statement):
    """`ALTER TABLE [db.]t UNSET TBLPROPERTIES [IF EXISTS] ('k', ...)`."""

    table: TableName
    keys: tuple[str, ...]
    if_exists: bool = False
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class AlterTableCompact(Statement):
    """`ALTER TABLE [db.]t [PARTITION (...)] COMPACT 'major'|'minor'|'rebalance' [CLUSTERED INTO n BUCKETS]
    [AND WAIT] [POOL 'p'] [WITH OVERWRITE ...]`.

    `compaction_type` is "major", "minor" or "rebalance" (lowercase whatever the case written, as Hive's
    CompactionType); `number_of_buckets` is a rebalance's CLUSTERED INTO n BUCKETS; `pool` the POOL as written
    (None: the table's or database's `hive.compactor.worker.pool`, else "default", chosen when it is queued).
    """

    table: TableName
    compaction_type: str
    partition: PartitionSpec | None = None
    wait: bool = False
    pool: str | None = None
    properties: Properties = ()
    number_of_buckets: int | None = None
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class ShowTables(Statement):
    """`SHOW TABLES [IN|FROM db] [[LIKE] 'pattern']`."""

    database: str | None = None
    pattern: str | None = None
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class ShowPartitions(Statement):
    """`SHOW PARTITIONS [db.]t`."""

    table: TableName
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class DescribeTable(Statement):
    """`DESCRIBE|DESC [FORMATTED|EXTENDED] [db.]t`."""

    table: TableName
    formatted: bool = False
    extended: bool = False
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class ShowTableProperties(Statement):
    """`SHOW TBLPROPERTIES [db.]t [('key')]`; `key` is None when every property is asked for."""

    table: TableName
    key: str | None = None
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class InsertValues(Statement):
    """`INSERT INTO [TABLE] [db.]t [PARTITION (...)] [(col, ...)] VALUES (...), ...`.

    `columns` is empty when no column list was given; every row has the same number of values, equal to
    `len(columns)` when there is a column list.
    """

    table: TableName
    rows: tuple[tuple[Literal, ...], ...]
    partition: PartitionSpec | None = None
    columns: tuple[str, ...] = ()
    text: str = _source_text()


# ---------------------------------------------------------------------------------------------------------------
# Transactions, locks and compactions


@dataclass(frozen=True, slots=True)
class ShowTransactions(Statement):
    """`SHOW TRANSACTIONS`."""

    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class ShowLocks(Statement):
    """`SHOW LOCKS [[db.]t [PARTITION (...)]] [EXTENDED]` or `SHOW LOCKS (DATABASE|SCHEMA) db [EXTENDED]`.

    At most one of `table` and `database` is set; `partition` only with `table`.
    """

    table: TableName | None = None
    partition: PartitionSpec | None = None
    database: str | None = None
    extended: bool = False
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class ShowCompactions(Statement):
    """`SHOW COMPACTIONS` with Hive 4's filters (hive-acid-reference.md section 8).

    `compaction_id` excludes every other filter; `database` and `table` exclude each other; `partition` needs `table`.
    `compaction_type` and `status` are the strings as written (the executor matches them as Hive does).
    """

    compaction_id: int | None = None
    database: str | None = None
    table: TableName | None = None
    partition: PartitionSpec | None = None
    pool: str | None = None
    compaction_type: str | None = None
    status: str | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: int | None = None
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class AbortTransactions(Statement):
    """`ABORT TRANSACTIONS id id ...`."""

    txn_ids: tuple[int, ...]
    text: str = _source_text()


@dataclass(frozen=True, slots=True)
class AbortCompactions(Statement):
    """`ABORT COMPACTIONS id id ...`."""

    compaction_ids: tuple[int, ...]
    text: str = _source_text()


# ---------------------------------------------------------------------------------------------------------------
# Statements only a query engine can run


@dataclass(frozen=True, slots=True)
class EngineStatement(Statement):
    """A statement recognized by its leading keywords, syntax-checked by `spark_sql` and handed to a query engine.

    `kind` is one of ENGINE_KINDS; `text` is the source text, which here does take part in equality. The engine reads
    its parts with `spark_sql.parse_engine_statement` when it runs it (names resolve in the database current then).
    """

    kind: str
    text: str


ENGINE_KINDS = ("SELECT", "WITH", "FROM", "INSERT INTO", "INSERT OVERWRITE", "UPDATE", "DELETE", "MERGE")
"""The `kind`s of EngineStatement: the statement's leading keyword(s), uppercase."""


@dataclass(frozen=True, slots=True)
class TableReference:
    """A table a piece of Spark SQL reads, written at `text[start:end]` of that piece (backquotes included).

    `needs_alias` when the text gives the table no alias: the view standing in for it is then aliased by the table's
    name, so that columns qualified by the table name (`t.id`) still resolve.
    """

    name: TableName
    start: int
    end: int
    needs_alias: bool = True


@dataclass(frozen=True, slots=True)
class SparkText:
    """A piece of Spark SQL as the user wrote it (a query, a condition or an expression) and the tables it reads."""

    text: str
    tables: tuple[TableReference, ...] = ()

    def render(self, view: Callable[[TableName], str]) -> str:
        """The text with every table name replaced by `view(name)`, a backquote-safe view name."""
        pieces, last = [], 0
        for reference in sorted(self.tables, key=lambda r: r.start):
            alias = " AS `" + reference.name.table.replace("`", "``") + "`" if reference.needs_alias else ""
            pieces += [self.text[last:reference.start], view(reference.name) + alias]
            last = reference.end
        return "".join(pieces) + self.text[last:]


@dataclass(frozen=True, slots=True)
class TableRead:
    """A table a statement reads through a view (every one it names but its target), with what the WHERE of the
    query block reading it says of the rows it takes from it (None: nothing known, every partition is read)."""

    name: TableName
    predicate: Predicate | None = None


def _reads():
    return field(default=(), compare=False, repr=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class SparkQuery:
    """`[WITH ...] SELECT ...` or Hive's `FROM ... SELECT ...`: the whole statement is the query."""

    query: SparkText
    reads: tuple[TableRead, ...] = _reads()


@dataclass(frozen=True, slots=True)
class SparkInsert:
    """`[WITH ...] INSERT INTO [TABLE] [db.]t [PARTITION (k='v', k2, ...)] [(col, ...)] query`.

    `partition` holds the keys given a value (static partitioning), `dynamic_keys` those named without one; `query`
    includes a WITH written before INSERT.
    """

    table: TableName
    query: SparkText
    partition: PartitionSpec | None = None
    dynamic_keys: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    reads: tuple[TableRead, ...] = _reads()


Assignments = tuple[tuple[str, SparkText], ...]
"""`SET column = expression, ...` as (lowercase column name, expression) pairs in the order written."""


@dataclass(frozen=True, slots=True)
class SparkUpdate:
    """`UPDATE [db.]t SET column = expression, ... [WHERE condition]`."""

    table: TableName
    assignments: Assignments
    condition: SparkText | None = None
    reads: tuple[TableRead, ...] = _reads()


@dataclass(frozen=True, slots=True)
class SparkDelete:
    """`DELETE FROM [db.]t [WHERE condition]`."""

    table: TableName
    condition: SparkText | None = None
    reads: tuple[TableRead, ...] = _reads()


@dataclass(frozen=True, slots=True)
class MergeUpdate:
    """`WHEN MATCHED [AND condition] THEN UPDATE SET column = expression, ...`."""

    assignments: Assignments
    condition: SparkText | None = None


@dataclass(frozen=True, slots=True)
class MergeDelete:
    """`WHEN MATCHED [AND condition] THEN DELETE`."""

    condition: SparkText | None = None


@dataclass(frozen=True, slots=True)
class MergeInsert:
    """`WHEN NOT MATCHED [AND condition] THEN INSERT [(column, ...)] VALUES (expression, ...)`; no columns means
    the table's columns then its partition keys, in order."""

    values: tuple[SparkText, ...]
    columns: tuple[str, ...] = ()
    condition: SparkText | None = None


@dataclass(frozen=True, slots=True)
class SparkMerge:
    """`MERGE INTO [db.]t [[AS] alias] USING source [[AS] alias] ON condition WHEN ...`.

    `source` is a table or a query (a parenthesized subquery); the clauses are in the order written, at most one of
    each kind.
    """

    table: TableName
    target_alias: str
    source: TableName | SparkText
    source_alias: str
    on: SparkText
    clauses: tuple[MergeUpdate | MergeDelete | MergeInsert, ...]
    reads: tuple[TableRead, ...] = _reads()


SparkStatement = SparkQuery | SparkInsert | SparkUpdate | SparkDelete | SparkMerge
"""An engine statement's parts, as `spark_sql.parse_engine_statement` reads them."""
