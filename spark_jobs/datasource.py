"""The `hiveacid` data source: ACID tables read through PySpark's own API (`pyspark.sql.datasource`).

    from spark_jobs.datasource import HiveAcidDataSource
    spark.dataSource.register(HiveAcidDataSource)        # sessions of `spark_jobs.session.build_session` have it
    df = spark.read.format("hiveacid").option("metastore", url).load("db.table")

The DataFrame holds the rows of one snapshot, merge-on-read (deletes and updates applied, aborted and open writes
invisible), with the schema `spark_jobs.read.read_table` gives: [`row__id`,] the table's columns, the partition
columns. Options (their names are case-insensitive):

- `table` (or the path given to `load`): `database.table`.
- `metastore`: the metastore's SQLAlchemy URL. Default: the `acid` command's (`ACID_METASTORE_URL` with the password
  of `ACID_METASTORE_PASSWORD`, else SQLite under `ACID_HOME`: `acid_core.metastore.engine.default_url`), resolved
  where Spark plans the read, in the environment of its Python workers (the driver's, plus `spark.executorEnv.*`).
- `rowId`: `true` puts Hive's `row__id` struct<writeid,bucketid,rowid> first; `false` (the default) leaves it out.
- `validWriteIds`: an explicit snapshot, Hive's ValidWriteIdList of the table (`db.table:hwm:minOpen:open:aborted`).

What runs where. On the driver, in Spark's Python planner workers: `load` reads the catalog and takes the snapshot
(every action on the DataFrame reads that snapshot); each query then plans the read (`plan_table_read`: only the
partitions its filters leave are listed, their footers read) and makes every read unit (an insert file, or one stripe
of a multi-stripe file) one input partition. Spark's tasks read one unit each from the files, through the code
`read_table`'s tasks run (`UnitOutput.read`), and never use the metastore.

Filters (`pushFilters`): comparisons of a partition column with a literal (=, <=>, <, <=, >, >=, IN) and IS NOT NULL
become an `acid_core.read.pruning` predicate; partitions where it cannot hold are neither listed nor read. Every
filter is also handed back, so Spark still evaluates it on the rows: pruning only drops partitions where the pruner
is sure no row matches (its rules, not Spark's, decide partition values' types). IS NULL, NOT, LIKE-style filters and
filters on other columns do not prune.

Spark 4.3's API limits this reader: it asks for no column pruning (every task returns every column, Spark drops the
unused ones), a reader with `pushFilters` needs `spark.sql.python.filterPushdown.enabled=true` (`build_session` sets
it; Spark refuses the read otherwise and names the setting), and Spark keeps the read plan of a query with pushable
filters on the DataFrame it was made from, so a later query on the same DataFrame with no filter Spark can push
reuses that plan: use a new `load` for it (see `HiveAcidReader`).

Cost: memory, per task: one stripe of one unit and the delete events of its bucket in one partition (or a stripe of
each delete file on the sort-merge path); the planner holds one query's plan. Time: the read_table plan per query,
then linear in the rows of the partitions kept.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from acid_core.errors import AcidError, InvalidSettingError, InvalidValidityListError, MetastoreError, UsageError
from acid_core.format.types import INTEGER_KINDS, parse_type
from acid_core.format.validity import ValidWriteIdList
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.engine import default_url, redact, split_credentials
from acid_core.metastore.txns import Snapshot, full_table_name
from acid_core.read.pruning import AnyOf, Comparison, Literal, Predicate, all_of
from acid_core.read.read_plan import InsertSource, ReadPlan, source_bucket
from spark_jobs.read import PartitionRead, UnitOutput, bucket_deletes, plan_table_read, table_schema

FORMAT_NAME = "hiveacid"
OPTIONS = ("table", "metastore", "rowId", "validWriteIds")  # and `path`, which `load("db.table")` sets
_COMPARISONS = {EqualTo: "=", EqualNullSafe: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
                LessThanOrEqual: "<="}
_log = logging.getLogger(__name__)


class HiveAcidOptionError(InvalidSettingError):
    """An option of the `hiveacid` data source is missing, unknown or has a bad value."""


class TableChangedError(AcidError):
    """A table's columns, partition keys or location changed since the DataFrame reading it was loaded."""


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """The options of one `hiveacid` read, checked. `metastore` is None for the default URL."""

    database: str
    table: str
    metastore: str | None
    include_row_id: bool
    valid_write_ids: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Raises: HiveAcidOptionError, naming the option and its value (never a metastore URL's password)."""
        given = {str(key).lower(): value for key, value in options.items()}
        unknown = sorted(set(given) - {name.lower() for name in OPTIONS} - {"path"})
        if unknown:
            raise HiveAcidOptionError(f"{FORMAT_NAME}: unknown option(s) {unknown}: the options are "
                                      f"{', '.join(OPTIONS)} (the table may also be the path given to load)")
        path, table = given.get("path"), given.get("table")
        if path and table and path.lower() != table.lower():
            raise HiveAcidOptionError(f"{FORMAT_NAME}: load({path!r}) and option table {table!r} name different "
                                      "tables: give one")
        name = table or path
        if not name:
            raise HiveAcidOptionError(f'{FORMAT_NAME}: no table to read: load("db.table") or option("table", '
                                      '"db.table")')
        database, dot, table_name = name.partition(".")
        if not dot or not database or not table_name or "." in table_name:
            raise HiveAcidOptionError(f"{FORMAT_NAME}: table {name!r} is not database.table (e.g. default.sales)")
        row_id = given.get("rowid", "false").strip().lower()
        if row_id not in ("true", "false"):
            raise HiveAcidOptionError(f"{FORMAT_NAME}: option rowId must be true or false, got {given['rowid']!r}")
        metastore = given.get("metastore")
        if metastore is not None:
            try:
                split_credentials(metastore)  # parses it; its own error would quote the parser's complaint
            except MetastoreError:
                raise HiveAcidOptionError(f"{FORMAT_NAME}: option metastore {redact(metastore)} is not a SQLAlchemy "
                                          "URL (postgresql://user@host/db, sqlite:////path/metastore.db)") from None
        return cls(database, table_name, metastore, row_id == "true", given.get("validwriteids"))

    def url(self) -> str:
        """The metastore URL: the option, else the `acid` command's default (`default_url`), resolved here."""
        return self.metastore or default_url()


@dataclass(frozen=True, slots=True)
class LoadedTable:
    """What `load` fixed: the table as the catalog described it and the snapshot every action reads."""

    info: TableInfo
    snapshot: Snapshot


def _open_metastore(options: ReadOptions) -> Metastore:
    url = options.url()
    metastore = Metastore(url, pool_size=1)
    _log.info("%s: metastore %s", FORMAT_NAME, redact(url))
    return metastore


def _explicit_snapshot(info: TableInfo, now: Snapshot, text: str) -> Snapshot:
    """`now` with the table's write-id list replaced by the one `text` gives, which must describe a snapshot this
    table had: nothing above its high watermark, and every write id open or aborted now (at or below the list's high
    watermark) listed as open or aborted (so no uncommitted row becomes visible)."""
    name = full_table_name(info.database, info.name)
    try:
        wanted = ValidWriteIdList.parse(text)
    except InvalidValidityListError as exc:
        raise HiveAcidOptionError(f"{FORMAT_NAME}: option validWriteIds: {exc}") from None
    if (wanted.table_name or "null").lower() != name:
        raise HiveAcidOptionError(f"{FORMAT_NAME}: option validWriteIds {text!r} is a write-id list of "
                                  f"{wanted.table_name}, not of {name}")
    current = now.write_ids[name]
    if wanted.high_watermark > current.high_watermark:
        raise HiveAcidOptionError(f"{FORMAT_NAME}: option validWriteIds {text!r}: its high watermark "
                                  f"{wanted.high_watermark} is above {name}'s ({current.high_watermark}): no snapshot "
                                  "of the table saw those write ids")
    for write_id in current.exceptions:
        if write_id <= wanted.high_watermark and wanted.is_valid(write_id):
            state = "aborted" if current.is_aborted(write_id) else "open"
            raise HiveAcidOptionError(f"{FORMAT_NAME}: option validWriteIds {text!r} would read write id {write_id} "
                                      f"of {name}, which is {state}: list it as open or aborted")
    return Snapshot(now.txns, {**now.write_ids, name: wanted})


def load_table(options: ReadOptions) -> LoadedTable:
    """The table and the snapshot a `hiveacid` DataFrame reads (the current one, or `validWriteIds`).

    Raises:
        NoSuchObjectError, NotTransactionalError: the table is unknown or not a full ACID table.
        HiveAcidOptionError: `validWriteIds` is malformed or no snapshot of the table.
        MetastoreError: the metastore cannot be used (its URL shown without the password).
    """
    metastore = _open_metastore(options)
    try:
        info = metastore.catalog.require_transactional(options.database, options.table)
        snapshot = metastore.txns.snapshot([info.full_name])
    finally:
        metastore.close()
    if options.valid_write_ids is not None:
        snapshot = _explicit_snapshot(info, snapshot, options.valid_write_ids)
    name = full_table_name(info.database, info.name)
    _log.info("%s: %s at %s", FORMAT_NAME, name, snapshot.write_ids[name])
    return LoadedTable(info, snapshot)


# --- filters as a partition predicate ------------------------------------------------------------------------------
def _literal(value: object) -> Literal | None:
    """A filter's value as a pruning literal: strings, integers, finite decimals and dates; None for the rest (a
    boolean, a float, a timestamp, NULL), which then does not prune."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return Literal("string", value)
    if isinstance(value, datetime.datetime):
        return None
    if isinstance(value, datetime.date):
        return Literal("date", value.isoformat())
    if isinstance(value, int):
        return Literal("number", str(value))
    if isinstance(value, Decimal) and value.is_finite():
        try:
            return Literal("number", format(value, "f"))
        except UsageError:
            return None
    return None


def _not_null(column: str, kind: str) -> Predicate | None:
    """IS NOT NULL in the pruning module's terms: a pair of comparisons one of which every value of the column's kind
    satisfies, while no comparison holds in Hive's default partition (where the column is NULL)."""
    if kind in ("string", "varchar"):
        return Comparison(column, ">=", (Literal("string", ""),))
    if kind in INTEGER_KINDS:
        zero = (Literal("number", "0"),)
        return AnyOf((Comparison(column, ">=", zero), Comparison(column, "<", zero)))
    if kind == "date":
        epoch = (Literal("date", "1970-01-01"),)
        return AnyOf((Comparison(column, ">=", epoch), Comparison(column, "<", epoch)))
    return None


def filter_predicate(spark_filter: Filter, key_kinds: Mapping[str, str]) -> Predicate | None:
    """What a filter Spark pushes says of the partition columns (`key_kinds`: name -> Hive type kind), or None when
    it says nothing the pruner can use."""
    attribute = getattr(spark_filter, "attribute", ())
    if len(attribute) != 1 or attribute[0].lower() not in key_kinds:
        return None
    column = attribute[0].lower()
    if isinstance(spark_filter, IsNotNull):
        return _not_null(column, key_kinds[column])
    if isinstance(spark_filter, In):
        literals = [_literal(value) for value in spark_filter.value if value is not None]
        if not literals or any(literal is None for literal in literals):
            return None
        return Comparison(column, "in", tuple(literals))
    operator = _COMPARISONS.get(type(spark_filter))
    literal = _literal(spark_filter.value) if operator is not None else None
    return None if literal is None else Comparison(column, operator, (literal,))


# --- the reader ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UnitPartition(InputPartition):
    """One read unit as a Spark input partition: its partition (with only the delete files of the unit's bucket),
    the insert file and the stripe (None: the whole file)."""

    partition: PartitionRead
    source: InsertSource
    stripe: int | None


class HiveAcidReader(DataSourceReader):
    """Plans a `hiveacid` read on the driver (`pushFilters`, `partitions`) and reads its units on the tasks (`read`).

    Spark 4.3 keeps the read plan made with pushed filters on the DataFrame's data source, not on the query's scan;
    a later query on the same DataFrame without filters Spark can push (none of =, <, IN, IS NOT NULL... on any
    column) is not planned again and reads the partitions the earlier query kept. Nothing the reader sees tells
    those queries apart, so the reader cannot prevent it: load the table again for such a query.
    """

    def __init__(self, options: ReadOptions, loaded: LoadedTable, schema: StructType) -> None:
        self.options = options
        self.loaded = loaded
        self.key_kinds = {key.name.lower(): parse_type(key.type).kind for key in loaded.info.partition_keys}
        self.predicates: list[Predicate] = []
        info = loaded.info
        self.output = UnitOutput(loaded.snapshot.write_ids[full_table_name(info.database, info.name)],
                                 tuple(column.name for column in info.columns), options.include_row_id,
                                 to_arrow_schema(schema, timezone="UTC"))

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Keeps what the filters say of the partition columns, for `partitions`; gives every filter back."""
        for spark_filter in filters:
            predicate = filter_predicate(spark_filter, self.key_kinds)
            if predicate is not None:
                self.predicates.append(predicate)
        return filters

    def partitions(self) -> list[InputPartition]:
        """One input partition per read unit of the partitions the pushed filters leave, in read order.

        Raises:
            TableChangedError: the table changed its columns, partition keys or location since `load`.
            AcidError: the plan fails as `plan_table_read`'s does.
        """
        info = self.loaded.info
        predicate = all_of(self.predicates)
        metastore = _open_metastore(self.options)
        try:
            plan = plan_table_read(metastore, info.database, info.name, partition_predicate=predicate,
                                   snapshot=self.loaded.snapshot)
        finally:
            metastore.close()
        now = plan.table
        if (now.location, now.columns, now.partition_keys) != (info.location, info.columns, info.partition_keys):
            raise TableChangedError(f"{FORMAT_NAME}: table {info.full_name} changed its columns, partition keys or "
                                    "location since this DataFrame was loaded: load it again")
        by_bucket: dict[tuple[int, int], PartitionRead] = {}
        units: list[InputPartition] = []
        for index, source, stripe in plan.units:
            key = (index, source_bucket(source))
            partition = by_bucket.get(key)
            if partition is None:
                whole = plan.partitions[index]
                partition = by_bucket[key] = dataclasses.replace(
                    whole, plan=ReadPlan(None, (), bucket_deletes(whole, key[1])))
            units.append(UnitPartition(partition, source, stripe))
        _log.info("%s: %s: %d partitions, %d units (partition predicate: %s)", FORMAT_NAME, info.full_name,
                  len(plan.partitions), len(units), predicate)
        return units

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of one unit, a stripe at a time (nothing for the empty partition Spark reads when a plan has no
        units)."""
        if isinstance(partition, UnitPartition):
            yield from self.output.read(partition.partition, partition.source, partition.stripe, {})


class HiveAcidDataSource(DataSource):
    """`spark.read.format("hiveacid")`: the rows of one snapshot of a Hive ACID table (module docstring)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _load(self) -> tuple[ReadOptions, LoadedTable]:
        loaded = getattr(self, "_loaded", None)
        if loaded is None:  # schema() keeps it: Spark pickles this data source after schema() for every query
            options = ReadOptions.parse(self.options)
            loaded = self._loaded = (options, load_table(options))
        return loaded

    def schema(self) -> StructType:
        """[`row__id`,] the table's columns, the partition columns, as `read_table` gives them."""
        options, loaded = self._load()
        return table_schema(loaded.info, include_row_id=options.include_row_id)

    def reader(self, schema: StructType) -> HiveAcidReader:
        """Raises: HiveAcidOptionError when `schema` (one given to `spark.read.schema`) is not the table's."""
        options, loaded = self._load()
        expected = table_schema(loaded.info, include_row_id=options.include_row_id)
        if schema != expected:
            raise HiveAcidOptionError(f"{FORMAT_NAME}: the schema given ({schema.simpleString()}) is not the schema "
                                      f"of {loaded.info.full_name} ({expected.simpleString()}): drop .schema(...)")
        return HiveAcidReader(options, loaded, schema)


__all__ = ["FORMAT_NAME", "HiveAcidDataSource", "HiveAcidOptionError", "HiveAcidReader", "LoadedTable", "ReadOptions",
           "TableChangedError", "UnitPartition", "filter_predicate", "load_table"]
