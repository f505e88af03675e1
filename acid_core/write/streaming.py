"""Streaming ingest, as Hive's streaming connection: many small transactions written into one delta per batch.

A connection to a table (and a static partition) opens a batch of transactions at once, allocates their write ids
together (consecutive), and writes one `delta_<min>_<max>` directory for the batch. Each commit first flushes the
ORC file and appends the flushed length to the bucket file's `_flush_length` side file, then commits the transaction;
readers read only up to the last recorded length, and only the write ids their snapshot says committed. Aborted
transactions leave rows that no snapshot ever sees. Closing (or a crash, through transaction time-outs) aborts what
is still open.

Object stores can neither append to an object nor show part of one: there every transaction of a batch writes its
own `delta_<w>_<w>` directory, whose files are complete (uploaded) before the transaction commits, and no side file.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from acid_core.errors import AcidError, TxnStateError, one_line_cause
from acid_core.format.bucketing import bucket_function
from acid_core.format.layout import ACID_FORMAT_FILE, bucket_file_name, delta_dir_name, side_file_name
from acid_core.format.orc_events import INSERT_OPERATION, EventFileWriter
from acid_core.format.rowid import encode_bucket
from acid_core.format.values import RowChecker
from acid_core.metastore import Metastore
from acid_core.metastore.locations import data_location
from acid_core.metastore.locks import LOCK_TIMEOUT_MS
from acid_core.metastore.txns import Operation
from acid_core.storage.fs import FileSystem
from acid_core.write.publish import write_format_file
from acid_core.write.table_write import TableWrite

_log = logging.getLogger("acid_core.write.streaming")

_NEVER = 1 << 62


class _BucketFile:
    """One open bucket file of a batch, with its side file."""

    def __init__(self, fs: FileSystem, directory: str, bucket: int, columns, compression: str, *,
                 side_file: bool = True) -> None:
        self.fs = fs
        self.path = fs.join(directory, bucket_file_name(bucket))
        self.side_path = side_file_name(self.path) if side_file else None
        self.bucket_property = encode_bucket(bucket, 0)
        if self.side_path is not None:
            fs.write_atomically(self.side_path, struct.pack(">q", 0))
        self.stream = fs.open_output(self.path)
        self.writer = EventFileWriter(self.stream, columns, compression=compression, stripe_rows=_NEVER, batch_rows=1)
        self.next_row_id = 0
        self.write_id: int | None = None

    def write(self, rows: list[tuple], write_id: int) -> None:
        if write_id != self.write_id:  # rowIds restart for every transaction, as Hive's record updater does
            self.write_id, self.next_row_id = write_id, 0
        first = self.next_row_id
        self.writer.write([(INSERT_OPERATION, write_id, self.bucket_property, first + i, write_id, row)
                           for i, row in enumerate(rows)], operation=INSERT_OPERATION)
        self.next_row_id += len(rows)

    def flush(self) -> None:
        length = self.writer.flush()
        self.stream.flush()
        assert self.side_path is not None, "flushed only with side files (one delta per batch)"
        self.fs.append_bytes(self.side_path, struct.pack(">q", length))

    def close(self) -> None:
        self.writer.close()
        self.stream.close()
        if self.side_path is not None:
            self.fs.delete_file(self.side_path)


class StreamingConnection:
    """Writes rows into a table (or one static partition of it) in transactions opened a batch at a time."""

    def __init__(self, metastore: Metastore, database: str, table: str, *, partition: Mapping[str, Any] | None = None,
                 batch_size: int = 10, agent_info: str = "acid-streaming", compression: str = "ZLIB",
                 heartbeat_interval_s: float | None = None, fs: FileSystem | None = None,
                 lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> None:
        self.metastore = metastore
        self.table = metastore.catalog.require_transactional(database, table)
        self.partition_name = self.table.partition_name(partition or {})
        if self.partition_name is not None:
            assert partition is not None, "only a given spec names a partition"
            metastore.catalog.add_partition(database, table, partition)
        if fs is None:
            where = data_location(self.table, self.partition_name)
            fs, location = where.fs, where.path
        else:
            location = self.table.partition_location(self.partition_name)
        self.fs, self.location = fs, location
        self._delta_per_batch = fs.renames_atomically  # appendable files: one delta per batch, with side files
        if not 1 <= batch_size <= metastore.txns.max_open_batch:
            raise AcidError(f"batch size {batch_size} must be in 1..{metastore.txns.max_open_batch}")
        self.batch_size = batch_size
        if lock_timeout_ms < 0:
            raise AcidError(f"lock timeout {lock_timeout_ms} ms must not be negative")
        self.agent_info = agent_info
        self.lock_timeout_ms = lock_timeout_ms
        self.compression = compression
        self.rows = RowChecker(self.table.columns)
        self._place = (bucket_function(self.table.columns, self.table.bucket_columns, self.table.num_buckets,
                                       version=self.table.bucketing_version)
                       if self.table.num_buckets > 0 else None)
        self._batch: list[TableWrite] = []
        self._next_in_batch = 0
        self._current: TableWrite | None = None
        self._files: dict[int, _BucketFile] = {}
        self._directory: str | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeats = None
        if heartbeat_interval_s:
            self._heartbeats = threading.Thread(target=self._heartbeat_loop, args=(heartbeat_interval_s,),
                                                name="acid-streaming-heartbeat", daemon=True)
            self._heartbeats.start()

    # --- batches ---------------------------------------------------------------------------------------------------
    @property
    def current_txn_id(self) -> int | None:
        return None if self._current is None else self._current.txn_id

    @property
    def current_write_id(self) -> int | None:
        return None if self._current is None else self._current.write_id

    @property
    def remaining_in_batch(self) -> int:
        return len(self._batch) - self._next_in_batch

    def _fetch_batch(self) -> None:
        self._batch = TableWrite.open_batch(self.metastore, self.table, self.batch_size, agent_info=self.agent_info,
                                            partition=self.partition_name)
        self._next_in_batch = 0
        self._files = {}
        if self._delta_per_batch:
            low, high = min(w.write_id for w in self._batch), max(w.write_id for w in self._batch)
            self._open_directory(delta_dir_name(low, high))

    def _open_directory(self, name: str) -> None:
        self._directory = self.fs.join(self.location, name)
        self.fs.make_dirs(self._directory)
        if not self.fs.exists(self.fs.join(self._directory, ACID_FORMAT_FILE)):
            write_format_file(self.fs, self._directory)  # in place: its uncommitted write ids hide it

    def begin_transaction(self) -> int:
        """Start the next transaction of the batch (opening a new batch when this one is used up).

        If it raises after taking the batch's next transaction (its lock not granted within `lock_timeout_ms`, or the
        metastore lost), that transaction is the current one, so `abort_transaction` (or `close`) ends it and
        releases what it holds; `current_txn_id` says whether there is one.
        """
        with self._lock:
            self._check_usable()
            if self._current is not None:
                raise TxnStateError(f"transaction {self._current.txn_id} is still open: commit or abort it first")
            if self.remaining_in_batch == 0:
                self._finish_batch()
                self._fetch_batch()
            write = self._batch[self._next_in_batch]
            self._next_in_batch += 1
            self._current = write  # held from here: heart-beaten, and ended by abort_transaction or close
            write.lock(timeout_ms=self.lock_timeout_ms)
            write.record(self.partition_name, Operation.INSERT)
            if not self._delta_per_batch:
                self._open_directory(delta_dir_name(write.write_id, write.write_id))
            return write.txn_id

    def write(self, rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> int:
        """Write rows in the current transaction; returns how many.

        Raises:
            InvalidRowError: a row does not fit (nothing of this call is written).
        """
        with self._lock:
            self._check_usable()
            if self._current is None:
                raise TxnStateError("no transaction is open: call begin_transaction() first")
            by_bucket: dict[int, list[tuple]] = {}
            count = 0
            for index, row in enumerate(rows):
                values = self.rows.normalise(row, index)
                by_bucket.setdefault(self._place(values) if self._place else 0, []).append(values)
                count += 1
            write_id = self._current.write_id
            assert self._directory is not None, "begin_transaction opened the transaction's delta directory"
            for bucket, bucket_rows in sorted(by_bucket.items()):
                if bucket not in self._files:
                    self._files[bucket] = _BucketFile(self.fs, self._directory, bucket, self.table.columns,
                                                      self.compression, side_file=self._delta_per_batch)
                self._files[bucket].write(bucket_rows, write_id)
            return count

    def commit_transaction(self) -> None:
        """Make the current transaction's rows durable (flush + side file), then commit it."""
        with self._lock:
            write = self._require_current()
            if self.remaining_in_batch == 0 or not self._delta_per_batch:
                self._close_files()  # last of the batch, or an object store: complete files, no side file needed
            else:
                for bucket_file in self._files.values():
                    bucket_file.flush()
            self._current = None
            write.commit()

    def abort_transaction(self) -> None:
        """Abort the current transaction; rows it wrote stay in the file but no snapshot sees them."""
        with self._lock:
            write = self._require_current()
            self._current = None
            if not self._delta_per_batch:
                self._close_files()  # its own directory: the files end with the transaction
            write.abort()

    def heartbeat(self) -> None:
        """Keep every still-open transaction of the batch alive."""
        with self._lock:
            pending = [w.txn_id for w in self._batch[self._next_in_batch - (1 if self._current is not None else 0):]]
        if pending:
            self.metastore.txns.heartbeat_range(min(pending), max(pending))

    def _heartbeat_loop(self, interval: float) -> None:
        """Heartbeat the open batch; failures are logged (with the time left before hive.txn.timeout) and so is
        the recovery, and the loop goes on: the writer finds an aborted batch at its next commit."""
        timeout_s = self.metastore.txns.txn_timeout_ms / 1000
        renewed, failing = time.monotonic(), False
        while not self._stop.wait(interval):
            try:
                self.heartbeat()
            except AcidError as exc:
                failing = True
                _log.warning("streaming %s: heartbeat failed, %.0f s before hive.txn.timeout: %s", self.table.full_name,
                             max(0.0, timeout_s - (time.monotonic() - renewed)), one_line_cause(exc))
                continue
            if failing:
                _log.warning("streaming %s: heartbeats renewed after %.0f s", self.table.full_name,
                             time.monotonic() - renewed)
                failing = False
            renewed = time.monotonic()

    def _require_current(self) -> TableWrite:
        self._check_usable()
        if self._current is None:
            raise TxnStateError("no transaction is open")
        return self._current

    def _check_usable(self) -> None:
        if self._closed:
            raise AcidError(f"streaming connection to {self.table.full_name} is closed")

    def _close_files(self) -> None:
        for bucket_file in self._files.values():
            bucket_file.close()
        self._files = {}

    def _finish_batch(self) -> None:
        """Abort the batch's unused transactions and close its files."""
        unused = [w.txn_id for w in self._batch[self._next_in_batch:]]
        if self._current is not None:
            unused = [self._current.txn_id] + unused
            self._current = None
        self.metastore.txns.abort_txns(unused)
        self._next_in_batch = len(self._batch)
        self._close_files()

    def close(self) -> None:
        """Abort whatever is still open, finish the files and stop heart-beating. Safe to call twice."""
        self._stop.set()
        with self._lock:
            if self._closed:
                return
            try:
                self._finish_batch()
            finally:
                self._closed = True
        if self._heartbeats is not None:
            self._heartbeats.join(timeout=5)

    def __enter__(self) -> StreamingConnection:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
