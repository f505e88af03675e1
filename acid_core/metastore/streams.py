"""Exactly-once micro-batches (STREAM_COMMITS; not in Hive, Delta's txn action): per streaming query and table, the
last micro-batch committed and the transaction of the batch being written.

A writer of micro-batches records each batch's transaction before it writes (`begin_batch`, which hands back a
transaction a killed run of the same query left pending, for the caller to abort), and commits it with a
`BatchMark` (`TxnStore.commit(batch=...)`): the batch id moves in the same database transaction as the COMMIT, so a
batch replayed after a crash, at or below the last one committed, is recognised (`state`) and skipped.

Cost: one small row per (query, table); each call one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core.errors import StreamBatchError
from acid_core.metastore import schema as s
from acid_core.metastore.engine import Database

NO_BATCH = -1  # SC_BATCH_ID before a query's first commit


@dataclass(frozen=True, slots=True)
class StreamState:
    """What the metastore knows of one query writing one table."""

    app_id: str
    database: str
    table: str
    last_batch: int = NO_BATCH
    pending_txn_id: int | None = None


@dataclass(frozen=True, slots=True)
class BatchMark:
    """The micro-batch a commit completes."""

    app_id: str
    database: str
    table: str
    batch_id: int


def _where(app_id: str, database: str, table: str):
    c = s.stream_commits.c
    return sa.and_(c.SC_DATABASE == database, c.SC_TABLE == table, c.SC_APP_ID == app_id)


class StreamCommits:
    def __init__(self, db: Database) -> None:
        self.db = db

    def state(self, app_id: str, database: str, table: str) -> StreamState:
        c = s.stream_commits.c

        def read(conn: Connection) -> StreamState:
            row = conn.execute(sa.select(c.SC_BATCH_ID, c.SC_PENDING_TXN_ID)
                               .where(_where(app_id, database, table))).first()
            if row is None:
                return StreamState(app_id, database, table)
            return StreamState(app_id, database, table, row.SC_BATCH_ID, row.SC_PENDING_TXN_ID)

        return self.db.run(f"stream {app_id} state on {database}.{table}", read, write=False)

    def begin_batch(self, app_id: str, database: str, table: str, txn_id: int) -> int | None:
        """Make `txn_id` the query's pending transaction on the table; returns the pending one it replaces (left by a
        run of the query that was killed while writing a batch), which the caller aborts."""
        c = s.stream_commits.c

        def begin(conn: Connection) -> int | None:
            row = conn.execute(sa.select(c.SC_PENDING_TXN_ID).where(_where(app_id, database, table))
                               .with_for_update()).first()
            if row is None:
                conn.execute(s.stream_commits.insert().values(SC_APP_ID=app_id, SC_DATABASE=database, SC_TABLE=table,
                                                              SC_BATCH_ID=NO_BATCH, SC_PENDING_TXN_ID=txn_id))
                return None
            conn.execute(s.stream_commits.update().where(_where(app_id, database, table))
                         .values(SC_PENDING_TXN_ID=txn_id))
            return row.SC_PENDING_TXN_ID if row.SC_PENDING_TXN_ID != txn_id else None

        return self.db.run(f"stream {app_id} begins a batch on {database}.{table}", begin)

    def end_pending(self, app_id: str, database: str, table: str, txn_id: int) -> None:
        """Forget `txn_id` as the query's pending transaction (it was aborted); nothing if another replaced it."""
        c = s.stream_commits.c

        def end(conn: Connection) -> None:
            conn.execute(s.stream_commits.update().where(_where(app_id, database, table),
                                                         c.SC_PENDING_TXN_ID == txn_id)
                         .values(SC_PENDING_TXN_ID=None))

        self.db.run(f"stream {app_id} ends transaction {txn_id} on {database}.{table}", end, idempotent=True)


def mark_batch(conn: Connection, mark: BatchMark, txn_id: int, now_ms: int) -> None:
    """Inside the COMMIT of `txn_id`: the query's batch `mark.batch_id` is committed by it (compare-and-swap: the
    transaction is the query's pending one and no later batch committed).

    Raises:
        StreamBatchError: it is not (the database transaction, and with it the COMMIT, is rolled back).
    """
    c = s.stream_commits.c
    updated = conn.execute(s.stream_commits.update().where(
        _where(mark.app_id, mark.database, mark.table), c.SC_PENDING_TXN_ID == txn_id, c.SC_BATCH_ID < mark.batch_id)
        .values(SC_BATCH_ID=mark.batch_id, SC_TXN_ID=txn_id, SC_PENDING_TXN_ID=None, SC_COMMIT_TIME=now_ms)).rowcount
    if updated != 1:
        raise StreamBatchError(f"streaming query {mark.app_id}: batch {mark.batch_id} of {mark.database}.{mark.table} "
                               f"cannot commit with transaction {txn_id}: another run of the query took over, or a "
                               "later batch committed")


__all__ = ["NO_BATCH", "BatchMark", "StreamCommits", "StreamState", "mark_batch"]
