"""Column types and column definitions in HiveQL, normalized as Hive's TypeInfo.getTypeName prints them.

`parse_type` reads `int`, `decimal(10,2)`, `varchar(20)`, `array<...>`, `map<...>`, `struct<...>`, `uniontype<...>`
with Hive's limits (HiveDecimal, HiveVarchar, HiveChar); `parse_column_list` reads `(name type [COMMENT 'c'], ...)`.
This is HiveQL's grammar over tokens, so that errors point at the statement; what it produces is the canonical type
name of acid_core's type model (`acid_core.format.types`), whose limits and field-name quoting it shares.
"""

from __future__ import annotations

from acid_cli.hiveql.ast import Column
from acid_cli.hiveql.cursor import TokenCursor
from acid_cli.hiveql.tokens import Token, TokenKind
from acid_core.format.types import (
    DEFAULT_DECIMAL,
    MAX_CHAR_LENGTH,
    MAX_DECIMAL_PRECISION,
    MAX_VARCHAR_LENGTH,
    hive_field_name,
)
from acid_core.format.types import parse_type as parse_type_name

SIMPLE_TYPES = {"TINYINT": "tinyint", "SMALLINT": "smallint", "INT": "int", "INTEGER": "int", "BIGINT": "bigint",
                "FLOAT": "float", "REAL": "float", "DOUBLE": "double", "STRING": "string", "BOOLEAN": "boolean",
                "BINARY": "binary", "DATE": "date", "TIMESTAMP": "timestamp"}
DECIMAL_WORDS = ("DECIMAL", "DEC", "NUMERIC")


def parse_type(cursor: TokenCursor) -> str:
    """A Hive column type as a normalized lowercase string (Hive's TypeInfo.getTypeName: no spaces).

    Raises:
        HiveQLSyntaxError: not a type, or parameters outside Hive's limits.
    """
    token = cursor.peek()
    word = token.value.upper() if token.kind is TokenKind.WORD else ""
    if word in SIMPLE_TYPES:
        cursor.advance()
        if word == "DOUBLE":
            cursor.accept("PRECISION")
        if cursor.peek().is_symbol("("):
            raise cursor.error(f"type {SIMPLE_TYPES[word]} does not take parameters, found '('")
        return SIMPLE_TYPES[word]
    if word in DECIMAL_WORDS:
        cursor.advance()
        return _decimal(cursor)
    if word in ("VARCHAR", "CHAR"):
        cursor.advance()
        return _character(cursor, word)
    if word == "ARRAY":
        cursor.advance()
        cursor.expect_symbol("<", after="array")
        element = parse_type(cursor)
        cursor.expect_symbol(">", after=f"array<{element}")
        return f"array<{element}>"
    if word == "MAP":
        cursor.advance()
        return _map(cursor)
    if word == "STRUCT":
        cursor.advance()
        return _struct(cursor)
    if word == "UNIONTYPE":
        cursor.advance()
        cursor.expect_symbol("<", after="uniontype")
        members = [parse_type(cursor)]
        while cursor.accept_symbol(","):
            members.append(parse_type(cursor))
        if not cursor.accept_symbol(">"):
            cursor.fail(["'>'", "','"])
        return "uniontype<" + ",".join(members) + ">"
    cursor.fail(["a column type"])


def _decimal(cursor: TokenCursor) -> str:
    """After DECIMAL: `[(precision[, scale])]`, defaulting as Hive does to decimal(10,0)."""
    precision, scale = DEFAULT_DECIMAL
    if cursor.accept_symbol("("):
        precision_token = cursor.peek()
        precision, scale = cursor.integer("a decimal precision"), 0
        if not 1 <= precision <= MAX_DECIMAL_PRECISION:
            raise cursor.error(f"decimal precision {precision} is outside the allowed range "
                               f"1..{MAX_DECIMAL_PRECISION}", precision_token)
        if cursor.accept_symbol(","):
            scale_token = cursor.peek()
            scale = cursor.integer("a decimal scale")
            if scale > precision:
                raise cursor.error(f"decimal scale {scale} is larger than the precision {precision}", scale_token)
        cursor.expect_symbol(")", after="the decimal precision and scale")
    return f"decimal({precision},{scale})"


def _character(cursor: TokenCursor, word: str) -> str:
    """After VARCHAR or CHAR: the required `(length)`."""
    lowercase, limit = word.lower(), MAX_VARCHAR_LENGTH if word == "VARCHAR" else MAX_CHAR_LENGTH
    if not cursor.accept_symbol("("):
        cursor.fail([f"'(' after {lowercase} ({lowercase} needs a length, as in {lowercase}(10))"])
    length_token = cursor.peek()
    length = cursor.integer(f"a {lowercase} length")
    if not 1 <= length <= limit:
        raise cursor.error(f"{lowercase} length {length} is outside the allowed range 1..{limit}", length_token)
    cursor.expect_symbol(")", after=f"the {lowercase} length")
    return f"{lowercase}({length})"


def _map(cursor: TokenCursor) -> str:
    """After MAP: `<primitive key type, value type>`."""
    cursor.expect_symbol("<", after="map")
    key_token = cursor.peek()
    key = parse_type(cursor)
    if parse_type_name(key).is_complex:
        raise cursor.error(f"map key type {key} is not a primitive type", key_token)
    cursor.expect_symbol(",", after=f"map<{key}")
    value = parse_type(cursor)
    cursor.expect_symbol(">", after=f"map<{key},{value}")
    return f"map<{key},{value}>"


def _struct(cursor: TokenCursor) -> str:
    """After STRUCT: `<name:type, ...>` with unique field names."""
    cursor.expect_symbol("<", after="struct")
    fields: dict[str, str] = {}
    while True:
        field_token = cursor.peek()
        field = cursor.name("a struct field name")
        if field in fields:
            raise cursor.error(f"struct field '{field}' is given twice", field_token)
        cursor.expect_symbol(":", after=f"struct field '{field}'")
        fields[field] = parse_type(cursor)
        if not cursor.accept_symbol(","):
            break
    if not cursor.accept_symbol(">"):
        cursor.fail(["'>'", "','"])
    return "struct<" + ",".join(f"{hive_field_name(name)}:{type_}" for name, type_ in fields.items()) + ">"


def parse_column(cursor: TokenCursor) -> tuple[Column, Token]:
    """`name type [COMMENT 'c']`, with the token the definition starts at."""
    token = cursor.peek()
    name = cursor.name("a column name")
    type_ = parse_type(cursor)
    comment = cursor.string("a comment (a string literal)") if cursor.accept("COMMENT") else None
    return Column(name, type_, comment), token


def parse_column_list(cursor: TokenCursor, after: str, seen: set[str], *,
                      partition: bool = False) -> tuple[Column, ...]:
    """`(col type [COMMENT 'c'], ...)`; `seen` holds the names already used, by this list or the data columns.

    Raises:
        HiveQLSyntaxError: a duplicate name, or (with `partition`) a partition column of a complex type.
    """
    cursor.expect_symbol("(", after=after)
    columns = []
    while True:
        column, token = parse_column(cursor)
        if column.name in seen:
            clash = partition and all(earlier.name != column.name for earlier in columns)
            reason = ": a partition column cannot have the name of a data column" if clash else ""
            raise cursor.error(f"duplicate column name '{column.name}'{reason}", token)
        if partition and parse_type_name(column.type).is_complex:
            raise cursor.error(f"partition column '{column.name}' has type {column.type}; partition columns must "
                               "have a primitive type", token)
        seen.add(column.name)
        columns.append(column)
        if not cursor.accept_symbol(","):
            break
    cursor.close_list()
    return tuple(columns)
