"""The `hiveacid` data source: ACID tables read and written through PySpark's own API (`pyspark.sql.datasource`).

    from spark_jobs.datasource import HiveAcidDataSource
    spark.dataSource.register(HiveAcidDataSource)        # sessions of `spark_jobs.session.build_session` have it
    df = spark.read.format("hiveacid").option("metastore", url).load("db.table")
    df.write.format("hiveacid").option("metastore", url).mode("append").save("db.table")

Writes (append, and overwrite as Hive's INSERT OVERWRITE) are `spark_jobs.datasource_write`'s; the rest of this
docstring is about reads.

The DataFrame holds the rows of one snapshot, merge-on-read (deletes and updates applied, aborted and open writes
invisible), with the schema `spark_jobs.read.read_table` gives: [`row__id`,] the table's columns, the partition
columns. Options (their names are case-insensitive):

- `table` (or the path given to `load`): `database.table`.
- `metastore`: the metastore's SQLAlchemy URL. Default: the `acid` command's (`ACID_METASTORE_URL` with the password
  of `ACID_METASTORE_PASSWORD`, else SQLite under `ACID_HOME`: `acid_core.metastore.engine.default_url`), resolved
  where Spark plans the read, in the environment of its Python workers (the driver's, plus `spark.executorEnv.*`).
- `rowId`: `true` puts Hive's `row__id` struct<writeid,bucketid,rowid> first; `false` (the default) leaves it out.
- `validWriteIds`: an explicit snapshot, Hive's ValidWriteIdList of the table (`db.table:hwm:minOpen:open:aborted`).
- `partitionPruning`: `true` lists and reads only the partitions the query's filters can hold in (below); `false`
  (the default) reads every partition and leaves the filters to Spark.

What runs where. On the driver, in Spark's Python planner workers: `load` reads the catalog and takes the snapshot
(every action on the DataFrame reads that snapshot); a query plans the read (`plan_table_read`: the partitions'
listings and footers) and makes every read unit (an insert file, or one stripe of a multi-stripe file) one input
partition. Spark's tasks read one unit each from the files, through the code `read_table`'s tasks run
(`UnitOutput.read`), and never use the metastore.

Partition pruning (`partitionPruning`, through `pushFilters`): comparisons of a partition column with a literal (=,
<=>, <, <=, >, >=, IN), IS NULL and IS NOT NULL become an `acid_core.read.pruning` predicate; partitions where it
cannot hold are neither listed nor read. Every filter is also handed back, so Spark still evaluates it on the rows:
pruning only drops partitions where the pruner is sure no row matches. NOT, LIKE, OR and filters on other columns do
not prune. It is opt-in because Spark 4.3 keeps the plan of a query with pushed filters on the DataFrame's data source,
not on that query's scan: a later query on the same DataFrame with no filter Spark can push (a bare count, an OR)
reuses that plan and silently reads only the partitions the earlier query kept (`PruningHiveAcidReader`). With
pruning, query each DataFrame with partition filters only, and `load` the table again for anything else.

Other limits of Spark 4.3's API: no column pruning (Spark never tells a Python reader which columns a query uses:
every task returns every column, Spark drops the unused ones); and a reader with `pushFilters` needs
`spark.sql.python.filterPushdown.enabled=true` (`build_session` sets it; without it Spark refuses a pruning read
with DATA_SOURCE_PUSHDOWN_DISABLED, naming the setting; the default reader works either way).

The snapshot is not held by a reader lease: a DataFrame kept past a compaction may find that the cleaner removed files
its snapshot reads (a read may then fail); load it again, or use `read_table` under `leased_snapshot` for long reads.
The `metastore` option travels with Spark's pickled data source to its Python workers (planners and tasks): it is
never logged nor shown in an error (`redact`), but keep the password out of it where you can (ACID_METASTORE_PASSWORD).

Cost: memory, per task (one unit): one stripe of the unit's file and the delete events of its bucket in its partition
(or a stripe of each of those delete files, on the sort-merge path); a bucket's delete events are loaded once per
unit, where `read_table`'s tasks load them once per run of units. The planner holds one query's plan. Time: planning
as `read_table`'s (Spark keeps a DataFrame's plan for its queries without pushed filters and plans the others
again), then linear in the rows of the partitions read.
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
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from acid_core.errors import AcidError, InvalidValidityListError, UsageError
from acid_core.format.types import parse_type
from acid_core.format.validity import ValidWriteIdList
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.txns import Snapshot, full_table_name
from acid_core.read.pruning import Comparison, Literal, Predicate, all_of
from acid_core.read.read_plan import InsertSource, ReadPlan, source_bucket
from spark_jobs.datasource_changes import HiveAcidChangeReader, HiveAcidChangeStream, change_schema, parse_write_id
from spark_jobs.datasource_options import FORMAT_NAME, HiveAcidOptionError, Target, lowered, parse_target
from spark_jobs.datasource_stream import HiveAcidStreamWriter
from spark_jobs.datasource_write import HiveAcidWriter
from spark_jobs.read import PartitionRead, UnitOutput, bucket_deletes, plan_table_read, table_schema

# and `path`, which load() sets
OPTIONS = ("table", "metastore", "rowId", "validWriteIds", "partitionPruning", "changesFrom", "changesTo")
_COMPARISONS = {EqualTo: "=", EqualNullSafe: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
                LessThanOrEqual: "<="}
_log = logging.getLogger(__name__)


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
    partition_pruning: bool = False
    changes_from: str | None = None
    changes_to: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Raises: HiveAcidOptionError, naming the option and its value (never a metastore URL's password)."""
        given = lowered(options, OPTIONS, "read")
        target = parse_target(given, "read")
        database, table_name, metastore = target.database, target.table, target.metastore
        changes_from, changes_to = given.get("changesfrom"), given.get("changesto")
        if changes_to is not None and changes_from is None:
            raise HiveAcidOptionError(f"{FORMAT_NAME}: option changesTo needs changesFrom (a change read)")
        if changes_from is not None:
            for option in ("rowId", "validWriteIds", "partitionPruning"):
                if option.lower() in given:
                    raise HiveAcidOptionError(f"{FORMAT_NAME}: option {option} does not apply to a change read "
                                              "(changesFrom): its rows always carry row__id")
        return cls(database, table_name, metastore, _boolean(given, "rowId"), given.get("validwriteids"),
                   _boolean(given, "partitionPruning"), changes_from, changes_to)

    @property
    def target(self) -> Target:
        return Target(self.database, self.table, self.metastore)

    def url(self) -> str:
        """The metastore URL: the option, else the `acid` command's default (`default_url`), resolved here."""
        return Target(self.database, self.table, self.metastore).url()


def _boolean(given: Mapping[str, str], option: str) -> bool:
    text = given.get(option.lower(), "false")
    if text.strip().lower() not in ("true", "false"):
        raise HiveAcidOptionError(f"{FORMAT_NAME}: option {option} must be true or false, got {text!r}")
    return text.strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class LoadedTable:
    """What `load` fixed: the table as the catalog described it and the snapshot every action reads."""

    info: TableInfo
    snapshot: Snapshot


def _open_metastore(options: ReadOptions) -> Metastore:
    return Target(options.database, options.table, options.metastore).open_metastore()


def _explicit_snapshot(info: TableInfo, now: Snapshot, text: str) -> Snapshot:
    """`now` with the table's write-id list replaced by the one `text` gives, which must describe a snapshot this
    table had: nothing above its high watermark, its minimum open write id the least open one (which decides the
    bases it may read, Hive's isValidBase), and every write id open or aborted now (at or below the list's high
    watermark) listed as open or aborted, so that no uncommitted row becomes visible."""
    name = full_table_name(info.database, info.name)
    try:
        wanted = ValidWriteIdList.parse(text)
    except InvalidValidityListError as exc:
        raise HiveAcidOptionError(f"{FORMAT_NAME}: option validWriteIds: {exc}") from None
    if (wanted.table_name or "null").lower() != name:
        raise HiveAcidOptionError(f"{FORMAT_NAME}: option validWriteIds {text!r} is a write-id list of "
                                  f"{wanted.table_name}, not of {name}")
    if wanted.open_ids and wanted.min_open != wanted.open_ids[0]:
        raise HiveAcidOptionError(f"{FORMAT_NAME}: option validWriteIds {text!r}: its minimum open write id "
                                  f"{wanted.min_open} is not the least of its open write ids ({wanted.open_ids[0]})")
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


def filter_predicate(spark_filter: Filter, key_kinds: Mapping[str, str]) -> Predicate | None:
    """What a filter Spark pushes says of the partition columns (`key_kinds`: name -> Hive type kind), or None when
    it says nothing the pruner can use."""
    attribute = getattr(spark_filter, "attribute", ())
    if len(attribute) != 1 or attribute[0].lower() not in key_kinds:
        return None
    column = attribute[0].lower()
    if isinstance(spark_filter, IsNotNull):
        return Comparison(column, "is not null", ())
    if isinstance(spark_filter, IsNull):
        return Comparison(column, "is null", ())
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
    """Plans a `hiveacid` read on the driver (`partitions`) and reads its units on the tasks (`read`): every
    partition of the table, whatever the query's filters (Spark applies them to the rows)."""

    def __init__(self, options: ReadOptions, loaded: LoadedTable, schema: StructType) -> None:
        self.options = options
        self.loaded = loaded
        self.key_kinds = {key.name.lower(): parse_type(key.type).kind for key in loaded.info.partition_keys}
        self.predicates: list[Predicate] = []
        info = loaded.info
        self.output = UnitOutput(loaded.snapshot.write_ids[full_table_name(info.database, info.name)],
                                 tuple(column.name for column in info.columns), options.include_row_id,
                                 to_arrow_schema(schema, timezone="UTC"))

    def partitions(self) -> list[InputPartition]:
        """One input partition per read unit (of the partitions the pushed filters leave, when pruning), in read
        order.

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


class PruningHiveAcidReader(HiveAcidReader):
    """`HiveAcidReader` that lists and reads only the partitions the query's pushed filters can hold in
    (`partitionPruning`).

    Spark 4.3 keeps the read plan made with pushed filters on the DataFrame's data source, not on the query's scan
    (PythonScanBuilder.pushFilters stores it with PythonDataSourceV2.setReadInfo); a later query on the same
    DataFrame with no filter Spark can hand to Python (none of =, <=>, <, <=, >, >=, IN, IS [NOT] NULL, LIKE 'a%' on
    any column, e.g. a bare count or an OR) is not planned again and reads only the partitions the earlier query
    kept. The reader is not called for that query and its tasks run the earlier query's read function: nothing here
    can tell the two apart. Hence opt-in, for DataFrames made to be queried with partition filters only.
    """

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Keeps what the filters say of the partition columns, for `partitions`; gives every filter back."""
        for spark_filter in filters:
            predicate = filter_predicate(spark_filter, self.key_kinds)
            if predicate is not None:
                self.predicates.append(predicate)
        return filters


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
        """[`row__id`,] the table's columns, the partition columns, as `read_table` gives them; a change read's
        (`changesFrom`) is `spark_jobs.datasource_changes.change_schema`."""
        options, loaded = self._load()
        if options.changes_from is not None:
            return change_schema(loaded.info)
        return table_schema(loaded.info, include_row_id=options.include_row_id)

    def reader(self, schema: StructType) -> HiveAcidReader:
        """A reader of the snapshot `schema()` took (with a schema given to `spark.read.schema`, Spark skips
        `schema()`: each query then takes its own snapshot).

        Raises:
            HiveAcidOptionError: a schema given to `spark.read.schema` is not the table's.
        """
        options, loaded = self._load()
        expected = self.schema()
        if schema != expected:
            raise HiveAcidOptionError(f"{FORMAT_NAME}: the schema given ({schema.simpleString()}) is not the schema "
                                      f"of {loaded.info.full_name} ({expected.simpleString()}): drop .schema(...)")
        if options.changes_from is not None:
            name = full_table_name(loaded.info.database, loaded.info.name)
            return HiveAcidChangeReader.open(options.target, loaded.info, loaded.snapshot.txns,
                                             loaded.snapshot.write_ids[name],
                                             {"changesfrom": options.changes_from, "changesto": options.changes_to},
                                             schema)
        return (PruningHiveAcidReader if options.partition_pruning else HiveAcidReader)(options, loaded, schema)

    def streamReader(self, schema: StructType) -> HiveAcidChangeStream:  # noqa: N802 (Spark's name)
        """`spark.readStream.format("hiveacid").option("changesFrom", w | "latest").load("db.table")`: the table's
        changes as a stream (`spark_jobs.datasource_changes`).

        Raises:
            HiveAcidOptionError: no `changesFrom`, or a bad one.
        """
        options, loaded = self._load()
        if options.changes_from is None or options.changes_to is not None:
            raise HiveAcidOptionError(f'{FORMAT_NAME}: a stream reads the changes of {loaded.info.full_name}: give '
                                      'option("changesFrom", <write id> or "latest") and no changesTo')
        start = parse_write_id("changesFrom", options.changes_from, latest=True)
        assert start is not None
        return HiveAcidChangeStream(options.target, loaded.info, start, self.schema())

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """`df.write.format("hiveacid").mode("append" | "overwrite").save("db.table")`: one write transaction
        (`spark_jobs.datasource_write`), opened here."""
        return HiveAcidWriter.open(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:  # noqa: N802
        """`df.writeStream.format("hiveacid").option("checkpointLocation", path).start("db.table")`: each
        micro-batch one transaction, exactly once (`spark_jobs.datasource_stream`)."""
        return HiveAcidStreamWriter.open(dict(self.options), schema, overwrite)


__all__ = ["FORMAT_NAME", "HiveAcidDataSource", "HiveAcidOptionError", "HiveAcidReader", "LoadedTable",
           "PruningHiveAcidReader", "ReadOptions", "TableChangedError", "UnitPartition", "filter_predicate",
           "load_table"]
