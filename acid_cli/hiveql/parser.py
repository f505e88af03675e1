"""A recursive-descent parser for the HiveQL statements `acid sql` runs itself; pure (no I/O, no metastore).

The grammar is the subset of Hive's (parser/.../HiveParser.g, ShowStatementParser.g, AlterClauseParser.g,
CreateDDLParser.g) listed in ast.py, with Hive's clause order and reserved words. This module splits a script into
statements and parses each statement's clauses; token handling, names and syntax errors are in `cursor`, column types
in `types`, VALUES literals in `literals`.

Statements that need a query engine (SELECT, INSERT ... SELECT, INSERT OVERWRITE, UPDATE, DELETE, MERGE) are
recognized by their leading keywords and syntax-checked here with sqlglot (`spark_sql`), so that a script with a bad
query runs nothing; Spark runs them, and `spark_sql` reads their parts when they run.

Why a hand-written parser still: sqlglot (Hive and Spark dialects) has no grammar for Hive's ACID administration.
It parses SHOW COMPACTIONS, SHOW LOCKS, SHOW TRANSACTIONS and ALTER TABLE ... COMPACT only as opaque `Command`s
(the text after the first word, unparsed) and fails on ABORT TRANSACTIONS / ABORT COMPACTIONS; for the DDL and
INSERT ... VALUES it parses, it has none of Hive's checks this parser makes (reserved words, STORED AS ORC, bucketing
columns among the table's, VALUES literals as Hive converts them without an engine) nor Hive's error positions.

Error positions are `line:column` in the text given to parse_script / parse_statement, the line counted from 1 and
the column from 0, as in Hive's ParseException ("line 1:21 ...").
"""

from __future__ import annotations

from collections.abc import Iterator

from acid_cli.hiveql.ast import (
    AbortCompactions,
    AbortTransactions,
    AlterTableCompact,
    AlterTableSetProperties,
    AlterTableUnsetProperties,
    CreateDatabase,
    CreateTable,
    DescribeTable,
    DropDatabase,
    DropTable,
    EngineStatement,
    InsertValues,
    OrderItem,
    PartitionSpec,
    ShowCompactions,
    ShowDatabases,
    ShowLocks,
    ShowPartitions,
    ShowTableProperties,
    ShowTables,
    ShowTransactions,
    Statement,
    TableName,
    UseDatabase,
)
from acid_cli.hiveql.cursor import (
    EXCERPT_LENGTH,
    RESERVED_WORDS,
    HiveQLSyntaxError,
    TokenCursor,
    describe,
    excerpt,
    line_column,
)
from acid_cli.hiveql.literals import check_row_sizes, parse_row
from acid_cli.hiveql.spark_sql import SparkSyntaxError, parse_tree
from acid_cli.hiveql.tokens import Token, TokenizeError, TokenKind, tokenize
from acid_cli.hiveql.types import parse_column_list
from acid_core.metastore.codes import MAX_REBALANCE_BUCKETS, REQUESTABLE_TYPES

__all__ = ["EXCERPT_LENGTH", "RESERVED_WORDS", "HiveQLSyntaxError", "excerpt", "parse_script", "parse_statement"]

_STATEMENT_WORDS = ("CREATE", "DROP", "ALTER", "SHOW", "DESCRIBE", "USE", "INSERT", "ABORT", "SELECT", "WITH", "FROM",
                    "UPDATE", "DELETE", "MERGE")
_QUERY_WORDS = ("SELECT", "FROM", "WITH", "MAP", "REDUCE")


def parse_script(text: str) -> list[Statement]:
    """Every statement of a script, split on `;` (outside strings, names and comments); empty statements are skipped.

    Raises:
        HiveQLSyntaxError: for the first statement, in script order, that does not parse.
    """
    return [_Parser(text, tokens).parse() for tokens in _split(text)]


def parse_statement(text: str) -> Statement:
    """The one statement in `text` (a trailing `;` is allowed).

    Raises:
        HiveQLSyntaxError: `text` holds no statement, more than one, or one that does not parse.
    """
    statements = _split(text)
    first = next(statements, None)
    if first is None:
        line, column = line_column(text, len(text))
        raise HiveQLSyntaxError("expected a statement, found end of input", statement=text, line=line, column=column)
    second = next(statements, None)
    if second is not None:
        line, column = line_column(text, second[0].start)
        raise HiveQLSyntaxError(f"expected end of input after ';', found {describe(second[0])}",
                                statement=text[first[0].start:].strip(), line=line, column=column)
    return _Parser(text, first).parse()


def _split(text: str) -> Iterator[list[Token]]:
    """The tokens of each non-empty statement, lazily, so that an earlier statement's error is reported first."""
    current: list[Token] = []
    try:
        for token in tokenize(text):
            if token.kind is TokenKind.END or token.is_symbol(";"):
                if current:
                    yield current
                current = []
            else:
                current.append(token)
    except TokenizeError as exc:
        start = current[0].start if current else exc.offset
        line, column = line_column(text, exc.offset)
        raise HiveQLSyntaxError(exc.detail, statement=text[start:].strip(), line=line, column=column) from None


class _Parser(TokenCursor):
    """Parses one statement from its tokens (TokenCursor supplies token access, names and errors)."""

    # -- statements -----------------------------------------------------------------------------------------------

    def parse(self) -> Statement:
        token = self.peek()
        word = token.value.upper() if token.kind is TokenKind.WORD else ""
        handler = {
            "CREATE": self.create, "DROP": self.drop, "ALTER": self.alter, "SHOW": self.show,
            "DESCRIBE": self.describe, "DESC": self.describe, "USE": self.use, "INSERT": self.insert,
            "ABORT": self.abort,
        }.get(word)
        if handler is not None:
            self.advance()
            statement = handler()
            self.expect_end()
            return statement
        if word in ("SELECT", "WITH", "FROM", "UPDATE", "DELETE", "MERGE"):
            return self.engine_statement(word)
        self.fail(["a statement (" + ", ".join(_STATEMENT_WORDS) + ")"])

    def engine_statement(self, kind: str) -> EngineStatement:
        """A statement for the query engine, recognized by `kind`; its syntax checked by sqlglot's Spark dialect."""
        try:
            parse_tree(self.text)
        except SparkSyntaxError as exc:
            line, column = line_column(self.script, self.tokens[0].start + exc.offset)
            raise HiveQLSyntaxError(exc.detail, statement=self.text, line=line, column=column) from None
        self.index = len(self.tokens)
        return EngineStatement(kind, self.text)

    def create(self) -> Statement:
        kind = self.expect("DATABASE", "SCHEMA", "TABLE")
        if kind.is_word("TABLE"):
            return self.create_table()
        if_not_exists = self.if_not_exists()
        name = self.name("a database name")
        found: dict[str, object] = {}
        self.clauses([
            ("COMMENT", lambda: found.update(comment=self.string("a comment (a string literal) after COMMENT"))),
            ("LOCATION", lambda: found.update(location=self.string("a location (a string literal) after LOCATION"))),
            ("WITH DBPROPERTIES", lambda: (self.expect("DBPROPERTIES"),
                                           found.update(properties=self.properties("DBPROPERTIES")))),
        ])
        return CreateDatabase(name, if_not_exists=if_not_exists, **found, text=self.text)

    def create_table(self) -> CreateTable:
        if_not_exists = self.if_not_exists()
        table = self.table_name()
        seen: set[str] = set()
        columns = parse_column_list(self, "the table name", seen)
        found: dict[str, object] = {}
        bucket_names: list[tuple[str, Token]] = []

        def partitioned_by() -> None:
            self.expect("BY")
            found["partition_columns"] = parse_column_list(self, "PARTITIONED BY", seen, partition=True)

        def clustered_by() -> None:
            self.expect("BY")
            bucket_names.extend(self.name_list("a bucketing column name", "CLUSTERED BY"))
            found["bucket_columns"] = tuple(name for name, _ in bucket_names)
            self.expect("INTO")
            count_token = self.peek()
            found["buckets"] = self.integer("a number of buckets")
            if found["buckets"] < 1:
                raise self.error("the number of buckets must be at least 1", count_token)
            self.expect("BUCKETS")

        def stored_as() -> None:
            self.expect("AS")
            if not self.peek().is_word("ORC"):
                self.fail(["ORC"], hint=" (transactional tables are stored as ORC)")
            self.advance()
            found["stored_as"] = "orc"

        self.clauses([
            ("COMMENT", lambda: found.update(comment=self.string("a comment (a string literal) after COMMENT"))),
            ("PARTITIONED BY", partitioned_by),
            ("CLUSTERED BY", clustered_by),
            ("STORED AS", stored_as),
            ("LOCATION", lambda: found.update(location=self.string("a location (a string literal) after LOCATION"))),
            ("TBLPROPERTIES", lambda: found.update(properties=self.properties("TBLPROPERTIES"))),
        ])
        data_columns = {column.name for column in columns}
        for name, token in bucket_names:
            if name not in data_columns:
                raise self.error(f"bucketing column '{name}' is not a column of the table "
                                 f"(columns: {', '.join(c.name for c in columns)})", token)
        return CreateTable(table, columns, if_not_exists=if_not_exists, **found, text=self.text)

    def drop(self) -> Statement:
        kind = self.expect("DATABASE", "SCHEMA", "TABLE")
        if kind.is_word("TABLE"):
            if_exists = self.if_exists()
            table = self.table_name()
            purge = self.accept("PURGE") is not None
            self.expect_end(["PURGE"] if not purge else [])
            return DropTable(table, if_exists=if_exists, purge=purge, text=self.text)
        if_exists = self.if_exists()
        name = self.name("a database name")
        mode = self.accept("RESTRICT", "CASCADE")
        self.expect_end(["RESTRICT", "CASCADE"] if mode is None else [])
        return DropDatabase(name, if_exists=if_exists, cascade=mode is not None and mode.is_word("CASCADE"),
                            text=self.text)

    def alter(self) -> Statement:
        self.expect("TABLE")
        table = self.table_name()
        partition = self.optional_partition()
        if partition is None:
            action = self.expect("SET", "UNSET", "COMPACT", "PARTITION")
        else:
            action = self.expect("COMPACT")
        if action.is_word("SET"):
            self.expect("TBLPROPERTIES")
            return AlterTableSetProperties(table, self.properties("TBLPROPERTIES"), text=self.text)
        if action.is_word("UNSET"):
            self.expect("TBLPROPERTIES")
            if_exists = self.if_exists()
            self.expect_symbol("(", after="UNSET TBLPROPERTIES")
            keys: list[str] = []
            while True:
                key_token = self.peek()
                key = self.string("a property key (a string literal)")
                if key in keys:
                    raise self.error(f"property '{key}' is given twice", key_token)
                keys.append(key)
                if not self.accept_symbol(","):
                    break
            self.close_list()
            return AlterTableUnsetProperties(table, tuple(keys), if_exists=if_exists, text=self.text)
        return self.compact(table, partition)

    def compact(self, table: TableName, partition: PartitionSpec | None) -> AlterTableCompact:
        """After COMPACT: Hive's alterStatementSuffixCompact; a rebalance's ORDER BY is refused (rows keep their
        write ids only in key order)."""
        type_token = self.peek()
        if type_token.kind is not TokenKind.STRING or type_token.value.lower() not in REQUESTABLE_TYPES:
            self.fail(["compaction type 'major', 'minor' or 'rebalance'"])
        self.advance()
        found: dict[str, object] = {}

        def buckets() -> None:
            self.expect("INTO")
            number_token = self.peek()
            number = self.integer("a number of buckets after CLUSTERED INTO")
            self.expect("BUCKETS")
            if type_token.value.lower() != "rebalance":
                raise self.error(f"CLUSTERED INTO {number} BUCKETS applies to a 'rebalance' compaction only",
                                 number_token)
            if not 1 <= number <= MAX_REBALANCE_BUCKETS:
                raise self.error(f"a rebalance compaction takes 1..{MAX_REBALANCE_BUCKETS} buckets, got {number}",
                                 number_token)
            found["number_of_buckets"] = number

        def order_by() -> None:
            raise self.error("ORDER BY in a compaction request is not supported: a rebalance keeps every row's "
                             "write id, so rows stay in ROW__ID order")

        def overwrite_properties() -> None:
            self.expect("OVERWRITE")
            self.expect("TBLPROPERTIES")
            found["properties"] = self.properties("WITH OVERWRITE TBLPROPERTIES")

        self.clauses([  # Hive 4's order: tableImplBuckets? blocking? compactPool? (WITH OVERWRITE ...)? orderByClause?
            ("CLUSTERED INTO", buckets),
            ("AND WAIT", lambda: (self.expect("WAIT"), found.update(wait=True))),
            ("POOL", lambda: found.update(pool=self.string("a pool name (a string literal) after POOL"))),
            ("WITH OVERWRITE TBLPROPERTIES", overwrite_properties),
            ("ORDER BY", order_by),
        ])
        return AlterTableCompact(table, type_token.value.lower(), partition=partition, **found, text=self.text)

    def show(self) -> Statement:
        what = self.expect("TRANSACTIONS", "LOCKS", "COMPACTIONS", "DATABASES", "SCHEMAS", "TABLES", "PARTITIONS",
                           "TBLPROPERTIES")
        word = what.value.upper()
        if word == "TRANSACTIONS":
            return ShowTransactions(text=self.text)
        if word == "LOCKS":
            return self.show_locks()
        if word == "COMPACTIONS":
            return self.show_compactions()
        if word in ("DATABASES", "SCHEMAS"):
            pattern = self.string("a pattern (a string literal) after LIKE") if self.accept("LIKE") else None
            self.expect_end(["LIKE"] if pattern is None else [])
            return ShowDatabases(pattern, text=self.text)
        if word == "TABLES":
            database = self.name("a database name") if self.accept("IN", "FROM") else None
            pattern = None
            if self.accept("LIKE"):
                pattern = self.string("a pattern (a string literal) after LIKE")
            elif self.peek().kind is TokenKind.STRING:
                pattern = self.advance().value
            self.expect_end((["IN"] if database is None else []) + (["LIKE"] if pattern is None else []))
            return ShowTables(database, pattern, text=self.text)
        if word == "PARTITIONS":
            return ShowPartitions(self.table_name(), text=self.text)
        table = self.table_name()
        key = None
        if self.accept_symbol("("):
            key = self.string("a property key (a string literal)")
            self.expect_symbol(")", after="the property key")
        return ShowTableProperties(table, key, text=self.text)

    def show_locks(self) -> ShowLocks:
        if self.accept("DATABASE", "SCHEMA"):
            database = self.name("a database name")
            extended = self.accept("EXTENDED") is not None
            self.expect_end([] if extended else ["EXTENDED"])
            return ShowLocks(database=database, extended=extended, text=self.text)
        table = partition = None
        if not self.at_end() and not self.peek().is_word("EXTENDED"):
            table = self.table_name()
            partition = self.optional_partition()
        extended = self.accept("EXTENDED") is not None
        self.expect_end([] if extended else (["PARTITION"] if table and not partition else []) + ["EXTENDED"])
        return ShowLocks(table=table, partition=partition, extended=extended, text=self.text)

    def show_compactions(self) -> ShowCompactions:
        """Hive's three forms: by id, by database, or by table (possibly none) with the same filters."""
        if self.accept("COMPACTIONID"):
            self.expect_symbol("=", after="COMPACTIONID")
            compaction_id = self.integer("a compaction id")
            return ShowCompactions(compaction_id=compaction_id, text=self.text)
        found: dict[str, object] = {}
        filters = ("POOL", "TYPE", "STATUS", "ORDER", "LIMIT")
        if self.accept("DATABASE", "SCHEMA"):
            found["database"] = self.name("a database name")
        elif not self.at_end() and not self.peek().is_word(*filters):
            found["table"] = self.table_name()
            if self.accept("PARTITION"):
                found["partition"] = self.partition_spec()

        def limit() -> None:
            if self.peek().is_symbol("-"):
                self.fail(["a non-negative integer after LIMIT"])
            found["limit"] = self.integer("a non-negative integer after LIMIT")

        self.clauses([
            ("POOL", lambda: found.update(pool=self.string("a pool name (a string literal) after POOL"))),
            ("TYPE", lambda: found.update(compaction_type=self.string("a compaction type (a string literal) "
                                                                      "after TYPE"))),
            ("STATUS", lambda: found.update(status=self.string("a status (a string literal) after STATUS"))),
            ("ORDER BY", lambda: found.update(order_by=self.order_by())),
            ("LIMIT", limit),
        ])
        return ShowCompactions(**found, text=self.text)

    def order_by(self) -> tuple[OrderItem, ...]:
        self.expect("BY")
        items = []
        while True:
            column = self.name("a column name after ORDER BY")
            direction = self.accept("ASC", "DESC")
            items.append(OrderItem(column, descending=direction is not None and direction.is_word("DESC")))
            if not self.accept_symbol(","):
                return tuple(items)

    def describe(self) -> DescribeTable:
        formatted = extended = False
        if self.peek().is_word("FORMATTED", "EXTENDED") and self.peek(1).kind is not TokenKind.END:
            formatted = self.advance().is_word("FORMATTED")
            extended = not formatted
        return DescribeTable(self.table_name(), formatted=formatted, extended=extended, text=self.text)

    def use(self) -> UseDatabase:
        return UseDatabase(self.name("a database name"), text=self.text)

    def abort(self) -> Statement:
        what = self.expect("TRANSACTIONS", "COMPACTIONS")
        noun = "transaction" if what.is_word("TRANSACTIONS") else "compaction"
        ids = [self.integer(f"a {noun} id")]
        while not self.at_end():
            ids.append(self.integer(f"a {noun} id"))
        if what.is_word("TRANSACTIONS"):
            return AbortTransactions(tuple(ids), text=self.text)
        return AbortCompactions(tuple(ids), text=self.text)

    # -- INSERT ---------------------------------------------------------------------------------------------------

    def insert(self) -> Statement:
        mode = self.expect("INTO", "OVERWRITE")
        if mode.is_word("OVERWRITE"):
            return self.engine_statement("INSERT OVERWRITE")
        if self.needs_engine():
            return self.engine_statement("INSERT INTO")
        self.accept("TABLE")
        table = self.table_name()
        partition = self.optional_partition()
        columns: tuple[tuple[str, Token], ...] = ()
        if self.peek().is_symbol("("):
            columns = self.name_list("a column name", "the table name")
        if not self.accept("VALUES"):
            optional = [] if columns else ["'('"] if partition else ["PARTITION", "'('"]
            self.fail([*optional, "VALUES", "a query"])
        rows = [parse_row(self, "VALUES")]
        while self.accept_symbol(","):
            rows.append(parse_row(self, "','"))
        check_row_sizes(self, rows, len(columns))
        return InsertValues(table, tuple(values for values, _ in rows), partition=partition,
                            columns=tuple(name for name, _ in columns), text=self.text)

    def needs_engine(self) -> bool:
        """Whether an INSERT INTO feeds from a query: the first top-level VALUES or query keyword decides."""
        depth = 0
        for token in self.tokens[self.index:]:
            if token.is_symbol("("):
                depth += 1
            elif token.is_symbol(")"):
                depth -= 1
            elif depth == 0 and token.is_word("VALUES"):
                return False
            elif depth == 0 and token.is_word(*_QUERY_WORDS):
                return True
        return False
