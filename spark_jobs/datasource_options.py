"""What the `hiveacid` data source's reads and writes share: its name, its option error and the table and metastore
options (`table` or the path given to `load` / `save`, `metastore`), checked the same way for both.

Option names are case-insensitive. A metastore URL is never shown with its password (`redact`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from acid_core.errors import InvalidSettingError, MetastoreError
from acid_core.metastore import Metastore
from acid_core.metastore.engine import default_url, redact, split_credentials

FORMAT_NAME = "hiveacid"
_log = logging.getLogger(__name__)


class HiveAcidOptionError(InvalidSettingError):
    """An option of the `hiveacid` data source is missing, unknown or has a bad value."""


@dataclass(frozen=True, slots=True)
class Target:
    """The table an operation names and the metastore holding it (None: the `acid` command's default URL)."""

    database: str
    table: str
    metastore: str | None

    def url(self) -> str:
        """The metastore URL: the option, else the `acid` command's default (`default_url`), resolved here."""
        return self.metastore or default_url()

    def open_metastore(self) -> Metastore:
        url = self.url()
        metastore = Metastore(url, pool_size=1)
        _log.info("%s: metastore %s", FORMAT_NAME, redact(url))
        return metastore


def lowered(options: Mapping[str, str], allowed: tuple[str, ...], action: str) -> dict[str, str]:
    """The options keyed in lower case, refused if one is not in `allowed` (or `path`)."""
    given = {str(key).lower(): value for key, value in options.items()}
    unknown = sorted(set(given) - {name.lower() for name in allowed} - {"path"})
    if unknown:
        raise HiveAcidOptionError(f"{FORMAT_NAME}: unknown option(s) {unknown} for a {action}: its options are "
                                  f"{', '.join(allowed)} (the table may also be the path given to "
                                  f"{'load' if action == 'read' else 'save'})")
    return given


def parse_target(given: Mapping[str, str], action: str) -> Target:
    """The table (`table`, or the path given to `load` / `save`) and metastore options of lowered `given`.

    Raises:
        HiveAcidOptionError: no table, two different tables, a name that is not database.table, or a metastore
            option that is not a SQLAlchemy URL (shown without its password).
    """
    verb = "load" if action == "read" else "save"
    path, table = given.get("path"), given.get("table")
    if path and table and path.lower() != table.lower():
        raise HiveAcidOptionError(f"{FORMAT_NAME}: {verb}({path!r}) and option table {table!r} name different "
                                  "tables: give one")
    name = table or path
    if not name:
        raise HiveAcidOptionError(f'{FORMAT_NAME}: no table to {action}: {verb}("db.table") or option("table", '
                                  '"db.table")')
    database, dot, table_name = name.partition(".")
    if not dot or not database or not table_name or "." in table_name:
        raise HiveAcidOptionError(f"{FORMAT_NAME}: table {name!r} is not database.table (e.g. default.sales)")
    metastore = given.get("metastore")
    if metastore is not None:
        try:
            split_credentials(metastore)  # parses it; its own error would quote the parser's complaint
        except MetastoreError:
            raise HiveAcidOptionError(f"{FORMAT_NAME}: option metastore {redact(metastore)} is not a SQLAlchemy "
                                      "URL (postgresql://user@host/db, sqlite:////path/metastore.db)") from None
    return Target(database, table_name, metastore)


def number_option(option: str, text: str, convert: Callable[[str], float], valid: Callable[[float], bool],
                  expected: str) -> float:
    """A numeric option's value (`convert` of its text), refused unless `valid`.

    Raises:
        HiveAcidOptionError: naming the option, what it must be (`expected`) and the text given.
    """
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not valid(value):
        raise HiveAcidOptionError(f"{FORMAT_NAME}: option {option} must be {expected}, got {text!r}")
    return value


__all__ = ["FORMAT_NAME", "HiveAcidOptionError", "Target", "lowered", "number_option", "parse_target"]
