"""JSON-schema fragments, Params and parse-time settings shared by the DAGs (kept free of heavy imports: DAG files
import it at parse time).

One rule per kind of value, used twice: as the Param's JSON schema, so Airflow itself refuses a bad trigger (the
REST API's `POST /api/v2/dags/{dag_id}/dagRuns` and the trigger form get a 400 with the Param's message and no run
is made: `create_dagrun` validates the merged params first), and by the task's own check, which says the same in
words should a run be made another way. Number bounds sit under `allOf`: Airflow's trigger form gives a top-level
`minimum` / `maximum` to its number field, which clamps without a word (-1 became 0); under `allOf` they are only
checked when the run is created, so -1 is refused, not changed.
"""

import math
import os
import re
from dataclasses import dataclass
from datetime import timedelta

from airflow.sdk import Param

from acid_core.compaction.pools import POOL_NAME_PATTERN, check_pool_name

# A Hive identifier, as acid_core.metastore.catalog.check_identifier takes one (that module is too heavy to import
# at parse time; tests/airflow/test_trigger_forms.py checks that the two agree).
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
MAX_IDENTIFIER = 128
IDENTIFIER = rf"^{_NAME}$"
# key=value pairs separated by "/" (empty: none); a value holds no "/" or "=" (a partition name escapes both). Which
# keys, in which order, and whether the partition exists is the catalog's to say, at run time.
_PAIR = rf"{_NAME}=[^/=]+"
PARTITION = rf"^(?:{_PAIR}(?:/{_PAIR})*)?$"
PARTITION_EXPECTED = "expected key=value[/key=value...], e.g. ds=2026-01-01/hr=3"
# a compaction pool name (acid_core.compaction.pools.check_pool_name's rule), or empty: none
POOL_NAME = rf"^(?:{POOL_NAME_PATTERN})?$"
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
    """The `database` and `table` Params of the DAGs that act on one table (new objects for each DAG): required, no
    default (a trigger without one is refused: "No value passed"), and Hive identifiers."""
    return {
        "database": Param(type="string", pattern=IDENTIFIER, maxLength=MAX_IDENTIFIER,
                          description="Database name (required: letters, digits and _, not starting with a digit)."),
        "table": Param(type="string", pattern=IDENTIFIER, maxLength=MAX_IDENTIFIER,
                       description="Table name (required: letters, digits and _, not starting with a digit)."),
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
        InvalidPoolNameError: naming the value and what a pool name may hold (`check_pool_name`).
    """
    return check_pool_name(text, what="pool") if text else None


@dataclass(frozen=True, slots=True)
class Bounds:
    """The range of a number Param: in its description, in words; with `refuse_on_trigger`, in its schema too (under
    `allOf`, see the module's docstring); and checked by the task (`check`)."""

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

    def schema(self) -> dict:
        """The JSON-schema bounds, `{"allOf": [{"minimum": ..., "maximum": ...}]}` (none: `{}`)."""
        bounds = {key: value for key, value in (("minimum", self.minimum), ("maximum", self.maximum))
                  if value is not None}
        return {"allOf": [bounds]} if bounds else {}

    def param(self, default, description: str, *, nullable: bool = False, refuse_on_trigger: bool = False) -> Param:
        """A Param of this kind of number, with the range in its description (and, with `refuse_on_trigger`, in its
        schema, so Airflow refuses a trigger out of range)."""
        kind = "integer" if self.integer else "number"
        return Param(default, type=["null", kind] if nullable else kind,
                     description=f"{description} ({self.words()}{'; empty: none' if nullable else ''}).",
                     **(self.schema() if refuse_on_trigger else {}))

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
