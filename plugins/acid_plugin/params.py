"""JSON-schema patterns and parse-time settings shared by the DAGs (kept free of heavy imports: DAG files import it
at parse time)."""

import os
from datetime import timedelta

from airflow.sdk import Param

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
# key=value pairs separated by "/": no "..", no leading "/", no quotes, spaces or other SQL punctuation.
_PAIR = r"[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_:%+-]+(?:\.[A-Za-z0-9_:%+-]+)*"
PARTITION = rf"^(?!.*\.\.){_PAIR}(?:/{_PAIR})*$"
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
    """The `database` and `table` Params of the DAGs that act on one table (new objects for each DAG)."""
    return {
        "database": Param("default", type="string", pattern=IDENTIFIER, description="Database name."),
        "table": Param(None, type="string", pattern=IDENTIFIER, description="Table name."),
    }
