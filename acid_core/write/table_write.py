"""One write transaction on one table: the way every writer here writes (`acid sql` INSERT, the demo writer, streaming
ingest and the Spark writes, whose tasks only write files).

`TableWrite.open` opens a transaction, allocates the table's write id, records where the write may stage files (a
partition, or the whole table when the partitions are found while writing) and takes Hive's shared_write lock.
`record` says which partitions it writes and how (TXN_COMPONENTS, written before the files, as Hive records them at
lock time, so the cleaner finds the files of a write that aborts). Where renames are atomic (local, HDFS) files are
built in hidden staging directories (`layout.write_staging_name`, carrying the transaction id) beside their final
directories and renamed into place; on object stores they are written under their final names directly (Hive's
direct insert: the write id stays invalid in every snapshot until the commit). `commit` commits; `abort` removes
what this write staged or published and aborts. A write killed before either leaves its staging (or, on an object
store, directories of its write id) behind: housekeeping (`remove_abandoned_staging`) removes them once the
transaction is no longer open.

Cost: five metastore round trips for a write (open, write id, staging record, lock, components) plus the commit;
removing a killed write's staging lists its partition directory, or the partition directories of its table when it
staged table-wide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from acid_core.errors import AcidError, NoSuchObjectError, NoSuchTxnError, TxnStateError, UsageError
from acid_core.format.bucketing import bucket_function
from acid_core.format.layout import (
    METADATA_FILE,
    ParsedBase,
    ParsedDelta,
    is_hidden,
    parse_directory,
    parse_partition_dir_name,
    parse_write_staging_name,
    write_staging_name,
)
from acid_core.format.orc_events import DEFAULT_STRIPE_ROWS
from acid_core.format.rowid import RowId
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.locations import DataLocation, data_location
from acid_core.metastore.locks import LOCK_TIMEOUT_MS, LockComponent, LockType
from acid_core.metastore.streams import BatchMark
from acid_core.metastore.txns import Operation, StagingRecord
from acid_core.read.merge import read_snapshot
from acid_core.storage.fs import FileSystem, ensure_inside
from acid_core.write.publish import Publication
from acid_core.write.writer import EmbeddedWriter, WriteResult


def strongest(current: Operation | None, operation: Operation) -> Operation:
    """What a transaction did to one partition after also doing `operation` there: update and delete win over insert
    (they drive first-committer-wins); a delete and an update make an update."""
    if current is None or current is operation:
        return operation
    if operation is Operation.INSERT:
        return current
    return operation if current is Operation.INSERT else Operation.UPDATE


class TableWrite:
    """One open write transaction on one table; use `open` (or `open_batch` for streaming) to make one."""

    def __init__(self, metastore: Metastore, table: TableInfo, txn_id: int, write_id: int, *, partition: str | None,
                 agent_info: str, staged: bool, cataloged: frozenset[str] = frozenset(),
                 stripe_rows: int = DEFAULT_STRIPE_ROWS) -> None:
        self.metastore = metastore
        self.table = table
        self.txn_id = txn_id
        self.write_id = write_id
        self.partition = partition
        self.agent_info = agent_info
        self._registered_staging = staged
        self._cataloged = set(cataloged)  # partitions known to be in the catalog already
        self._recorded: dict[str | None, Operation] = {}
        self._published: Publication | None = None  # made on first use: a streaming write never stages
        self._ended = False
        self._writer: EmbeddedWriter | None = None
        self._stripe_rows = stripe_rows
        self._sweep = False  # abort also removes staging this handle was not told of (`resume`)

    # --- opening ----------------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, metastore: Metastore, database: str, table: str, *, agent_info: str,
             partition: Mapping[str, Any] | str | None = None, lock_timeout_ms: int = LOCK_TIMEOUT_MS,
             lock_type: LockType = LockType.SHARED_WRITE, stripe_rows: int = DEFAULT_STRIPE_ROWS) -> TableWrite:
        """Open a transaction writing `table` (only `partition` when given, else anywhere in it), with its write id,
        its staging record and a shared_write lock (excl_write with `lock_type`, as hive.txn.xlock.write asks).
        `stripe_rows`: rows per ORC stripe of the embedded writer's files (`insert`, `delete`, `update`).

        Raises:
            NotTransactionalError, NoSuchObjectError: not an existing ACID table.
            MetastoreError: the partition does not fit the table's keys.
            LockTimeoutError: the lock was not granted in time (the transaction is aborted).
        """
        info = metastore.catalog.require_transactional(database, table)
        name = _partition_name(info, partition)
        txns = metastore.txns
        txn_id = txns.open_txn(agent_info=agent_info, tables=[info.full_name])
        try:
            write_id = txns.allocate_write_ids([txn_id], info.database, info.name)[txn_id]
            txns.register_staging(txn_id, info.database, info.name, name)
        except BaseException:
            _abort_quietly(metastore, txn_id)
            raise
        write = cls(metastore, info, txn_id, write_id, partition=name, agent_info=agent_info, staged=True,
                    stripe_rows=stripe_rows)
        try:
            write.lock(timeout_ms=lock_timeout_ms, lock_type=lock_type)
        except BaseException:
            write.abort()
            raise
        return write

    @classmethod
    def open_batch(cls, metastore: Metastore, table: TableInfo, count: int, *, agent_info: str,
                   partition: str | None) -> list[TableWrite]:
        """Open `count` transactions at once with consecutive write ids (Hive's streaming TransactionBatch); each is
        locked when it begins (`lock`). They write in place (one delta for the batch), so they stage nothing."""
        txns = metastore.txns
        txn_ids = txns.open_txns(count, agent_info=agent_info, tables=[table.full_name])
        try:
            write_ids = txns.allocate_write_ids(txn_ids, table.database, table.name)
        except BaseException:
            txns.abort_txns(txn_ids)
            raise
        cataloged = frozenset() if partition is None else frozenset({partition})  # the connection added it
        return [cls(metastore, table, txn_id, write_ids[txn_id], partition=partition, agent_info=agent_info,
                    staged=False, cataloged=cataloged) for txn_id in txn_ids]

    @classmethod
    def resume(cls, metastore: Metastore, table: TableInfo, txn_id: int, write_id: int, *, agent_info: str,
               partition: str | None = None) -> TableWrite:
        """The write transaction `txn_id` that `open` opened in another process (Spark pickles a data source's writer
        from the planner to the process that commits it): what was staged is told again with `staged`, what was
        written with `record`. Its `abort` also removes the staging directories nobody told it of (a failed task's):
        every one named for the transaction in its partition, or in every partition of the table; and it leaves
        the staging record for housekeeping (`remove_abandoned_staging`), which sweeps again once the transaction is
        aborted, for what tasks still running when their job was given up on write after the abort."""
        write = cls(metastore, table, txn_id, write_id, partition=partition, agent_info=agent_info, staged=True)
        write._sweep = True
        return write

    def lock(self, *, timeout_ms: int = LOCK_TIMEOUT_MS, lock_type: LockType = LockType.SHARED_WRITE) -> None:
        """Take the write lock on the partition (or the table) this write was opened for."""
        component = LockComponent(self.table.database, self.table.name, self.partition, lock_type)
        self.metastore.locks.acquire([component], txn_id=self.txn_id, timeout_ms=timeout_ms,
                                     agent_info=self.agent_info)

    @property
    def _publication(self) -> Publication:
        """What this write staged and published (`acid_core.write.publish`)."""
        if self._published is None:
            where = self.location()
            self._published = Publication(where.fs, where.table_root)
        return self._published

    # --- what is written where --------------------------------------------------------------------------------------
    def location(self, partition: str | None = None) -> DataLocation:
        """The checked directory of `partition` (the table's directory for None)."""
        return data_location(self.table, partition)

    def record(self, partition: str | None, operation: Operation) -> None:
        """Say this write writes `partition` (None: the unpartitioned table) by `operation`, before its files are
        published (TXN_COMPONENTS, so the cleaner finds them if the write aborts); a new partition enters the catalog
        at commit.

        Raises:
            UsageError: the partition lies outside what this write locked.
            MetastoreError: the partition does not fit the table's keys.
        """
        if partition is not None:
            partition = self.table.check_partition_name(partition)
            self.location(partition)  # refused if its directory leads out of the table (a symbolic link)
        if bool(self.table.partition_keys) != (partition is not None):
            raise UsageError(f"{self.table.full_name} is {'' if self.table.partition_keys else 'not '}partitioned: "
                             f"cannot record a write to {partition or 'the whole table'}")
        if self.partition is not None and partition != self.partition:
            raise UsageError(f"transaction {self.txn_id} locked {self.table.full_name} partition {self.partition} "
                             f"only, not {partition}")
        combined = strongest(self._recorded.get(partition), operation)
        if self._recorded.get(partition) is combined:
            return
        self.metastore.txns.add_components(self.txn_id, self.table.database, self.table.name, [partition], combined)
        self._recorded[partition] = combined

    @property
    def recorded(self) -> dict[str | None, Operation]:
        """The partitions recorded so far and what was done to each."""
        return dict(self._recorded)

    def staging_name(self, final: str) -> str:
        """The hidden name under which this write builds `final` (beside it, in its partition directory); `final`
        itself on an object store (`FileSystem.renames_atomically`), where the write id hides it until the commit."""
        if not self._registered_staging:
            raise UsageError(f"transaction {self.txn_id} writes in place (streaming) and stages nothing")
        if not self.location().fs.renames_atomically:
            return final
        return write_staging_name(final, self.txn_id)

    def staged(self, staging: str, final: str) -> None:
        """Remember a staging directory that `publish` renames to `final` (and `abort` removes).

        Raises:
            PathOutsideTableError: either directory resolves outside the table's location.
        """
        self._publication.stage(staging, final)

    def publish(self, *, check_open: bool = True) -> tuple[str, ...]:
        """Publish every staged directory (`acid_core.write.publish`: the ACID format file, then the rename into place;
        on an object store, where a write builds its final directories directly, only the format file).

        A heartbeat first (unless `check_open` is false): a write whose transaction was aborted meanwhile (timed out,
        or by an operator) publishes nothing, so no directory with its write id appears after the cleaner and
        housekeeping forgot it.

        Raises:
            TxnAbortedError, NoSuchTxnError: the transaction is no longer open.
        """
        if self._published is None:
            return ()
        if check_open and self._published.pending:
            self.metastore.txns.heartbeat(self.txn_id)
        return self._published.publish()

    # --- the embedded writer ----------------------------------------------------------------------------------------
    def _embedded(self) -> EmbeddedWriter:
        if self._writer is None:
            info = self.table
            where = self.location()
            buckets = info.num_buckets if info.num_buckets > 0 else None
            place = (bucket_function(info.columns, info.bucket_columns, info.num_buckets,
                                     version=info.bucketing_version) if buckets else None)
            self._writer = EmbeddedWriter(where.path, columns=info.columns,
                                          partition_keys=[k.name for k in info.partition_keys], bucket_count=buckets,
                                          bucket_function=place, compression=compression_of(info),
                                          stripe_rows=self._stripe_rows, fs=where.fs)
        return self._writer

    def _spec(self, partition: Mapping[str, Any] | None) -> tuple[str | None, dict | None]:
        name = _partition_name(self.table, partition)
        return name, (parse_partition_dir_name(name) if name is not None else None)

    def insert(self, rows: Iterable[Sequence[Any] | Mapping[str, Any]], *, partition: Mapping[str, Any] | None = None,
               statement_id: int = 0, writer_id: int = 0) -> WriteResult:
        """Insert rows with the embedded writer (checked first: a bad row writes nothing)."""
        name, spec = self._spec(partition)
        self.record(name, Operation.INSERT)
        return self._wrote(self._embedded().insert(rows, write_id=self.write_id, statement_id=statement_id,
                                                   partition=spec, writer_id=writer_id, txn_id=self.txn_id,
                                                   publication=self._publication))

    def delete(self, row_ids: Iterable[RowId], *, partition: Mapping[str, Any] | None = None,
               statement_id: int = 0) -> WriteResult:
        """Delete rows by ROW__ID with the embedded writer."""
        name, spec = self._spec(partition)
        self.record(name, Operation.DELETE)
        return self._wrote(self._embedded().delete(row_ids, write_id=self.write_id, statement_id=statement_id,
                                                   partition=spec, txn_id=self.txn_id,
                                                   publication=self._publication))

    def update(self, row_ids: Sequence[RowId], new_rows: Sequence[Sequence[Any] | Mapping[str, Any]], *,
               partition: Mapping[str, Any] | None = None, statement_id: int = 0, writer_id: int = 0) -> WriteResult:
        """Split-update with the embedded writer (a delete delta and a delta of one statement)."""
        name, spec = self._spec(partition)
        self.record(name, Operation.UPDATE)
        return self._wrote(self._embedded().update(row_ids, new_rows, write_id=self.write_id,
                                                   statement_id=statement_id, partition=spec, writer_id=writer_id,
                                                   txn_id=self.txn_id, publication=self._publication))

    def _wrote(self, result: WriteResult) -> WriteResult:
        """Publish an embedded statement's directories at once (as before the commit: its write id hides them from
        every other snapshot), so later statements of this transaction read them."""
        self.publish(check_open=False)
        return result

    def read(self, partition: str | None = None, *, include_row_id: bool = False) -> pa.Table:
        """The rows of `partition` (or the unpartitioned table) this transaction sees, its own writes included."""
        snapshot = self.metastore.txns.snapshot([self.table.full_name], current_txn=self.txn_id)
        where = self.location(partition)
        return read_snapshot(where.path, write_ids=snapshot.write_ids[self.table.full_name], txns=snapshot.txns,
                             include_row_id=include_row_id, missing_ok=True, fs=where.fs)

    # --- ending -----------------------------------------------------------------------------------------------------
    def commit(self, *, batch: BatchMark | None = None) -> None:
        """Publish what is still staged, add new partitions to the catalog and commit (forgetting the staging record
        in the same database transaction; marking `batch`, the streaming micro-batch it writes, committed there too).

        Raises:
            WriteConflictError: an update/delete of the same partition committed first; this write is aborted and
                what it staged or published removed.
            TxnAbortedError, NoSuchTxnError: the transaction timed out or was aborted meanwhile.
            StreamBatchError: `batch` is not this transaction's to commit; this write is aborted.
        """
        try:
            self.publish()
            for partition in self._recorded:
                if partition is not None and partition not in self._cataloged:
                    self.metastore.catalog.add_partition(self.table.database, self.table.name,
                                                         parse_partition_dir_name(partition))
                    self._cataloged.add(partition)
            self.metastore.txns.commit(self.txn_id, wrote=bool(self._recorded), batch=batch)
        except BaseException:
            self.abort()
            raise
        self._ended = True

    def abort(self) -> None:
        """Remove what this write staged, published or wrote, forget its staging record and abort; quiet when the
        transaction is no longer open (timed out, or aborted by a write conflict). An abort that fails (the metastore
        still unreachable after its retries) leaves the write to be aborted again; each step is safe to repeat."""
        if self._ended:
            return
        try:
            if self._published is not None:
                self._published.discard()  # only this write id writes there
        except BaseException:
            _abort_quietly(self.metastore, self.txn_id)
            raise
        try:
            if self._registered_staging:
                record = StagingRecord(self.txn_id, self.table.database, self.table.name, self.partition)
                if self._sweep:  # the record stays: a task still running may write after this sweep, and
                    _remove_staging_of(self.metastore, record)  # housekeeping sweeps again, then forgets it
                else:
                    self.metastore.txns.forget_staging(record)
        finally:
            _abort_quietly(self.metastore, self.txn_id)
        self._ended = True

    def __enter__(self) -> TableWrite:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        """Commit when the block ends normally (unless it committed or aborted itself), abort when it raises."""
        if exc_type is None:
            if not self._ended:
                self.commit()
        else:
            self.abort()


def compression_of(table: TableInfo) -> str:
    """The ORC compression a table's writes use: its `orc.compress` property, ZLIB by default (as Hive)."""
    return (table.param("orc.compress") or "ZLIB").upper()


def _partition_name(table: TableInfo, partition: Mapping[str, Any] | str | None) -> str | None:
    if partition is None or isinstance(partition, str):
        return None if partition is None else table.check_partition_name(partition)
    return table.partition_name(partition)


def _abort_quietly(metastore: Metastore, txn_id: int) -> None:
    try:
        metastore.txns.abort(txn_id)
    except (TxnStateError, NoSuchTxnError):
        pass  # timed out, aborted by a conflict, or never recorded


# --- housekeeping: what killed writes left ----------------------------------------------------------------------------
def remove_abandoned_staging(metastore: Metastore, *, limit: int = 1000) -> tuple[list[str], list[str]]:
    """Remove the staging directories of writes whose transaction is no longer open (killed, timed out, or ended
    without cleaning up), then their staging records. Returns (directories removed, problems); a record whose
    directories could not be removed stays for the next run.

    Only hidden directories named for that transaction (`.<final>.tmp-t<txn>[-<attempt>]`) are touched, inside the
    table's real location; at most `limit` records per call.
    """
    removed: list[str] = []
    problems: list[str] = []
    for record in metastore.txns.abandoned_staging(limit=limit):
        try:
            removed.extend(_remove_staging_of(metastore, record))
        except NoSuchObjectError:
            pass  # the table is gone, and its records with it (drop table)
        except AcidError as exc:
            problems.append(f"transaction {record.txn_id} ({record.database}.{record.table}"
                            f"{'/' + record.partition if record.partition else ''}): staging not removed: {exc}")
            continue
        metastore.txns.forget_staging(record)
    return removed, problems


def _remove_staging_of(metastore: Metastore, record: StagingRecord) -> list[str]:
    """Remove what a write that ended without cleaning up left: its hidden staging directories, or on an object
    store (where writers build their final directories directly) the delta and delete-delta directories of its write
    id and the `_v<txn>` results of a compactor transaction. No snapshot reads them (the transaction is aborted) and
    no other writer can have made them (write ids are allocated once per table, a `_v` suffix names its compactor
    transaction; a compactor's output of another transaction is left alone)."""
    table = metastore.catalog.get_table(record.database, record.table)
    where = data_location(table, record.partition)
    depth = 0 if record.partition is not None else len(table.partition_keys)
    write_id = None
    if not where.fs.renames_atomically:  # -1: a compactor transaction, which holds no write id
        write_id = metastore.txns.write_id_of(record.txn_id, table.database, table.name) or -1
    removed = []
    for directory in _directories(where.fs, where.path, depth):
        for child in where.fs.list_dir(directory, missing_ok=True):
            if (child.is_dir and _left_by(child.name, record.txn_id, write_id)
                    and not where.fs.exists(where.fs.join(child.path, METADATA_FILE))):  # a compactor's base
                where.fs.delete_dir(ensure_inside(where.table_root, child.path, fs=where.fs))
                removed.append(child.path)
    return removed


def _left_by(name: str, txn_id: int, write_id: int | None) -> bool:
    """A staging directory of transaction `txn_id`; on an object store (`write_id` given, None if it has none) also
    a delta directory written directly by its write `write_id`, or a result of it as a compactor transaction."""
    staging = parse_write_staging_name(name)
    if staging is not None:
        return staging.txn_id == txn_id
    if write_id is None:
        return False
    parsed = parse_directory(name)
    if parsed is None:
        return False
    if parsed.visibility_txn_id:
        return parsed.visibility_txn_id == txn_id
    if isinstance(parsed, ParsedBase):  # an INSERT OVERWRITE's base (a compactor's has a `_v` suffix)
        return parsed.write_id == write_id
    return (isinstance(parsed, ParsedDelta) and parsed.min_write_id == parsed.max_write_id == write_id)


def _directories(fs: FileSystem, root: str, depth: int) -> list[str]:
    """`root` and, `depth` levels down, its visible subdirectories (the partition directories of a table)."""
    level = [root]
    found = [root]
    for _ in range(depth):
        level = [child.path for directory in level for child in fs.list_dir(directory, missing_ok=True)
                 if child.is_dir and not is_hidden(child.name)]
        found.extend(level)
    return found


__all__ = ["TableWrite", "compression_of", "remove_abandoned_staging", "strongest"]
