"""The literals of INSERT ... VALUES: numbers with Hive's suffixes, strings, NULL, booleans, DATE '...',
TIMESTAMP '...' and CAST(literal AS type), typed as `acid_cli.hiveql.ast.Literal` describes."""

from __future__ import annotations

import datetime
import decimal
import re

from acid_cli.hiveql.ast import Cast, Literal
from acid_cli.hiveql.cursor import INTEGER, TokenCursor
from acid_cli.hiveql.tokens import Token, TokenKind
from acid_cli.hiveql.types import parse_type

_DATE = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})")
_TIMESTAMP = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
                        r"(?:[ T]([0-9]{1,2}):([0-9]{1,2})(?::([0-9]{1,2})(?:\.([0-9]{1,9}))?)?)?")


def parse_row(cursor: TokenCursor, after: str) -> tuple[tuple[Literal, ...], Token]:
    """`(literal, ...)` of VALUES, with the token of its `(` (for errors about the whole row)."""
    token = cursor.peek()
    cursor.expect_symbol("(", after=after)
    values = [parse_literal(cursor)]
    while cursor.accept_symbol(","):
        values.append(parse_literal(cursor))
    cursor.close_list()
    return tuple(values), token


def check_row_sizes(cursor: TokenCursor, rows: list[tuple[tuple[Literal, ...], Token]], column_count: int) -> None:
    """Every row has as many values as the column list (when given) and as the first row.

    Raises:
        HiveQLSyntaxError: at the first row of the wrong size.
    """
    expected = column_count or len(rows[0][0])
    for number, (values, token) in enumerate(rows, start=1):
        if len(values) != expected:
            against = f"the column list names {column_count}" if column_count else f"row 1 has {expected}"
            raise cursor.error(f"row {number} has {len(values)} values but {against}", token)


def parse_literal(cursor: TokenCursor) -> Literal:
    """A literal of INSERT ... VALUES, typed as ast.Literal describes.

    Raises:
        HiveQLSyntaxError: not a literal (an expression or a name), or an invalid DATE / TIMESTAMP.
    """
    token = cursor.peek()
    if token.kind is TokenKind.STRING:
        cursor.advance()
        return token.value
    if token.is_symbol("-", "+") and cursor.peek(1).kind is TokenKind.NUMBER:
        cursor.advance()
        number = _number(cursor)
        return -number if token.value == "-" else number
    if token.kind is TokenKind.NUMBER:
        return _number(cursor)
    if token.is_word("NULL"):
        cursor.advance()
        return None
    if token.is_word("TRUE", "FALSE"):
        cursor.advance()
        return token.is_word("TRUE")
    if token.is_word("DATE", "TIMESTAMP") and cursor.peek(1).kind is TokenKind.STRING:
        cursor.advance()
        string = cursor.advance()
        return _date(cursor, string) if token.is_word("DATE") else _timestamp(cursor, string)
    if token.is_word("CAST"):
        cursor.advance()
        cursor.expect_symbol("(", after="CAST")
        value = parse_literal(cursor)
        cursor.expect("AS")
        type_ = parse_type(cursor)
        cursor.expect_symbol(")", after=f"CAST(... AS {type_}")
        return Cast(value, type_)
    if token.is_word("DATE", "TIMESTAMP"):
        cursor.advance()
        cursor.fail([f"a string literal after {token.value.upper()}"])
    hint = ""
    if token.kind in (TokenKind.WORD, TokenKind.QUOTED_NAME):
        hint = " (VALUES takes literals only; use INSERT INTO ... SELECT for expressions)"
    cursor.fail(["a literal value"], hint=hint)


def _number(cursor: TokenCursor) -> int | decimal.Decimal:
    """A number literal: int for plain digits (or an L, S, Y suffix), decimal.Decimal for the rest."""
    token = cursor.advance()
    text = token.text.upper()
    if text.endswith("BD"):
        return decimal.Decimal(text[:-2])
    if text.endswith(("L", "S", "Y")):
        return int(text[:-1])
    if text.endswith("D"):
        return decimal.Decimal(text[:-1])
    return int(text) if INTEGER.fullmatch(text) else decimal.Decimal(text)


def _date(cursor: TokenCursor, token: Token) -> datetime.date:
    """DATE 'yyyy-mm-dd'."""
    match = _DATE.fullmatch(token.value.strip())
    if not match:
        cursor.fail(["a date as 'yyyy-mm-dd' after DATE"], token)
    try:
        return datetime.date(*(int(part) for part in match.groups()))
    except ValueError as exc:
        raise cursor.error(f"invalid DATE literal {token.text}: {exc}", token) from None


def _timestamp(cursor: TokenCursor, token: Token) -> datetime.datetime:
    """TIMESTAMP 'yyyy-mm-dd[ hh:mm[:ss[.fffffffff]]]' (a `T` may separate date and time), to the microsecond."""
    match = _TIMESTAMP.fullmatch(token.value.strip())
    if not match:
        cursor.fail(["a timestamp as 'yyyy-mm-dd hh:mm:ss[.fffffffff]' after TIMESTAMP"], token)
    year, month, day, hour, minute, second, fraction = match.groups()
    fraction = fraction or ""
    if fraction[6:].strip("0"):
        raise cursor.error(f"TIMESTAMP literal {token.text} is more precise than a microsecond, which is the "
                           "finest this tool keeps", token)
    try:
        return datetime.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                                 int(second or 0), int(fraction[:6].ljust(6, "0")))
    except ValueError as exc:
        raise cursor.error(f"invalid TIMESTAMP literal {token.text}: {exc}", token) from None
