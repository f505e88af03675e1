"""The embedded writer (no Spark): inserts into `delta_w_w_s`, deletes by ROW__ID into `delete_delta_w_w_s`, updates
as split-update (both), in partition directories `k=v`, one bucket file per bucket.

Every value is checked against its column type first; then, where renames are atomic (local, HDFS), all directories
of one write are staged under hidden names beside them and published (`acid_core.write.publish`: format file, rename)
only when all of them are complete, so a bad row or a crash never leaves a half-written visible file (nor half of a
split-update). On object stores the files are written under their final names directly (each appears whole when its
upload completes): the write id is what hides them until the transaction commits, and a failure removes the files
this call wrote. Write ids come from the caller (the metastore hands them out); the writer does not commit anything
(`acid_core.write.table_write` is the transaction around it, and publishes what it staged).
"""

from __future__ import annotations

import decimal
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from acid_core.errors import AcidError, InvalidRowError
from acid_core.format.layout import (
    bucket_file_name,
    delta_dir_name,
    partition_dir_name,
    write_staging_name,
)
from acid_core.format.orc_events import (
    DEFAULT_STRIPE_ROWS,
    DELETE_OPERATION,
    INSERT_OPERATION,
    Column,
    EventFileWriter,
    parse_columns,
)
from acid_core.format.rowid import RowId, decode_bucket_id, encode_bucket
from acid_core.format.values import RowChecker
from acid_core.storage.fs import FileSystem, ensure_inside
from acid_core.write.publish import Publication

BucketFunction = Callable[[tuple], int]


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What one write produced: directories made visible and rows written per kind."""

    directories: tuple[str, ...]
    inserted: int = 0
    deleted: int = 0


class EmbeddedWriter:
    """Writes ACID event files for one table location."""

    def __init__(self, location: str, *, columns: Iterable[Column | tuple[str, str]],
                 partition_keys: Sequence[str] = (), bucket_count: int | None = None,
                 bucket_function: BucketFunction | None = None, compression: str = "ZLIB",
                 stripe_rows: int = DEFAULT_STRIPE_ROWS, fs: FileSystem | None = None) -> None:
        if fs is None:
            fs, location = FileSystem.resolve(location)
        self.fs, self.location = fs, location.rstrip("/") or "/"
        self.columns = parse_columns(columns)
        self.rows = RowChecker(self.columns)
        self.partition_keys = tuple(key.lower() for key in partition_keys)
        if bucket_count is not None and not 1 <= bucket_count <= 4096:
            raise InvalidRowError(f"bucket count {bucket_count} must be in 1..4096")
        if bucket_count and bucket_count > 1 and bucket_function is None:
            raise InvalidRowError(f"a table with {bucket_count} buckets needs a bucket_function to place rows")
        self.bucket_count = bucket_count
        self.bucket_function = bucket_function
        self.compression = compression
        self.stripe_rows = stripe_rows

    def partition_location(self, partition: Mapping[str, Any] | None) -> str:
        """The directory of a partition (the table location for an unpartitioned table).

        Raises:
            InvalidRowError: the spec's keys differ from the table's partition keys.
        """
        if not self.partition_keys:
            if partition:
                raise InvalidRowError(f"table at {self.location!r} is not partitioned, got partition {dict(partition)!r}")
            return self.location
        spec = {str(k).lower(): v for k, v in (partition or {}).items()}
        if list(spec) != list(self.partition_keys):
            raise InvalidRowError(f"partition {dict(partition or {})!r} must give exactly the keys "
                                  f"{list(self.partition_keys)} in that order")
        path = self.fs.join(self.location, partition_dir_name({k: None if v is None else str(v) for k, v in spec.items()}))
        return ensure_inside(self.location, path, fs=self.fs)

    def _bucket_of(self, row: tuple, writer_id: int) -> int:
        if not self.bucket_count:
            return writer_id
        if self.bucket_count == 1:
            return 0
        assert self.bucket_function is not None, "__init__ requires one for a table with buckets"
        bucket = self.bucket_function(row)
        if not 0 <= bucket < self.bucket_count:
            raise InvalidRowError(f"bucket function placed row {row!r} in bucket {bucket}, outside 0..{self.bucket_count - 1}")
        return bucket

    def _insert_events(self, rows: Iterable, write_id: int, statement_id: int,
                       writer_id: int) -> dict[int, list[tuple]]:
        if writer_id and self.bucket_count:
            raise InvalidRowError(f"writer id {writer_id} applies to unbucketed tables only; this table has "
                                  f"{self.bucket_count} buckets and places rows by hash")
        by_bucket: dict[int, list[tuple]] = {}
        for index, row in enumerate(rows):
            values = self.rows.normalise(row, index)
            by_bucket.setdefault(self._bucket_of(values, writer_id), []).append(values)
        events = {}
        for bucket, bucket_rows in sorted(by_bucket.items()):
            property_ = encode_bucket(bucket, statement_id)
            events[bucket] = [(INSERT_OPERATION, write_id, property_, row_id, write_id, row)
                              for row_id, row in enumerate(bucket_rows)]
        return events

    @staticmethod
    def _delete_events(row_ids: Iterable[RowId], write_id: int) -> dict[int, list[tuple]]:
        by_bucket: dict[int, list[tuple]] = {}
        for row_id in sorted(set(row_ids)):
            event = (DELETE_OPERATION, row_id.write_id, row_id.bucket_property, row_id.row_id, write_id, None)
            by_bucket.setdefault(decode_bucket_id(row_id.bucket_property), []).append(event)
        return by_bucket

    def _check_free(self, parent: str, name: str, buckets) -> None:
        final = self.fs.join(parent, name)
        for bucket in buckets:
            target = self.fs.join(final, bucket_file_name(bucket))
            if self.fs.exists(target):
                raise AcidError(f"{target} already exists: write id and statement id were used twice")

    def _write_file(self, path: str, name: str, bucket: int, events: list[tuple], operation: int) -> None:
        with self.fs.open_output(path) as stream:
            writer = EventFileWriter(stream, self.columns, compression=self.compression, stripe_rows=self.stripe_rows)
            try:
                writer.write(events, operation=operation)
            except (TypeError, ValueError, OverflowError, decimal.DecimalException) as exc:
                raise InvalidRowError(f"{name}/{bucket_file_name(bucket)}: a row does not fit the columns "
                                      f"{[(c.name, c.type) for c in self.columns]}: {exc}") from exc
            writer.close()

    def _write(self, parent: str, directories: list[tuple[str, dict[int, list[tuple]], int]],
               txn_id: int | None, publication: Publication | None) -> tuple[str, ...]:
        """Write every directory of one write, then stage them in `publication` (the transaction's, which publishes
        them) or publish them at once through a publication of their own.

        Where renames are atomic the files are built under hidden names beside their directories (named after the
        transaction, `layout.write_staging_name`, so housekeeping can remove them if this process is killed); on an
        object store under their final names. A failure removes what this call wrote and stages nothing: the files of
        an object store's directory one by one (another writer of the write id may share the directory)."""
        fs = self.fs
        for name, files, _ in directories:
            self._check_free(parent, name, files)
        fs.make_dirs(parent)
        built: list[tuple[str, str]] = []  # (where the files were written, final directory)
        written: list[str] = []  # files written in place (object stores)
        try:
            for name, files, operation in directories:
                final = fs.join(parent, name)
                if fs.renames_atomically:
                    attempt = uuid.uuid4().hex[:12]
                    hidden = (write_staging_name(name, txn_id, attempt=attempt) if txn_id is not None
                              else f".{name}.tmp-{attempt}")
                    target = fs.join(parent, hidden)
                    built.append((target, final))
                    fs.make_dirs(target)
                else:
                    target = final
                    built.append((final, final))
                for bucket, events in files.items():
                    path = fs.join(target, bucket_file_name(bucket))
                    if target == final:
                        written.append(path)
                    self._write_file(path, name, bucket, events, operation)
            if fs.renames_atomically:
                for name, files, _ in directories:
                    self._check_free(parent, name, files)  # again: another writer may have published meanwhile
        except BaseException:
            for target, final in built:
                if target != final:
                    fs.delete_dir(target)
            for path in written:
                fs.delete_file(path)
            raise
        own = publication if publication is not None else Publication(fs)
        for target, final in built:
            own.stage(target, final)
        if publication is None:
            try:
                own.publish()
            except BaseException:
                for entry in own.pending:
                    fs.delete_dir(entry.staging)
                raise
        return tuple(final for _, final in built)

    def insert(self, rows: Iterable[Sequence[Any] | Mapping[str, Any]], *, write_id: int, statement_id: int = 0,
               partition: Mapping[str, Any] | None = None, writer_id: int = 0,
               txn_id: int | None = None, publication: Publication | None = None) -> WriteResult:
        """Insert rows as write `write_id`, statement `statement_id`, into `delta_w_w_s`.

        An unbucketed table gets one file per writer (`bucket_<writer_id>`, as Hive's parallel tasks write);
        a bucketed table one file per bucket the rows hash to. `txn_id` names the staging directories after the
        writing transaction, and `publication` is the transaction's, which publishes them (`acid_core.write.table_write`);
        without one they are published at once.

        Raises:
            InvalidRowError: a row does not fit the table; nothing is made visible.
        """
        parent = self.partition_location(partition)
        events = self._insert_events(rows, write_id, statement_id, writer_id)
        if not events:
            return WriteResult(())
        name = delta_dir_name(write_id, write_id, statement_id=statement_id)
        paths = self._write(parent, [(name, events, INSERT_OPERATION)], txn_id, publication)
        return WriteResult(paths, inserted=sum(map(len, events.values())))

    def delete(self, row_ids: Iterable[RowId], *, write_id: int, statement_id: int = 0,
               partition: Mapping[str, Any] | None = None, txn_id: int | None = None,
               publication: Publication | None = None) -> WriteResult:
        """Delete rows by ROW__ID as write `write_id` into `delete_delta_w_w_s` (one file per bucket of the rows)."""
        parent = self.partition_location(partition)
        events = self._delete_events(row_ids, write_id)
        if not events:
            return WriteResult(())
        name = delta_dir_name(write_id, write_id, statement_id=statement_id, delete=True)
        paths = self._write(parent, [(name, events, DELETE_OPERATION)], txn_id, publication)
        return WriteResult(paths, deleted=sum(map(len, events.values())))

    def update(self, row_ids: Sequence[RowId], new_rows: Sequence[Sequence[Any] | Mapping[str, Any]], *,
               write_id: int, statement_id: int = 0, partition: Mapping[str, Any] | None = None,
               writer_id: int = 0, txn_id: int | None = None,
               publication: Publication | None = None) -> WriteResult:
        """Split-update: delete the old ROW__IDs and insert the new rows under the same write and statement id."""
        if len(row_ids) != len(new_rows):
            raise InvalidRowError(f"update got {len(row_ids)} row ids but {len(new_rows)} new rows")
        parent = self.partition_location(partition)
        inserts = self._insert_events(new_rows, write_id, statement_id, writer_id)
        deletes = self._delete_events(row_ids, write_id)
        directories = []
        if deletes:
            directories.append((delta_dir_name(write_id, write_id, statement_id=statement_id, delete=True), deletes,
                                DELETE_OPERATION))
        if inserts:
            directories.append((delta_dir_name(write_id, write_id, statement_id=statement_id), inserts, INSERT_OPERATION))
        paths = self._write(parent, directories, txn_id, publication) if directories else ()
        return WriteResult(paths, inserted=sum(map(len, inserts.values())), deleted=sum(map(len, deletes.values())))
