"""The table catalog: databases, tables (columns, partition keys, buckets, location, properties) and partitions.

Names are Hive identifiers (letters, digits, underscore), stored lower-case, so a name can never escape the warehouse
as a path. Table properties keep their keys as given; look-ups of the ACID switches are case-insensitive as in Hive.
Every create and alter checks the properties with `acid_core.metastore.properties` (Hive's metastore rules).

Over 500 lines because it holds the catalog's three value objects (`DatabaseInfo`, `TableInfo` with its partition-name
rules, `PartitionInfo`) beside the one class that reads and writes them: moving the value objects out would change
where fourteen modules import `TableInfo` from, for no gain in what either half does.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from acid_core.errors import (
    AlreadyExistsError,
    DuplicateKeyError,
    InvalidNameError,
    MetastoreError,
    NoSuchObjectError,
    NotTransactionalError,
)
from acid_core.format.layout import parse_partition_dir_name, partition_dir_name
from acid_core.format.orc_events import Column, parse_columns
from acid_core.metastore import properties
from acid_core.metastore import schema as s
from acid_core.metastore.engine import Database
from acid_core.storage.fs import is_absolute_location

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_DATABASE = "default"


def check_identifier(name: str, what: str) -> str:
    """A lower-cased Hive identifier.

    Raises:
        MetastoreError: the name has characters other than letters, digits and underscores (or is too long).
    """
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) or len(name) > 128:
        raise MetastoreError(f"{what} name {name!r} is not valid: use letters, digits and underscores "
                             "(starting with a letter or underscore), at most 128 characters")
    return name.lower()


def _absolute_location(location: str, what: str) -> str:
    """The location, which must be absolute: a relative one would be resolved against each client's working directory,
    so writers, compactors and cleaners started in different places would each see a different table.

    Raises:
        MetastoreError: the location is relative.
    """
    if not is_absolute_location(location):
        raise MetastoreError(f"{what}: location {location!r} is relative; give an absolute path or a URI "
                             "(e.g. /data/warehouse/t or hdfs://namenode/warehouse/t)")
    return location.rstrip("/") if len(location) > 1 and not location.endswith("://") else location


def _ancestors(location: str) -> list[str]:
    """`location` and each directory above it (`/a/b` -> `/a/b`, `/a`, `/`; `s3://w/t` -> `s3://w/t`, `s3://w`)."""
    scheme, sep, rest = location.partition("://")
    prefix, path = (scheme + sep, rest) if sep else ("", location)
    found = []
    while path:
        found.append(prefix + path)
        parent = posixpath.dirname(path.rstrip("/"))
        if not parent or parent == path or (sep and "/" not in path):
            break
        path = parent
    return found


def _below(location: str) -> str:
    """The prefix every location inside `location` starts with."""
    return location if location.endswith("/") else location + "/"


@dataclass(frozen=True, slots=True)
class DatabaseInfo:
    name: str
    location: str
    description: str | None
    create_time_ms: int
    params: Mapping[str, str] = field(default_factory=dict)

    def param(self, key: str) -> str | None:
        """A database property (DBPROPERTIES), key matched case-insensitively."""
        return properties.find(self.params, key)

    @property
    def no_auto_compaction(self) -> bool:
        """Hive honours `no_auto_compaction` on the database as well as on the table."""
        return properties.is_true(self.param(properties.NO_AUTO_COMPACTION))


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A table's definition as the catalog records it."""

    database: str
    name: str
    location: str
    columns: tuple[Column, ...]
    partition_keys: tuple[Column, ...] = ()
    bucket_columns: tuple[str, ...] = ()
    num_buckets: int = -1
    params: Mapping[str, str] = field(default_factory=dict)
    comment: str | None = None
    owner: str | None = None
    create_time_ms: int = 0

    @property
    def full_name(self) -> str:
        return f"{self.database}.{self.name}"

    def param(self, key: str) -> str | None:
        """A table property, key matched case-insensitively."""
        return properties.find(self.params, key)

    @property
    def is_transactional(self) -> bool:
        """A full ACID table: 'transactional'='true' and not insert-only."""
        return properties.is_full_acid(self.params)

    @property
    def no_auto_compaction(self) -> bool:
        return properties.is_true(self.param(properties.NO_AUTO_COMPACTION))

    @property
    def bucketing_version(self) -> int:
        return int(self.param(properties.BUCKETING_VERSION) or 2)

    def partition_name(self, spec: Mapping[str, object]) -> str | None:
        """The `k=v/...` name of a full partition spec (None for an unpartitioned table).

        Raises:
            MetastoreError: the spec does not give exactly the table's partition keys, or a value is empty.
        """
        keys = [k.name for k in self.partition_keys]
        given = {str(k).lower(): v for k, v in (spec or {}).items()}
        if not keys:
            if given:
                raise MetastoreError(f"table {self.full_name} is not partitioned, got partition spec {dict(spec)!r}")
            return None
        if sorted(given) != sorted(keys):
            raise MetastoreError(f"partition spec {dict(spec or {})!r} for {self.full_name} must give exactly the "
                                 f"partition keys {keys}")
        for key in keys:
            if given[key] is None or str(given[key]) == "":
                raise MetastoreError(f"partition spec for {self.full_name}: key {key!r} has an empty value")
        return partition_dir_name({key: str(given[key]) for key in keys})

    def check_partition_name(self, partition_name: str) -> str:
        """`partition_name` if it names a partition of this table in the canonical `k1=v1/k2=v2` form.

        Raises:
            MetastoreError: the table is not partitioned, or the name is not `key=value` components giving exactly
                the table's partition keys in order, escaped as Hive escapes them (so it can never leave the table).
        """
        keys = [key.name for key in self.partition_keys]
        if not keys:
            raise MetastoreError(f"table {self.full_name} is not partitioned, got partition {partition_name!r}")
        try:
            spec = parse_partition_dir_name(partition_name) if isinstance(partition_name, str) else None
        except InvalidNameError as exc:
            raise MetastoreError(f"partition {partition_name!r} of {self.full_name} is not valid: {exc}") from None
        if spec is None or list(spec) != keys or partition_dir_name(spec) != partition_name:
            raise MetastoreError(f"partition {partition_name!r} of {self.full_name} is not valid: give "
                                 f"{'/'.join(f'{key}=<value>' for key in keys)} with the keys in that order and "
                                 "values escaped as Hive escapes them")
        return partition_name

    def partition_location(self, partition_name: str | None) -> str:
        """The directory of a partition (checked with `check_partition_name`), or the table's for None."""
        if partition_name is None:
            return self.location
        return posixpath.join(self.location, self.check_partition_name(partition_name))


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    database: str
    table: str
    name: str
    location: str
    create_time_ms: int

    @property
    def spec(self) -> dict[str, str]:
        return parse_partition_dir_name(self.name)


class Catalog:
    """Databases, tables and partitions."""

    def __init__(self, db: Database, warehouse: str) -> None:
        self.db = db
        self.warehouse = warehouse.rstrip("/")

    def _next(self, conn: Connection, sequence: str) -> int:
        st = s.sequence_table.c
        return conn.execute(s.sequence_table.update().where(st.SEQUENCE_NAME == sequence)
                            .values(NEXT_VAL=st.NEXT_VAL + 1).returning(st.NEXT_VAL)).scalar_one() - 1

    # --- databases -------------------------------------------------------------------------------------------------
    def default_database_location(self, name: str) -> str:
        return self.warehouse if name == DEFAULT_DATABASE else posixpath.join(self.warehouse, f"{name}.db")

    def create_database(self, name: str, *, location: str | None = None, description: str | None = None,
                        params: Mapping[str, str] | None = None, if_not_exists: bool = False) -> DatabaseInfo:
        """Record a database.

        Raises:
            MetastoreError: a bad name or a relative location; InvalidPropertyError: a property the metastore cannot
                hold (`properties.check_database`); AlreadyExistsError: it exists (unless `if_not_exists`).
        """
        name = check_identifier(name, "database")
        params = properties.check_database(name, params)

        def create(conn: Connection) -> DatabaseInfo:
            row = conn.execute(sa.select(s.dbs).where(s.dbs.c.NAME == name)).first()
            if row is not None:
                if if_not_exists:
                    return self._database(conn, row)
                raise AlreadyExistsError(f"database {name!r} already exists")
            where = _absolute_location(location or self.default_database_location(name), f"database {name}")
            if name != DEFAULT_DATABASE:
                self._check_database_location_free(conn, where, name)
            db_id = self._next(conn, "DBS")
            conn.execute(s.dbs.insert().values(DB_ID=db_id, NAME=name, DB_LOCATION_URI=where,
                                               DESC=description, CREATE_TIME=self.db.clock.now_ms()))
            if params:
                conn.execute(s.database_params.insert(), [{"DB_ID": db_id, "PARAM_KEY": k, "PARAM_VALUE": v}
                                                          for k, v in params.items()])
            return self._database(conn, conn.execute(sa.select(s.dbs).where(s.dbs.c.DB_ID == db_id)).one())

        try:
            return self.db.run(f"create database {name}", create)
        except DuplicateKeyError:  # created concurrently between our check and our insert
            if if_not_exists:
                return self.get_database(name)
            raise AlreadyExistsError(f"database {name!r} already exists") from None

    def _database_row(self, conn: Connection, name: str):
        row = conn.execute(sa.select(s.dbs).where(s.dbs.c.NAME == name)).first()
        if row is None:
            raise NoSuchObjectError(f"database {name!r} does not exist")
        return row

    def ensure_default_database(self) -> None:
        """Create Hive's `default` database (at the warehouse root) unless it exists."""
        self.db.run("create the default database", self._ensure_default)

    def _ensure_default(self, conn: Connection) -> None:
        if conn.execute(sa.select(s.dbs.c.DB_ID).where(s.dbs.c.NAME == DEFAULT_DATABASE)).first() is None:
            insert = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(s.dbs)
            conn.execute(insert.values(DB_ID=self._next(conn, "DBS"), NAME=DEFAULT_DATABASE,
                                       DB_LOCATION_URI=self.warehouse, DESC="Default Hive database",
                                       CREATE_TIME=self.db.clock.now_ms()).on_conflict_do_nothing())

    @staticmethod
    def _database(conn: Connection, row) -> DatabaseInfo:
        params = dict(conn.execute(sa.select(s.database_params.c.PARAM_KEY, s.database_params.c.PARAM_VALUE)
                                   .where(s.database_params.c.DB_ID == row.DB_ID)).all())
        return DatabaseInfo(row.NAME, row.DB_LOCATION_URI, row.DESC, row.CREATE_TIME, params)

    def get_database(self, name: str) -> DatabaseInfo:
        name = check_identifier(name, "database")
        return self.db.run(f"read database {name}", lambda conn: self.get_database_in(conn, name), write=False)

    def get_database_in(self, conn: Connection, name: str) -> DatabaseInfo:
        """`get_database` inside the caller's database transaction.

        Raises:
            NoSuchObjectError: no such database.
        """
        return self._database(conn, self._database_row(conn, name))

    def set_database_params(self, name: str, params: Mapping[str, str]) -> DatabaseInfo:
        """Set database properties (ALTER DATABASE ... SET DBPROPERTIES); keys match case-insensitively.

        Raises:
            InvalidPropertyError: a property the metastore cannot hold (`properties.check_database`).
        """
        name = check_identifier(name, "database")
        wanted = properties.check_database(name, params)

        def set_(conn: Connection) -> DatabaseInfo:
            row = self._database_row(conn, name)
            dp = s.database_params.c
            current = conn.execute(sa.select(dp.PARAM_KEY).where(dp.DB_ID == row.DB_ID)).scalars().all()
            lowered = {key.lower() for key in wanted}
            doomed = [old for old in current if old.lower() in lowered]
            if doomed:
                conn.execute(s.database_params.delete().where(dp.DB_ID == row.DB_ID, dp.PARAM_KEY.in_(doomed)))
            if wanted:
                conn.execute(s.database_params.insert(), [{"DB_ID": row.DB_ID, "PARAM_KEY": k, "PARAM_VALUE": v}
                                                          for k, v in wanted.items()])
            return self._database(conn, row)

        return self.db.run(f"set properties of database {name}", set_)

    def list_databases(self) -> list[str]:
        def read(conn: Connection) -> list[str]:
            return list(conn.execute(sa.select(s.dbs.c.NAME).order_by(s.dbs.c.NAME)).scalars())

        return self.db.run("list databases", read, write=False)

    def drop_database(self, name: str, *, if_exists: bool = False, cascade: bool = False) -> list[TableInfo]:
        """Drop a database (with its tables when `cascade`); returns the dropped tables so callers can remove data."""
        name = check_identifier(name, "database")
        if name == DEFAULT_DATABASE:
            raise MetastoreError("the default database cannot be dropped")

        def drop(conn: Connection) -> list[TableInfo]:
            row = conn.execute(sa.select(s.dbs).where(s.dbs.c.NAME == name)).first()
            if row is None:
                if if_exists:
                    return []
                raise NoSuchObjectError(f"database {name!r} does not exist")
            names = conn.execute(sa.select(s.tbls.c.TBL_NAME).where(s.tbls.c.DB_ID == row.DB_ID)).scalars().all()
            if names and not cascade:
                raise MetastoreError(f"database {name!r} is not empty (tables {sorted(names)}); use CASCADE")
            dropped = [self._drop_table(conn, name, table) for table in names]
            conn.execute(s.database_params.delete().where(s.database_params.c.DB_ID == row.DB_ID))
            conn.execute(s.dbs.delete().where(s.dbs.c.DB_ID == row.DB_ID))
            return dropped

        return self.db.run(f"drop database {name}", drop)

    # --- tables ----------------------------------------------------------------------------------------------------
    def create_table(self, database: str, name: str, columns: Sequence[Column | tuple[str, str]], *,
                     partition_keys: Sequence[Column | tuple[str, str]] = (), bucket_columns: Sequence[str] = (),
                     num_buckets: int | None = None, location: str | None = None,
                     params: Mapping[str, str] | None = None, comment: str | None = None,
                     if_not_exists: bool = False) -> TableInfo:
        """Record a table.

        Raises:
            MetastoreError: bad names, duplicate columns, a partition key that is also a column, bucketing on an
                unknown column, or a bucket count outside 1..4096.
            InvalidPropertyError: a property Hive's metastore refuses (`properties.check_new_table`).
            AlreadyExistsError: the table exists (unless `if_not_exists`).
        """
        database = check_identifier(database, "database")
        name = check_identifier(name, "table")
        params = properties.check_new_table(f"{database}.{name}", params)
        cols = parse_columns([(check_identifier(c[0] if isinstance(c, tuple) else c.name, "column"),
                               c[1] if isinstance(c, tuple) else c.type) for c in columns])
        keys = tuple(parse_columns([(check_identifier(k[0] if isinstance(k, tuple) else k.name, "partition key"),
                                     k[1] if isinstance(k, tuple) else k.type) for k in partition_keys])) \
            if partition_keys else ()
        clash = {c.name for c in cols} & {k.name for k in keys}
        if clash:
            raise MetastoreError(f"table {database}.{name}: {sorted(clash)} cannot be both a column and a partition key")
        buckets = tuple(check_identifier(b, "bucketing column") for b in bucket_columns)
        unknown = set(buckets) - {c.name for c in cols}
        if unknown:
            raise MetastoreError(f"table {database}.{name}: bucketing columns {sorted(unknown)} are not columns")
        if buckets and not (num_buckets and 1 <= num_buckets <= 4096):
            raise MetastoreError(f"table {database}.{name}: CLUSTERED BY needs 1..4096 buckets, got {num_buckets}")

        def create(conn: Connection) -> TableInfo:
            db_row = self._database_row(conn, database)
            existing = conn.execute(sa.select(s.tbls.c.TBL_ID).where(s.tbls.c.DB_ID == db_row.DB_ID,
                                                                     s.tbls.c.TBL_NAME == name)).first()
            if existing is not None:
                if if_not_exists:
                    return self._table(conn, database, name)
                raise AlreadyExistsError(f"table {database}.{name} already exists")
            where = _absolute_location(location or posixpath.join(db_row.DB_LOCATION_URI, name),
                                       f"table {database}.{name}")
            self._check_location_free(conn, where, f"table {database}.{name}", own=(database, name))
            table_id = self._next(conn, "TBLS")
            conn.execute(s.tbls.insert().values(TBL_ID=table_id, DB_ID=db_row.DB_ID, TBL_NAME=name, LOCATION=where,
                                                NUM_BUCKETS=num_buckets if buckets else -1,
                                                OWNER=self.db.identity.user, COMMENT=comment,
                                                CREATE_TIME=self.db.clock.now_ms()))
            conn.execute(s.columns_v2.insert(), [{"TBL_ID": table_id, "COLUMN_NAME": c.name, "TYPE_NAME": c.type,
                                                  "INTEGER_IDX": i} for i, c in enumerate(cols)])
            if keys:
                conn.execute(s.partition_keys.insert(), [{"TBL_ID": table_id, "PKEY_NAME": k.name, "PKEY_TYPE": k.type,
                                                          "INTEGER_IDX": i} for i, k in enumerate(keys)])
            if buckets:
                conn.execute(s.bucketing_cols.insert(), [{"TBL_ID": table_id, "BUCKET_COL_NAME": b, "INTEGER_IDX": i}
                                                         for i, b in enumerate(buckets)])
            if params:
                conn.execute(s.table_params.insert(), [{"TBL_ID": table_id, "PARAM_KEY": k, "PARAM_VALUE": v}
                                                       for k, v in params.items()])
            return self._table(conn, database, name)

        try:
            return self.db.run(f"create table {database}.{name}", create)
        except DuplicateKeyError:  # created concurrently between our check and our insert
            if if_not_exists:
                return self.get_table(database, name)
            raise AlreadyExistsError(f"table {database}.{name} already exists") from None

    def _table_id(self, conn: Connection, database: str, name: str) -> int:
        db_row = self._database_row(conn, database)
        table_id = conn.execute(sa.select(s.tbls.c.TBL_ID).where(s.tbls.c.DB_ID == db_row.DB_ID,
                                                                 s.tbls.c.TBL_NAME == name)).scalar_one_or_none()
        if table_id is None:
            raise NoSuchObjectError(f"table {database}.{name} does not exist")
        return table_id

    def _table(self, conn: Connection, database: str, name: str) -> TableInfo:
        table_id = self._table_id(conn, database, name)
        row = conn.execute(sa.select(s.tbls).where(s.tbls.c.TBL_ID == table_id)).one()
        cols = conn.execute(sa.select(s.columns_v2.c.COLUMN_NAME, s.columns_v2.c.TYPE_NAME)
                            .where(s.columns_v2.c.TBL_ID == table_id).order_by(s.columns_v2.c.INTEGER_IDX)).all()
        keys = conn.execute(sa.select(s.partition_keys.c.PKEY_NAME, s.partition_keys.c.PKEY_TYPE)
                            .where(s.partition_keys.c.TBL_ID == table_id).order_by(s.partition_keys.c.INTEGER_IDX)).all()
        buckets = conn.execute(sa.select(s.bucketing_cols.c.BUCKET_COL_NAME).where(s.bucketing_cols.c.TBL_ID == table_id)
                               .order_by(s.bucketing_cols.c.INTEGER_IDX)).scalars().all()
        params = dict(conn.execute(sa.select(s.table_params.c.PARAM_KEY, s.table_params.c.PARAM_VALUE)
                                   .where(s.table_params.c.TBL_ID == table_id)).all())
        return TableInfo(database, name, row.LOCATION, tuple(Column(*c) for c in cols), tuple(Column(*k) for k in keys),
                         tuple(buckets), row.NUM_BUCKETS, params, row.COMMENT, row.OWNER, row.CREATE_TIME)

    def get_table(self, database: str, name: str) -> TableInfo:
        database, name = check_identifier(database, "database"), check_identifier(name, "table")
        return self.db.run(f"read table {database}.{name}", lambda conn: self._table(conn, database, name), write=False)

    def require_transactional(self, database: str, name: str) -> TableInfo:
        """The table, which must be a full ACID table.

        Raises:
            NoSuchObjectError: unknown; NotTransactionalError: not 'transactional'='true' (or insert-only).
        """
        database, name = check_identifier(database, "database"), check_identifier(name, "table")
        return self.db.run(f"read table {database}.{name}",
                           lambda conn: self.require_transactional_in(conn, database, name), write=False)

    def require_transactional_in(self, conn: Connection, database: str, name: str) -> TableInfo:
        """`require_transactional` inside the caller's database transaction (same errors)."""
        table = self._table(conn, check_identifier(database, "database"), check_identifier(name, "table"))
        if not table.is_transactional:
            raise NotTransactionalError(f"table {table.full_name} is not a full ACID table: it needs TBLPROPERTIES "
                                        "('transactional'='true') and must not be insert-only")
        return table

    def list_tables(self, database: str) -> list[str]:
        database = check_identifier(database, "database")

        def read(conn: Connection) -> list[str]:
            db_row = self._database_row(conn, database)
            return list(conn.execute(sa.select(s.tbls.c.TBL_NAME).where(s.tbls.c.DB_ID == db_row.DB_ID)
                                     .order_by(s.tbls.c.TBL_NAME)).scalars())

        return self.db.run(f"list tables of {database}", read, write=False)

    def _check_location_free(self, conn: Connection, where: str, what: str, *, own: tuple[str, str]) -> None:
        """A table's location must be its own: not the location of another table, not inside one and not around
        one (dropping either would take the other's files), and neither a database's directory, the warehouse root,
        nor above them. Tables inside a database's directory are the usual case. `own` (database, table): the table
        being created, which a concurrent CREATE may have recorded meanwhile (the caller reports a duplicate).

        Raises:
            MetastoreError: naming the other owner; nothing is created.
        """
        t, d = s.tbls.c, s.dbs.c
        other = conn.execute(sa.select(d.NAME, t.TBL_NAME, t.LOCATION).join(s.dbs, d.DB_ID == t.DB_ID).where(
            sa.or_(t.LOCATION.in_(_ancestors(where)), t.LOCATION.startswith(_below(where), autoescape=True)),
            sa.not_(sa.and_(d.NAME == own[0], t.TBL_NAME == own[1])))  # the same table created meanwhile: a duplicate
            .order_by(t.TBL_ID).limit(1)).first()
        if other is not None:
            how = "is" if other.LOCATION == where else ("is inside" if where.startswith(_below(other.LOCATION))
                                                       else "contains")
            raise MetastoreError(f"{what}: location {where!r} {how} the location of table {other.NAME}."
                                 f"{other.TBL_NAME} ({other.LOCATION}); give the table a location of its own")
        owner = conn.execute(sa.select(d.NAME, d.DB_LOCATION_URI).where(sa.or_(
            d.DB_LOCATION_URI == where, d.DB_LOCATION_URI.startswith(_below(where), autoescape=True)))
            .order_by(d.DB_ID).limit(1)).first()
        if owner is not None or where in _ancestors(self.warehouse):
            whose = (f"the directory of database {owner.NAME} ({owner.DB_LOCATION_URI})" if owner is not None
                     else f"the warehouse root ({self.warehouse})")
            how = "is" if owner is not None and owner.DB_LOCATION_URI == where or where == self.warehouse \
                else "contains"
            raise MetastoreError(f"{what}: location {where!r} {how} {whose}; give the table a location of its own")

    def _check_database_location_free(self, conn: Connection, where: str, name: str) -> None:
        """A database's directory must be its own: not a table's location, inside one or around one (its tables
        would land in another table's files), not another database's directory, and not the warehouse root or above.

        Raises:
            MetastoreError: naming the other owner; nothing is created.
        """
        t, d = s.tbls.c, s.dbs.c
        what = f"database {name}"
        table = conn.execute(sa.select(d.NAME, t.TBL_NAME, t.LOCATION).join(s.dbs, d.DB_ID == t.DB_ID).where(
            sa.or_(t.LOCATION.in_(_ancestors(where)), t.LOCATION.startswith(_below(where), autoescape=True)))
            .order_by(t.TBL_ID).limit(1)).first()
        if table is not None:
            how = "is" if table.LOCATION == where else ("is inside" if where.startswith(_below(table.LOCATION))
                                                       else "contains")
            raise MetastoreError(f"{what}: location {where!r} {how} the location of table {table.NAME}."
                                 f"{table.TBL_NAME} ({table.LOCATION}); give the database a directory of its own")
        other = conn.execute(sa.select(d.NAME).where(d.DB_LOCATION_URI == where, d.NAME != name).limit(1)).first()
        if other is not None and other.NAME != DEFAULT_DATABASE:
            raise MetastoreError(f"{what}: location {where!r} is the directory of database {other.NAME}; give the "
                                 "database a directory of its own")
        if where in _ancestors(self.warehouse):
            how = "is" if where == self.warehouse else "contains"
            raise MetastoreError(f"{what}: location {where!r} {how} the warehouse root ({self.warehouse}); give the "
                                 "database a directory of its own")

    def tables_within(self, location: str, *, other_than: tuple[str, str]) -> list[str]:
        """`db.table (location)` of the tables other than `other_than` whose location is `location` or inside it:
        what removing `location` would take from them."""
        t, d = s.tbls.c, s.dbs.c
        query = (sa.select(d.NAME, t.TBL_NAME, t.LOCATION).join(s.dbs, d.DB_ID == t.DB_ID).where(
            sa.or_(t.LOCATION == location, t.LOCATION.startswith(_below(location), autoescape=True)),
            sa.not_(sa.and_(d.NAME == other_than[0], t.TBL_NAME == other_than[1]))).order_by(t.TBL_ID).limit(20))
        return self.db.run("find tables inside a location", lambda conn: [
            f"{row.NAME}.{row.TBL_NAME} ({row.LOCATION})" for row in conn.execute(query).all()], write=False)

    def list_all_tables(self) -> list[TableInfo]:
        def read(conn: Connection) -> list[TableInfo]:
            rows = conn.execute(sa.select(s.dbs.c.NAME, s.tbls.c.TBL_NAME).join(s.tbls, s.tbls.c.DB_ID == s.dbs.c.DB_ID)
                                .order_by(s.dbs.c.NAME, s.tbls.c.TBL_NAME)).all()
            return [self._table(conn, database, name) for database, name in rows]

        return self.db.run("list tables", read, write=False)

    def _drop_table(self, conn: Connection, database: str, name: str) -> TableInfo:
        info = self._table(conn, database, name)
        table_id = self._table_id(conn, database, name)
        for table in (s.columns_v2, s.partition_keys, s.bucketing_cols, s.table_params, s.partitions):
            conn.execute(table.delete().where(table.c.TBL_ID == table_id))
        conn.execute(s.tbls.delete().where(s.tbls.c.TBL_ID == table_id))
        # Forget the table's transactional records too (Hive's CleanupRecordsFunction), so a table created later
        # under the same name starts from write id 1 with an empty compaction history.
        for table, prefix in ((s.txn_components, "TC"), (s.completed_txn_components, "CTC"),
                              (s.compaction_queue, "CQ"), (s.completed_compactions, "CC"),
                              (s.txn_to_write_id, "T2W"), (s.next_write_id, "NWI"), (s.write_set, "WS"),
                              (s.reader_leases, "RL"), (s.txn_staging, "TS"), (s.stream_commits, "SC")):
            conn.execute(table.delete().where(table.c[f"{prefix}_DATABASE"] == database,
                                              table.c[f"{prefix}_TABLE"] == name))
        return info

    def drop_table(self, database: str, name: str, *, if_exists: bool = False) -> TableInfo | None:
        """Forget a table; returns its definition (None if it did not exist and `if_exists`)."""
        database, name = check_identifier(database, "database"), check_identifier(name, "table")

        def drop(conn: Connection) -> TableInfo | None:
            try:
                return self._drop_table(conn, database, name)
            except NoSuchObjectError:
                if if_exists:
                    return None
                raise

        return self.db.run(f"drop table {database}.{name}", drop)

    def alter_table_params(self, database: str, name: str, *, set_params: Mapping[str, str] | None = None,
                           unset: Sequence[str] = (), if_exists: bool = False) -> TableInfo:
        """ALTER TABLE ... SET / UNSET TBLPROPERTIES in one metastore transaction, with Hive's rules: a transactional
        table stays transactional and keeps its 'transactional_properties' (`properties.changed_table`).

        Raises:
            NoSuchObjectError: no such table, or a key to unset is not there (unless `if_exists`).
            InvalidPropertyError: a value the catalog refuses, or a change Hive forbids; nothing is changed.
        """
        return self._change_table_params(database, name, set_params=set_params, unset=unset, if_exists=if_exists,
                                         transitions=True)

    def set_table_params(self, database: str, name: str, params: Mapping[str, str]) -> TableInfo:
        """Set table properties (replacing a key that differs only in case, as Hive matches them).

        The values are checked (`properties.changed_table`) but not Hive's ALTER TABLE transitions: this is the
        store's own write, with which a tool may repair a table; statements go through `alter_table_params`.
        """
        return self._change_table_params(database, name, set_params=params, transitions=False)

    def unset_table_params(self, database: str, name: str, keys: Sequence[str], *, if_exists: bool = False) -> TableInfo:
        """Remove table properties (case-insensitively), all or none; like `set_table_params`, without the ALTER
        TABLE transitions."""
        return self._change_table_params(database, name, unset=keys, if_exists=if_exists, transitions=False)

    def _change_table_params(self, database: str, name: str, *, set_params: Mapping[str, str] | None = None,
                             unset: Sequence[str] = (), if_exists: bool = False, transitions: bool) -> TableInfo:
        database, name = check_identifier(database, "database"), check_identifier(name, "table")
        tp = s.table_params.c

        def change(conn: Connection) -> TableInfo:
            table_id = self._table_id(conn, database, name)
            current = dict(conn.execute(sa.select(tp.PARAM_KEY, tp.PARAM_VALUE).where(tp.TBL_ID == table_id)).all())
            after = properties.changed_table(f"{database}.{name}", current, set_params=set_params, unset=unset,
                                             if_exists=if_exists, transitions=transitions)
            stale = [key for key, value in current.items() if after.get(key) != value]  # removed, respelled, changed
            if stale:
                conn.execute(s.table_params.delete().where(tp.TBL_ID == table_id, tp.PARAM_KEY.in_(stale)))
            fresh = [{"TBL_ID": table_id, "PARAM_KEY": key, "PARAM_VALUE": value} for key, value in after.items()
                     if current.get(key) != value]
            if fresh:
                conn.execute(s.table_params.insert(), fresh)
            return self._table(conn, database, name)

        return self.db.run(f"change properties of {database}.{name}", change)

    # --- partitions ------------------------------------------------------------------------------------------------
    def add_partition(self, database: str, name: str, spec: Mapping[str, object]) -> PartitionInfo:
        """The partition for a spec, recording it if new (writes create partitions as Hive's dynamic partitioning does)."""
        database, name = check_identifier(database, "database"), check_identifier(name, "table")

        def add(conn: Connection) -> PartitionInfo:
            table = self._table(conn, database, name)
            part_name = table.partition_name(spec)
            if part_name is None:
                raise MetastoreError(f"table {table.full_name} is not partitioned")
            table_id = self._table_id(conn, database, name)
            row = conn.execute(sa.select(s.partitions).where(s.partitions.c.TBL_ID == table_id,
                                                             s.partitions.c.PART_NAME == part_name)).first()
            if row is None:  # a concurrent writer may add it first: then keep theirs
                insert = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(s.partitions)
                conn.execute(insert.values(PART_ID=self._next(conn, "PARTITIONS"), TBL_ID=table_id, PART_NAME=part_name,
                                           LOCATION=table.partition_location(part_name),
                                           CREATE_TIME=self.db.clock.now_ms()).on_conflict_do_nothing())
                row = conn.execute(sa.select(s.partitions).where(s.partitions.c.TBL_ID == table_id,
                                                                 s.partitions.c.PART_NAME == part_name)).one()
            return PartitionInfo(database, name, row.PART_NAME, row.LOCATION, row.CREATE_TIME)

        return self.db.run(f"add partition of {database}.{name}", add)

    def get_partition(self, database: str, name: str, spec: Mapping[str, object]) -> PartitionInfo:
        """An existing partition.

        Raises:
            NoSuchObjectError: the table has no such partition.
        """
        table = self.get_table(database, name)
        part_name = table.partition_name(spec)
        if part_name is None:
            raise MetastoreError(f"table {table.full_name} is not partitioned")
        for partition in self.list_partitions(database, name):
            if partition.name == part_name:
                return partition
        raise NoSuchObjectError(f"table {table.full_name} has no partition {part_name!r}")

    def list_partitions(self, database: str, name: str) -> list[PartitionInfo]:
        database, name = check_identifier(database, "database"), check_identifier(name, "table")

        def read(conn: Connection) -> list[PartitionInfo]:
            table_id = self._table_id(conn, database, name)
            rows = conn.execute(sa.select(s.partitions).where(s.partitions.c.TBL_ID == table_id)
                                .order_by(s.partitions.c.PART_NAME)).all()
            return [PartitionInfo(database, name, r.PART_NAME, r.LOCATION, r.CREATE_TIME) for r in rows]

        return self.db.run(f"list partitions of {database}.{name}", read, write=False)
