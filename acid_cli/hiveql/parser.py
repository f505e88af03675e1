"""A recursive-descent parser for the HiveQL statements `acid sql` runs; pure (no I/O, no metastore).

The grammar is the subset of Hive's (parser/.../HiveParser.g, ShowStatementParser.g, AlterClauseParser.g,
CreateDDLParser.g) listed in ast.py, with Hive's clause order and reserved words. Statements that need a query engine
(SELECT, INSERT ... SELECT, INSERT OVERWRITE, UPDATE, DELETE, MERGE) are recognized by their leading keywords only.

Error positions are `line:column` in the text given to parse_script / parse_statement, the line counted from 1 and
the column from 0, as in Hive's ParseException ("line 1:21 ...").
"""

from __future__ import annotations

import datetime
import decimal
import re
from typing import Callable, Iterator, NoReturn, Sequence

from acid_core.errors import UsageError
from acid_cli.hiveql.ast import (AbortCompactions, AbortTransactions, AlterTableCompact, AlterTableSetProperties,
                                 AlterTableUnsetProperties, Cast, Column, CreateDatabase, CreateTable, DescribeTable,
                                 DropDatabase, DropTable, EngineStatement, InsertValues, Literal, OrderItem,
                                 PartitionSpec, PartitionValue, Properties, ShowCompactions, ShowDatabases, ShowLocks,
                                 ShowPartitions, ShowTableProperties, ShowTables, ShowTransactions, Statement,
                                 TableName, UseDatabase)
from acid_cli.hiveql.tokens import Token, TokenizeError, TokenKind, tokenize

EXCERPT_LENGTH = 80

RESERVED_WORDS = frozenset("""
    ALL ALTER AND ARRAY AS AUTHORIZATION BETWEEN BIGINT BINARY BOOLEAN BOTH BY CASE CAST CHAR COLUMN CONF CREATE CROSS
    CUBE CURRENT CURRENT_DATE CURRENT_TIMESTAMP CURSOR DATABASE DATE DECIMAL DELETE DESCRIBE DISTINCT DOUBLE DROP ELSE
    END EXCHANGE EXISTS EXTENDED EXTERNAL FALSE FETCH FLOAT FOLLOWING FOR FROM FULL FUNCTION GRANT GROUP GROUPING HAVING
    IF IMPORT IN INNER INSERT INT INTERSECT INTERVAL INTO IS JOIN LATERAL LEFT LESS LIKE LOCAL MACRO MAP MORE NONE NOT
    NULL OF ON OR ORDER OUT OUTER OVER PARTIALSCAN PARTITION PERCENT PRECEDING PRESERVE PROCEDURE RANGE READS REDUCE
    REVOKE RIGHT ROLLUP ROW ROWS SELECT SET SMALLINT TABLE TABLESAMPLE THEN TIMESTAMP TO TRANSFORM TRIGGER TRUE TRUNCATE
    UNBOUNDED UNION UNIQUEJOIN UPDATE USER USING UTC_TMESTAMP VALUES VARCHAR WHEN WHERE WINDOW WITH COMMIT ONLY REGEXP
    RLIKE ROLLBACK START CONSTRAINT FOREIGN PRIMARY REFERENCES EXTRACT FLOOR INTEGER PRECISION TIME NUMERIC SYNC
""".split())
"""Words Hive refuses as bare names (SQL:2011 reserved keywords, Hive wiki LanguageManual DDL "Reserved Keywords",
Hive 2.2 to 3.1); backquote them to use them as names."""

_SIMPLE_TYPES = {"TINYINT": "tinyint", "SMALLINT": "smallint", "INT": "int", "INTEGER": "int", "BIGINT": "bigint",
                 "FLOAT": "float", "REAL": "float", "DOUBLE": "double", "STRING": "string", "BOOLEAN": "boolean",
                 "BINARY": "binary", "DATE": "date", "TIMESTAMP": "timestamp"}
_DECIMAL_WORDS = ("DECIMAL", "DEC", "NUMERIC")
_COMPLEX_PREFIXES = ("array<", "map<", "struct<", "uniontype<")
_MAX_DECIMAL_PRECISION = 38          # HiveDecimal.MAX_PRECISION
_DEFAULT_DECIMAL = (10, 0)           # HiveDecimal.USER_DEFAULT_PRECISION / USER_DEFAULT_SCALE
_MAX_VARCHAR_LENGTH = 65535          # HiveVarchar.MAX_VARCHAR_LENGTH
_MAX_CHAR_LENGTH = 255               # HiveChar.MAX_CHAR_LENGTH
_COMPACTION_TYPES = ("major", "minor")
_STATEMENT_WORDS = ("CREATE", "DROP", "ALTER", "SHOW", "DESCRIBE", "USE", "INSERT", "ABORT", "SELECT", "WITH", "FROM",
                    "UPDATE", "DELETE", "MERGE")
_QUERY_WORDS = ("SELECT", "FROM", "WITH", "MAP", "REDUCE")
_INTEGER = re.compile(r"[0-9]+")
_DATE = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})")
_TIMESTAMP = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
                        r"(?:[ T]([0-9]{1,2}):([0-9]{1,2})(?::([0-9]{1,2})(?:\.([0-9]{1,9}))?)?)?")


class HiveQLSyntaxError(UsageError):
    """A HiveQL statement does not follow the grammar `acid sql` accepts (the message names statement and position)."""

    def __init__(self, detail: str, *, statement: str, line: int, column: int) -> None:
        super().__init__(f'syntax error in "{excerpt(statement)}" at {line}:{column}: {detail}')
        self.detail = detail
        self.statement = statement
        self.line = line
        self.column = column


def excerpt(text: str) -> str:
    """The statement as error messages quote it: whitespace runs as one space, at most EXCERPT_LENGTH characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_LENGTH else flat[:EXCERPT_LENGTH - 3] + "..."


def _line_column(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1)


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
        line, column = _line_column(text, len(text))
        raise HiveQLSyntaxError("expected a statement, found end of input", statement=text, line=line, column=column)
    second = next(statements, None)
    if second is not None:
        line, column = _line_column(text, second[0].start)
        raise HiveQLSyntaxError(f"expected end of input after ';', found {_describe(second[0])}",
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
        line, column = _line_column(text, exc.offset)
        raise HiveQLSyntaxError(exc.detail, statement=text[start:].strip(), line=line, column=column) from None


def _describe(token: Token) -> str:
    """A token as error messages name it after "found"."""
    if token.kind is TokenKind.END:
        return "end of input"
    text = token.text if len(token.text) <= 40 else token.text[:37] + "..."
    if token.kind in (TokenKind.WORD, TokenKind.SYMBOL):
        return f"'{text}'"
    return text


def _one_of(options: Sequence[str]) -> str:
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]


class _Parser:
    """Parses one statement from its tokens; `script` is the whole text, for positions and the statement's source."""

    def __init__(self, script: str, tokens: list[Token]) -> None:
        self.script = script
        self.tokens = tokens
        self.index = 0
        self.text = script[tokens[0].start:tokens[-1].end]
        self.end = Token(TokenKind.END, "", "", tokens[-1].end, tokens[-1].end)

    # -- token access ---------------------------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token:
        index = self.index + ahead
        return self.tokens[index] if index < len(self.tokens) else self.end

    def advance(self) -> Token:
        token = self.peek()
        self.index += 1
        return token

    def at_end(self) -> bool:
        return self.index >= len(self.tokens)

    def accept(self, *words: str) -> Token | None:
        """Consume the next token if it is one of the keywords `words`."""
        if self.peek().is_word(*words):
            return self.advance()
        return None

    def accept_symbol(self, symbol: str) -> Token | None:
        if self.peek().is_symbol(symbol):
            return self.advance()
        return None

    def expect(self, *words: str) -> Token:
        """Consume one of the keywords `words`, or fail naming them."""
        token = self.accept(*words)
        if token is None:
            self.fail(list(words))
        return token

    def expect_symbol(self, symbol: str, after: str = "") -> Token:
        token = self.accept_symbol(symbol)
        if token is None:
            self.fail([f"'{symbol}'" + (f" after {after}" if after else "")])
        return token

    # -- errors ---------------------------------------------------------------------------------------------------

    def error(self, detail: str, token: Token | None = None) -> HiveQLSyntaxError:
        token = token or self.peek()
        line, column = _line_column(self.script, token.start)
        return HiveQLSyntaxError(detail, statement=self.text, line=line, column=column)

    def fail(self, expected: Sequence[str], token: Token | None = None, hint: str = "") -> NoReturn:
        token = token or self.peek()
        raise self.error(f"expected {_one_of(expected)}, found {_describe(token)}{hint}", token)

    def expect_end(self, expected: Sequence[str] = ()) -> None:
        if not self.at_end():
            self.fail([*expected, "end of statement"])

    # -- names and literals ---------------------------------------------------------------------------------------

    def name(self, what: str) -> str:
        """An identifier, lowercase as Hive's metastore stores names; reserved words must be backquoted."""
        token = self.peek()
        if token.kind is TokenKind.QUOTED_NAME:
            if not token.value:
                raise self.error(f"expected {what}, found an empty quoted name ``")
            self.advance()
            return token.value.lower()
        if token.kind is TokenKind.WORD:
            if token.value.upper() in RESERVED_WORDS:
                raise self.error(f"expected {what}, found reserved word '{token.value}' "
                                 f"(write `{token.value}` to use it as a name)")
            self.advance()
            return token.value.lower()
        self.fail([what])

    def table_name(self) -> TableName:
        first = self.name("a table name")
        if self.accept_symbol("."):
            return TableName(database=first, table=self.name("a table name after '.'"))
        return TableName(table=first)

    def string(self, what: str) -> str:
        token = self.peek()
        if token.kind is not TokenKind.STRING:
            self.fail([what])
        self.advance()
        return token.value

    def integer(self, what: str) -> int:
        """A non-negative integer written as plain digits."""
        token = self.peek()
        if token.kind is not TokenKind.NUMBER or not _INTEGER.fullmatch(token.text):
            self.fail([what])
        self.advance()
        return int(token.text)

    def if_exists(self) -> bool:
        if self.accept("IF"):
            self.expect("EXISTS")
            return True
        return False

    def if_not_exists(self) -> bool:
        if self.accept("IF"):
            self.expect("NOT")
            self.expect("EXISTS")
            return True
        return False

    def properties(self, what: str) -> Properties:
        """`('k'='v', ...)`: keys and values are string literals (Hive's keyValueProperty); keys must be unique."""
        self.expect_symbol("(", after=what)
        pairs: dict[str, str] = {}
        while True:
            key_token = self.peek()
            key = self.string("a property key (a string literal)")
            if key in pairs:
                raise self.error(f"property '{key}' is given twice", key_token)
            self.expect_symbol("=", after=f"property key {key_token.text}")
            pairs[key] = self.string(f"a string value for property {key_token.text}")
            if not self.accept_symbol(","):
                break
        self.close_list()
        return tuple(pairs.items())

    def close_list(self) -> None:
        if not self.accept_symbol(")"):
            self.fail(["')'", "','"])

    def partition_spec(self) -> PartitionSpec:
        """`PARTITION (k='v', k2=3, ...)` with the PARTITION keyword already consumed; every key needs a value."""
        self.expect_symbol("(", after="PARTITION")
        values: dict[str, PartitionValue] = {}
        while True:
            key_token = self.peek()
            key = self.name("a partition column name")
            if key in values:
                raise self.error(f"partition column '{key}' is given twice", key_token)
            self.expect_symbol("=", after=f"partition column '{key}'")
            value_token = self.peek()
            sign = self.accept_symbol("-")
            token = self.peek()
            if token.kind is TokenKind.STRING and not sign:
                value = PartitionValue(key, token.value, quoted=True)
            elif token.kind is TokenKind.NUMBER:
                value = PartitionValue(key, ("-" if sign else "") + token.text, quoted=False)
            else:
                self.fail(["a partition value (a string or a number)"])
            if not value.value:
                raise self.error(f"partition value for '{key}' is empty", value_token)
            self.advance()
            values[key] = value
            if not self.accept_symbol(","):
                break
        self.close_list()
        return PartitionSpec(tuple(values.values()))

    def optional_partition(self) -> PartitionSpec | None:
        return self.partition_spec() if self.accept("PARTITION") else None

    def clauses(self, clauses: Sequence[tuple[str, Callable[[], None]]]) -> None:
        """Optional clauses that must come in the given order; each starts with the first word of its name."""
        position = 0
        while not self.at_end():
            for index in range(position, len(clauses)):
                name, parse = clauses[index]
                if self.accept(name.split()[0]):
                    parse()
                    position = index + 1
                    break
            else:
                self.fail([name for name, _ in clauses[position:]] + ["end of statement"])

    # -- types ----------------------------------------------------------------------------------------------------

    def type(self) -> str:
        """A Hive column type as a normalized lowercase string (Hive's TypeInfo.getTypeName: no spaces)."""
        token = self.peek()
        word = token.value.upper() if token.kind is TokenKind.WORD else ""
        if word in _SIMPLE_TYPES:
            self.advance()
            if word == "DOUBLE":
                self.accept("PRECISION")
            if self.peek().is_symbol("("):
                raise self.error(f"type {_SIMPLE_TYPES[word]} does not take parameters, found '('")
            return _SIMPLE_TYPES[word]
        if word in _DECIMAL_WORDS:
            self.advance()
            precision, scale = _DEFAULT_DECIMAL
            if self.accept_symbol("("):
                precision_token = self.peek()
                precision, scale = self.integer("a decimal precision"), 0
                if not 1 <= precision <= _MAX_DECIMAL_PRECISION:
                    raise self.error(f"decimal precision {precision} is outside the allowed range "
                                     f"1..{_MAX_DECIMAL_PRECISION}", precision_token)
                if self.accept_symbol(","):
                    scale_token = self.peek()
                    scale = self.integer("a decimal scale")
                    if scale > precision:
                        raise self.error(f"decimal scale {scale} is larger than the precision {precision}",
                                         scale_token)
                self.expect_symbol(")", after="the decimal precision and scale")
            return f"decimal({precision},{scale})"
        if word in ("VARCHAR", "CHAR"):
            self.advance()
            lowercase, limit = word.lower(), _MAX_VARCHAR_LENGTH if word == "VARCHAR" else _MAX_CHAR_LENGTH
            if not self.accept_symbol("("):
                self.fail([f"'(' after {lowercase} ({lowercase} needs a length, as in {lowercase}(10))"])
            length_token = self.peek()
            length = self.integer(f"a {lowercase} length")
            if not 1 <= length <= limit:
                raise self.error(f"{lowercase} length {length} is outside the allowed range 1..{limit}", length_token)
            self.expect_symbol(")", after=f"the {lowercase} length")
            return f"{lowercase}({length})"
        if word == "ARRAY":
            self.advance()
            self.expect_symbol("<", after="array")
            element = self.type()
            self.expect_symbol(">", after=f"array<{element}")
            return f"array<{element}>"
        if word == "MAP":
            self.advance()
            self.expect_symbol("<", after="map")
            key_token = self.peek()
            key = self.type()
            if key.startswith(_COMPLEX_PREFIXES):
                raise self.error(f"map key type {key} is not a primitive type", key_token)
            self.expect_symbol(",", after=f"map<{key}")
            value = self.type()
            self.expect_symbol(">", after=f"map<{key},{value}")
            return f"map<{key},{value}>"
        if word == "STRUCT":
            self.advance()
            self.expect_symbol("<", after="struct")
            fields: dict[str, str] = {}
            while True:
                field_token = self.peek()
                field = self.name("a struct field name")
                if field in fields:
                    raise self.error(f"struct field '{field}' is given twice", field_token)
                self.expect_symbol(":", after=f"struct field '{field}'")
                fields[field] = self.type()
                if not self.accept_symbol(","):
                    break
            if not self.accept_symbol(">"):
                self.fail(["'>'", "','"])
            return "struct<" + ",".join(f"{name}:{type_}" for name, type_ in fields.items()) + ">"
        if word == "UNIONTYPE":
            self.advance()
            self.expect_symbol("<", after="uniontype")
            members = [self.type()]
            while self.accept_symbol(","):
                members.append(self.type())
            if not self.accept_symbol(">"):
                self.fail(["'>'", "','"])
            return "uniontype<" + ",".join(members) + ">"
        self.fail(["a column type"])

    def column(self) -> tuple[Column, Token]:
        token = self.peek()
        name = self.name("a column name")
        type_ = self.type()
        comment = self.string("a comment (a string literal)") if self.accept("COMMENT") else None
        return Column(name, type_, comment), token

    def column_list(self, after: str, seen: set[str], *, partition: bool = False) -> tuple[Column, ...]:
        """`(col type [COMMENT 'c'], ...)`; `seen` holds the names already used, by this list or the data columns."""
        self.expect_symbol("(", after=after)
        columns = []
        while True:
            column, token = self.column()
            if column.name in seen:
                clash = partition and all(earlier.name != column.name for earlier in columns)
                reason = ": a partition column cannot have the name of a data column" if clash else ""
                raise self.error(f"duplicate column name '{column.name}'{reason}", token)
            if partition and column.type.startswith(_COMPLEX_PREFIXES):
                raise self.error(f"partition column '{column.name}' has type {column.type}; partition columns must "
                                 "have a primitive type", token)
            seen.add(column.name)
            columns.append(column)
            if not self.accept_symbol(","):
                break
        self.close_list()
        return tuple(columns)

    def name_list(self, what: str, after: str) -> tuple[tuple[str, Token], ...]:
        """`(name, ...)` with unique names, each with its token."""
        self.expect_symbol("(", after=after)
        names: dict[str, Token] = {}
        while True:
            token = self.peek()
            name = self.name(what)
            if name in names:
                raise self.error(f"column '{name}' is given twice", token)
            names[name] = token
            if not self.accept_symbol(","):
                break
        self.close_list()
        return tuple(names.items())

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
            return EngineStatement(word, self.text)
        self.fail(["a statement (" + ", ".join(_STATEMENT_WORDS) + ")"])

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
        columns = self.column_list("the table name", seen)
        found: dict[str, object] = {}
        bucket_names: list[tuple[str, Token]] = []

        def partitioned_by() -> None:
            self.expect("BY")
            found["partition_columns"] = self.column_list("PARTITIONED BY", seen, partition=True)

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
        """After COMPACT: Hive's alterStatementSuffixCompact without the rebalance-only clauses."""
        type_token = self.peek()
        if type_token.kind is not TokenKind.STRING or type_token.value.lower() not in _COMPACTION_TYPES:
            self.fail(["compaction type 'major' or 'minor'"])
        self.advance()
        found: dict[str, object] = {}

        def overwrite_properties() -> None:
            self.expect("OVERWRITE")
            self.expect("TBLPROPERTIES")
            found["properties"] = self.properties("WITH OVERWRITE TBLPROPERTIES")

        self.clauses([
            ("AND WAIT", lambda: (self.expect("WAIT"), found.update(wait=True))),
            ("POOL", lambda: found.update(pool=self.string("a pool name (a string literal) after POOL"))),
            ("WITH OVERWRITE TBLPROPERTIES", overwrite_properties),
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
            self.index = len(self.tokens)
            return EngineStatement("INSERT OVERWRITE", self.text)
        if self.needs_engine():
            self.index = len(self.tokens)
            return EngineStatement("INSERT INTO", self.text)
        self.accept("TABLE")
        table = self.table_name()
        partition = self.optional_partition()
        columns: tuple[tuple[str, Token], ...] = ()
        if self.peek().is_symbol("("):
            columns = self.name_list("a column name", "the table name")
        if not self.accept("VALUES"):
            optional = [] if columns else ["'('"] if partition else ["PARTITION", "'('"]
            self.fail([*optional, "VALUES", "a query"])
        rows = [self.row("VALUES")]
        while self.accept_symbol(","):
            rows.append(self.row("','"))
        self.check_row_sizes(rows, len(columns))
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

    def check_row_sizes(self, rows: list[tuple[tuple[Literal, ...], Token]], column_count: int) -> None:
        """Every row has as many values as the column list (when given) and as the first row."""
        expected = column_count or len(rows[0][0])
        for number, (values, token) in enumerate(rows, start=1):
            if len(values) != expected:
                against = f"the column list names {column_count}" if column_count else f"row 1 has {expected}"
                raise self.error(f"row {number} has {len(values)} values but {against}", token)

    def row(self, after: str) -> tuple[tuple[Literal, ...], Token]:
        token = self.peek()
        self.expect_symbol("(", after=after)
        values = [self.literal()]
        while self.accept_symbol(","):
            values.append(self.literal())
        self.close_list()
        return tuple(values), token

    def literal(self) -> Literal:
        """A literal of INSERT ... VALUES, typed as ast.Literal describes."""
        token = self.peek()
        if token.kind is TokenKind.STRING:
            self.advance()
            return token.value
        if token.is_symbol("-", "+") and self.peek(1).kind is TokenKind.NUMBER:
            self.advance()
            number = self.number()
            return -number if token.value == "-" else number
        if token.kind is TokenKind.NUMBER:
            return self.number()
        if token.is_word("NULL"):
            self.advance()
            return None
        if token.is_word("TRUE", "FALSE"):
            self.advance()
            return token.is_word("TRUE")
        if token.is_word("DATE", "TIMESTAMP") and self.peek(1).kind is TokenKind.STRING:
            self.advance()
            string = self.advance()
            return self.date(string) if token.is_word("DATE") else self.timestamp(string)
        if token.is_word("CAST"):
            self.advance()
            self.expect_symbol("(", after="CAST")
            value = self.literal()
            self.expect("AS")
            type_ = self.type()
            self.expect_symbol(")", after=f"CAST(... AS {type_}")
            return Cast(value, type_)
        if token.is_word("DATE", "TIMESTAMP"):
            self.advance()
            self.fail([f"a string literal after {token.value.upper()}"])
        hint = ""
        if token.kind in (TokenKind.WORD, TokenKind.QUOTED_NAME):
            hint = " (VALUES takes literals only; use INSERT INTO ... SELECT for expressions)"
        self.fail(["a literal value"], hint=hint)

    def number(self) -> int | decimal.Decimal:
        """A number literal: int for plain digits (or an L, S, Y suffix), decimal.Decimal for the rest."""
        token = self.advance()
        text = token.text.upper()
        if text.endswith("BD"):
            return decimal.Decimal(text[:-2])
        if text.endswith(("L", "S", "Y")):
            return int(text[:-1])
        if text.endswith("D"):
            return decimal.Decimal(text[:-1])
        return int(text) if _INTEGER.fullmatch(text) else decimal.Decimal(text)

    def date(self, token: Token) -> datetime.date:
        """DATE 'yyyy-mm-dd'."""
        match = _DATE.fullmatch(token.value.strip())
        if not match:
            self.fail(["a date as 'yyyy-mm-dd' after DATE"], token)
        try:
            return datetime.date(*(int(part) for part in match.groups()))
        except ValueError as exc:
            raise self.error(f"invalid DATE literal {token.text}: {exc}", token) from None

    def timestamp(self, token: Token) -> datetime.datetime:
        """TIMESTAMP 'yyyy-mm-dd[ hh:mm[:ss[.fffffffff]]]' (a `T` may separate date and time), to the microsecond."""
        match = _TIMESTAMP.fullmatch(token.value.strip())
        if not match:
            self.fail(["a timestamp as 'yyyy-mm-dd hh:mm:ss[.fffffffff]' after TIMESTAMP"], token)
        year, month, day, hour, minute, second, fraction = match.groups()
        fraction = fraction or ""
        if fraction[6:].strip("0"):
            raise self.error(f"TIMESTAMP literal {token.text} is more precise than a microsecond, which is the "
                             "finest this tool keeps", token)
        try:
            return datetime.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                                     int(second or 0), int(fraction[:6].ljust(6, "0")))
        except ValueError as exc:
            raise self.error(f"invalid TIMESTAMP literal {token.text}: {exc}", token) from None
