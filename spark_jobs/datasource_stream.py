"""The `hiveacid` data source as a Structured Streaming sink, exactly once:

    df.writeStream.format("hiveacid").option("checkpointLocation", path).start("db.table")

Each micro-batch is one write transaction (a delta `delta_w_w_0000` per partition its rows fall in, files as a batch
append writes them: `spark_jobs.datasource_write`), and the metastore records (query, batch) in the same database
transaction as the COMMIT (`acid_core.metastore.streams`, Delta's txnAppId/txnVersion idea; the query is the
streaming query's id, which Spark keeps in the checkpoint's `metadata` file, so it survives restarts). A batch Spark
replays after a crash is therefore written at most once:

- Spark plans each micro-batch in a Python planner process on the driver (`streamWriter`), then pickles the writer to
  the batch's tasks: the pickling opens the batch's transaction (write id, staging record, shared_write lock) and
  makes it the query's pending one, aborting a pending transaction a killed run of the query left behind (its staged
  files are removed, now and by housekeeping).
- The tasks write event files into hidden staging directories (never the metastore).
- Spark commits the batch in another driver process (`commit(messages, batchId)`): if the metastore shows the batch
  committed already (the run that wrote it was killed before Spark recorded that), the new transaction is aborted and
  its files removed; otherwise the files are published and the transaction commits with the batch's mark. `abort`
  aborts the pending transaction.

Only the append output mode is taken (`complete` would replace the table at every batch). While a micro-batch's
tasks run, the query's keeper process (`acid_deploy.keeper.ensure_stream_keeper`, one per query on the driver's
machine) heartbeats its transaction every `heartbeatSeconds` (30 by default), so a long micro-batch is not timed out
by housekeeping; it aborts the pending transaction if the driver dies, and exits after ten minutes without a
micro-batch. Options: `table` (or the path given to `start`), `metastore`, `checkpointLocation` (required, as an
option of the query) and `heartbeatSeconds`.

Cost per micro-batch: the metastore round trips of one write plus reading and moving the query's row (two), one read
of the checkpoint's metadata file when the sink is planned; tasks as a batch append's.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from acid_core.errors import AcidError
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.streams import BatchMark
from acid_core.storage.fs import FileSystem
from acid_core.write.table import AcidTable
from acid_core.write.table_write import TableWrite
from acid_deploy.keeper import driver_process, ensure_stream_keeper
from spark_jobs.datasource_options import FORMAT_NAME, HiveAcidOptionError, Target, lowered, parse_target
from spark_jobs.datasource_write import (
    HEARTBEAT_SECONDS,
    HiveAcidWriteError,
    TaskPlan,
    WrittenFiles,
    final_name,
    frame_columns,
    seconds_option,
    stage_files,
    write_task,
)
from spark_jobs.write import file_task

STREAM_OPTIONS = ("table", "metastore", "checkpointLocation", "heartbeatSeconds")
_log = logging.getLogger(__name__)


def query_id(checkpoint: str) -> str:
    """The streaming query's id, from the `metadata` file Spark writes into its checkpoint when the query starts.

    Raises:
        HiveAcidOptionError: no readable metadata there.
    """
    location = checkpoint if "://" in checkpoint else os.path.abspath(checkpoint)
    try:
        fs, path = FileSystem.resolve(location)
        text = fs.read_bytes(fs.join(path, "metadata")).decode("utf-8")
        return str(json.loads(text.splitlines()[0])["id"])
    except (AcidError, OSError, ValueError, KeyError, IndexError) as exc:
        raise HiveAcidOptionError(f"{FORMAT_NAME}: checkpointLocation {checkpoint!r} holds no readable Spark query "
                                  f"metadata ({exc.__class__.__name__}): give the query's own checkpoint") from None


@dataclass(frozen=True, slots=True)
class OpenBatch:
    """The transaction of the micro-batch being written, as its tasks get it."""

    txn_id: int
    write_id: int
    plan: TaskPlan


class HiveAcidStreamWriter(DataSourceStreamArrowWriter):
    """One query's sink; made by Spark for each micro-batch, in the planner and again in the committing process."""

    def __init__(self, target: Target, table: TableInfo, sources: tuple[str, ...], app_id: str,
                 heartbeat_s: float = HEARTBEAT_SECONDS) -> None:
        self.target = target
        self.table = table
        self.sources = sources
        self.app_id = app_id
        self.heartbeat_s = heartbeat_s
        self.batch: OpenBatch | None = None  # opened when pickled to the tasks (module docstring)

    @classmethod
    def open(cls, options: dict[str, str], schema: StructType, overwrite: bool) -> HiveAcidStreamWriter:
        """Check the options and the stream's columns (no transaction yet).

        Raises:
            HiveAcidOptionError, HiveAcidWriteError: a bad option, the complete output mode, columns that do not fit.
            NoSuchObjectError, NotTransactionalError: no such full ACID table.
        """
        given = lowered(options, STREAM_OPTIONS, "streaming write")
        target = parse_target(given, "write")
        if overwrite:
            raise HiveAcidWriteError(f"{FORMAT_NAME}: streaming into {target.database}.{target.table}: only the "
                                     "append output mode is supported (complete would replace the table each batch)")
        checkpoint = given.get("checkpointlocation")
        if not checkpoint:
            raise HiveAcidOptionError(f'{FORMAT_NAME}: streaming into {target.database}.{target.table} needs '
                                      'option("checkpointLocation", ...) on the query: the batches it committed are '
                                      "recorded under the query's id, which Spark keeps there")
        app_id = query_id(checkpoint)
        metastore = target.open_metastore()
        try:
            table = AcidTable.load(metastore, target.database, target.table).info
        finally:
            metastore.close()
        return cls(target, table, frame_columns(table, schema), app_id,
                   seconds_option(given, "heartbeatSeconds", HEARTBEAT_SECONDS))

    @property
    def agent_info(self) -> str:
        return f"spark hiveacid stream {self.app_id}"

    def __getstate__(self) -> dict:
        if self.batch is None:
            self.batch = self._begin()
        return {name: getattr(self, name) for name in ("target", "table", "sources", "app_id", "heartbeat_s", "batch")}

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def _begin(self) -> OpenBatch:
        """Open the micro-batch's transaction and make it the query's pending one (aborting a stale one)."""
        metastore = self.target.open_metastore()
        try:
            write = AcidTable(metastore, self.table).new_write(agent_info=self.agent_info)
            try:
                stale = metastore.streams.begin_batch(self.app_id, self.table.database, self.table.name,
                                                      write.txn_id)
                final = final_name(write.write_id, False)
                plan = TaskPlan(file_task(write, 0, final, bucketed=self.table.num_buckets > 0), self.sources,
                                write.table)
                ensure_stream_keeper(self.target.url(), (self.app_id, self.table.database, self.table.name),
                                     watch=driver_process(), interval_s=self.heartbeat_s)
            except BaseException:
                write.abort()
                raise
            if stale is not None:
                _log.warning("%s: streaming query %s: aborting transaction %d, left pending by a run that stopped "
                             "while writing a batch", FORMAT_NAME, self.app_id, stale)
                self._resume(metastore, stale).abort()
            return OpenBatch(write.txn_id, write.write_id, plan)
        finally:
            metastore.close()

    def _resume(self, metastore: Metastore, txn_id: int) -> TableWrite:
        write_id = metastore.txns.write_id_of(txn_id, self.table.database, self.table.name) or 0
        return TableWrite.resume(metastore, self.table, txn_id, write_id, agent_info=self.agent_info)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        """Spark task: write this task's rows of the micro-batch."""
        if self.batch is None:
            raise HiveAcidWriteError(f"{FORMAT_NAME}: streaming into {self.table.full_name}: a task got no "
                                     "transaction (the writer was not pickled by Spark's planner)")
        return write_task(self.batch.plan, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        """Commit the micro-batch exactly once (module docstring).

        Raises:
            StreamBatchError: another run of the query took over the batch.
            HiveAcidWriteError: the tasks wrote for another transaction than the query's pending one.
        """
        found = [m for m in messages if isinstance(m, WrittenFiles)]
        metastore = self.target.open_metastore()
        try:
            state = metastore.streams.state(self.app_id, self.table.database, self.table.name)
            if state.pending_txn_id is None:
                if batchId <= state.last_batch:
                    return  # committed before, and its replay's transaction is gone already
                raise HiveAcidWriteError(f"{FORMAT_NAME}: streaming query {self.app_id}: batch {batchId} of "
                                         f"{self.table.full_name} has no transaction to commit")
            write = self._resume(metastore, state.pending_txn_id)
            if batchId <= state.last_batch:
                _log.info("%s: streaming query %s: batch %d of %s committed before (replayed after a restart): "
                          "skipped", FORMAT_NAME, self.app_id, batchId, self.table.full_name)
                self._abort(metastore, write)
                return
            try:
                strangers = sorted({m.write_id for m in found} - {write.write_id})
                if strangers:
                    raise HiveAcidWriteError(f"{FORMAT_NAME}: streaming query {self.app_id}: batch {batchId}'s tasks "
                                             f"wrote write id(s) {strangers}, not the pending {write.write_id}")
                files = [f for m in found for f in m.files]
                stage_files(write, files, final=final_name(write.write_id, False),
                            overwrite=False)
            except BaseException:
                self._abort(metastore, write)
                raise
            write.commit(batch=BatchMark(self.app_id, self.table.database, self.table.name, batchId))
        finally:
            metastore.close()

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Abort the micro-batch's transaction, removing what its tasks wrote."""
        metastore = self.target.open_metastore()
        try:
            state = metastore.streams.state(self.app_id, self.table.database, self.table.name)
            if state.pending_txn_id is not None:
                self._abort(metastore, self._resume(metastore, state.pending_txn_id))
        finally:
            metastore.close()

    def _abort(self, metastore: Metastore, write: TableWrite) -> None:
        write.abort()
        metastore.streams.end_pending(self.app_id, self.table.database, self.table.name, write.txn_id)


__all__ = ["STREAM_OPTIONS", "HiveAcidStreamWriter", "OpenBatch", "query_id"]
