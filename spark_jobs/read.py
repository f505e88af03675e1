"""Reading ACID tables as Spark DataFrames under one snapshot: acid_core's merge-on-read, run on Spark's tasks.

The driver takes the snapshot (from an open transaction, a reader lease, or the metastore now), picks the partitions
from the catalog (a partial spec, and a `partition_predicate`: partitions the caller's condition cannot hold in are
neither listed nor read, as Hive's compiler prunes them), computes each one's directory state (`get_acid_state`) and
read plan (`plan_read`), as many partitions at once as their filesystem takes, opens the footers of the files to read
`FOOTER_THREADS` at a time, picks each partition's delete path (`uses_sort_merge`: Hive's
`hive.transactional.events.mem` rule) and splits it into units: one per insert file, or per stripe of a multi-stripe
file (`read_units`). Spark then reads the units in parallel (`mapInArrow`); every task opens the files through
acid_core (pyarrow.fs), loads the delete events of each bucket it reads once, from only that bucket's delete files
(or streams them, skipping delete stripes below the unit by `hive.acid.key.index`), and yields Arrow record batches a
stripe at a time. The `hiveacid` data source (`spark_jobs.datasource`) plans with `plan_table_read` too and runs
one unit per task through the same `UnitOutput.read`.

Columns: `row__id` struct<writeid:bigint,bucketid:int,rowid:bigint> first when asked for, then the table's columns
(catalog names; Hive's files say `_col0`...), then the partition columns typed by the catalog's key types. Types
follow the catalog through `spark_jobs.types`, the mapping writes use too: `timestamp` is TimestampNTZType (cut to
microseconds), `varchar(n)` and `char(n)` are strings (char values keep the padding Hive stores).

The plan lists the files of the snapshot once, at `read_table` time; every action on the DataFrame reads those
files. A compaction's cleaner may delete them afterwards unless a transaction or a reader lease holds the snapshot:
for a long read hold one (`leased_snapshot`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from acid_core.errors import AcidError, MetastoreError, SchemaMismatchError
from acid_core.format.layout import DEFAULT_PARTITION_NAME
from acid_core.format.validity import ValidWriteIdList
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.leases import Lease
from acid_core.metastore.locations import DataLocation, data_location
from acid_core.metastore.txns import Snapshot, full_table_name
from acid_core.read.merge import PartitionReader
from acid_core.read.pruning import PartitionPruner, Predicate
from acid_core.read.read_plan import (
    DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY,
    DeleteSource,
    Footer,
    InsertSource,
    ReadPlan,
    file_bucket,
    footer_paths,
    plan_read,
    read_footers,
    read_units,
    source_bucket,
    uses_sort_merge,
)
from acid_core.read.state import get_acid_state
from acid_core.storage.fs import FileSystem, concurrently
from spark_jobs.types import spark_schema, to_spark

DEFAULT_LEASE_HEARTBEAT_S = 30.0
_log = logging.getLogger(__name__)

hive_type_to_spark = to_spark  # the Spark type of a Hive column type string, as spark_jobs.types maps it


def table_schema(table: TableInfo, *, include_row_id: bool = False) -> StructType:
    """The DataFrame schema of `read_table`: [row__id,] columns, partition columns; every field nullable."""
    return spark_schema(table, include_row_id=include_row_id, include_partition_keys=True)


# --- the driver's plan -------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PartitionRead:
    """One partition as the tasks read it: its filesystem, the delete side of its read plan (the insert files travel
    as units), the delete path and the partition column values."""

    location: str
    fs: FileSystem
    plan: ReadPlan
    sort_merge: bool
    values: tuple[pa.Scalar, ...]


@dataclass(frozen=True, slots=True)
class TableReadPlan:
    """A table read under one snapshot: what each partition reads and the units Spark runs, in output order."""

    table: TableInfo
    snapshot: Snapshot
    write_ids: ValidWriteIdList
    partitions: tuple[PartitionRead, ...]
    units: tuple[tuple[int, InsertSource, int | None], ...]
    unit_bytes: tuple[float, ...] = ()  # each unit's estimated size (its file's bytes over its stripes)


def _snapshot(metastore: Metastore, table: TableInfo, txn_id: int | None, lease: Lease | None,
              snapshot: Snapshot | None = None) -> Snapshot:
    if txn_id is not None and lease is not None:
        raise MetastoreError(f"reading {table.full_name}: give txn_id ({txn_id}) or lease ({lease.lease_id}), not both")
    if snapshot is not None:
        if txn_id is not None or lease is not None:
            raise MetastoreError(f"reading {table.full_name}: give a snapshot, a txn_id or a lease, not several")
        if full_table_name(table.database, table.name) not in snapshot.write_ids:
            raise MetastoreError(f"the snapshot given holds no write-id list of {table.full_name}: take one that "
                                 f"names it (`metastore.txns.snapshot([{table.full_name!r}])`)")
        return snapshot
    if lease is not None:
        if (lease.database, lease.table) != (table.database, table.name):
            raise MetastoreError(f"reader lease {lease.lease_id} holds a snapshot of {lease.database}.{lease.table}, "
                                 f"not of {table.full_name}: acquire one on {table.full_name}")
        return lease.snapshot
    return metastore.txns.snapshot([table.full_name], current_txn=txn_id)


def _spec_text(value: object) -> str:
    """A partition value as it appears in a partition name (what the catalog stores)."""
    if value is None or value == "":
        return DEFAULT_PARTITION_NAME
    return str(value).lower() if isinstance(value, bool) else str(value)


def _selected_partitions(metastore: Metastore, table: TableInfo, partition: Mapping[str, object] | None,
                         predicate: Predicate | None = None) -> list[tuple[str | None, dict[str, str]]]:
    """(partition name, spec) of every partition the read covers: those of the catalog matching the partial spec
    `partition` and that `predicate` may hold in (`acid_core.read.pruning`). An unpartitioned table is one partition
    named None. Nothing is listed here: only the catalog is read."""
    if not table.partition_keys:
        if partition:
            raise MetastoreError(f"table {table.full_name} is not partitioned, got partition {dict(partition)!r}")
        return [(None, {})]
    keys = [k.name for k in table.partition_keys]
    wanted = {str(k).lower(): _spec_text(v) for k, v in (partition or {}).items()}
    unknown = sorted(set(wanted) - set(keys))
    if unknown:
        raise MetastoreError(f"partition {dict(partition)!r} of {table.full_name}: {unknown} are not partition keys "
                             f"(the keys are {keys})")
    pruner = PartitionPruner(predicate, {k.name: k.type for k in table.partition_keys})
    selected = []
    for info in metastore.catalog.list_partitions(table.database, table.name):
        spec = info.spec
        if all(spec.get(key) == value for key, value in wanted.items()) and pruner.matches(spec):
            selected.append((info.name, spec))
    return selected


def partition_values(table: TableInfo, spec: Mapping[str, str], schema: pa.Schema) -> tuple[pa.Scalar, ...]:
    values = []
    for key in table.partition_keys:
        arrow_type = schema.field(key.name).type
        text = spec.get(key.name)
        if text is None or text == DEFAULT_PARTITION_NAME:
            values.append(pa.scalar(None, arrow_type))
            continue
        try:
            values.append(pa.array([text]).cast(arrow_type)[0])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatchError(f"table {table.full_name}: partition value {text!r} of key {key.name!r} is not "
                                      f"a {key.type} ({exc})") from exc
    return tuple(values)


def plan_table_read(metastore: Metastore, database: str, table: str, *, partition: Mapping[str, object] | None = None,
                    partition_predicate: Predicate | None = None, txn_id: int | None = None,
                    lease: Lease | None = None, snapshot: Snapshot | None = None,
                    max_delete_events_in_memory: int = DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY) -> TableReadPlan:
    """Plan a read on the driver (see `read_table` for the arguments); lists the snapshot's files once.

    `snapshot`, instead of `txn_id` or `lease`: one taken before (with the table's write-id list), e.g. when a
    DataFrame of the `hiveacid` data source was made, so that every action on it reads the same snapshot.

    Only the partitions selected (`partition`, `partition_predicate`) are listed: as many at once as their
    filesystem takes (`FileSystem.io_threads`); then the footers of every file to read, `FOOTER_THREADS` at once.
    A partition (or unpartitioned table) whose directory does not exist yet reads as empty.
    """
    info = metastore.catalog.require_transactional(database, table)
    snapshot = _snapshot(metastore, info, txn_id, lease, snapshot)
    write_ids = snapshot.write_ids[full_table_name(info.database, info.name)]
    arrow_schema = to_arrow_schema(table_schema(info), timezone="UTC")
    selected = _selected_partitions(metastore, info, partition, partition_predicate)

    def list_partition(item: tuple[str | None, dict[str, str]]) -> tuple[DataLocation, dict, ReadPlan] | None:
        name, spec = item
        where = data_location(info, name)
        state = get_acid_state(where.path, write_ids=write_ids, txns=snapshot.txns, ignore_empty_files=True,
                               missing_ok=True, fs=where.fs)
        if state.listing is not None and not state.listing.entries:
            return None
        return where, spec, plan_read(where.fs, state, write_ids)

    threads = data_location(info).fs.io_threads if len(selected) > 1 else 1
    listed = [planned for planned in concurrently(list_partition, selected, threads=threads) if planned is not None]
    footers = {footer.path: footer for footer in
               read_footers([(where.fs, path) for where, _, plan in listed for path in footer_paths(plan)])}
    partitions: list[PartitionRead] = []
    units: list[tuple[int, InsertSource, int | None]] = []
    unit_bytes: list[float] = []
    for where, spec, plan in listed:
        sort_merge = uses_sort_merge(where.fs, plan.deletes, max_delete_events_in_memory=max_delete_events_in_memory,
                                     footers=footers)
        index = len(partitions)
        partitions.append(PartitionRead(where.path, where.fs, ReadPlan(None, (), plan.deletes), sort_merge,
                                        partition_values(info, spec, arrow_schema)))
        for source, stripe in read_units(where.fs, plan, footers=footers):
            units.append((index, source, stripe))
            unit_bytes.append(_unit_bytes(source, stripe, footers))
    return TableReadPlan(info, snapshot, write_ids, tuple(partitions), tuple(units), tuple(unit_bytes))


def _unit_bytes(source: InsertSource, stripe: int | None, footers: Mapping[str, Footer]) -> float:
    """A unit's estimated size: its file's bytes (the flushed length of a streaming file), over its stripes when the
    unit is one stripe."""
    if source.length is not None:
        return float(max(source.length, 1))
    footer = footers[source.path]
    return max(footer.length, 1) / (footer.stripes if stripe is not None else 1)


# --- the tasks ---------------------------------------------------------------------------------------------------
def conform_array(array: pa.Array, target: pa.DataType) -> pa.Array:
    """`array` as `target`: nested struct fields renamed by position (nulls for fields a file predates), the rest
    cast (timestamps to microseconds, cutting nanoseconds)."""
    if array.type == target:
        return array
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = array.flatten()
        fields = [conform_array(children[i], target.field(i).type) if i < len(children)
                  else pa.nulls(len(array), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(fields, fields=list(target), mask=array.is_null())
    if pa.types.is_list(target) and pa.types.is_list(array.type):
        offsets = array.offsets  # of this (maybe sliced) array, into the whole values array: rebase to the slice
        start = offsets[0].as_py()
        values = conform_array(array.values.slice(start, offsets[-1].as_py() - start), target.value_type)
        return pa.ListArray.from_arrays(pc.subtract(offsets, pa.scalar(start, offsets.type)), values, type=target,
                                        mask=array.is_null() if array.null_count else None)
    try:
        return array.cast(target, safe=not pa.types.is_timestamp(target))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(f"cannot read a column of type {array.type} as {target}: {exc}") from exc


def bucket_deletes(partition: PartitionRead, bucket: int) -> tuple[DeleteSource, ...]:
    """The delete files of `partition` that can hold deletes of rows in `bucket` (Hive writes a delete event into
    the bucket of the row it deletes)."""
    return tuple(d for d in partition.plan.deletes if file_bucket(d.path) == bucket)


@dataclass(frozen=True, slots=True)
class UnitOutput:
    """How a task turns units into output: the snapshot's write ids, the catalog's column names, whether `row__id`
    leads, and the Arrow schema of the output (`table_schema`'s). Shared by `read_table`'s tasks and the `hiveacid`
    data source's (`spark_jobs.datasource`)."""

    write_ids: ValidWriteIdList
    column_names: tuple[str, ...]
    include_row_id: bool
    schema: pa.Schema

    def read(self, partition: PartitionRead, source: InsertSource, stripe: int | None,
             readers: dict[int, PartitionReader]) -> Iterator[pa.RecordBatch]:
        """One unit's rows as record batches of `schema`, a stripe at a time. `readers` holds the delete side this
        task built for `partition` so far, by bucket: the bucket of `source` is loaded once, from its own delete
        files only, and kept there for the next unit of the same partition and bucket."""
        bucket = source_bucket(source)
        reader = readers.get(bucket)
        if reader is None:
            reader = readers[bucket] = PartitionReader(
                partition.fs, ReadPlan(None, (), bucket_deletes(partition, bucket)), self.write_ids,
                column_names=self.column_names, include_row_id=self.include_row_id, sort_merge=partition.sort_merge)
        for table in reader.read_pieces((source, stripe)):
            yield from with_partition_values(table, partition.values, self.schema).to_batches()


def with_partition_values(table: pa.Table, values: Sequence[pa.Scalar], schema: pa.Schema) -> pa.Table:
    """A piece of output (a unit's [row__id,] columns, or changes) conformed to `schema`, its partition's `values`
    appended as the last columns."""
    columns = []
    for position, field in enumerate(schema):
        if position < table.num_columns:
            column = table.column(position)
            columns.append(pa.chunked_array([conform_array(chunk, field.type) for chunk in column.chunks],
                                            type=field.type))
        else:
            columns.append(pa.repeat(values[position - table.num_columns], table.num_rows))
    return pa.Table.from_arrays(columns, schema=schema)


@dataclass(frozen=True, slots=True)
class _ReadUnits:
    """The function Spark runs on each task: unit numbers in, Arrow record batches of the unit's rows out."""

    partitions: tuple[PartitionRead, ...]
    units: tuple[tuple[int, InsertSource, int | None], ...]
    write_ids: ValidWriteIdList
    column_names: tuple[str, ...]
    include_row_id: bool
    schema: pa.Schema

    slots: tuple[int, ...] = ()

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        output = UnitOutput(self.write_ids, self.column_names, self.include_row_id, self.schema)
        readers: dict[int, PartitionReader] = {}
        current = None
        for batch in batches:
            for slot in batch.column(0).to_pylist():
                number = self.slots[slot] if self.slots else slot
                if number < 0:  # padding of a lighter task
                    continue
                index, source, stripe = self.units[number]
                if index != current:  # units come partition by partition: one partition's deletes at a time
                    readers, current = {}, index
                yield from output.read(self.partitions[index], source, stripe, readers)


def read_table(spark: SparkSession, metastore: Metastore, database: str, table: str, *,
               partition: Mapping[str, object] | None = None, partition_predicate: Predicate | None = None,
               include_row_id: bool = False, txn_id: int | None = None, lease: Lease | None = None,
               max_delete_events_in_memory: int = DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY) -> DataFrame:
    """The rows of an ACID table (or some of its partitions) under one snapshot, as a DataFrame.

    Args:
        partition: a partition spec (`{"day": "2024-01-01"}`); a subset of the keys selects every matching partition,
            a spec no partition matches reads nothing. None reads every partition in the catalog.
        partition_predicate: what the caller's condition says of the rows it wants (`acid_core.read.pruning`, e.g. from
            `spark_jobs.pruning.condition_predicate`): partitions where it cannot hold are neither listed nor read.
            The DataFrame still holds every row of the partitions read: the caller applies its condition.
        include_row_id: add Hive's `row__id` struct first.
        txn_id: read as this open transaction (its own writes are visible).
        lease: read the snapshot a reader lease holds (`leased_snapshot`). With neither, the snapshot is taken now;
            hold a lease for a long read, or a compaction's cleaner may remove files the read still needs.
        max_delete_events_in_memory: above this many delete events in a partition, its tasks stream them in a
            sort-merge instead of loading them (Hive's `hive.transactional.events.mem`).

    Raises:
        NoSuchObjectError, NotTransactionalError: the table is unknown or not a full ACID table.
        MetastoreError: a partition spec with unknown keys, both txn_id and lease, or a lease of another table.
        SchemaMismatchError: a column type Spark cannot hold, or a partition value that does not fit its key's type.
        AcidError: the snapshot cannot be served (e.g. NotEnoughHistoryError), or files are corrupt (when Spark
            runs the tasks, wrapped in Spark's Python exception).
    """
    plan = plan_table_read(metastore, database, table, partition=partition, partition_predicate=partition_predicate,
                           txn_id=txn_id, lease=lease, max_delete_events_in_memory=max_delete_events_in_memory)
    schema = table_schema(plan.table, include_row_id=include_row_id)
    if not plan.units:
        return spark.createDataFrame([], schema)
    names = tuple(c.name for c in plan.table.columns)
    tasks = max(1, min(len(plan.units), spark.sparkContext.defaultParallelism))
    bins = _balanced_bins(plan, tasks)
    width = max(len(units) for units in bins)
    slots = tuple(unit for units in bins for unit in units + [-1] * (width - len(units)))
    read = _ReadUnits(plan.partitions, plan.units, plan.write_ids, names, include_row_id,
                      to_arrow_schema(schema, timezone="UTC"), slots)
    # spark.range splits the slots evenly: task j gets slots [j*width, (j+1)*width), i.e. exactly bin j
    return spark.range(0, len(slots), 1, tasks).mapInArrow(read, schema)


def _balanced_bins(plan: TableReadPlan, tasks: int) -> list[list[int]]:
    """The units cut into at most `tasks` contiguous runs of about equal estimated size (file bytes per stripe).

    Contiguous runs keep the output in read order and one partition's delete events in memory at a time per task;
    Python tasks have a fixed start-up cost, so one task per core beats many small ones.
    """
    if plan.unit_bytes:
        weights = list(plan.unit_bytes)
    else:  # a plan made without footers' lengths: one stat per file
        stripes: dict[str, int] = {}
        for _, source, _ in plan.units:
            stripes[source.path] = stripes.get(source.path, 0) + 1
        weights = []
        for index, source, _ in plan.units:
            size = source.length if source.length is not None else plan.partitions[index].fs.file_size(source.path)
            weights.append(max(size, 1) / stripes[source.path])
    total, bins, current, done = sum(weights), [], [], 0.0
    for number, weight in enumerate(weights):
        target = total * (len(bins) + 1) / tasks
        # close the run before this unit when stopping here lands nearer the target than taking it would
        if current and len(bins) < tasks - 1 and abs(done - target) <= abs(done + weight - target):
            bins.append(current)
            current = []
        current.append(number)
        done += weight
    bins.append(current)
    return bins


# --- reader leases -----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def leased_snapshot(metastore: Metastore, database: str, table: str, *,
                    heartbeat_interval_s: float = DEFAULT_LEASE_HEARTBEAT_S,
                    owner: str | None = None) -> Iterator[Lease]:
    """Hold a reader lease on a table for the duration of a `with` block: acquired on entry, heartbeated from a
    daemon thread every `heartbeat_interval_s`, released on exit. Pass the lease to `read_table(lease=...)`.

    The cleaner keeps the files of the lease's snapshot while the lease lives. A failed heartbeat is logged and
    retried at the next interval; a lease that expired meanwhile no longer protects the read.
    """
    if heartbeat_interval_s <= 0:
        raise MetastoreError(f"heartbeat interval must be positive, got {heartbeat_interval_s}")
    lease = metastore.leases.acquire(database, table, owner=owner)
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(heartbeat_interval_s):
            try:
                metastore.leases.heartbeat(lease.lease_id)
            except AcidError as exc:
                _log.warning("reader lease %s on %s.%s: heartbeat failed: %s", lease.lease_id, lease.database,
                             lease.table, exc)

    thread = threading.Thread(target=heartbeat, name=f"acid-lease-{lease.lease_id}", daemon=True)
    thread.start()
    try:
        yield lease
    finally:
        stop.set()
        thread.join(timeout=60)
        metastore.leases.release(lease.lease_id)


__all__ = ["PartitionRead", "TableReadPlan", "UnitOutput", "bucket_deletes", "conform_array", "hive_type_to_spark",
           "leased_snapshot", "partition_values", "plan_table_read", "read_table", "table_schema",
           "with_partition_values"]
