"""Reading one statement's tokens: lookahead, keywords, names, strings and the syntax errors the parser raises.

Every part of the parser (statements, types, literals) works on a TokenCursor. Error positions are `line:column` in
the whole script, the line counted from 1 and the column from 0, as in Hive's ParseException ("line 1:21 ...").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NoReturn

from acid_cli.hiveql.ast import PartitionSpec, PartitionValue, Properties, TableName
from acid_cli.hiveql.tokens import Token, TokenKind
from acid_core.errors import UsageError

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

INTEGER = re.compile(r"[0-9]+")


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


def line_column(text: str, offset: int) -> tuple[int, int]:
    """(line from 1, column from 0) of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1)


def describe(token: Token) -> str:
    """A token as error messages name it after "found"."""
    if token.kind is TokenKind.END:
        return "end of input"
    text = token.text if len(token.text) <= 40 else token.text[:37] + "..."
    if token.kind in (TokenKind.WORD, TokenKind.SYMBOL):
        return f"'{text}'"
    return text


def _one_of(options: Sequence[str]) -> str:
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]


class TokenCursor:
    """The tokens of one statement and a position in them; `script` is the whole text, for positions and the
    statement's source text."""

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
        line, column = line_column(self.script, token.start)
        return HiveQLSyntaxError(detail, statement=self.text, line=line, column=column)

    def fail(self, expected: Sequence[str], token: Token | None = None, hint: str = "") -> NoReturn:
        token = token or self.peek()
        raise self.error(f"expected {_one_of(expected)}, found {describe(token)}{hint}", token)

    def expect_end(self, expected: Sequence[str] = ()) -> None:
        if not self.at_end():
            self.fail([*expected, "end of statement"])

    # -- names, strings, numbers ----------------------------------------------------------------------------------

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

    def string(self, what: str) -> str:
        token = self.peek()
        if token.kind is not TokenKind.STRING:
            self.fail([what])
        self.advance()
        return token.value

    def integer(self, what: str) -> int:
        """A non-negative integer written as plain digits."""
        token = self.peek()
        if token.kind is not TokenKind.NUMBER or not INTEGER.fullmatch(token.text):
            self.fail([what])
        self.advance()
        return int(token.text)

    # -- pieces shared by several statements ----------------------------------------------------------------------

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
