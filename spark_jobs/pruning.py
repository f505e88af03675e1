"""Spark SQL conditions read as partition predicates (`acid_core.read.pruning`), with sqlglot's Spark dialect.

`condition_predicate` reads a condition's text (the WHERE of an UPDATE or DELETE, the ON of a MERGE) and
`expression_predicate` a sqlglot expression (the WHERE of a query block, for `acid sql`). They read only what they
are sure Spark reads the same way: `column <op> literal` (either way round) with `=`, `<`, `<=`, `>`, `>=`,
`column IN (literal, ...)`, `column BETWEEN literal AND literal`, AND and OR, over string, number (`[-]digits[.digits]`)
and date literals (`DATE '...'`, `CAST('...' AS DATE)`). Anything else is unknown: left out of an AND, and it makes
an OR unknown; NOT, `<>`, `<=>`, functions, casts of columns and subqueries are not looked into. A condition whose
string literals use backslash escapes or adjacent pieces (`'it''s'`), which sqlglot and Spark may read differently,
gives no predicate at all. Which column is the table's is told by its qualifier (the table's name or alias), or by
no qualifier where the caller says an unqualified name can only be the table's.

Cost: time linear in the condition's length; no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from acid_core.errors import UsageError
from acid_core.read.pruning import Comparison, Literal, Predicate, all_of, any_of

DIALECT = "spark"
_OPERATORS = {exp.EQ: "=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


def plain_strings(text: str, tokens: Sequence[Token]) -> bool:
    """Whether every string literal of `text` is written plainly (no backslash escapes), so that sqlglot's value of
    it is Spark's."""
    return not any(token.token_type is TokenType.STRING and "\\" in text[token.start:token.end + 1] for token in tokens)


def condition_predicate(condition: str, *, qualifiers: Collection[str] = (),
                        unqualified: bool = True) -> Predicate | None:
    """What a Spark SQL boolean expression says of a table's columns; None when nothing is known (or the text does
    not parse: Spark then reports the error, not this).

    Args:
        qualifiers: the names columns of the table are qualified by (its name or alias).
        unqualified: whether an unqualified column name is the table's (false where other tables are in scope).
    """
    try:
        tokens = sqlglot.tokenize(condition, read=DIALECT)
        if not plain_strings(condition, tokens):
            return None
        tree = sqlglot.parse_one(condition, read=DIALECT)
    except (ParseError, TokenError):
        return None
    return expression_predicate(tree, qualifiers=qualifiers, unqualified=unqualified)


def expression_predicate(node: exp.Expr, *, qualifiers: Collection[str] = (),
                         unqualified: bool = True) -> Predicate | None:
    """`condition_predicate` of a parsed expression (its string literals must be plain: see `plain_strings`)."""
    names = frozenset(name.lower() for name in qualifiers)
    return _predicate(node, names, unqualified)


def _predicate(node: exp.Expr, qualifiers: frozenset[str], unqualified: bool) -> Predicate | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return all_of([_predicate(node.this, qualifiers, unqualified),
                       _predicate(node.expression, qualifiers, unqualified)])
    if isinstance(node, exp.Or):
        return any_of([_predicate(node.this, qualifiers, unqualified),
                       _predicate(node.expression, qualifiers, unqualified)])
    operator = _OPERATORS.get(type(node))
    if operator is not None:
        column, literal = _column(node.this, qualifiers, unqualified), _literal(node.expression)
        if column is not None and literal is not None:
            return Comparison(column, operator, (literal,))
        column, literal = _column(node.expression, qualifiers, unqualified), _literal(node.this)
        if column is not None and literal is not None:
            return Comparison(column, operator, (literal,)).flipped()
        return None
    if isinstance(node, exp.In):
        if any(node.args.get(key) for key in ("query", "unnest", "field")):
            return None
        column = _column(node.this, qualifiers, unqualified)
        literals = [_literal(value) for value in node.expressions]
        if column is None or not literals or any(literal is None for literal in literals):
            return None
        return Comparison(column, "in", tuple(literals))
    if isinstance(node, exp.Between) and not node.args.get("symmetric"):
        column = _column(node.this, qualifiers, unqualified)
        low, high = _literal(node.args.get("low")), _literal(node.args.get("high"))
        if column is None or low is None or high is None:
            return None
        return all_of([Comparison(column, ">=", (low,)), Comparison(column, "<=", (high,))])
    return None


def _column(node: exp.Expr | None, qualifiers: frozenset[str], unqualified: bool) -> str | None:
    """The lower-case name of a column of the table, or None for anything else."""
    if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
        return None
    if node.args.get("db") or node.args.get("catalog"):
        return None
    qualifier = node.table.lower()
    if (qualifier and qualifier not in qualifiers) or (not qualifier and not unqualified):
        return None
    return node.name.lower()


def _literal(node: exp.Expr | None) -> Literal | None:
    """A string, number or date literal, or None for anything else (NULL included)."""
    if isinstance(node, exp.Literal):
        text = str(node.this)
        if node.is_string:
            return Literal("string", text)
        return _number(text)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        text = str(node.this.this)
        return None if text.startswith(("-", "+")) else _number("-" + text)
    if (isinstance(node, (exp.Cast, exp.TryCast)) and isinstance(node.this, exp.Literal) and node.this.is_string
            and isinstance(node.to, exp.DataType) and node.to.this == exp.DataType.Type.DATE):
        return Literal("date", str(node.this.this))  # DATE '...' and CAST('...' AS DATE)
    return None


def _number(text: str) -> Literal | None:
    try:
        return Literal("number", text)
    except UsageError:  # an exponent (1e3: a double in Spark) or another spelling
        return None


__all__ = ["condition_predicate", "expression_predicate", "plain_strings"]
