"""The `hiveacid` data source's change feed, in batch and as a streaming source (`acid_core.read.changes`):

    spark.read.format("hiveacid").option("changesFrom", 5).option("changesTo", 9).load("db.table")
    spark.readStream.format("hiveacid").option("changesFrom", "latest").load("db.table")

A change row is `_change_type` ("insert" or "delete"), `_change_write_id` (the write that made it), `row__id` (the
ROW__ID inserted or deleted), the table's columns (NULL for a delete: a delete event names a ROW__ID only) and the
partition columns. An UPDATE is a delete of the old ROW__ID and an insert under a new one, as Hive writes it.

Batch: the changes of the committed write ids in (changesFrom, changesTo]; `changesTo` defaults to the table's settled
write id (the highest below which no write is open), and may not pass it (an open write's changes are not known yet).
Streaming: each micro-batch takes the changes from the last offset to the settled write id at the time (offsets are
write ids, `{"writeId": n}`, kept in the query's checkpoint, so a restarted query goes on where it stopped, repeating
and skipping nothing); the first offset is `changesFrom` (a write id, or `latest`: the settled write id when the query
first starts). Changes come out in write-id order across micro-batches, and a write id only once every lower one has
committed or aborted, so a write committing late is never skipped. Spark asks a Python data source for its schema
before it knows whether a read or a stream follows, so a stream names `changesFrom` (the change feed's schema), and
`spark.readStream` without it is refused.

When a major compaction folded the changes of the range into a base and the cleaner removed their deltas, the read
(or the micro-batch) fails with `ChangesUnavailableError` naming the oldest write id whose changes are readable there.

What runs where: the driver's Python workers list the partitions and plan the files (the metastore: catalog and
snapshot); each task reads one delta or delete-delta file of the range, a batch at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from acid_core.format.types import arrow_struct
from acid_core.format.validity import ValidTxnList, ValidWriteIdList
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.txns import full_table_name
from acid_core.read.changes import CHANGE_TYPE, CHANGE_WRITE_ID, ChangeSource, change_batches, plan_changes
from acid_core.storage.fs import FileSystem
from spark_jobs.datasource_options import FORMAT_NAME, HiveAcidOptionError, Target, number_option
from spark_jobs.read import partition_values, table_schema, with_partition_values
from spark_jobs.types import ROW_ID_COLUMN, ROW_ID_TYPE

LATEST = "latest"
_log = logging.getLogger(__name__)


def change_schema(table: TableInfo) -> StructType:
    """`_change_type`, `_change_write_id`, `row__id`, the table's columns, the partition columns."""
    return StructType([StructField(CHANGE_TYPE, StringType(), False), StructField(CHANGE_WRITE_ID, LongType(), False),
                       StructField(ROW_ID_COLUMN, ROW_ID_TYPE, False), *table_schema(table).fields])


def settled_write_id(write_ids: ValidWriteIdList) -> int:
    """The highest write id at and below which every write committed or aborted."""
    return write_ids.open_ids[0] - 1 if write_ids.open_ids else write_ids.high_watermark


def parse_write_id(option: str, text: str | None, *, latest: bool = False) -> int | None:
    """A write-id option's value (None when not given; `latest` as -1 where allowed).

    Raises:
        HiveAcidOptionError: not a write id.
    """
    if text is None:
        return None
    if latest and text.strip().lower() == LATEST:
        return -1
    allowed = " or latest" if latest else ""
    return int(number_option(option, text, int, lambda value: value >= 0,
                             f"a write id (a whole number >= 0){allowed}"))


@dataclass(frozen=True, slots=True)
class ChangePartition(InputPartition):
    """One file of changes, with its partition's values (as the Arrow scalars of the output's partition columns)."""

    source: ChangeSource
    location: str
    values: tuple[pa.Scalar, ...]
    after: int
    upto: int
    write_ids: ValidWriteIdList


def plan_change_partitions(metastore: Metastore, table: TableInfo, *, after: int, upto: int,
                           write_ids: ValidWriteIdList, txns: ValidTxnList) -> list[ChangePartition]:
    """One input partition per file holding changes of (after, upto], over every partition of the table.

    Raises:
        ChangesUnavailableError: as `plan_changes`.
    """
    arrow_schema = to_arrow_schema(change_schema(table))
    if table.partition_keys:
        parts = [(p.location, p.spec, p.name) for p in metastore.catalog.list_partitions(table.database, table.name)]
    else:
        parts = [(table.location, {}, None)]
    found = []
    for location, spec, name in parts:
        fs, path = FileSystem.resolve(location)
        where = table.full_name + (f"/{name}" if name else "")
        values = partition_values(table, spec, arrow_schema)
        for source in plan_changes(fs, path, after=after, upto=upto, write_ids=write_ids, txns=txns, name=where):
            found.append(ChangePartition(source, location, values, after, upto, write_ids))
    _log.info("%s: changes of %s in write ids (%d, %d]: %d files", FORMAT_NAME, table.full_name, after, upto,
              len(found))
    return found


def read_changes(partition: ChangePartition, table: TableInfo, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Spark task: the changes one file holds, as `schema` (the change schema in Arrow)."""
    fs, _ = FileSystem.resolve(partition.location)
    row_type = arrow_struct(table.columns)
    for changes in change_batches(fs, partition.source, after=partition.after, upto=partition.upto,
                                  write_ids=partition.write_ids, row_type=row_type):
        yield from with_partition_values(changes, partition.values, schema).to_batches()


class HiveAcidChangeReader(DataSourceReader):
    """A batch read of the changes of write ids (after, upto]."""

    def __init__(self, target: Target, table: TableInfo, snapshot_txns: ValidTxnList, write_ids: ValidWriteIdList,
                 after: int, upto: int, schema: StructType) -> None:
        self.target, self.table, self.txns, self.write_ids = target, table, snapshot_txns, write_ids
        self.after, self.upto = after, upto
        self.arrow_schema = to_arrow_schema(schema)

    @classmethod
    def open(cls, target: Target, table: TableInfo, txns: ValidTxnList, write_ids: ValidWriteIdList,
             options: Mapping[str, str | None], schema: StructType) -> HiveAcidChangeReader:
        """Raises: HiveAcidOptionError: a bad range (naming the open write id a `changesTo` would pass)."""
        after = parse_write_id("changesFrom", options.get("changesfrom"))
        assert after is not None, "a change read has changesFrom"
        settled = settled_write_id(write_ids)
        upto = parse_write_id("changesTo", options.get("changesto"))
        if upto is None:
            upto = settled
        elif upto > settled:
            blocker = (f"write id {settled + 1} is still open" if write_ids.open_ids
                       else f"the highest write id is {write_ids.high_watermark}")
            raise HiveAcidOptionError(f"{FORMAT_NAME}: option changesTo {upto} of {table.full_name}: {blocker}; read "
                                      f"up to {settled}")
        if after > upto:
            raise HiveAcidOptionError(f"{FORMAT_NAME}: option changesFrom {after} is above changesTo {upto}")
        return cls(target, table, txns, write_ids, after, upto, schema)

    def partitions(self) -> list[InputPartition]:
        metastore = self.target.open_metastore()
        try:
            return list(plan_change_partitions(metastore, self.table, after=self.after, upto=self.upto,
                                               write_ids=self.write_ids, txns=self.txns))
        finally:
            metastore.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The changes of one file (nothing for the empty partition Spark reads when a plan has no files)."""
        if isinstance(partition, ChangePartition):
            yield from read_changes(partition, self.table, self.arrow_schema)


class HiveAcidChangeStream(DataSourceStreamReader):
    """The table's changes as a stream, in write-id order; offsets `{"writeId": n}` (module docstring)."""

    def __init__(self, target: Target, table: TableInfo, start: int, schema: StructType) -> None:
        self.target, self.table, self.start = target, table, start
        self.arrow_schema = to_arrow_schema(schema)

    def _snapshot(self, metastore: Metastore) -> tuple[ValidTxnList, ValidWriteIdList]:
        snapshot = metastore.txns.snapshot([self.table.full_name])
        return snapshot.txns, snapshot.write_ids[full_table_name(self.table.database, self.table.name)]

    def _settled(self) -> int:
        metastore = self.target.open_metastore()
        try:
            return settled_write_id(self._snapshot(metastore)[1])
        finally:
            metastore.close()

    def initialOffset(self) -> dict:  # noqa: N802 (Spark's names)
        return {"writeId": self._settled() if self.start < 0 else self.start}

    def latestOffset(self) -> dict:  # noqa: N802
        return {"writeId": self._settled()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        metastore = self.target.open_metastore()
        try:
            txns, write_ids = self._snapshot(metastore)
            return list(plan_change_partitions(metastore, self.table, after=int(start["writeId"]),
                                               upto=int(end["writeId"]), write_ids=write_ids, txns=txns))
        finally:
            metastore.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The changes of one file (nothing for the empty partition Spark reads when a plan has no files)."""
        if isinstance(partition, ChangePartition):
            yield from read_changes(partition, self.table, self.arrow_schema)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint."""


__all__ = ["LATEST", "ChangePartition", "HiveAcidChangeReader", "HiveAcidChangeStream", "change_schema",
           "parse_write_id", "plan_change_partitions", "read_changes", "settled_write_id"]
