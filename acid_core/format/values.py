"""Checks that a Python value fits a Hive column type before it reaches the ORC writer.

pyorc wraps integers that overflow a narrower column (2**40 into `int` is stored as 0) and lets decimal errors escape
as `decimal.InvalidOperation`; these checks turn both into an InvalidRowError naming the column and the value.
Complex types (array, map, struct, uniontype) are left to pyorc, which refuses mismatched shapes itself.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from acid_core.errors import InvalidRowError
from acid_core.format.types import TEXT_KINDS, parse_type

Check = Callable[[Any], str | None]

_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
_INSTANCES = {"boolean": (bool,), "binary": (bytes, bytearray), "date": (datetime.date,),
              "timestamp": (datetime.datetime,)}


def _integer(bits: int, type_name: str) -> Check:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(value):
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{value!r} is not an integer for {type_name}"
        if not low <= value <= high:
            return f"{value} is outside the {type_name} range {low}..{high}"
        return None

    return check


def _decimal(precision: int, scale: int, type_name: str) -> Check:
    quantum = decimal.Decimal(1).scaleb(-scale)
    limit = decimal.Decimal(10) ** (precision - scale)

    def check(value):
        if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
            return f"{value!r} is not a decimal.Decimal or int for {type_name}"
        try:
            rounded = decimal.Decimal(value).quantize(quantum, rounding=decimal.ROUND_HALF_UP)
        except decimal.InvalidOperation:
            return f"{value} does not fit {type_name}"
        if not rounded.is_finite() or abs(rounded) >= limit:
            return f"{value} has more than {precision - scale} integer digits for {type_name}"
        return None

    return check


def _instance(kinds: tuple[type, ...], type_name: str, *, no_bool: bool = False) -> Check:
    names = " or ".join(k.__name__ for k in kinds)

    def check(value):
        if not isinstance(value, kinds) or (no_bool and isinstance(value, bool)):
            return f"{value!r} is not {names} for {type_name}"
        return None

    return check


def decimal_rounder(type_name: str) -> Callable[[Any], Any] | None:
    """For a decimal column, the function rounding a value to its scale HALF_UP as Hive stores it; else None."""
    hive_type = parse_type(type_name)
    if hive_type.kind != "decimal":
        return None
    assert hive_type.scale is not None, "a parsed decimal type has its scale"
    quantum = decimal.Decimal(1).scaleb(-hive_type.scale)
    return lambda value: decimal.Decimal(value).quantize(quantum, rounding=decimal.ROUND_HALF_UP)


def value_check(type_name: str) -> Check | None:
    """The check for one column type, or None when pyorc's own conversion is trusted (complex types).

    Raises:
        InvalidTypeError: `type_name` is not a Hive type.
    """
    hive_type = parse_type(type_name)
    kind, name = hive_type.kind, str(hive_type)
    if kind in _INT_BITS:
        return _integer(_INT_BITS[kind], name)
    if kind == "decimal":
        assert hive_type.precision is not None and hive_type.scale is not None, "a parsed decimal has both"
        return _decimal(hive_type.precision, hive_type.scale, name)
    if kind in ("float", "double"):
        return _instance((int, float), name, no_bool=True)
    if kind in TEXT_KINDS:
        return _instance((str,), name)
    if kind in _INSTANCES:
        return _instance(_INSTANCES[kind], name)
    return None


class RowChecker:
    """Turns a row (a sequence in column order, or a mapping by column name) into a checked tuple."""

    def __init__(self, columns: Sequence) -> None:
        self.columns = tuple(columns)
        self._names = [c.name for c in self.columns]
        self._checks = [(i, c.name, check) for i, c in enumerate(self.columns) if (check := value_check(c.type))]
        self._rounders = [(i, rounder) for i, c in enumerate(self.columns) if (rounder := decimal_rounder(c.type))]

    def normalise(self, row: Sequence[Any] | Mapping[str, Any], index: int) -> tuple:
        """The row as a tuple in column order.

        Raises:
            InvalidRowError: wrong number of values, unknown column names, or a value that does not fit its column;
                the message names the row's index and the column.
        """
        if isinstance(row, Mapping):
            unknown = set(row) - set(self._names)
            if unknown:
                raise InvalidRowError(f"row {index}: unknown columns {sorted(unknown)}; table columns are {self._names}")
            values = tuple(row.get(name) for name in self._names)
        else:
            values = tuple(row)
            if len(values) != len(self.columns):
                raise InvalidRowError(f"row {index} has {len(values)} values, the table has {len(self.columns)} "
                                      f"columns ({self._names})")
        for position, name, check in self._checks:
            value = values[position]
            if value is not None and (problem := check(value)) is not None:
                raise InvalidRowError(f"row {index}, column {name!r}: {problem}")
        if self._rounders and any(values[i] is not None for i, _ in self._rounders):
            rounded = list(values)
            for position, rounder in self._rounders:
                if rounded[position] is not None:
                    rounded[position] = rounder(rounded[position])
            values = tuple(rounded)
        return values
