"""Partition pruning: which partitions of a table a statement can read rows from, told from partition values alone.

An engine's front end reads what it can of a WHERE clause into a `Predicate`: comparisons of a column with literals
(`=`, `<`, `<=`, `>`, `>=`, `IN`), null tests (`IS NULL`, `IS NOT NULL`: no literal), `AllOf` (AND) and `AnyOf`
(OR). What it cannot read (a function, NOT, a subquery, a comparison of two columns) it leaves out of an AND, and an
OR with such a branch is no predicate at all (None: every partition). Hive's compiler prunes the same way
(PartitionPruner, on the conjuncts over partition columns), before anything is listed.

`PartitionPruner.matches` answers False only when no row of the partition can make the predicate true: a partition
column's value is compared as the column's type (strings as strings, integers as numbers, dates as dates), Hive's
default partition holds NULL (no comparison with it is true), and anything it is not sure of (another type, a value
that does not parse, a literal of another kind, a column that is not a partition column) counts as a match.

Cost: no I/O; time linear in the predicate's size per partition.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from acid_core.errors import UsageError
from acid_core.format.layout import DEFAULT_PARTITION_NAME
from acid_core.format.types import INTEGER_KINDS, parse_type

NULL_TESTS = ("is null", "is not null")
OPERATORS = ("=", "<", "<=", ">", ">=", "in", *NULL_TESTS)
LITERAL_KINDS = ("string", "number", "date")
_INTEGER_RE = re.compile(r"-?[0-9]+")  # what pyarrow casts to an integer (no "+", no spaces)
_NUMBER_RE = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_INTEGER_RANGES = {"tinyint": 2**7, "smallint": 2**15, "int": 2**31, "bigint": 2**63}
_FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_UNSURE = object()


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant of a comparison: `kind` "string" (its value), "number" (decimal digits, an optional sign and
    fraction) or "date" (`YYYY-MM-DD`, a DATE literal)."""

    kind: str
    text: str

    def __post_init__(self) -> None:
        if self.kind not in LITERAL_KINDS:
            raise UsageError(f"literal kind {self.kind!r} is not one of {LITERAL_KINDS}")
        if self.kind == "number" and not _NUMBER_RE.fullmatch(self.text):
            raise UsageError(f"number literal {self.text!r} is not [+-]digits[.digits]")


@dataclass(frozen=True, slots=True)
class Comparison:
    """`column operator value` (or `column IN (values)`, or `column IS [NOT] NULL` with no values); `column` is
    lower case."""

    column: str
    operator: str
    values: tuple[Literal, ...]

    def __post_init__(self) -> None:
        if self.operator not in OPERATORS:
            raise UsageError(f"comparison operator {self.operator!r} is not one of {OPERATORS}")
        if self.operator in NULL_TESTS:
            if self.values:
                raise UsageError(f"{self.column} {self.operator}: takes no values, {len(self.values)} given")
        elif not self.values or (self.operator != "in" and len(self.values) != 1):
            raise UsageError(f"{self.column} {self.operator}: {len(self.values)} values given")

    def flipped(self) -> Comparison:
        """The same comparison written the other way round (`5 < x` read as `x > 5`)."""
        return Comparison(self.column, _FLIPPED.get(self.operator, self.operator), self.values)


@dataclass(frozen=True, slots=True)
class AllOf:
    """Every part holds (AND)."""

    parts: tuple[Predicate, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    """Some part holds (OR)."""

    parts: tuple[Predicate, ...]


Predicate = Comparison | AllOf | AnyOf
"""What is known of a condition; None stands for a condition nothing is known of (it may hold anywhere)."""


def all_of(parts: Iterable[Predicate | None]) -> Predicate | None:
    """AND of the parts: an unknown part is left out (the rest still has to hold); None when nothing is left."""
    known: list[Predicate] = []
    for part in parts:
        if isinstance(part, AllOf):
            known.extend(part.parts)
        elif part is not None:
            known.append(part)
    if not known:
        return None
    return known[0] if len(known) == 1 else AllOf(tuple(known))


def any_of(parts: Iterable[Predicate | None]) -> Predicate | None:
    """OR of the parts: None (unknown) as soon as one part is unknown, since that part may hold anywhere."""
    known: list[Predicate] = []
    for part in parts:
        if part is None:
            return None
        known.extend(part.parts if isinstance(part, AnyOf) else [part])
    if not known:
        return None
    return known[0] if len(known) == 1 else AnyOf(tuple(known))


def _key_value(kind: str, text: str):
    """A partition value as its column's type reads it (pyarrow's cast of the partition name's text, which is what
    readers put in the partition column); `_UNSURE` for a type or text this module does not compare."""
    if kind in ("string", "varchar"):
        return text
    if kind in INTEGER_KINDS:
        if not _INTEGER_RE.fullmatch(text):
            return _UNSURE
        value = int(text)
        bound = _INTEGER_RANGES[kind]
        return value if -bound <= value < bound else _UNSURE
    if kind == "date" and _DATE_RE.fullmatch(text):
        try:
            return datetime.date.fromisoformat(text)
        except ValueError:
            return _UNSURE
    return _UNSURE


def _literal_value(kind: str, literal: Literal):
    """A literal as compared with a column of `kind` (Spark's and Hive's coercions: a string literal compared with
    a date column is read as a date); `_UNSURE` for a pairing whose coercion this module does not reproduce."""
    if kind in ("string", "varchar"):
        return literal.text if literal.kind == "string" else _UNSURE
    if kind in INTEGER_KINDS:
        return Decimal(literal.text) if literal.kind == "number" else _UNSURE
    if kind == "date" and literal.kind in ("date", "string") and _DATE_RE.fullmatch(literal.text):
        try:
            return datetime.date.fromisoformat(literal.text)
        except ValueError:
            return _UNSURE
    return _UNSURE


def _holds(operator: str, value, literals: list) -> bool:
    if operator == "in":
        return value in literals
    literal = literals[0]
    if operator == "=":
        return value == literal
    if operator == "<":
        return value < literal
    if operator == "<=":
        return value <= literal
    if operator == ">":
        return value > literal
    return value >= literal


class PartitionPruner:
    """Decides, partition by partition, whether a predicate can hold on its rows (see the module docstring).

    Args:
        predicate: what is known of the statement's condition on this table; None keeps every partition.
        key_types: the table's partition columns and their Hive types (`{"day": "date"}`).
    """

    def __init__(self, predicate: Predicate | None, key_types: Mapping[str, str]) -> None:
        self.predicate = predicate
        self.kinds = {key.lower(): parse_type(type_name).kind for key, type_name in key_types.items()}

    def matches(self, spec: Mapping[str, str | None]) -> bool:
        """False only if no row of the partition `spec` (its key -> value text, as in the partition's name) can
        satisfy the predicate."""
        return self.predicate is None or self._may_hold(self.predicate, {k.lower(): v for k, v in spec.items()})

    def _may_hold(self, predicate: Predicate, spec: Mapping[str, str | None]) -> bool:
        if isinstance(predicate, AllOf):
            return all(self._may_hold(part, spec) for part in predicate.parts)
        if isinstance(predicate, AnyOf):
            return any(self._may_hold(part, spec) for part in predicate.parts)
        kind = self.kinds.get(predicate.column)
        if kind is None or predicate.column not in spec:
            return True  # not a partition column: any partition may hold rows that satisfy it
        text = spec[predicate.column]
        null = text is None or text == DEFAULT_PARTITION_NAME  # the column is NULL in the whole partition
        if predicate.operator in NULL_TESTS:
            return null == (predicate.operator == "is null")
        if text is None or null:
            return False  # no comparison with NULL is true
        value = _key_value(kind, text)
        literals = [_literal_value(kind, literal) for literal in predicate.values]
        if value is _UNSURE or any(literal is _UNSURE for literal in literals):
            return True
        return _holds(predicate.operator, value, literals)


__all__ = ["NULL_TESTS", "AllOf", "AnyOf", "Comparison", "Literal", "PartitionPruner", "Predicate", "all_of",
           "any_of"]
