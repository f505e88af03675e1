"""JSON-schema fragments, Params and parse-time settings shared by the DAGs (kept free of heavy imports: DAG files
import it at parse time). A setting's Param is made from its entry in the registry (`setting_param`,
`acid_core.settings`): its default, range and description are the registry's.

One rule per kind of value, used twice: as the Param's JSON schema, so Airflow itself refuses a bad trigger (the
REST API's `POST /api/v2/dags/{dag_id}/dagRuns` and the trigger form get a 400 with the Param's message and no run
is made: `create_dagrun` validates the merged params first), and by the task's own check, which says the same in
words should a run be made another way. Number bounds sit under `allOf`: Airflow's trigger form gives a top-level
`minimum` / `maximum` to its number field, which clamps without a word (-1 became 0); under `allOf` they are only
checked when the run is created, so -1 is refused, not changed.
"""

import os
import re
from datetime import timedelta

from airflow.sdk import Param

from acid_core.metastore.pools import POOL_NAME_PATTERN, check_pool_name
from acid_core.settings import Bounds, Setting

# A Hive identifier, as acid_core.metastore.catalog.check_identifier takes one (that module is too heavy to import
# at parse time; tests/dags/test_trigger_forms.py checks that the two agree).
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
MAX_IDENTIFIER = 128
IDENTIFIER = rf"^{_NAME}$"
# key=value pairs separated by "/" (empty: none); a value holds no "/" or "=" (a partition name escapes both). Which
# keys, in which order, and whether the partition exists is the catalog's to say, at run time.
_PAIR = rf"{_NAME}=[^/=]+"
PARTITION = rf"^(?:{_PAIR}(?:/{_PAIR})*)?$"
PARTITION_EXPECTED = "expected key=value[/key=value...], e.g. ds=2026-01-01/hr=3"
# a compaction pool name (acid_core.metastore.pools.check_pool_name's rule), or empty: none
POOL_NAME = rf"^(?:{POOL_NAME_PATTERN})?$"
# an absolute path or a filesystem URI, with no ".." segment and no whitespace
ABSOLUTE_PATH = r"^(?!.*(?:^|/)\.\.(?:/|$))(?:/|[A-Za-z][A-Za-z0-9+.-]*://)\S*$"


def schedule_interval(setting: Setting) -> timedelta:
    """A DAG's schedule interval: the registry's `setting` in seconds, from its environment variable (as `make run`
    reads it), else its default.

    Raises:
        UsageError: naming the variable, its value and the range, so the DAG's import error says what to fix.
    """
    return timedelta(seconds=setting.from_environ(os.environ))


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


def bounds_schema(bounds: Bounds | None) -> dict:
    """The JSON-schema bounds, `{"allOf": [{"minimum": ..., "maximum": ...}]}` (none: `{}`)."""
    found = {key: value for key, value in (("minimum", getattr(bounds, "minimum", None)),
                                           ("maximum", getattr(bounds, "maximum", None))) if value is not None}
    return {"allOf": [found]} if found else {}


def number_param(bounds: Bounds, default, description: str, *, nullable: bool = False,
                 refuse_on_trigger: bool = False) -> Param:
    """A Param of this kind of number, with the range in its description (and, with `refuse_on_trigger`, in its
    schema, so Airflow refuses a trigger out of range)."""
    kind = "integer" if bounds.integer else "number"
    return Param(default, type=["null", kind] if nullable else kind,
                 description=f"{description} ({bounds.words()}{'; empty: none' if nullable else ''}).",
                 **(bounds_schema(bounds) if refuse_on_trigger else {}))


_JSON_TYPES = {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string", "memory": "string"}
_FROM_REGISTRY = object()


def setting_param(setting: Setting, *, default=_FROM_REGISTRY, description: str | None = None,
                  nullable: bool = False, empty: str = "none", refuse_on_trigger: bool = False,
                  as_property: bool = False) -> Param:
    """The Param of a setting of the registry (`acid_core.settings`): its default (None when `nullable`: empty means
    `empty`), its type, and its key, description and allowed values in the Param's description; a number's range
    in its schema too with `refuse_on_trigger` (see the module's docstring). The key named is Hive's, or the table
    property's with `as_property` (a DAG that sets the property)."""
    key = setting.property_key if as_property else setting.hive_key
    text = (description or (f"{key}: {setting.description}" if key else setting.description)).rstrip(".")
    value = None if nullable else setting.default if default is _FROM_REGISTRY else default
    kind = _JSON_TYPES[setting.kind]
    nullable = nullable or value is None
    allowed = setting.expected() if setting.kind in ("integer", "number", "memory") else ""
    if nullable:
        allowed = f"{allowed}; empty: {empty}" if allowed else f"empty: {empty}"
    schema = {"maxLength": setting.max_length} if kind == "string" and setting.max_length else {}
    if refuse_on_trigger:
        schema.update(bounds_schema(setting.bounds))
    return Param(value, type=["null", kind] if nullable else kind,
                 description=f"{text} ({allowed})." if allowed else f"{text}.", **schema)


def setting_params(settings: tuple[Setting, ...], **options) -> dict[str, Param]:
    """`setting_param` of each setting, by Param name, in registry order (`options` apply to every one)."""
    return {setting.param_name: setting_param(setting, **options) for setting in settings}


def check_setting_params(params, settings: tuple[Setting, ...]) -> None:
    """Check the Params of `settings` as the registry allows them (`Setting.check`; None passes).

    Raises:
        ValueError: the first that is not allowed, in one line: `<param> must be <allowed>, got <value>`.
    """
    for setting in settings:
        if setting.param_name in params:
            setting.check(params.get(setting.param_name))


def check_numbers(params, bounds: dict[str, Bounds]) -> None:
    """Check every number Param named in `bounds` (see `Bounds.check`).

    Raises:
        ValueError: the first that is out of range, in one line.
    """
    for name, bound in bounds.items():
        bound.check(name, params.get(name))
