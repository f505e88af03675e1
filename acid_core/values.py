"""Checks that a Python value fits a Hive column type before it reaches the ORC writer.

pyorc wraps integers that overflow a narrower column (2**40 into `int` is stored as 0) and lets decimal errors escape
as `decimal.InvalidOperation`; these checks turn both into an InvalidRowError naming the column and the value.
Complex types (array, map, struct, uniontype) are left to pyorc, which refuses mismatched shapes itself.
"""

from __future__ import annotations

import datetime
import decimal
import re
from typing import Any, Callable

Check = Callable[[Any], str | None]

_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


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


def value_check(type_name: str) -> Check | None:
    """The check for one column type, or None when pyorc's own conversion is trusted (complex types)."""
    normal = type_name.strip().lower()
    if normal in _INT_BITS:
        return _integer(_INT_BITS[normal], normal)
    match = _DECIMAL.fullmatch(normal)
    if match:
        return _decimal(int(match.group(1)), int(match.group(2)), normal)
    if normal == "decimal":
        return _decimal(10, 0, normal)
    if normal in ("float", "double"):
        return _instance((int, float), normal, no_bool=True)
    if normal == "boolean":
        return _instance((bool,), normal)
    if normal == "string" or normal.startswith(("varchar", "char")):
        return _instance((str,), normal)
    if normal == "binary":
        return _instance((bytes, bytearray), normal)
    if normal == "date":
        return _instance((datetime.date,), normal)
    if normal == "timestamp":
        return _instance((datetime.datetime,), normal)
    return None
