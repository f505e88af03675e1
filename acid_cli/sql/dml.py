"""INSERT INTO ... VALUES through the embedded writer, in one transaction with Hive's locks and write ids."""

from __future__ import annotations

import datetime
import decimal
import re

from acid_cli.hiveql import ast
from acid_cli.sql.session import Session
from acid_core.errors import InvalidRowError, MetastoreError
from acid_core.format.types import INTEGER_KINDS, TEXT_KINDS, parse_type
from acid_core.format.values import RowChecker
from acid_core.write.table import AcidTable


def _fail(value, type_name: str, column: str) -> InvalidRowError:
    return InvalidRowError(f"column {column!r} ({type_name}): cannot use {value!r}")


def _as_text(value) -> str:
    """A value as Hive prints it when cast to string (timestamps without trailing zeros in the fraction)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return text + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def convert(value: ast.Literal, type_name: str, column: str):
    """A VALUES literal as the Python value for a column of `type_name` (Hive's implicit conversions for literals).

    Raises:
        InvalidRowError: the literal cannot become that type (the message names the column).
    """
    if isinstance(value, ast.Cast):
        return convert(convert(value.value, value.type, column), type_name, column)
    if value is None:
        return None
    hive_type = parse_type(type_name)
    kind = hive_type.kind
    try:
        if kind in INTEGER_KINDS:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
                return int(value)
            if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
                return int(value)
            if isinstance(value, int):
                return value
            raise ValueError
        if kind == "decimal":
            if isinstance(value, (bool, datetime.date)):
                raise ValueError
            return decimal.Decimal(str(value).strip())
        if kind in ("float", "double"):
            if isinstance(value, (bool, datetime.date)):
                raise ValueError
            return float(value)
        if kind == "boolean":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return value.strip().lower() == "true"
            raise ValueError
        if kind in TEXT_KINDS:
            text = _as_text(value)
            return text if hive_type.length is None else text[:hive_type.length]  # Hive truncates varchar/char values
        if kind == "date":
            if isinstance(value, datetime.datetime):
                return value.date()
            if isinstance(value, datetime.date):
                return value
            return datetime.date.fromisoformat(str(value).strip())
        if kind == "timestamp":
            if isinstance(value, datetime.datetime):
                return value
            if isinstance(value, datetime.date):
                return datetime.datetime(value.year, value.month, value.day)
            return datetime.datetime.fromisoformat(str(value).strip())
        if kind == "binary":
            if isinstance(value, (bytes, bytearray)):
                return bytes(value)
            if isinstance(value, str):
                return value.encode("utf-8")
            raise ValueError
    except (ValueError, decimal.InvalidOperation, OverflowError):
        raise _fail(value, type_name, column) from None
    raise InvalidRowError(f"column {column!r} has type {type_name}, which INSERT ... VALUES cannot set")


def insert_values(session: Session, statement: ast.InsertValues) -> None:
    database, name = session.qualify(statement.table)
    metastore = session.metastore
    table = metastore.catalog.require_transactional(database, name)
    if table.partition_keys and statement.partition is None:
        raise MetastoreError(f"{table.full_name} is partitioned: give PARTITION ({', '.join(k.name for k in table.partition_keys)}"
                             " = ...); dynamic partitions need INSERT ... SELECT")
    spec = statement.partition.to_dict() if statement.partition else {}
    partition = table.partition_name(spec)
    names = [c.name for c in table.columns]
    targets = list(statement.columns) or names
    unknown = [c for c in targets if c not in names]
    if unknown:
        raise MetastoreError(f"{table.full_name} has no columns {unknown}; its columns are {names}")
    rows = []
    for index, literals in enumerate(statement.rows):
        if len(literals) != len(targets):
            raise InvalidRowError(f"row {index} has {len(literals)} values for {len(targets)} columns {targets}")
        given = dict(zip(targets, literals))
        rows.append(tuple(convert(given.get(c.name), c.type, c.name) for c in table.columns))
    checker = RowChecker(table.columns)
    rows = [checker.normalise(row, index) for index, row in enumerate(rows)]  # all checked before any transaction
    ordered_spec = {k.name: spec[k.name] for k in table.partition_keys}
    with AcidTable(metastore, table).new_write(agent_info="acid sql INSERT", partition=partition) as write:
        write.insert(rows, partition=ordered_spec or None)
    txn_id, write_id = write.txn_id, write.write_id
    where = f" partition {partition}" if partition else ""
    noun = "row" if len(rows) == 1 else "rows"
    session.say(f"Inserted {len(rows)} {noun} into {table.full_name}{where} (transaction {txn_id}, write id {write_id})")
