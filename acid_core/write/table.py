"""One ACID table, as a writer or a front end holds it (pyiceberg's `Table`, delta-rs's `DeltaTable`).

`AcidTable.load(metastore, "db.table")` checks the table is a full ACID table once; its writes all go through
`TableWrite` (transaction, write id, staging record, lock, components, the publish step of `acid_core.write.publish`, commit
or abort): `new_write` for a transaction the caller fills (acid sql, Spark, the demo), `append` for rows written in
one transaction, `stream` for Hive's streaming connection. Nothing else here opens a write transaction.

Cost: loading is one catalog read; each write costs what `TableWrite` says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from acid_core.errors import UsageError
from acid_core.format.orc_events import DEFAULT_STRIPE_ROWS
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.locations import DataLocation, data_location
from acid_core.metastore.locks import LOCK_TIMEOUT_MS, LockType
from acid_core.write.streaming import StreamingConnection
from acid_core.write.table_write import TableWrite
from acid_core.write.writer import WriteResult


@dataclass(frozen=True, slots=True)
class AcidTable:
    """A full ACID table of a metastore."""

    metastore: Metastore
    info: TableInfo

    @classmethod
    def load(cls, metastore: Metastore, name: str, table: str | None = None) -> AcidTable:
        """The table `name` ("db.table"), or `name`.`table` when both are given.

        Raises:
            UsageError: `name` is not "db.table".
            NoSuchObjectError, NotTransactionalError: not an existing full ACID table.
        """
        database, table = _split(name, table)
        return cls(metastore, metastore.catalog.require_transactional(database, table))

    @property
    def full_name(self) -> str:
        return self.info.full_name

    def location(self, partition: str | None = None) -> DataLocation:
        """The checked directory of `partition` ("k=v/..."), or of the table for None."""
        return data_location(self.info, partition)

    def new_write(self, *, agent_info: str, partition: Mapping[str, Any] | str | None = None,
                  lock_timeout_ms: int = LOCK_TIMEOUT_MS, lock_type: LockType = LockType.SHARED_WRITE,
                  stripe_rows: int = DEFAULT_STRIPE_ROWS) -> TableWrite:
        """Open one write transaction (use it as a context manager: committed when the block ends, aborted when it
        raises). See `TableWrite.open`."""
        return TableWrite.open(self.metastore, self.info.database, self.info.name, agent_info=agent_info,
                               partition=partition, lock_timeout_ms=lock_timeout_ms, lock_type=lock_type,
                               stripe_rows=stripe_rows)

    def append(self, rows: Iterable[Sequence[Any] | Mapping[str, Any]], *, partition: Mapping[str, Any] | None = None,
               agent_info: str = "acid append") -> WriteResult:
        """Insert rows in one committed transaction (into `partition` of a partitioned table).

        Raises:
            InvalidRowError: a row does not fit (nothing is written, the transaction is aborted).
            LockTimeoutError, WriteConflictError: as `TableWrite`.
        """
        with self.new_write(agent_info=agent_info, partition=partition) as write:
            return write.insert(rows, partition=partition)

    def stream(self, *, partition: Mapping[str, Any] | None = None, batch_size: int = 10,
               agent_info: str = "acid-streaming", compression: str = "ZLIB",
               heartbeat_interval_s: float | None = None,
               lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> StreamingConnection:
        """Hive's streaming connection to the table (or a static partition of it)."""
        return StreamingConnection(self.metastore, self.info.database, self.info.name, partition=partition,
                                   batch_size=batch_size, agent_info=agent_info, compression=compression,
                                   heartbeat_interval_s=heartbeat_interval_s, lock_timeout_ms=lock_timeout_ms)


def _split(name: str, table: str | None) -> tuple[str, str]:
    if table is not None:
        return name, table
    database, dot, table = name.partition(".")
    if not dot or not database or not table or "." in table:
        raise UsageError(f"table name {name!r} must be database.table")
    return database, table


__all__ = ["AcidTable"]
