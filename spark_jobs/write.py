"""Writing ACID tables from PySpark: insert, delete, update (split-update) and merge, each in one transaction.

Every call is one `acid_core.write.table_write.TableWrite` on the driver (`AcidTable.new_write`: transaction, write id,
staging record, a shared_write lock on the table); Spark tasks only write event files (acid_core's columnar writer: Hive's event schema
and user metadata) into its hidden staging directories (on object stores: straight into `delta_w_w_s` /
`delete_delta_w_w_s`, hidden by the uncommitted write id); the driver records the partitions written
(TXN_COMPONENTS: insert, update or delete, which drives first-committer-wins) and commits, which publishes the
staging as `delta_w_w_s` / `delete_delta_w_w_s` (`acid_core.write.publish`). UPDATE, DELETE and MERGE read only the partitions their condition (the WHERE, or
MERGE's ON) can hold in (`spark_jobs.pruning`). Any failure aborts the transaction and removes what was written:
nothing visible is left; a killed driver's staging is removed by housekeeping. Unbucketed tables get one file per
Spark task (`bucket_<task>`, the task being the writer id, as Hive's parallel writers); bucketed tables one file per
bucket (Hive's hash).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from acid_core.errors import AcidError
from acid_core.format.bucketing import bucket_function, bucket_numbers
from acid_core.format.layout import bucket_file_name, delta_dir_name, parse_write_staging_name, partition_dir_name
from acid_core.format.orc_columnar import EventStreamWriter, event_table, null_rows
from acid_core.format.orc_events import DELETE_OPERATION, INSERT_OPERATION
from acid_core.format.rowid import decode_bucket_ids, encode_bucket
from acid_core.format.types import arrow_struct
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.txns import Operation
from acid_core.storage.fs import FileSystem, ensure_inside
from acid_core.write.table import AcidTable
from acid_core.write.table_write import TableWrite, compression_of, strongest
from spark_jobs.pruning import condition_predicate
from spark_jobs.types import spark_schema

PART, BUCKET, OWID, BPROP, ROWID = "__acid_part", "__acid_bucket", "__acid_owid", "__acid_bprop", "__acid_rowid"
_RESULT = StructType([StructField("part", StringType()), StructField("staging", StringType()),
                      StructField("rows", LongType())])
_MAX_WRITERS = 4096
GATHER_ROWS_DEFAULT = 131_072  # rows an insert task groups by (partition, bucket) at once, at most
GATHER_BYTES = 8 << 20  # and their bytes, at most (rows of 1 KB: 8,192 rows)


@dataclass(frozen=True, slots=True)
class WriteSummary:
    """What one write did."""

    txn_id: int
    write_id: int
    inserted: int
    deleted: int
    partitions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FileTask:
    """What a Spark task needs to write event files (picklable)."""

    location: str
    columns: tuple[str, ...]
    row_type: pa.StructType
    partition_keys: tuple[str, ...]
    write_id: int
    statement_id: int
    staging: str
    compression: str
    bucketed: bool
    table_columns: tuple = ()


def _part_names(batch: pa.RecordBatch, keys: tuple[str, ...]) -> pa.Array:
    """Each row's partition directory name (`k=v/...`): one dictionary encoding of the key values, Python once per
    distinct partition, not per row."""
    if not keys:
        return pa.repeat("", batch.num_rows)
    columns = [pc.cast(batch.column(batch.schema.get_field_index(k)), pa.string()) for k in keys]
    combined = pc.binary_join_element_wise(*[pc.fill_null(c, "\x00") for c in columns], "\x01")
    codes = pc.dictionary_encode(combined).indices.to_numpy()
    _, firsts = np.unique(codes, return_index=True)
    names = [partition_dir_name({k: columns[i][int(row)].as_py() for i, k in enumerate(keys)})
             for row in firsts]
    return pc.take(pa.array(names, pa.string()), pa.array(codes))


def _result_batch(results: list[tuple[str, str, int]]) -> pa.RecordBatch:
    """What a writing task reports back: (partition, staging directory, rows written) per file."""
    return pa.RecordBatch.from_pylist([{"part": p, "staging": s, "rows": n} for p, s, n in results],
                                      schema=pa.schema([("part", pa.string()), ("staging", pa.string()),
                                                        ("rows", pa.int64())]))


def _destination(task: FileTask, part: str, bucket: int, suffix: str = "") -> tuple[str, str]:
    """(partition directory, staging file) of one output file, refused if a symbolic link leads out of the table."""
    fs, location = FileSystem.resolve(task.location)
    directory = ensure_inside(location, fs.join(location, part) if part else location, fs=fs)
    return directory, fs.join(directory, task.staging, bucket_file_name(bucket) + suffix)


def _insert_groups(batch: pa.RecordBatch, keys: tuple[str, ...], buckets: np.ndarray
                   ) -> list[tuple[str, int, np.ndarray]]:
    """(partition directory name, bucket, row positions in input order) of each group of a batch's rows: one
    dictionary encoding of the (partition, bucket) key, Python once per group, not per row."""
    parts = _part_names(batch, keys)
    combined = pc.binary_join_element_wise(parts, pa.array(buckets).cast(pa.string()), "\x01")
    codes = pc.dictionary_encode(combined).indices.to_numpy()
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    groups = []
    for start, end in zip(starts.tolist(), starts[1:].tolist() + [len(order)]):
        rows = order[start:end]
        groups.append((parts[int(rows[0])].as_py(), int(buckets[rows[0]]), rows))
    return groups


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """One event file a task wrote: its partition (`k=v/...`, "" unpartitioned), the staging directory holding it,
    its bucket (or writer id), its name there and its rows."""

    part: str
    staging: str
    bucket: int
    name: str
    rows: int


def write_insert_files(task: FileTask, batches: Iterator[pa.RecordBatch], *, writer_id: int,
                       gather_rows: int = GATHER_ROWS_DEFAULT, first_row_id: int = 0,
                       name_suffix: str = "") -> list[WrittenFile]:
    """Insert events for the rows of `batches`, one file per (partition, bucket; or `writer_id` for an unbucketed
    table) named `bucket_N` + `name_suffix`, written batch by batch as the rows arrive (memory: a batch of
    `gather_rows` and each open file's stripe buffer, not the rows). Every file's row ids count from
    `first_row_id`. A failure removes what was written."""
    fs, _ = FileSystem.resolve(task.location)
    files: dict[tuple[str, int], list] = {}  # (partition, bucket) -> [writer, rows written, staging directory, name]
    try:
        for batch in _gathered(batches, gather_rows):
            buckets = batch.column(batch.schema.get_field_index(BUCKET)).to_numpy() if task.bucketed \
                else np.full(batch.num_rows, writer_id)
            for part, bucket, rows in _insert_groups(batch, task.partition_keys, buckets):
                chosen = batch.take(pa.array(rows))
                data = pa.StructArray.from_arrays(
                    [chosen.column(chosen.schema.get_field_index(n)).cast(task.row_type.field(i).type)
                     for i, n in enumerate(task.columns)], fields=list(task.row_type))
                entry = files.get((part, bucket))
                if entry is None:
                    directory, path = _destination(task, part, bucket, name_suffix)
                    writer = EventStreamWriter(fs, path, compression=task.compression, columns=task.table_columns)
                    entry = files[(part, bucket)] = [writer, 0, fs.join(directory, task.staging),
                                                     path.rsplit("/", 1)[-1]]
                count, first = len(rows), first_row_id + entry[1]
                entry[0].write(event_table(INSERT_OPERATION, np.full(count, task.write_id),
                                           np.full(count, encode_bucket(bucket, task.statement_id)),
                                           np.arange(first, first + count), np.full(count, task.write_id), data))
                entry[1] += count
        written = []
        for (part, bucket), (writer, count, staging, name) in sorted(files.items()):
            writer.close()
            written.append(WrittenFile(part, staging, bucket, name, count))
    except BaseException:
        for writer, _, _, _ in files.values():
            writer.abort()
        raise
    return written


def _write_inserts(task: FileTask, batches: Iterator[pa.RecordBatch], *,
                   gather_rows: int = GATHER_ROWS_DEFAULT) -> Iterator[pa.RecordBatch]:
    """Spark task: `write_insert_files` with the task as the writer id, reported as one result batch."""
    from pyspark import TaskContext

    written = write_insert_files(task, batches, writer_id=TaskContext.get().partitionId(), gather_rows=gather_rows)
    yield _result_batch([(f.part, f.staging, f.rows) for f in written])


def _gathered(batches: Iterator[pa.RecordBatch], rows_wanted: int) -> Iterator[pa.RecordBatch]:
    """Spark's small Arrow batches (10,000 rows) joined into batches of about `rows_wanted` rows, or GATHER_BYTES
    if fewer make that many: an insert task groups and writes per (partition, bucket), so with 32 buckets a
    10,000-row batch would make 32 writes of some 300 rows each (memory: one joined batch)."""
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= rows_wanted or size >= GATHER_BYTES:
            yield pending[0] if len(pending) == 1 else pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
            pending, rows, size = [], 0, 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def _runs(parts: pa.Array, buckets: np.ndarray) -> list[tuple[str, int, int, int]]:
    """(partition, bucket, start, end) of each run of equal (partition, bucket) in a batch sorted by them."""
    codes = pc.dictionary_encode(parts).indices.to_numpy()
    starts = np.flatnonzero(np.r_[True, (codes[1:] != codes[:-1]) | (buckets[1:] != buckets[:-1])])
    ends = np.r_[starts[1:], len(codes)]
    return [(parts[int(a)].as_py(), int(buckets[a]), int(a), int(b)) for a, b in zip(starts, ends)]


def _write_deletes(task: FileTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Spark task: delete events for the ROW__IDs of this task, one file per (partition, bucket), written batch by
    batch: Spark sorted the task's rows by (partition, bucket, key), so each file's events arrive in key order, one
    file after another (memory: one batch and one open file's stripe buffer, not the task's rows)."""
    fs, _ = FileSystem.resolve(task.location)
    results: list[tuple[str, str, int]] = []
    current: tuple[str, int] | None = None
    writer, count, staging = None, 0, ""
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            parts = batch.column(batch.schema.get_field_index(PART))
            buckets = batch.column(batch.schema.get_field_index(BUCKET)).to_numpy()
            keys = [batch.column(batch.schema.get_field_index(n)).to_numpy() for n in (OWID, BPROP, ROWID)]
            for part, bucket, start, end in _runs(parts, buckets):
                if (part, bucket) != current:
                    if writer is not None:
                        writer.close()
                        results.append((current[0], staging, count))
                    directory, path = _destination(task, part, bucket)
                    writer, count, staging = (EventStreamWriter(fs, path, compression=task.compression,
                                                                columns=task.table_columns),
                                              0, fs.join(directory, task.staging))
                    current = (part, bucket)
                rows = end - start
                writer.write(event_table(DELETE_OPERATION, *(k[start:end] for k in keys),
                                         np.full(rows, task.write_id), null_rows(task.row_type, rows)))
                count += rows
        if writer is not None:
            writer.close()
            results.append((current[0], staging, count))
            writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    yield _result_batch(results)


def file_task(write: TableWrite, statement_id: int, final: str, *, bucketed: bool = False) -> FileTask:
    """What the tasks of one statement of `write` need to write the event files of `final`."""
    table = write.table
    return FileTask(table.location, tuple(c.name for c in table.columns), arrow_struct(table.columns),
                     tuple(k.name for k in table.partition_keys), write.write_id, statement_id,
                     write.staging_name(final), compression_of(table), bucketed, tuple(table.columns))


def _run(write: TableWrite, frame: DataFrame, task: FileTask, writer) -> list[tuple[str, str, int]]:
    """Run the event-file tasks and stage what they wrote in `write` (which publishes it at commit)."""
    rows = frame.mapInArrow(lambda batches: writer(task, batches), _RESULT).collect()
    results = [(r["part"], r["staging"], r["rows"]) for r in rows]
    staging_name = parse_write_staging_name(task.staging)
    final = staging_name.final if staging_name is not None else task.staging  # written in place on object stores
    fs = write.location().fs
    for _, staging, _ in results:
        write.staged(staging, fs.join(staging.rsplit("/", 1)[0], final))
    return results


def _record(write: TableWrite, operations: Mapping[str, Operation]) -> None:
    """Record the partitions written (TXN_COMPONENTS) before the commit publishes them."""
    for part, operation in operations.items():
        write.record(part or None, operation)


def _rows(results: list[tuple[str, str, int]]) -> int:
    return sum(count for _, _, count in results)


def _summary(write: TableWrite, inserted: int, deleted: int, partitions: Iterable[str]) -> WriteSummary:
    return WriteSummary(write.txn_id, write.write_id, inserted, deleted, tuple(sorted(set(partitions))))


def _with_bucket(frame: DataFrame, table: TableInfo) -> DataFrame:
    """Add Hive's bucket number of every row for a bucketed table, computed on whole Arrow batches
    (`acid_core.format.bucketing.bucket_numbers`: the per-row function's results, vectorized)."""
    columns, bucketed, count = table.columns, table.bucket_columns, table.num_buckets
    version = table.bucketing_version
    bucket_function(columns, bucketed, count, version=version)  # refused here, on the driver, with its message
    schema = StructType(frame.schema.fields + [StructField(BUCKET, LongType())])

    def add(batches):
        for batch in batches:
            numbers = bucket_numbers(columns, bucketed, count, batch, version=version)
            yield batch.append_column(BUCKET, pa.array(numbers, pa.int64()))

    return frame.mapInArrow(add, schema)


def _prepare_rows(frame: DataFrame, table: TableInfo, partition: Mapping[str, object] | None) -> DataFrame:
    """Source rows as the table's columns (cast by position-independent name) plus partition columns."""
    schema = spark_schema(table)
    keys = [k.name for k in table.partition_keys]
    given = {k.lower(): v for k, v in (partition or {}).items()}
    missing = [c.name for c in table.columns if c.name not in frame.columns]
    if missing:
        raise AcidError(f"insert into {table.full_name}: the DataFrame lacks columns {missing}")
    selected = [F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields]
    for key in keys:
        if key in given:
            selected.append(F.lit(str(given[key])).alias(key))
        elif key in frame.columns:
            selected.append(F.col(key).cast("string").alias(key))
        else:
            raise AcidError(f"insert into {table.full_name}: partition key {key!r} is neither in the partition spec "
                            "nor a DataFrame column")
    unknown = set(given) - set(keys)
    if unknown:
        raise AcidError(f"insert into {table.full_name}: {sorted(unknown)} are not partition keys ({keys})")
    return frame.select(*selected)


def _insert_frame(write: TableWrite, frame: DataFrame, statement_id: int) -> list[tuple[str, str, int]]:
    table = write.table
    final = delta_dir_name(write.write_id, write.write_id, statement_id=statement_id)
    if table.num_buckets > 0:
        keys = [k.name for k in table.partition_keys]
        # as many tasks as the application has slots (adaptive execution would pack a shuffle of under 64 MiB
        # into one task, writing every bucket on one core)
        slots = frame.sparkSession.sparkContext.defaultParallelism
        frame = _with_bucket(frame, table).repartition(slots, *([F.col(k) for k in keys] + [F.col(BUCKET)]))
        return _run(write, frame, file_task(write, statement_id, final, bucketed=True), _write_inserts)
    if frame.rdd.getNumPartitions() > _MAX_WRITERS:
        frame = frame.coalesce(_MAX_WRITERS)  # writer ids are 12 bits in BucketCodec V1
    return _run(write, frame, file_task(write, statement_id, final), _write_inserts)


def insert(metastore: Metastore, database: str, table: str, frame: DataFrame, *,
           partition: Mapping[str, object] | None = None) -> WriteSummary:
    """Append the DataFrame's rows (columns matched by name; partition values from `partition` or from columns)."""
    with AcidTable.load(metastore, database, table).new_write(agent_info="spark insert") as write:
        results = _insert_frame(write, _prepare_rows(frame, write.table, partition), 0)
        _record(write, {part: Operation.INSERT for part, _, _ in results})
    return _summary(write, _rows(results), 0, (p for p, _, _ in results))


def _delete_frame(write: TableWrite, matched: DataFrame, statement_id: int) -> list[tuple[str, str, int]]:
    """Delete events for the `row__id`s of `matched` (a snapshot DataFrame with row__id and partition columns)."""
    keys = tuple(k.name for k in write.table.partition_keys)
    ids = matched.select(*[F.col(k).cast("string").alias(k) for k in keys], F.col("row__id.writeid").alias(OWID),
                         F.col("row__id.bucketid").alias(BPROP), F.col("row__id.rowid").alias(ROWID))

    def add_part_and_bucket(batches):
        for batch in batches:
            bprop = batch.column(batch.schema.get_field_index(BPROP)).to_numpy()
            batch = batch.append_column(PART, _part_names(batch, keys))
            yield batch.append_column(BUCKET, pa.array(decode_bucket_ids(bprop).astype(np.int64)))

    schema = StructType(ids.schema.fields + [StructField(PART, StringType()), StructField(BUCKET, LongType())])
    # One task per group of (partition, bucket), its rows sorted by Spark (which spills; Python never holds them)
    ids = ids.mapInArrow(add_part_and_bucket, schema).repartition(F.col(PART), F.col(BUCKET)) \
        .sortWithinPartitions(PART, BUCKET, OWID, BPROP, ROWID)
    final = delta_dir_name(write.write_id, write.write_id, statement_id=statement_id, delete=True)
    return _run(write, ids, file_task(write, statement_id, final), _write_deletes)


def delete(spark, metastore: Metastore, database: str, table: str, condition: str) -> WriteSummary:
    """DELETE FROM table WHERE condition (a Spark SQL boolean expression over the table's columns)."""
    from spark_jobs.read import read_table

    with AcidTable.load(metastore, database, table).new_write(agent_info="spark delete") as write:
        snapshot = read_table(spark, metastore, database, table, include_row_id=True, txn_id=write.txn_id,
                              partition_predicate=condition_predicate(condition, qualifiers=(write.table.name,))) \
            .alias(write.table.name)  # the condition may qualify columns with the table's name
        results = _delete_frame(write, snapshot.filter(F.expr(condition)), 0)
        _record(write, {part: Operation.DELETE for part, _, _ in results})
    return _summary(write, 0, _rows(results), (p for p, _, _ in results))


def update(spark, metastore: Metastore, database: str, table: str, condition: str,
           assignments: Mapping[str, str]) -> WriteSummary:
    """UPDATE table SET column = expression, ... WHERE condition, as Hive's split-update (delete + insert, one statement)."""
    from spark_jobs.read import read_table

    with AcidTable.load(metastore, database, table).new_write(agent_info="spark update") as write:
        info = write.table
        keys = [k.name for k in info.partition_keys]
        forbidden = set(assignments) & (set(keys) | set(info.bucket_columns))
        if forbidden:
            raise AcidError(f"update of {info.full_name}: partition and bucketing columns {sorted(forbidden)} "
                            "cannot be updated (Hive refuses it too)")
        unknown = set(assignments) - {c.name for c in info.columns}
        if unknown:
            raise AcidError(f"update of {info.full_name}: {sorted(unknown)} are not columns")
        snapshot = read_table(spark, metastore, database, table, include_row_id=True, txn_id=write.txn_id,
                              partition_predicate=condition_predicate(condition, qualifiers=(info.name,))) \
            .alias(write.table.name)  # the condition may qualify columns with the table's name
        matched = snapshot.filter(F.expr(condition)).cache()
        deleted = _delete_frame(write, matched, 0)
        new_rows = matched.select(*[F.expr(assignments[c.name]).alias(c.name) if c.name in assignments
                                    else F.col(c.name) for c in info.columns], *[F.col(k) for k in keys])
        inserted = _insert_frame(write, _prepare_rows(new_rows, info, None), 0)
        matched.unpersist()
        _record(write, {part: Operation.UPDATE for part, _, _ in deleted + inserted})
    return _summary(write, _rows(inserted), _rows(deleted), (p for p, _, _ in deleted + inserted))


def merge(spark, metastore: Metastore, database: str, table: str, source: DataFrame, on: str, *,
          target_alias: str = "t", source_alias: str = "s", matched_update: Mapping[str, str] | None = None,
          matched_update_condition: str | None = None, matched_delete: bool = False,
          matched_delete_condition: str | None = None, not_matched_insert: Mapping[str, str] | None = None,
          not_matched_condition: str | None = None, delete_first: bool = False) -> WriteSummary:
    """MERGE INTO table t USING source s ON condition WHEN MATCHED [AND ...] THEN UPDATE SET ... / DELETE,
    WHEN NOT MATCHED [AND ...] THEN INSERT: one transaction, one statement id per WHEN clause (in the order written:
    update then delete, or delete then update with `delete_first`), the first matching WHEN MATCHED clause wins, and
    Hive's cardinality check (a target row matched by two source rows is an error)."""
    from spark_jobs.read import read_table

    if not (matched_update or matched_delete or not_matched_insert):
        raise AcidError("merge needs at least one WHEN clause")
    with AcidTable.load(metastore, database, table).new_write(agent_info="spark merge") as write:
        info = write.table
        keys = [k.name for k in info.partition_keys]
        if matched_update and set(matched_update) & (set(keys) | set(info.bucket_columns)):
            raise AcidError(f"merge into {info.full_name}: partition and bucketing columns cannot be updated")
        # A target row the ON condition cannot match is never updated or deleted, and an unmatched target row
        # produces nothing (no WHEN NOT MATCHED BY SOURCE): partitions where ON cannot hold are not read.
        on_target = condition_predicate(on, qualifiers=(target_alias,), unqualified=False)
        target = read_table(spark, metastore, database, table, include_row_id=True, txn_id=write.txn_id,
                            partition_predicate=on_target) \
            .withColumn("__acid_target", F.lit(True)).alias(target_alias)
        src = source.withColumn("__acid_source", F.lit(True)).alias(source_alias)
        joined = target.join(src, F.expr(on), "full_outer" if not_matched_insert else "inner").cache()
        matched = joined.filter(F.col("__acid_target").isNotNull() & F.col("__acid_source").isNotNull())
        twice = matched.groupBy(F.col(f"{target_alias}.row__id")).count().filter("count > 1").limit(1).collect()
        if twice:
            raise AcidError(f"merge into {info.full_name}: the same target row ({twice[0][0]}) is matched by more "
                            "than one source row (Hive's cardinality check)")
        operations: dict[str, Operation] = {}
        inserted = deleted = 0
        update_condition = F.expr(matched_update_condition) if matched_update_condition else F.lit(True)
        delete_condition = F.expr(matched_delete_condition) if matched_delete_condition else F.lit(True)
        if matched_update and matched_delete:  # the first matching WHEN MATCHED clause wins
            if delete_first:
                update_condition = update_condition & ~delete_condition
            else:
                delete_condition = delete_condition & ~update_condition
        written = [c for c in (["delete", "update"] if delete_first else ["update", "delete"])
                   if (matched_update if c == "update" else matched_delete)]
        update_statement = written.index("update") if matched_update else None
        delete_statement = written.index("delete") if matched_delete else None
        statement = len(written)  # the insert clause comes last
        if matched_update:
            rows = matched.filter(update_condition).select(
                F.col(f"{target_alias}.row__id").alias("row__id"),
                *[F.expr(matched_update[c.name]).alias(c.name) if c.name in matched_update
                  else F.col(f"{target_alias}.{c.name}").alias(c.name) for c in info.columns],
                *[F.col(f"{target_alias}.{k}").alias(k) for k in keys]).cache()
            for part, _, count in _delete_frame(write, rows, update_statement):
                deleted += count
                operations[part] = strongest(operations.get(part), Operation.UPDATE)
            for part, _, count in _insert_frame(write, _prepare_rows(rows.drop("row__id"), info, None),
                                                update_statement):
                inserted += count
                operations[part] = strongest(operations.get(part), Operation.UPDATE)
        if matched_delete:
            rows = matched.filter(delete_condition).select(F.col(f"{target_alias}.row__id").alias("row__id"),
                                                           *[F.col(f"{target_alias}.{k}").alias(k) for k in keys])
            for part, _, count in _delete_frame(write, rows, delete_statement):
                deleted += count
                operations[part] = strongest(operations.get(part), Operation.DELETE)
        if not_matched_insert:
            unknown = set(not_matched_insert) - {c.name for c in info.columns} - set(keys)
            if unknown:
                raise AcidError(f"merge into {info.full_name}: {sorted(unknown)} are not columns")
            condition = F.expr(not_matched_condition) if not_matched_condition else F.lit(True)
            rows = joined.filter(F.col("__acid_target").isNull() & condition).select(
                *[F.expr(not_matched_insert[c]).alias(c) if c in not_matched_insert else F.lit(None).alias(c)
                  for c in [c.name for c in info.columns] + keys])
            for part, _, count in _insert_frame(write, _prepare_rows(rows, info, None), statement):
                inserted += count
                operations[part] = strongest(operations.get(part), Operation.INSERT)
        joined.unpersist()
        _record(write, operations)
    return _summary(write, inserted, deleted, operations)
