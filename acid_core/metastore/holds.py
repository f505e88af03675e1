"""What an open transaction holds back from the cleaner (Hive 4's MIN_HISTORY_WRITE_ID, HIVE-26704 / HIVE-29619).

A transaction names the tables it reads when it opens for a table (a write, a compaction, a streaming batch) or when
it takes a snapshot of them (`TxnStore.snapshot(..., current_txn=...)`); each named table gets a MIN_HISTORY_WRITE_ID
row. The cleaner then waits, for a compaction of table T committed while the transaction was open, only if:

- the transaction is a compactor's (the queue entry references it): it reads its own partition only, so it holds
  that partition and nothing else;
- it named T;
- it named no table at all: it may read anything, so it holds every table (as in Hive before HIVE-26704).

A transaction that has named its tables may name another one later only if no compaction of that table committed
while it was open (`check_may_name`): such a compaction's obsolete directories may be cleaned already, and the
transaction's snapshot (capped at its own id) could not see the compaction's output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core.errors import TxnStateError
from acid_core.metastore import schema as s
from acid_core.metastore.codes import CompactionState
from acid_core.metastore.schema import TXN_OPEN

READY_FOR_CLEANING, SUCCEEDED = CompactionState.READY_FOR_CLEANING.value, CompactionState.SUCCEEDED.value


@dataclass(frozen=True, slots=True)
class TxnScope:
    """What one open transaction may read, as the cleaner sees it."""

    txn_id: int
    tables: frozenset[tuple[str, str]] = frozenset()  # named tables; empty: it named none
    partition: tuple[str, str, str | None] | None = None  # a compactor transaction's partition

    @property
    def everything(self) -> bool:
        return self.partition is None and not self.tables

    def holds(self, database: str, table: str, partition: str | None, next_txn_id: int | None) -> bool:
        """Does this transaction hold back the cleaning of a compaction of `partition` that committed with
        CQ_NEXT_TXN_ID `next_txn_id`? Only if it was open when the compaction committed, and may read there."""
        if next_txn_id is None or self.txn_id >= next_txn_id:
            return False
        if self.partition is not None:
            return self.partition == (database, table, partition)
        return self.everything or (database, table) in self.tables

    def describe(self) -> str:
        if self.partition is not None:
            database, table, partition = self.partition
            return f"compacts {database}.{table}" + (f"/{partition}" if partition else "")
        if self.everything:
            return "named no table, so it may read any"
        return "reads " + ", ".join(f"{d}.{t}" for d, t in sorted(self.tables))


@dataclass(frozen=True, slots=True)
class Watermarks:
    """The lowest open transaction id holding back each scope: the cleaner's per-table form of Hive's min open txn."""

    everything: int | None = None
    tables: dict[tuple[str, str], int] = field(default_factory=dict)
    partitions: dict[tuple[str, str, str | None], int] = field(default_factory=dict)

    def holds(self, database: str, table: str, partition: str | None, next_txn_id: int | None) -> bool:
        if next_txn_id is None:
            return False
        lowest = [v for v in (self.everything, self.tables.get((database, table)),
                              self.partitions.get((database, table, partition))) if v is not None]
        return bool(lowest) and min(lowest) < next_txn_id


def _compactor_txns():
    cq = s.compaction_queue.c
    return sa.select(cq.CQ_TXN_ID).where(cq.CQ_TXN_ID.is_not(None))


def watermarks(conn: Connection) -> Watermarks:
    """Three grouped reads, each driven by the open transactions (TXNS_STATE_IDX) and index probes; cost follows the
    open transactions and the queue, not the history."""
    t, mh, cq = s.txns.c, s.min_history_write_id.c, s.compaction_queue.c
    compactors = _compactor_txns()
    named = sa.select(mh.MH_TXNID).where(mh.MH_TXNID == t.TXN_ID).exists()
    everything = conn.execute(sa.select(sa.func.min(t.TXN_ID)).where(
        t.TXN_STATE == TXN_OPEN, ~named, t.TXN_ID.not_in(compactors))).scalar_one_or_none()
    tables = {(d, n): low for d, n, low in conn.execute(
        sa.select(mh.MH_DATABASE, mh.MH_TABLE, sa.func.min(mh.MH_TXNID))
        .select_from(s.min_history_write_id.join(s.txns, t.TXN_ID == mh.MH_TXNID))
        .where(t.TXN_STATE == TXN_OPEN, mh.MH_TXNID.not_in(compactors))
        .group_by(mh.MH_DATABASE, mh.MH_TABLE)).all()}
    partitions: dict[tuple[str, str, str | None], int] = {}
    for database, table, partition, txn_id in conn.execute(
            sa.select(cq.CQ_DATABASE, cq.CQ_TABLE, cq.CQ_PARTITION, cq.CQ_TXN_ID)
            .select_from(s.compaction_queue.join(s.txns, t.TXN_ID == cq.CQ_TXN_ID))
            .where(t.TXN_STATE == TXN_OPEN)).all():
        key = (database, table, partition)
        partitions[key] = min(partitions.get(key, txn_id), txn_id)
    return Watermarks(everything, tables, partitions)


def scopes(conn: Connection, txn_ids: list[int]) -> dict[int, TxnScope]:
    """The scope of each given open transaction (for saying what holds an entry back)."""
    if not txn_ids:
        return {}
    mh, cq = s.min_history_write_id.c, s.compaction_queue.c
    tables: dict[int, set[tuple[str, str]]] = {}
    for txn_id, database, table in conn.execute(sa.select(mh.MH_TXNID, mh.MH_DATABASE, mh.MH_TABLE).where(
            mh.MH_TXNID.in_(txn_ids))).all():
        tables.setdefault(txn_id, set()).add((database, table))
    partitions = {txn_id: (d, t, p) for txn_id, d, t, p in conn.execute(
        sa.select(cq.CQ_TXN_ID, cq.CQ_DATABASE, cq.CQ_TABLE, cq.CQ_PARTITION).where(cq.CQ_TXN_ID.in_(txn_ids))).all()}
    return {txn_id: TxnScope(txn_id, frozenset(tables.get(txn_id, ())), partitions.get(txn_id)) for txn_id in txn_ids}


def named_tables(conn: Connection, txn_id: int) -> set[tuple[str, str]]:
    mh = s.min_history_write_id.c
    return {(d, t) for d, t in conn.execute(sa.select(mh.MH_DATABASE, mh.MH_TABLE).where(mh.MH_TXNID == txn_id)).all()}


def check_may_name(conn: Connection, txn_id: int, database: str, table: str, *, named: set[tuple[str, str]],
                   dialect: str) -> None:
    """Refuse to add `database.table` to the tables of a transaction that named others already, when a compaction of
    it committed while the transaction was open (its cleaning was not held back by this transaction).

    On PostgreSQL the table's queue entries are locked first, so a compactor's commit (which updates its entry)
    and this check happen one after the other; SQLite runs one writer at a time anyway.
    """
    if not named:
        return  # it held every table until now: nothing of this table was cleaned under it
    cq, cc = s.compaction_queue.c, s.completed_compactions.c
    query = sa.select(cq.CQ_ID).where(cq.CQ_DATABASE == database, cq.CQ_TABLE == table,
                                      cq.CQ_STATE == READY_FOR_CLEANING,
                                      sa.or_(cq.CQ_NEXT_TXN_ID.is_(None), cq.CQ_NEXT_TXN_ID > txn_id))
    if dialect == "postgresql":
        locked = sa.select(cq.CQ_ID).where(cq.CQ_DATABASE == database, cq.CQ_TABLE == table).with_for_update()
        conn.execute(locked).all()
    found = conn.execute(query.limit(1)).scalar_one_or_none()
    if found is None:
        found = conn.execute(sa.select(cc.CC_ID).where(
            cc.CC_DATABASE == database, cc.CC_TABLE == table, cc.CC_STATE == SUCCEEDED,
            cc.CC_NEXT_TXN_ID > txn_id).limit(1)).scalar_one_or_none()
    if found is not None:
        names = ", ".join(f"{d}.{t}" for d, t in sorted(named))
        raise TxnStateError(f"transaction {txn_id} cannot read {database}.{table}: it named {names} first, and "
                            f"compaction {found} of {database}.{table} committed while it was open, so its old "
                            f"files may be cleaned already; read {database}.{table} in a new transaction")


def purge_ended(conn: Connection) -> int:
    """Housekeeping: drop the rows of transactions no longer open (a commit or abort removes its own; time-outs
    leave theirs)."""
    mh, t = s.min_history_write_id.c, s.txns.c
    still_open = sa.select(t.TXN_ID).where(t.TXN_ID == mh.MH_TXNID, t.TXN_STATE == TXN_OPEN).exists()
    return conn.execute(s.min_history_write_id.delete().where(~still_open)).rowcount


__all__ = ["TxnScope", "Watermarks", "check_may_name", "named_tables", "purge_ended", "scopes", "watermarks"]
