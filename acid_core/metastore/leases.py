"""Reader leases (beyond Hive): a reader without a transaction (a Spark job, a notebook) registers its snapshot.

The cleaner leaves a table's obsolete directories alone while a lease on that table holds a snapshot taken before
the compaction became visible; an old lease therefore blocks cleaning of its own table only. Leases expire when their
holder stops heartbeating.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core.errors import MetastoreError
from acid_core.metastore import schema as s
from acid_core.metastore.engine import Database
from acid_core.metastore.txns import Snapshot, TxnStore, full_table_name


@dataclass(frozen=True, slots=True)
class Lease:
    """A registered snapshot of one table."""

    lease_id: int
    database: str
    table: str
    snapshot: Snapshot

    @property
    def write_ids(self):
        return self.snapshot.write_ids[full_table_name(self.database, self.table)]


class ReaderLeases:
    def __init__(self, db: Database, txns: TxnStore) -> None:
        self.db, self.txns = db, txns

    def acquire(self, database: str, table: str, *, owner: str | None = None) -> Lease:
        """Take a snapshot of the table and register it, in one database transaction."""
        database, table = database.lower(), table.lower()
        name = full_table_name(database, table)

        def acquire_(conn: Connection) -> Lease:
            txns = self.txns._valid_txns(conn, None)
            snapshot = Snapshot(txns, {name: self.txns._valid_write_ids(conn, name, txns, None)})
            following = conn.execute(sa.select(s.next_txn_id.c.NTXN_NEXT)).scalar_one()
            lease_id = conn.execute(s.sequence_table.update().where(s.sequence_table.c.SEQUENCE_NAME == "READER_LEASES")
                                    .values(NEXT_VAL=s.sequence_table.c.NEXT_VAL + 1)
                                    .returning(s.sequence_table.c.NEXT_VAL)).scalar_one() - 1
            now = self.db.clock.now_ms()
            conn.execute(s.reader_leases.insert().values(
                RL_ID=lease_id, RL_DATABASE=database, RL_TABLE=table, RL_NEXT_TXN_ID=following,
                RL_VALID_TXNS=str(txns), RL_STARTED=now, RL_LAST_HEARTBEAT=now,
                RL_OWNER=(owner or self.db.identity.user)[:128], RL_HOST=self.db.identity.host))
            return Lease(lease_id, database, table, snapshot)

        return self.db.run(f"acquire a reader lease on {name}", acquire_, snapshot=True)

    def heartbeat(self, lease_id: int) -> None:
        """Keep a lease alive.

        Raises:
            MetastoreError: the lease expired or was released (its snapshot may already be cleaned away).
        """
        def beat(conn: Connection) -> None:
            if not conn.execute(s.reader_leases.update().where(s.reader_leases.c.RL_ID == lease_id)
                                .values(RL_LAST_HEARTBEAT=self.db.clock.now_ms())).rowcount:
                raise MetastoreError(f"reader lease {lease_id} does not exist (released or expired); "
                                     "take a new snapshot")

        self.db.run(f"heartbeat reader lease {lease_id}", beat)

    def release(self, lease_id: int) -> None:
        self.db.run(f"release reader lease {lease_id}", lambda conn: conn.execute(
            s.reader_leases.delete().where(s.reader_leases.c.RL_ID == lease_id)))

    def expire(self, timeout_ms: int) -> list[int]:
        """Drop leases whose last heartbeat is older than `timeout_ms`."""
        def expire_(conn: Connection) -> list[int]:
            cutoff = self.db.clock.now_ms() - timeout_ms
            stale = conn.execute(sa.select(s.reader_leases.c.RL_ID).where(
                s.reader_leases.c.RL_LAST_HEARTBEAT < cutoff)).scalars().all()
            conn.execute(s.reader_leases.delete().where(s.reader_leases.c.RL_LAST_HEARTBEAT < cutoff))
            return sorted(stale)

        return self.db.run("expire reader leases", expire_)

    def list(self, database: str | None = None, table: str | None = None) -> list[dict]:
        query = sa.select(s.reader_leases).order_by(s.reader_leases.c.RL_ID)
        if database:
            query = query.where(s.reader_leases.c.RL_DATABASE == database.lower())
        if table:
            query = query.where(s.reader_leases.c.RL_TABLE == table.lower())
        return [dict(r._mapping) for r in self.db.run("list reader leases", lambda c: c.execute(query).all(), write=False)]
