"""The `hiveacid` data source's batch write: `df.write.format("hiveacid").mode("append" | "overwrite").save("db.table")`.

One write is one transaction (`acid_core.write.table_write.TableWrite`), as `spark_jobs.write.insert` is:

- Where Spark plans the write (a Python planner process on the driver), `HiveAcidDataSource.writer` checks the
  DataFrame's columns against the table and opens the transaction (write id, staging record, lock: Hive's shared_write
  for an append, exclusive for an overwrite, as hive.txn.xlock.iow asks). Spark pickles the writer to its tasks and to
  the process that ends the write.
- Each Spark task writes insert events into hidden staging directories beside their final names (on an object store,
  under the final names, hidden by the uncommitted write id), with the code `spark_jobs.write` runs, and reports the
  files it wrote. Tasks never use the metastore.
- `commit` (on the driver, after every task succeeded) publishes the staged directories, adds new partitions to the
  catalog, records the partitions written (TXN_COMPONENTS) and commits; `abort` (a task failed for good, or the job
  was cancelled) removes every staging directory of the transaction, those of failed tasks included, and aborts.
  Nothing is visible before the commit; a driver killed before either leaves the transaction open until it times
  out, after which housekeeping aborts it and removes its staging.

What is written, as Hive writes it:

- `append`: a delta `delta_w_w_0000` in every partition the rows fall in (dynamic partitions: the partition columns
  come from the DataFrame, new partitions are added to the catalog). An unbucketed table gets one file per Spark task,
  `bucket_<task>` (the task as the writer id, as Hive's parallel writers). A bucketed table gets one file per bucket
  (Hive's hash, `acid_core.format.bucketing`): each task writes its rows of a bucket into a part, and the commit joins
  the parts of each bucket stripe by stripe (`join_event_files`, no row decoded) into `bucket_N`. Row ids count from 0
  in each file of an unbucketed table; in a bucketed table's file each task's rows count from task x 2**36, so that
  the joined file's keys stay unique and ascending.
- `overwrite`: Hive's INSERT OVERWRITE of an ACID table: a new base `base_w` (same files) in every partition the rows
  fall in, which hides everything written there before once the write commits (dynamic partition overwrite: other
  partitions keep their rows); an unpartitioned table always gets one, empty if the DataFrame is. The partitions are
  recorded as an update (first-committer-wins against concurrent updates), as Hive records an INSERT OVERWRITE.

Columns are matched by name (case-insensitive): the DataFrame must have every column and partition column of the table
and no other; each of its types must be the table's, or one that converts without loss (a smaller integer, float into
double, a decimal into a wider one, NULL). Options: `table` (or the path given to `save`) and `metastore`, as for a
read (`spark_jobs.datasource`), and `heartbeatSeconds` (below). At most 4,096 Spark tasks may write (Hive's bucket
codec numbers writers in 12 bits): `coalesce` a DataFrame with more partitions.

While Spark runs the tasks a keeper process (`acid_deploy.keeper`) heartbeats the transaction every
`heartbeatSeconds` (30 by default; keep it well below hive.txn.timeout, 300 s by default), so that housekeeping does
not abort a long write; it exits once the write ends, and aborts the write if the driver's JVM dies first.

Cost: on the driver, the metastore round trips of one `TableWrite` and, for a bucketed table, one pass over the
bytes of each bucket's parts but the first; per task, as `spark_jobs.write`'s insert tasks (a batch of rows and one
open file's stripe buffer per (partition, bucket)).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StructType,
)

from acid_core.errors import AcidError
from acid_core.format.bucketing import bucket_numbers
from acid_core.format.layout import base_dir_name, bucket_file_name, delta_dir_name
from acid_core.format.orc_events import join_event_files
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.locks import LockType
from acid_core.metastore.txns import Operation
from acid_core.write.table import AcidTable
from acid_core.write.table_write import TableWrite
from acid_deploy.keeper import driver_process, start_keeper
from spark_jobs.datasource_options import (
    FORMAT_NAME,
    HiveAcidOptionError,
    Target,
    lowered,
    number_option,
    parse_target,
)
from spark_jobs.types import spark_schema
from spark_jobs.write import BUCKET, FileTask, WrittenFile, file_task, write_insert_files

WRITE_OPTIONS = ("table", "metastore", "heartbeatSeconds")
HEARTBEAT_SECONDS = 30.0  # the keeper's interval: well inside hive.txn.timeout (300 s by default)
AGENT_INFO = "spark hiveacid write"
MAX_WRITE_TASKS = 4096  # BucketCodec V1 numbers writers in 12 bits
ROW_ID_STRIDE = 1 << 36  # a bucketed table's task k numbers its rows of a bucket from k * ROW_ID_STRIDE
_PART_SUFFIX = ".part-{:04d}"
_INTEGERS = (ByteType, ShortType, IntegerType, LongType)


class HiveAcidWriteError(AcidError):
    """A `hiveacid` write cannot go on (its DataFrame does not fit the table, too many tasks)."""


# --- the DataFrame against the table -------------------------------------------------------------------------------
def _converts(given: DataType, wanted: DataType) -> bool:
    """Whether values of `given` become `wanted` without loss (Arrow casts them in the task)."""
    if isinstance(given, NullType) or given.simpleString().lower() == wanted.simpleString().lower():
        return True
    if isinstance(given, _INTEGERS) and isinstance(wanted, _INTEGERS):
        return _INTEGERS.index(type(given)) <= _INTEGERS.index(type(wanted))
    if isinstance(given, FloatType) and isinstance(wanted, DoubleType):
        return True
    if isinstance(given, DecimalType) and isinstance(wanted, DecimalType):
        return wanted.scale >= given.scale and wanted.precision - wanted.scale >= given.precision - given.scale
    return False


def frame_columns(table: TableInfo, schema: StructType) -> tuple[str, ...]:
    """The DataFrame field feeding each column of the table, then each partition column, in the table's order.

    Raises:
        HiveAcidWriteError: a column is missing, unknown, given twice or of a type that does not convert.
    """
    wanted = spark_schema(table, include_partition_keys=True)
    given: dict[str, str] = {}
    for field in schema.fields:
        if field.name.lower() in given:
            raise HiveAcidWriteError(f"{FORMAT_NAME}: write into {table.full_name}: the DataFrame has column "
                                     f"{field.name!r} twice (names are case-insensitive)")
        given[field.name.lower()] = field.name
    missing = [f.name for f in wanted.fields if f.name.lower() not in given]
    if missing:
        raise HiveAcidWriteError(f"{FORMAT_NAME}: write into {table.full_name}: the DataFrame lacks column(s) "
                                 f"{missing} (the table's columns and partition columns: {wanted.fieldNames()})")
    unknown = sorted(set(given) - {f.name.lower() for f in wanted.fields})
    if unknown:
        raise HiveAcidWriteError(f"{FORMAT_NAME}: write into {table.full_name}: the table has no column(s) "
                                 f"{[given[name] for name in unknown]}: select the table's columns "
                                 f"{wanted.fieldNames()}")
    by_name = {f.name.lower(): f for f in schema.fields}
    for field in wanted.fields:
        source = by_name[field.name.lower()]
        if not _converts(source.dataType, field.dataType):
            raise HiveAcidWriteError(f"{FORMAT_NAME}: write into {table.full_name}: column {field.name} is "
                                     f"{source.dataType.simpleString()} in the DataFrame, "
                                     f"{field.dataType.simpleString()} in the table: cast it")
    return tuple(given[f.name.lower()] for f in wanted.fields)


def seconds_option(given: dict[str, str], option: str, default: float) -> float:
    """A heartbeat interval option (lowered `given`), or `default`."""
    text = given.get(option.lower())
    if text is None:
        return default
    return number_option(option, text, float, lambda value: 0 < value < 86_400,
                         "a number of seconds above 0 and below a day")


def final_name(write_id: int, overwrite: bool) -> str:
    """The directory a write of `write_id` publishes in each partition: INSERT OVERWRITE's base, else a delta."""
    return base_dir_name(write_id) if overwrite else delta_dir_name(write_id, write_id, statement_id=0)


# --- tasks -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WrittenFiles(WriterCommitMessage):
    """What one task wrote, and for which write id."""

    task: int
    write_id: int
    files: tuple[WrittenFile, ...]


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """What every task needs (picklable): where and how to write, and how the DataFrame's fields map to the table."""

    task: FileTask
    sources: tuple[str, ...]  # frame_columns
    table: TableInfo


def _table_batch(plan: TaskPlan, batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch of the DataFrame as the table's columns (converted to their types), its partition columns and, for a
    bucketed table, each row's bucket."""
    task, table = plan.task, plan.table
    columns, names = [], []
    for index, name in enumerate(task.columns):
        columns.append(batch.column(batch.schema.get_field_index(plan.sources[index]))
                       .cast(task.row_type.field(index).type))
        names.append(name)
    for offset, key in enumerate(task.partition_keys):
        columns.append(batch.column(batch.schema.get_field_index(plan.sources[len(task.columns) + offset])))
        names.append(key)
    rows = pa.RecordBatch.from_arrays(columns, names=names)
    if not task.bucketed:
        return rows
    numbers = bucket_numbers(table.columns, table.bucket_columns, table.num_buckets, rows,
                             version=table.bucketing_version)
    return rows.append_column(BUCKET, pa.array(numbers, pa.int64()))


def write_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> WrittenFiles:
    from pyspark import TaskContext

    number = TaskContext.get().partitionId()
    if number >= MAX_WRITE_TASKS:
        raise HiveAcidWriteError(f"{FORMAT_NAME}: write into {plan.table.full_name}: task {number} of more than "
                                 f"{MAX_WRITE_TASKS} (Hive numbers writers in 12 bits): coalesce({MAX_WRITE_TASKS}) "
                                 "the DataFrame")
    rows = (_table_batch(plan, batch) for batch in batches if batch.num_rows)
    if plan.task.bucketed:
        files = write_insert_files(plan.task, rows, writer_id=number, first_row_id=number * ROW_ID_STRIDE,
                                   name_suffix=_PART_SUFFIX.format(number))
    else:
        files = write_insert_files(plan.task, rows, writer_id=number)
    return WrittenFiles(number, plan.task.write_id, tuple(files))


# --- the driver's side ---------------------------------------------------------------------------------------------
class HiveAcidWriter(DataSourceArrowWriter):
    """One open write transaction, pickled from Spark's planner to its tasks and to the process ending it."""

    def __init__(self, target: Target, table: TableInfo, txn_id: int, write_id: int, overwrite: bool,
                 plan: TaskPlan) -> None:
        self.target = target
        self.table = table
        self.txn_id = txn_id
        self.write_id = write_id
        self.overwrite = overwrite
        self.plan = plan

    @classmethod
    def open(cls, options: dict[str, str], schema: StructType, overwrite: bool) -> HiveAcidWriter:
        """Check the options and the DataFrame's columns, then open the write transaction.

        Raises:
            HiveAcidOptionError: an option is unknown or bad.
            HiveAcidWriteError: the DataFrame's columns do not fit the table.
            NoSuchObjectError, NotTransactionalError: no such full ACID table.
            LockTimeoutError: the lock was not granted in time.
        """
        given = lowered(options, WRITE_OPTIONS, "write")
        target = parse_target(given, "write")
        interval = seconds_option(given, "heartbeatSeconds", HEARTBEAT_SECONDS)
        metastore = target.open_metastore()
        try:
            table = AcidTable.load(metastore, target.database, target.table)
            sources = frame_columns(table.info, schema)
            write = table.new_write(agent_info=AGENT_INFO,
                                    lock_type=LockType.EXCLUSIVE if overwrite else LockType.SHARED_WRITE)
            try:
                start_keeper(target.url(), write.txn_id, watch=driver_process(), interval_s=interval)
            except BaseException:
                write.abort()
                raise
            task = file_task(write, 0, final_name(write.write_id, overwrite), bucketed=table.info.num_buckets > 0)
        finally:
            metastore.close()
        return cls(target, write.table, write.txn_id, write.write_id, overwrite, TaskPlan(task, sources, write.table))

    @property
    def final(self) -> str:
        return final_name(self.write_id, self.overwrite)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        """Spark task: write this task's rows (see the module docstring)."""
        return write_task(self.plan, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Publish what the tasks wrote and commit (on failure: abort, removing it all).

        Raises:
            TxnAbortedError, NoSuchTxnError: the transaction timed out or was aborted meanwhile.
            WriteConflictError: an update of the same partitions committed first (an overwrite).
        """
        files = [f for message in messages if isinstance(message, WrittenFiles) for f in message.files]
        metastore = self.target.open_metastore()
        try:
            write = TableWrite.resume(metastore, self.table, self.txn_id, self.write_id, agent_info=AGENT_INFO)
            try:
                stage_files(write, files, final=self.final, overwrite=self.overwrite)
            except BaseException:
                write.abort()
                raise
            write.commit()
        finally:
            metastore.close()

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Remove every staging directory of the write (failed tasks' too) and abort."""
        metastore = self.target.open_metastore()
        try:
            TableWrite.resume(metastore, self.table, self.txn_id, self.write_id, agent_info=AGENT_INFO).abort()
        finally:
            metastore.close()


def stage_files(write: TableWrite, files: Sequence[WrittenFile], *, final: str, overwrite: bool) -> None:
    """Tell `write` what its tasks staged for `final` (joining a bucketed table's parts into one file per bucket
    first) and record the partitions written; an unpartitioned overwrite stages its base even if no task wrote a
    row."""
    table = write.table
    fs = write.location().fs
    operation = Operation.UPDATE if overwrite else Operation.INSERT
    staged: dict[str, str] = {}  # staging directory -> partition
    if table.num_buckets > 0:
        parts: dict[tuple[str, str, int], list[str]] = defaultdict(list)
        for f in files:
            parts[(f.part, f.staging, f.bucket)].append(f.name)
        for (part, staging, bucket), names in sorted(parts.items()):
            paths = [fs.join(staging, name) for name in sorted(names)]  # task order: key order
            destination = fs.join(staging, bucket_file_name(bucket))
            if len(paths) == 1 and fs.renames_atomically:  # an object store would copy on the server: join
                fs.rename(paths[0], destination)
            else:
                join_event_files(fs, paths, destination)
                for path in paths:
                    if fs.exists(path):  # the first became the bucket's file in place on a local filesystem
                        fs.delete_file(path)
            staged[staging] = part
    else:
        staged.update((f.staging, f.part) for f in files)
    if overwrite and not table.partition_keys and not staged:
        staging = fs.join(write.location().path, write.staging_name(final))
        fs.make_dirs(staging)
        staged[staging] = ""
    for staging, part in sorted(staged.items()):
        write.staged(staging, fs.join(staging.rsplit("/", 1)[0], final))
        write.record(part or None, operation)


__all__ = ["AGENT_INFO", "HEARTBEAT_SECONDS", "MAX_WRITE_TASKS", "ROW_ID_STRIDE", "WRITE_OPTIONS", "HiveAcidOptionError",
           "HiveAcidWriteError", "HiveAcidWriter", "TaskPlan", "WrittenFiles", "final_name", "frame_columns", "seconds_option",
           "stage_files", "write_task"]
