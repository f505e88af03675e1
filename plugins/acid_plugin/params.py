"""JSON-schema patterns, Params and parse-time settings shared by the DAGs (kept free of heavy imports: DAG files
import it at parse time).

Params whose values have a shape or a range are checked in the task, not by the Param's schema: Airflow's trigger form
clamps a number field to the schema's `minimum` / `maximum` without a word (-1 became 0), and a schema `pattern`
error shows the user the regular expression. The task refuses such a value with one line saying what is expected.
"""

import math
import os
import re
from dataclasses import dataclass
from datetime import timedelta

from airflow.sdk import Param

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
# key=value pairs separated by "/": no "..", no leading "/", no quotes, spaces or other SQL punctuation.
_PAIR = r"[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_:%+-]+(?:\.[A-Za-z0-9_:%+-]+)*"
PARTITION = rf"^(?!.*\.\.){_PAIR}(?:/{_PAIR})*$"
PARTITION_EXPECTED = "expected key=value[/key=value...], e.g. ds=2026-01-01/hr=3"
POOL_EXPECTED = "expected letters, digits, _, - and . (at most 128)"
# a compaction pool name (acid_core.compaction.pools.check_pool_name's rule)
POOL_NAME = r"^[A-Za-z0-9_.-]{1,128}$"
# an absolute path or a filesystem URI, with no ".." segment and no whitespace
ABSOLUTE_PATH = r"^(?!.*(?:^|/)\.\.(?:/|$))(?:/|[A-Za-z][A-Za-z0-9+.-]*://)\S*$"


def interval_from_env(name: str, default_seconds: int) -> timedelta:
    """A schedule interval from environment variable `name` (whole seconds, at least 1), else the default.

    Raises:
        ValueError: naming the variable and its value, so the DAG's import error says what to fix.
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return timedelta(seconds=default_seconds)
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"environment variable {name}={text!r} must be a whole number of seconds >= 1")
    return timedelta(seconds=int(text))


def table_params() -> dict[str, Param]:
    """The `database` and `table` Params of the DAGs that act on one table (new objects for each DAG). The names are
    checked by the catalog, which says in words what a name may hold."""
    return {
        "database": Param("default", type="string", minLength=1, maxLength=128,
                          description="Database name (letters, digits and _)."),
        "table": Param(None, type="string", minLength=1, maxLength=128,
                       description="Table name (letters, digits and _)."),
    }


def check_partition(text: str | None, *, what: str = "partition") -> str | None:
    """`text` if it is a partition name `key=value[/key=value...]` (or None).

    Raises:
        ValueError: naming the value and what is expected, in words.
    """
    if text is not None and not re.match(PARTITION, text):
        raise ValueError(f"{what} {text!r} is malformed: {PARTITION_EXPECTED}")
    return text


def check_pool(text: str | None) -> str | None:
    """`text` if it is a compaction pool name (or empty / None: no pool).

    Raises:
        ValueError: naming the value and what is expected, in words.
    """
    if text and not re.match(POOL_NAME, text):
        raise ValueError(f"pool {text!r} is not a compaction pool name: {POOL_EXPECTED}")
    return text or None


@dataclass(frozen=True, slots=True)
class Bounds:
    """The range of a number Param, checked in the task (the trigger form would clamp to a schema's range)."""

    minimum: float | None = None
    maximum: float | None = None
    integer: bool = True

    def words(self) -> str:
        """`a whole number from 0 to 100`, `a number >= 0`, ..."""
        kind = "a whole number" if self.integer else "a number"
        if self.minimum is not None and self.maximum is not None:
            return f"{kind} from {_number(self.minimum)} to {_number(self.maximum)}"
        if self.minimum is not None:
            return f"{kind} >= {_number(self.minimum)}"
        if self.maximum is not None:
            return f"{kind} <= {_number(self.maximum)}"
        return kind

    def param(self, default, description: str, *, nullable: bool = False) -> Param:
        """A Param of this kind of number, with the range in its description but not in its schema."""
        kind = "integer" if self.integer else "number"
        return Param(default, type=["null", kind] if nullable else kind,
                     description=f"{description} ({self.words()}{'; empty: none' if nullable else ''}).")

    def check(self, name: str, value):
        """`value` (None passes) if it is a number in range.

        Raises:
            ValueError: `<name> must be <words>, got <value>`.
        """
        if value is None:
            return None
        valid = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        valid = valid and (not self.integer or float(value).is_integer())
        valid = valid and (self.minimum is None or value >= self.minimum)
        valid = valid and (self.maximum is None or value <= self.maximum)
        if not valid:
            raise ValueError(f"{name} must be {self.words()}, got {value!r}")
        return int(value) if self.integer else value


def check_numbers(params, bounds: dict[str, "Bounds"]) -> None:
    """Check every number Param named in `bounds` (see `Bounds.check`).

    Raises:
        ValueError: the first that is out of range, in one line.
    """
    for name, bound in bounds.items():
        bound.check(name, params.get(name))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
