"""Splitting HiveQL text into tokens, following Hive's lexer (parser/.../HiveLexerParent.g, HiveLexer.g).

* Keywords are case-insensitive words; a word is a letter, digit or `_` followed by letters, digits and `_`.
* Names may be backquoted: `` `a b` ``, with ``` `` ``` standing for one backquote.
* String literals use single or double quotes with backslash escapes, unescaped as Hive's
  BaseSemanticAnalyzer.unescapeSQLString does; literals written back to back (`'a''b'`) are one literal, as in
  Hive's StringLiteral rule (so `'it''s'` is "its", not "it's").
* Numbers are digits with an optional fraction and exponent and an optional type suffix (`L`, `S`, `Y`, `BD`, `D`);
  a digit run followed by letters is a word (`2024_sales`), as in Hive.
* `--` comments run to the end of the line, `/* ... */` comments may nest; both are skipped.
* Any other character is a one-character symbol, so that statements handed to a query engine (SELECT with its
  operators) can be split on `;` without being understood.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass

from acid_core.errors import UsageError


class TokenKind(enum.Enum):
    """What a token is."""

    WORD = "word"
    QUOTED_NAME = "quoted name"
    STRING = "string"
    NUMBER = "number"
    SYMBOL = "symbol"
    END = "end of input"


@dataclass(frozen=True, slots=True)
class Token:
    """One token: `text` as written, `value` its meaning (name without backquotes, unescaped string, symbol).

    `start` and `end` are offsets into the text given to `tokenize`.
    """

    kind: TokenKind
    text: str
    value: str
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        """An unquoted word equal, ignoring case, to one of `words` (given uppercase)."""
        return self.kind is TokenKind.WORD and self.value.upper() in words

    def is_symbol(self, *symbols: str) -> bool:
        return self.kind is TokenKind.SYMBOL and self.value in symbols


class TokenizeError(UsageError):
    """The text cannot be split into tokens (an unterminated string, comment or quoted name)."""

    def __init__(self, detail: str, *, offset: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offset = offset


_WORD = re.compile(r"[A-Za-z0-9_]+")
_NUMBER = re.compile(r"[0-9]+[lLsSyY]|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?(?:[bB][dD]|[dD])?")
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_ESCAPES = {"0": "\0", "'": "'", '"': '"', "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "\\": "\\",
            "%": "\\%", "_": "\\_"}


def unescape_string(body: str) -> str:
    """The value of a string literal's body (between its quotes), as Hive's unescapeSQLString computes it.

    `\\uXXXX` is a UTF-16 code unit, `\\ooo` (first digit 0 or 1) an octal byte, `\\%` and `\\_` stay escaped
    (for LIKE patterns, as in MySQL), any other escaped character stands for itself.
    """
    out = []
    i, n = 0, len(body)
    while i < n:
        char = body[i]
        if char != "\\" or i + 1 >= n:
            out.append(char)
            i += 1
            continue
        following = body[i + 1]
        if following == "u" and _HEX4.fullmatch(body, i + 2, i + 6):
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif (i + 3 < n and body[i + 1] in "01" and body[i + 2] in "01234567" and body[i + 3] in "01234567"):
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(_ESCAPES.get(following, following))
            i += 2
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """Offset just past the literal opening at `start` (a quote), or raise for an unterminated one."""
    quote = text[start]
    i, n = start + 1, len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            i += 2
        elif char == quote:
            return i + 1
        else:
            i += 1
    raise TokenizeError(f"unterminated string literal: expected a closing {quote}, found end of input", offset=start)


def tokenize(text: str) -> Iterator[Token]:
    """The tokens of `text`, comments and whitespace skipped, ending with one END token at `len(text)`.

    Raises:
        TokenizeError: an unterminated string literal, block comment or backquoted name (at its start).
    """
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char.isspace():
            i += 1
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline + 1
        elif text.startswith("/*", i):
            i = _comment_end(text, i)
        elif char in "'\"":
            start, pieces = i, []
            while i < n and text[i] in "'\"":
                end = _string_end(text, i)
                pieces.append(unescape_string(text[i + 1:end - 1]))
                i = end
            yield Token(TokenKind.STRING, text[start:i], "".join(pieces), start, i)
        elif char == "`":
            start, i = i, i + 1
            name = []
            while True:
                close = text.find("`", i)
                if close < 0:
                    raise TokenizeError("unterminated quoted name: expected a closing `, found end of input",
                                        offset=start)
                name.append(text[i:close])
                if text.startswith("``", close):
                    name.append("`")
                    i = close + 2
                else:
                    i = close + 1
                    break
            yield Token(TokenKind.QUOTED_NAME, text[start:i], "".join(name), start, i)
        elif char.isascii() and (char.isalnum() or char == "_"):
            start = i
            number = _NUMBER.match(text, i) if char.isdigit() else None
            word_end = _WORD.match(text, i).end()
            if number and number.end() >= word_end:
                i = number.end()
                yield Token(TokenKind.NUMBER, text[start:i], text[start:i], start, i)
            else:
                i = word_end
                yield Token(TokenKind.WORD, text[start:i], text[start:i], start, i)
        elif text.startswith("==", i):
            yield Token(TokenKind.SYMBOL, "==", "=", i, i + 2)
            i += 2
        else:
            yield Token(TokenKind.SYMBOL, char, char, i, i + 1)
            i += 1
    yield Token(TokenKind.END, "", "", n, n)


def _comment_end(text: str, start: int) -> int:
    """Offset just past the (possibly nested) block comment opening at `start`."""
    depth, i, n = 0, start, len(text)
    while i < n:
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise TokenizeError("unterminated comment: expected */, found end of input", offset=start)
