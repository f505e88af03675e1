"""The columnar event-file writer: pyarrow's ORC writer plus the Hive user metadata patched into the tail.

Used where events arrive as Arrow columns (compaction, Spark writes): it writes millions of events per second where
the row-wise pyorc writer (orc_events.EventFileWriter) manages a few hundred thousand. The file is built in a scratch
file, its per-stripe last keys are read back for `hive.acid.key.index`, `hive.acid.stats` and `hive.acid.version`
are added to the footer, and only then is it put in place.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Sequence
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc

from acid_core import settings
from acid_core.errors import SchemaMismatchError, UnsortedEventsError
from acid_core.format.delete_events import KeyArrays
from acid_core.format.orc_events import (
    ACID_VERSION,
    BUCKET,
    CURRENT_WRITE_ID,
    EVENT_FIELDS,
    KEY_FIELDS,
    KEY_INDEX_KEY,
    OPERATION,
    ORIGINAL_WRITE_ID,
    ROW,
    ROW_ID,
    STATS_KEY,
    VERSION_KEY,
    AcidStats,
    Column,
    EventFileWriter,
)
from acid_core.format.orc_tail import parse_postscript, with_user_metadata
from acid_core.format.types import parse_type
from acid_core.storage.fs import FileSystem, local_scratch, put_scratch

_COMPRESSION = {"ZLIB": "zlib", "SNAPPY": "snappy", "NONE": "uncompressed"}
DEFAULT_STRIPE_BYTES = settings.STRIPE_SIZE.default  # Hive's hive.exec.orc.default.stripe.size


def event_table(operation: np.ndarray | int, original: np.ndarray, bucket: np.ndarray, row_id: np.ndarray,
                current: np.ndarray, rows: pa.StructArray) -> pa.Table:
    """An Arrow table in the ACID event schema (column order and types as Hive's OrcRecordUpdater writes them)."""
    count = len(original)
    operations = np.full(count, operation, np.int32) if np.isscalar(operation) else np.asarray(operation, np.int32)
    return pa.Table.from_arrays(
        [pa.array(operations, pa.int32()), pa.array(original, pa.int64()), pa.array(bucket, pa.int32()),
         pa.array(row_id, pa.int64()), pa.array(current, pa.int64()), rows],
        names=list(EVENT_FIELDS))


def rows_struct(data: pa.Table) -> pa.StructArray:
    """The table's columns as the `row` struct of insert events."""
    if data.num_columns == 0:
        raise SchemaMismatchError("insert events need at least one column")
    combined = data.combine_chunks()
    return pa.StructArray.from_arrays([combined.column(i).chunk(0) if combined.column(i).num_chunks else
                                       pa.array([], combined.schema.field(i).type) for i in range(combined.num_columns)],
                                      fields=list(combined.schema))


def null_rows(row_type: pa.StructType, count: int) -> pa.StructArray:
    """The all-null `row` struct of delete events."""
    return pa.nulls(count, row_type)


_TYPES = (pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64())


def _check(table: pa.Table, destination: str) -> None:
    if table.column_names != list(EVENT_FIELDS):
        raise SchemaMismatchError(f"{destination}: events need columns {list(EVENT_FIELDS)}, got {table.column_names}")
    for field, expected in zip(table.schema, _TYPES):
        if field.type != expected:
            raise SchemaMismatchError(f"{destination}: event column {field.name!r} has type {field.type}, "
                                      f"expected {expected}")
    if not pa.types.is_struct(table.schema.field(ROW).type):
        raise SchemaMismatchError(f"{destination}: event column 'row' has type {table.schema.field(ROW).type}, "
                                  "expected a struct")
    keys = KeyArrays(*(table.column(name).to_numpy() for name in KEY_FIELDS))
    if not keys.is_sorted():
        raise UnsortedEventsError(f"{destination}: events are not sorted by (originalTransaction, bucket, rowId); "
                                  "Hive's readers require it")


def _exact_types_needed(columns: Sequence[Column] | None) -> bool:
    """Arrow has no char/varchar: tables using them are written row by row (pyorc) to keep the ORC types."""
    return columns is not None and any(nested.kind in ("char", "varchar")
                                       for c in columns for nested in parse_type(c.type).walk())


def _as_tuple(value, arrow_type: pa.DataType):
    """pyorc takes structs as tuples; Arrow gives dicts."""
    if value is None:
        return None
    if pa.types.is_struct(arrow_type):
        return tuple(_as_tuple(value[arrow_type.field(i).name], arrow_type.field(i).type)
                     for i in range(arrow_type.num_fields))
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_as_tuple(item, arrow_type.value_type) for item in value]
    if pa.types.is_map(arrow_type):
        return {key: _as_tuple(item, arrow_type.item_type) for key, item in value}
    return value


def _rowwise_events(table: pa.Table) -> list[tuple]:
    row_type = table.schema.field(ROW).type
    return list(zip(table.column(OPERATION).to_pylist(),
                    *(table.column(n).to_pylist() for n in (ORIGINAL_WRITE_ID, BUCKET, ROW_ID, CURRENT_WRITE_ID)),
                    (_as_tuple(row, row_type) for row in table.column(ROW).to_pylist())))


def rows_per_stripe(table: pa.Table, stripe_bytes: int) -> int:
    """How many rows like `table`'s make a stripe of about `stripe_bytes` decoded bytes.

    ORC's writer closes a stripe when its *compressed* buffers reach the stripe size, so a compressible column makes
    stripes many times that size once decoded, and pyarrow decodes a whole stripe at a time: every file written here
    gets stripes of a fixed row count instead (pyarrow's writer with batch_size = that count and a 1-byte stripe size
    ends a stripe after each batch), so a reader holds about `stripe_bytes` per stripe whatever the data.
    """
    per_row = table.nbytes / table.num_rows if table.num_rows else 1.0
    return max(1, int(stripe_bytes / max(per_row, 1.0)))


class EventStreamWriter:
    """Writes event tables, in key order across calls, into one ORC bucket file with Hive's ACID user metadata.

    Batches go to pyarrow's ORC writer a stripe at a time (pyorc's row-wise writer for char/varchar tables), so memory
    is the stripe being buffered, not the file; nothing is visible at `destination` until `close`. Use as a context
    manager: leaving it by an exception removes the scratch file. Stripes hold about `stripe_bytes` decoded bytes
    (`rows_per_stripe`).
    Memory: about two stripes (the buffered rows and the ORC writer's copy) plus the batch being written; time:
    linear in events.
    """

    def __init__(self, fs: FileSystem, destination: str, *, compression: str = "ZLIB",
                 stripe_bytes: int = DEFAULT_STRIPE_BYTES, columns: Sequence[Column] | None = None,
                 background: bool = False, key_observer: Callable[[pa.RecordBatch], None] | None = None) -> None:
        """`background`: encode on a thread of its own, for a writer that is the only one running (a compaction of
        one bucket); where every core already runs a task, the thread would only compete with them.
        `key_observer`: given each stripe's key columns (KEY_FIELDS) as `close` reads them back from the written
        file for `hive.acid.key.index`, so a caller can check what the file holds without decoding them again (not
        called for files the row-wise writer writes)."""
        if compression.upper() not in _COMPRESSION:
            raise SchemaMismatchError(f"compression {compression!r} is not one of {sorted(_COMPRESSION)} "
                                      "(Hive 3.1 cannot read ZSTD)")
        self.fs, self.destination = fs, destination
        self.compression, self.stripe_bytes, self.columns = compression.upper(), stripe_bytes, columns
        self._rowwise = _exact_types_needed(columns)
        self._exit = contextlib.ExitStack()
        self._scratch = self._exit.enter_context(local_scratch(fs, destination))
        # the file's writer: pyorc's row-wise one for char/varchar tables (on `_stream`), else pyarrow's
        self._rows_writer: EventFileWriter | None = None
        self._stream: BinaryIO | None = None
        self._orc_writer: pa_orc.ORCWriter | None = None
        self._schema: pa.Schema | None = None
        self._last: tuple | None = None
        self._counts = [0, 0, 0]
        self._pending: list[pa.Table] = []  # rows not yet handed to the ORC writer: less than one stripe
        self._pending_rows = 0
        self._stripe_rows = 0
        # With `background`, ORC encoding and compression run on a thread (pyarrow releases the GIL), overlapping
        # whatever produces the events (decoding and merging the inputs); at most one stripe waits for it.
        self._background = background
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._key_observer = key_observer

    def write(self, table: pa.Table) -> None:
        """Append events; they must continue the key order of everything written before.

        Raises:
            SchemaMismatchError: not the event schema (or not the schema of the earlier batches).
            UnsortedEventsError: events out of key order, within the batch or after the previous one.
        """
        _check(table, self.destination)
        if self._schema is not None and not table.num_rows:
            return
        if table.num_rows:
            keys = KeyArrays(*(table.column(name).to_numpy() for name in KEY_FIELDS))
            if self._last is not None and keys.first() < self._last:
                raise UnsortedEventsError(f"{self.destination}: events are not sorted by (originalTransaction, "
                                          "bucket, rowId) across batches; Hive's readers require it")
            self._last = keys.last()
        operations = table.column(OPERATION).to_numpy()
        for operation in range(3):
            self._counts[operation] += int((operations == operation).sum())
        if self._schema is None:
            self._schema = table.schema
            self._stripe_rows = rows_per_stripe(table, self.stripe_bytes)
            self._open()
        elif table.schema != self._schema:
            raise SchemaMismatchError(f"{self.destination}: a batch of events does not fit the file's schema: "
                                      f"row {table.schema.field(ROW).type} after {self._schema.field(ROW).type}")
        if self._rowwise:
            assert self._rows_writer is not None, "opened with the first batch"
            events = _rowwise_events(table)
            start = 0
            while start < len(events):  # one call per run of equal operations
                end = start
                while end < len(events) and events[end][0] == events[start][0]:
                    end += 1
                self._rows_writer.write(events[start:end], operation=events[start][0])
                start = end
            return
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= self._stripe_rows:
            self._flush(whole_stripes_only=True)

    def _flush(self, *, whole_stripes_only: bool) -> None:
        """Hand the buffered rows to the ORC writer: whole stripes only (the rest stays buffered), or everything."""
        pending = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        ready = (self._pending_rows // self._stripe_rows) * self._stripe_rows if whole_stripes_only \
            else self._pending_rows
        if ready:
            self._submit(pending.slice(0, ready))
        rest = pending.slice(ready)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def _submit(self, table: pa.Table) -> None:
        """Hand whole stripes to the ORC writer (its thread: waits while a stripe is already waiting, bounded memory)."""
        assert self._orc_writer is not None, "opened with the first batch"
        if not self._background:
            try:
                self._orc_writer.write(table)
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise SchemaMismatchError(f"{self.destination}: ORC cannot hold these events: {exc}") from exc
            return
        if self._thread is None:
            self._queue = queue.Queue(maxsize=1)
            self._thread = threading.Thread(target=self._drain, name="orc-event-writer", daemon=True)
            self._thread.start()
        self._raise_failure()
        assert self._queue is not None, "made with the thread"
        self._queue.put(table)

    def _drain(self) -> None:
        assert self._queue is not None and self._orc_writer is not None, "made before the thread starts"
        while True:
            table = self._queue.get()
            if table is None:
                return
            if self._failure is None:  # after a failure, keep taking tables so that no producer waits for ever
                try:
                    self._orc_writer.write(table)
                except BaseException as exc:  # raised in the producer's thread by _raise_failure
                    self._failure = exc

    def _stop_thread(self) -> None:
        if self._thread is not None:
            assert self._queue is not None, "made with the thread"
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _raise_failure(self) -> None:
        exc = self._failure
        if exc is None:
            return
        if isinstance(exc, (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError)):
            raise SchemaMismatchError(f"{self.destination}: ORC cannot hold these events: {exc}") from exc
        raise exc

    def _open(self) -> None:
        if self._rowwise:
            self._stream = self._exit.enter_context(self._scratch.open_for_writing())
            assert self.columns is not None, "only a table with char or varchar columns is written row by row"
            self._rows_writer = EventFileWriter(self._stream, self.columns, compression=self.compression)
        else:
            self._orc_writer = pa_orc.ORCWriter(self._scratch.path, compression=_COMPRESSION[self.compression],
                                                file_version="0.12", batch_size=self._stripe_rows, stripe_size=1)

    @property
    def rows(self) -> int:
        return sum(self._counts)

    def close(self) -> AcidStats:
        """Finish the file, add Hive's user metadata and put it in place; returns its `hive.acid.stats`.

        Raises:
            SchemaMismatchError: nothing was written (an ACID file needs a schema).
            FileSystemError: `destination` exists or cannot be written.
        """
        if self._schema is None:
            raise SchemaMismatchError(f"{self.destination}: no events were written; nothing to close")
        stats = AcidStats(*self._counts)
        with self._exit:
            if self._pending:
                self._flush(whole_stripes_only=False)
            self._stop_thread()
            self._raise_failure()
            if self._rowwise:
                assert self._rows_writer is not None and self._stream is not None, "opened with the first batch"
                self._rows_writer.close()
                self._stream.close()
            else:
                assert self._orc_writer is not None, "opened with the first batch"
                self._orc_writer.close()
                _add_acid_metadata(self._scratch, stats, self.destination, key_observer=self._key_observer)
            put_scratch(self.fs, self._scratch, self.destination)
        return stats

    def abort(self) -> None:
        """Drop what was written (the scratch file)."""
        self._stop_thread()
        if self._orc_writer is not None:  # the row-wise writer's stream closes with `_exit`
            try:
                self._orc_writer.close()
            except (pa.ArrowException, OSError):
                pass
        self._exit.close()

    def __enter__(self) -> EventStreamWriter:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is not None:
            self.abort()


def _add_acid_metadata(scratch, stats: AcidStats, destination: str, *,
                       key_observer: Callable[[pa.RecordBatch], None] | None = None) -> None:
    """Read back each stripe's last key for `hive.acid.key.index` (one stripe's key columns at a time, each also
    handed to `key_observer`) and patch it, `hive.acid.stats` and `hive.acid.version` into the finished scratch
    file's footer."""
    key_index = []
    with pa.OSFile(scratch.path) as handle:  # read, not memory-mapped: a mapping of the whole file would count
        written = pa_orc.ORCFile(handle)    # against a Spark worker's address-space cap
        for stripe in range(written.nstripes):
            keys = written.read_stripe(stripe, columns=list(KEY_FIELDS))
            if key_observer is not None:
                key_observer(keys)
            last = keys.num_rows - 1
            key_index.append("{},{},{};".format(*(keys.column(i)[last].as_py() for i in range(3))))
    ps_length = scratch.read_tail(1)[0]
    footer_length = _footer_length(scratch.read_tail(ps_length + 1))
    tail = scratch.read_tail(footer_length + ps_length + 1)
    cut, new_tail = with_user_metadata(tail, {KEY_INDEX_KEY: "".join(key_index).encode(),
                                              STATS_KEY: stats.serialize(),
                                              VERSION_KEY: ACID_VERSION.encode()}, path=destination)
    scratch.replace_tail(cut, new_tail)


def write_event_table(fs: FileSystem, destination: str, table: pa.Table, *, compression: str = "ZLIB",
                      stripe_bytes: int = DEFAULT_STRIPE_BYTES, columns: Sequence[Column] | None = None) -> AcidStats:
    """Write an event table as one ORC bucket file with Hive's ACID user metadata; nothing is visible until done.

    `columns` (the table's Hive types) keeps char/varchar columns as such: Arrow cannot express them, so such
    tables are written through the row-wise writer. (`EventStreamWriter` writes a file batch by batch.)

    Raises:
        SchemaMismatchError: not the event schema, or a compression Hive 3.1 cannot read.
        UnsortedEventsError: events out of key order.
        FileSystemError: `destination` exists or cannot be written.
    """
    if _exact_types_needed(columns):
        with EventStreamWriter(fs, destination, compression=compression, stripe_bytes=stripe_bytes,
                               columns=columns) as writer:
            writer.write(table)
            return writer.close()
    if compression.upper() not in _COMPRESSION:
        raise SchemaMismatchError(f"compression {compression!r} is not one of {sorted(_COMPRESSION)} "
                                  "(Hive 3.1 cannot read ZSTD)")
    _check(table, destination)
    operations = table.column(OPERATION).to_numpy()
    stats = AcidStats(int((operations == 0).sum()), int((operations == 1).sum()), int((operations == 2).sum()))
    with local_scratch(fs, destination) as scratch:
        try:
            pa_orc.write_table(table, scratch.path, compression=_COMPRESSION[compression.upper()], file_version="0.12",
                               batch_size=rows_per_stripe(table, stripe_bytes), stripe_size=1)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SchemaMismatchError(f"{destination}: ORC cannot hold these events: {exc}") from exc
        _add_acid_metadata(scratch, stats, destination)
        put_scratch(fs, scratch, destination)
    return stats


def _footer_length(postscript_and_length: bytes) -> int:
    return parse_postscript(postscript_and_length[:-1]).footer_length


__all__ = ["EventStreamWriter", "event_table", "rows_struct", "null_rows", "write_event_table", "ORIGINAL_WRITE_ID", "BUCKET", "ROW_ID",
           "CURRENT_WRITE_ID", "ROW"]
