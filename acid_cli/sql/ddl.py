"""Catalog statements: databases, tables, properties, and what SHOW/DESCRIBE print about them."""

from __future__ import annotations

import fnmatch
import os
import time

from acid_cli.hiveql import ast
from acid_cli.sql.results import result
from acid_cli.sql.session import Session
from acid_core.errors import FileSystemError, MetastoreError
from acid_core.metastore import properties as table_properties
from acid_core.metastore.catalog import check_identifier
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.storage.fs import FileSystem, is_absolute_location


def _qualified(location: str | None) -> str | None:
    """A relative LOCATION made absolute against this client's working directory once, at CREATE time (as Hive and
    Spark qualify one against the filesystem's working directory), so the catalog never stores a relative path."""
    if location is None or is_absolute_location(location):
        return location
    return os.path.abspath(location)


def create_database(session: Session, statement: ast.CreateDatabase) -> None:
    table_properties.check_settings(dict(statement.properties), what="database")
    info = session.metastore.catalog.create_database(statement.name, location=_qualified(statement.location),
                                                     description=statement.comment,
                                                     params=dict(statement.properties) or None,
                                                     if_not_exists=statement.if_not_exists)
    fs, path = FileSystem.resolve(info.location)
    fs.make_dirs(path)
    session.say("OK")


def drop_database(session: Session, statement: ast.DropDatabase) -> None:
    catalog = session.metastore.catalog
    location = (catalog.get_database(statement.name).location
                if not statement.if_exists or statement.name in catalog.list_databases() else None)
    dropped = catalog.drop_database(statement.name, if_exists=statement.if_exists, cascade=statement.cascade)
    for table in dropped:
        session.say(_remove_table_data(session, table.location, table.full_name, purge=False))
    if location is not None:
        fs, path = FileSystem.resolve(location)
        if fs.is_dir(path) and not fs.list_dir(path):
            fs.delete_dir(path)  # the database directory, once its tables' data moved to the trash
    if session.database == statement.name:
        session.database = "default"
    session.say("OK")


def use_database(session: Session, statement: ast.UseDatabase) -> None:
    session.metastore.catalog.get_database(statement.name)
    session.database = statement.name
    session.say("OK")


def _matches(name: str, pattern: str | None) -> bool:
    """Hive's SHOW ... LIKE patterns: `*` wildcards, `|` alternatives, case-insensitive."""
    return pattern is None or any(fnmatch.fnmatchcase(name, part.strip().lower()) for part in pattern.split("|"))


def show_databases(session: Session, statement: ast.ShowDatabases) -> None:
    names = [n for n in session.metastore.catalog.list_databases() if _matches(n, statement.pattern)]
    session.show(result(["database_name"], ["database_name"], [(n,) for n in names]))


def create_table(session: Session, statement: ast.CreateTable) -> None:
    database, name = session.qualify(statement.table)
    properties = dict(statement.properties)
    table_properties.check_settings(properties)
    lowered = {k.lower() for k in properties}
    if any(k.lower() == "transactional" and v.lower() == "true" for k, v in properties.items()):
        if "transactional_properties" not in lowered:
            properties["transactional_properties"] = "default"
    if "bucketing_version" not in lowered:
        properties["bucketing_version"] = "2"
    catalog = session.metastore.catalog
    existed = statement.if_not_exists and name in catalog.list_tables(database)
    table = catalog.create_table(
        database, name, [(c.name, c.type) for c in statement.columns],
        partition_keys=[(c.name, c.type) for c in statement.partition_columns], bucket_columns=statement.bucket_columns,
        num_buckets=statement.buckets, location=_qualified(statement.location), params=properties, comment=statement.comment,
        if_not_exists=statement.if_not_exists)
    if not existed:
        try:
            fs, path = FileSystem.resolve(table.location)
            fs.make_dirs(path)
        except FileSystemError:
            catalog.drop_table(database, name)  # a failed statement changes nothing
            raise
    session.say("OK")


def _remove_table_data(session: Session, location: str, full_name: str, *, purge: bool) -> str:
    """Move a dropped table's directory to the warehouse trash (or delete it with PURGE)."""
    fs, path = FileSystem.resolve(location)
    if not fs.exists(path):
        return f"{full_name}: no data at {location}"
    if purge:
        fs.delete_dir(path)
        return f"{full_name}: deleted {location}"
    warehouse_fs, warehouse = FileSystem.resolve(session.metastore.catalog.warehouse)
    trash = warehouse_fs.join(warehouse, ".trash", f"{full_name}-{int(time.time() * 1000)}")
    try:
        warehouse_fs.make_dirs(warehouse_fs.join(warehouse, ".trash"))
        fs.rename(path, trash)
    except FileSystemError as exc:
        return f"{full_name}: data left in place at {location} ({exc})"
    return f"{full_name}: data moved to {trash}"


def drop_table(session: Session, statement: ast.DropTable) -> None:
    database, name = session.qualify(statement.table)
    catalog = session.metastore.catalog
    if statement.if_exists and name not in catalog.list_tables(database):
        session.say("OK")
        return
    if name in catalog.list_tables(database):
        inside = catalog.tables_within(catalog.get_table(database, name).location, other_than=(database, name))
        if inside:  # moving or deleting its directory would take their files
            raise MetastoreError(f"cannot drop {database}.{name}: the location of table {inside[0]} lies inside "
                                 "it; drop or move that table first")
    locks = session.metastore.locks
    lock_id = locks.acquire([LockComponent(database, name, None, LockType.EXCLUSIVE)], timeout_ms=10_000,
                            agent_info="acid sql DROP TABLE")
    try:
        table = catalog.drop_table(database, name, if_exists=statement.if_exists)
    finally:
        locks.unlock(lock_id)
    if table is not None:
        session.say(_remove_table_data(session, table.location, table.full_name, purge=statement.purge))
    session.say("OK")


def set_properties(session: Session, statement: ast.AlterTableSetProperties) -> None:
    database, name = session.qualify(statement.table)
    properties = dict(statement.properties)
    table_properties.check_settings(properties)
    session.metastore.catalog.alter_table_params(database, name, set_params=properties)
    session.say("OK")


def unset_properties(session: Session, statement: ast.AlterTableUnsetProperties) -> None:
    database, name = session.qualify(statement.table)
    session.metastore.catalog.alter_table_params(database, name, unset=list(statement.keys),
                                                 if_exists=statement.if_exists)
    session.say("OK")


def show_tables(session: Session, statement: ast.ShowTables) -> None:
    database = check_identifier(statement.database or session.database, "database")
    names = [n for n in session.metastore.catalog.list_tables(database) if _matches(n, statement.pattern)]
    session.show(result(["tab_name"], ["tab_name"], [(n,) for n in names]))


def show_partitions(session: Session, statement: ast.ShowPartitions) -> None:
    database, name = session.qualify(statement.table)
    table = session.metastore.catalog.get_table(database, name)
    if not table.partition_keys:
        raise MetastoreError(f"table {table.full_name} is not a partitioned table")
    partitions = session.metastore.catalog.list_partitions(database, name)
    session.show(result(["partition"], ["partition"], [(p.name,) for p in partitions]))


def describe_table(session: Session, statement: ast.DescribeTable) -> None:
    database, name = session.qualify(statement.table)
    table = session.metastore.catalog.get_table(database, name)
    rows = [(c.name, c.type, "") for c in table.columns]
    if table.partition_keys:
        rows += [("", None, None), ("# Partition Information", None, None), ("# col_name", "data_type", "comment")]
        rows += [(k.name, k.type, "") for k in table.partition_keys]
    if statement.formatted or statement.extended:
        rows += [("", None, None), ("# Detailed Table Information", None, None),
                 ("Database:", table.database, None), ("Table:", table.name, None), ("Owner:", table.owner, None),
                 ("Location:", table.location, None), ("Num Buckets:", str(table.num_buckets), None),
                 ("Bucket Columns:", str(list(table.bucket_columns)), None), ("Table Parameters:", None, None)]
        rows += [("", key, value) for key, value in sorted(table.params.items())]
    session.show(result(["col_name", "data_type", "comment"], ["col_name", "data_type", "comment"], rows))


def show_table_properties(session: Session, statement: ast.ShowTableProperties) -> None:
    database, name = session.qualify(statement.table)
    table = session.metastore.catalog.get_table(database, name)
    items = sorted(table.params.items())
    if statement.key is not None:
        value = table.param(statement.key)
        if value is None:
            raise MetastoreError(f"table {table.full_name} does not have property {statement.key!r}")
        items = [(statement.key, value)]
    session.show(result(["prpt_name", "prpt_value"], ["prpt_name", "prpt_value"], items))
