"""Transactions and write ids: Hive's TxnHandler (open, commit, abort, heartbeat, write ids, snapshots, timeouts).

Ids come from counter rows (NEXT_TXN_ID, NEXT_WRITE_ID) updated in the same database transaction that records them,
so they never repeat or go missing. Every state change is a compare-and-swap on TXN_STATE. Commit follows Hive:
update/delete components are checked against WRITE_SET under the NEXT_TXN_ID row lock (first committer wins),
components move to COMPLETED_TXN_COMPONENTS, locks are released, and a compactor transaction stamps its queue entry
with the next transaction id (the cleaner's watermark).

Over 500 lines because it is one protocol, as Hive's TxnHandler is: open, write ids, commit, abort, heartbeats,
snapshots, time-outs and staging records read and write the same rows (TXNS, TXN_COMPONENTS, WRITE_SET, the NEXT_*
counters) in one lock order; split over several files, that order would have no single place to be read and kept.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from acid_core import settings
from acid_core.errors import MetastoreError, NoSuchTxnError, TxnAbortedError, TxnStateError, WriteConflictError
from acid_core.format.validity import LONG_MAX, ValidTxnList, ValidWriteIdList
from acid_core.metastore import holds
from acid_core.metastore import schema as s
from acid_core.metastore.engine import NOT_DONE, Database
from acid_core.metastore.schema import TXN_ABORTED, TXN_COMMITTED, TXN_OPEN
from acid_core.metastore.streams import BatchMark, mark_batch

__all__ = ["TXN_ABORTED", "TXN_COMMITTED", "TXN_OPEN", "Operation", "Snapshot", "StagingRecord", "TxnInfo", "TxnStore",
           "TxnType", "fold_completed_components", "full_table_name"]

DEFAULT_TXN_TIMEOUT_MS = settings.TXN_TIMEOUT.default_ms  # hive.txn.timeout
DEFAULT_MAX_OPEN_BATCH = 1000


class TxnType(enum.IntEnum):
    """Hive's thrift TxnType."""

    DEFAULT = 0
    REPL_CREATED = 1
    READ_ONLY = 2
    COMPACTION = 3
    MATER_VIEW_REBUILD = 4
    SOFT_DELETE = 5
    REBALANCE_COMPACTION = 6


class Operation(str, enum.Enum):
    """TXN_COMPONENTS.TC_OPERATION_TYPE codes (Hive's OperationType)."""

    SELECT = "s"
    INSERT = "i"
    UPDATE = "u"
    DELETE = "d"
    COMPACT = "c"


_UPDATE_DELETE = (Operation.UPDATE.value, Operation.DELETE.value)

# Commit of an open transaction that wrote nothing, in one atomic statement (PostgreSQL); 0 rows means "take the
# general path" (it has components, is a compactor's, whose commit also records its queue entry, or is not open).
# A plain string run on the driver's cursor (Database.driver_rows): no SQL compilation on the hot path.
_COMPACTOR_TYPES = (TxnType.COMPACTION, TxnType.REBALANCE_COMPACTION)
_COMMIT_WITHOUT_WRITES = (
    'WITH t AS (DELETE FROM "TXNS" WHERE "TXN_ID" = %(txn)s AND "TXN_STATE" = \'o\' '
    f'AND COALESCE("TXN_TYPE", 0) NOT IN ({", ".join(str(int(t)) for t in _COMPACTOR_TYPES)}) '
    'AND NOT EXISTS (SELECT 1 FROM "TXN_COMPONENTS" WHERE "TC_TXNID" = %(txn)s) RETURNING "TXN_ID"), '
    'l AS (DELETE FROM "HIVE_LOCKS" WHERE "HL_TXNID" IN (SELECT "TXN_ID" FROM t)), '
    'g AS (DELETE FROM "TXN_STAGING" WHERE "TS_TXNID" IN (SELECT "TXN_ID" FROM t)), '
    'm AS (DELETE FROM "MIN_HISTORY_WRITE_ID" WHERE "MH_TXNID" IN (SELECT "TXN_ID" FROM t)) '
    'SELECT count(*) FROM t')

# A snapshot's statements (plain strings on the driver's cursor, both databases). The transactions: the counter's
# single row, joined with the open and aborted transactions (none: one row).
_SNAPSHOT_TXNS = ('SELECT n."NTXN_NEXT", t."TXN_ID", t."TXN_STATE" FROM "NEXT_TXN_ID" n LEFT OUTER JOIN "TXNS" t '
                  'ON t."TXN_STATE" IN (\'o\', \'a\')')
# A table's next write id, and the write ids of transactions above the snapshot (an index range), outer-joined to
# NEXT_TXN_ID's single row so that it returns a row when there are none
_SNAPSHOT_LATER_WRITES = (
    'SELECT (SELECT "NWI_NEXT" FROM "NEXT_WRITE_ID" WHERE "NWI_DATABASE" = %(database)s AND "NWI_TABLE" = %(table)s), '
    'w."T2W_WRITEID", w."T2W_TXNID" FROM "NEXT_TXN_ID" LEFT OUTER JOIN "TXN_TO_WRITE_ID" w ON w."T2W_DATABASE" = '
    '%(database)s AND w."T2W_TABLE" = %(table)s AND w."T2W_TXNID" > %(high)s')
# The table's write id of each open or aborted transaction: one unique-index probe each (a correlated subquery: no
# planner turns it into a scan of the history, whatever its statistics say)
_SNAPSHOT_INVALID_WRITES = (
    'SELECT t."TXN_ID", (SELECT w."T2W_WRITEID" FROM "TXN_TO_WRITE_ID" w WHERE w."T2W_DATABASE" = %(database)s AND '
    'w."T2W_TABLE" = %(table)s AND w."T2W_TXNID" = t."TXN_ID") FROM "TXNS" t WHERE t."TXN_STATE" IN (\'o\', \'a\')')

# SQLite: a transaction's state, type and whether it recorded components; then what commit of one that wrote nothing
# deletes (its locks, staging records and named tables, and its row)
_STATE_SQLITE = ('SELECT "TXN_STATE", "TXN_TYPE", EXISTS (SELECT 1 FROM "TXN_COMPONENTS" WHERE "TC_TXNID" = %(txn)s) '
                 'FROM "TXNS" WHERE "TXN_ID" = %(txn)s')
_FORGET_SQLITE = tuple(f'DELETE FROM "{table}" WHERE "{column}" = %(txn)s' for table, column in (
    ("HIVE_LOCKS", "HL_TXNID"), ("TXN_STAGING", "TS_TXNID"), ("MIN_HISTORY_WRITE_ID", "MH_TXNID"), ("TXNS", "TXN_ID")))

# SQLite: transactions first..last, open (the ids come from NEXT_TXN_ID's update just before, in the same transaction)
_OPEN_SQLITE = (
    'WITH RECURSIVE g(x) AS (SELECT %(first)s UNION ALL SELECT x + 1 FROM g WHERE x < %(last)s) '
    'INSERT INTO "TXNS" ("TXN_ID", "TXN_STATE", "TXN_STARTED", "TXN_LAST_HEARTBEAT", "TXN_USER", "TXN_HOST", '
    '"TXN_AGENT_INFO", "TXN_HEARTBEAT_COUNT", "TXN_TYPE", "TXN_META_INFO") '
    "SELECT x, 'o', %(now)s, %(now)s, %(user)s, %(host)s, %(agent)s, 0, %(type)s, %(token)s FROM g")


@dataclass(frozen=True, slots=True)
class StagingRecord:
    """Where a write transaction stages files: a partition name, or None for anywhere in the table."""

    txn_id: int
    database: str
    table: str
    partition: str | None


@dataclass(frozen=True, slots=True)
class TxnInfo:
    """One row of SHOW TRANSACTIONS."""

    txn_id: int
    state: str
    started_ms: int
    last_heartbeat_ms: int
    user: str
    host: str
    agent_info: str | None
    txn_type: int | None

    @property
    def state_name(self) -> str:
        return {TXN_OPEN: "OPEN", TXN_ABORTED: "ABORTED", TXN_COMMITTED: "COMMITTED"}.get(self.state, self.state)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one reader sees: the txn list and, per table, its write-id list, taken together."""

    txns: ValidTxnList
    write_ids: dict[str, ValidWriteIdList]


def fold_completed_components(conn: Connection, database: str, table: str, partition: str | None, write_id: int, *,
                              newest_ms: int | None = None) -> int:
    """Let the partition's COMPLETED_TXN_COMPONENTS row of `write_id` stand for its rows of lower write ids: they go,
    and it takes their update/delete flag (and `newest_ms` as its time, when given). Index lookups of one partition;
    returns the rows removed."""
    ctc = s.completed_txn_components.c
    same = (ctc.CTC_DATABASE == database, ctc.CTC_TABLE == table, s.same_partition(ctc.CTC_PARTITION, partition))
    older = (*same, ctc.CTC_WRITEID < write_id)
    flagged = conn.execute(s.completed_txn_components.delete().where(*older, ctc.CTC_UPDATE_DELETE == "Y")).rowcount
    removed = flagged + conn.execute(s.completed_txn_components.delete().where(*older)).rowcount
    values = {**({"CTC_UPDATE_DELETE": "Y"} if flagged else {}), **({"CTC_TIMESTAMP": newest_ms} if newest_ms else {})}
    if values:
        conn.execute(s.completed_txn_components.update().where(*same, ctc.CTC_WRITEID == write_id).values(**values))
    return removed


def full_table_name(database: str, table: str) -> str:
    return f"{database.lower()}.{table.lower()}"


def _split_name(name: str) -> tuple[str, str]:
    database, _, table = name.lower().partition(".")
    return database, table


class TxnStore:
    """Transactions, write ids and snapshots in the metastore database."""

    def __init__(self, db: Database, *, txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
                 max_open_batch: int = DEFAULT_MAX_OPEN_BATCH) -> None:
        self.db = db
        self.txn_timeout_ms = txn_timeout_ms
        self.max_open_batch = max_open_batch

    # --- opening -------------------------------------------------------------------------------------------------
    def open_txns(self, count: int = 1, *, txn_type: TxnType = TxnType.DEFAULT, agent_info: str | None = None,
                  user: str | None = None, tables: Sequence[str] = ()) -> list[int]:
        """Open `count` transactions at once (Hive's openTxns); ids are consecutive.

        `tables` (`db.table`) are the tables the transactions read and write, named at once (MIN_HISTORY_WRITE_ID):
        the cleaner then waits for them only when it cleans one of these tables (`holds`). Without `tables`, a
        transaction holds back every table's cleaning until its first snapshot names its tables.

        Raises:
            MetastoreError: count is outside 1..hive.txn.max.open.batch.
        """
        if not 1 <= count <= self.max_open_batch:
            raise MetastoreError(f"cannot open {count} transactions at once: allowed 1..{self.max_open_batch} "
                                 "(hive.txn.max.open.batch)")
        names = [_split_name(name) for name in dict.fromkeys(tables)]
        token = f"open {uuid.uuid4().hex}"  # finds the transactions of an open whose answer was lost

        def opened(conn: Connection):
            found = conn.execute(sa.select(s.txns.c.TXN_ID).where(s.txns.c.TXN_META_INFO == token)).scalars().all()
            return sorted(found) if found else NOT_DONE

        return self.db.run("open transactions", lambda conn: self.open_in(conn, count, txn_type=txn_type,
                                                                           agent_info=agent_info, user=user,
                                                                           tables=names, token=token),
                           single_statement=self.db.dialect == "postgresql", done_check=opened)

    def open_in(self, conn: Connection, count: int, *, txn_type: TxnType = TxnType.DEFAULT,
                agent_info: str | None = None, user: str | None = None,
                tables: Sequence[tuple[str, str]] = (), token: str | None = None) -> list[int]:
        """`open_txns` inside the caller's database transaction (a compactor's claim records its transaction in the
        same commit). `tables` are (database, table) pairs."""
        now = self.db.clock.now_ms()
        values = {"now": now, "user": (user or self.db.identity.user)[:128], "host": self.db.identity.host,
                  "agent": agent_info[:128] if agent_info else None, "type": int(txn_type), "count": count,
                  "token": token}
        if self.db.dialect == "postgresql":
            # one statement: the counter, the transactions and the tables they name (each table's next write id:
            # Hive's registerMinOpenWriteId)
            named = ""
            if tables:
                pairs = ", ".join(f"(CAST(%(d{i})s AS varchar), CAST(%(t{i})s AS varchar))" for i in range(len(tables)))
                values.update({f"d{i}": database for i, (database, _) in enumerate(tables)})
                values.update({f"t{i}": table for i, (_, table) in enumerate(tables)})
                named = (', m AS (INSERT INTO "MIN_HISTORY_WRITE_ID" ("MH_TXNID", "MH_DATABASE", "MH_TABLE", '
                         '"MH_WRITEID") SELECT t."TXN_ID", v.d, v.t, COALESCE((SELECT "NWI_NEXT" FROM '
                         '"NEXT_WRITE_ID" WHERE "NWI_DATABASE" = v.d AND "NWI_TABLE" = v.t), 1) '
                         f'FROM t, (VALUES {pairs}) AS v(d, t))')
            return sorted(row[0] for row in self.db.driver_rows(conn, (  # a plain string, the driver's cursor
                'WITH n AS (UPDATE "NEXT_TXN_ID" SET "NTXN_NEXT" = "NTXN_NEXT" + %(count)s RETURNING "NTXN_NEXT"), '
                't AS (INSERT INTO "TXNS" ("TXN_ID", "TXN_STATE", "TXN_STARTED", "TXN_LAST_HEARTBEAT", "TXN_USER", '
                '"TXN_HOST", "TXN_AGENT_INFO", "TXN_HEARTBEAT_COUNT", "TXN_TYPE", "TXN_META_INFO") '
                "SELECT g, 'o', %(now)s, %(now)s, %(user)s, %(host)s, %(agent)s, 0, %(type)s, %(token)s "
                'FROM n, generate_series(n."NTXN_NEXT" - %(count)s, n."NTXN_NEXT" - 1) AS g RETURNING "TXN_ID")'
                + named + ' SELECT "TXN_ID" FROM t'), values))
        # SQLite (one writer at a time: every statement here runs under the database's write lock, so they are plain
        # strings on the driver's cursor, compiled by nobody): the counter, the transactions, the tables they name
        following = self.db.driver_rows(conn, 'UPDATE "NEXT_TXN_ID" SET "NTXN_NEXT" = "NTXN_NEXT" + %(count)s '
                                              'RETURNING "NTXN_NEXT"', {"count": count})[0][0]
        values["first"], values["last"] = following - count, following - 1
        self.db.driver_rows(conn, _OPEN_SQLITE, values)
        if tables:
            pairs = ", ".join(f"(%(d{i})s, %(t{i})s)" for i in range(len(tables)))
            values.update({f"d{i}": database for i, (database, _) in enumerate(tables)})
            values.update({f"t{i}": table for i, (_, table) in enumerate(tables)})
            self.db.driver_rows(conn, (  # Hive's registerMinOpenWriteId: each table's next write id
                f'WITH RECURSIVE g(x) AS (SELECT %(first)s UNION ALL SELECT x + 1 FROM g WHERE x < %(last)s), v(d, t) AS '
                f'(VALUES {pairs}) INSERT INTO "MIN_HISTORY_WRITE_ID" ("MH_TXNID", "MH_DATABASE", "MH_TABLE", '
                '"MH_WRITEID") SELECT g.x, v.d, v.t, COALESCE((SELECT "NWI_NEXT" FROM "NEXT_WRITE_ID" WHERE '
                '"NWI_DATABASE" = v.d AND "NWI_TABLE" = v.t), 1) FROM g, v'), values)
        return list(range(following - count, following))

    def open_txn(self, **options) -> int:
        return self.open_txns(1, **options)[0]

    # --- state checks ----------------------------------------------------------------------------------------------
    @staticmethod
    def _state_error(conn: Connection, txn_id: int, action: str) -> MetastoreError:
        state = conn.execute(sa.select(s.txns.c.TXN_STATE).where(s.txns.c.TXN_ID == txn_id)).scalar_one_or_none()
        if state == TXN_ABORTED:
            return TxnAbortedError(f"cannot {action} transaction {txn_id}: it was aborted")
        if state is None:
            return NoSuchTxnError(f"cannot {action} transaction {txn_id}: no such transaction "
                                  "(never opened, already committed, or aborted and cleaned up)")
        return TxnStateError(f"cannot {action} transaction {txn_id}: it is in state {state!r}")

    def require_open(self, conn: Connection, txn_id: int, action: str) -> int:
        """Lock the open transaction's row for this database transaction and return its type."""
        row = conn.execute(s.txns.update().where(s.txns.c.TXN_ID == txn_id, s.txns.c.TXN_STATE == TXN_OPEN)
                           .values(TXN_STATE=TXN_OPEN).returning(s.txns.c.TXN_TYPE)).first()
        if row is None:
            raise self._state_error(conn, txn_id, action)
        return row[0] or 0

    # --- commit / abort -------------------------------------------------------------------------------------------
    def commit(self, txn_id: int, *, wrote: bool = False, batch: BatchMark | None = None) -> None:
        """Commit: first committer wins for update/delete of the same partition. `wrote`: the caller knows the
        transaction recorded components (a write), so the one-statement path of a transaction that wrote nothing is
        not tried first (it would find components and cost a round trip for nothing). `batch`: the streaming
        micro-batch this transaction writes, marked committed in the same database transaction (`streams`).

        Raises:
            WriteConflictError: another update/delete on the same partition committed after this transaction began;
                this transaction has been aborted.
            TxnAbortedError, NoSuchTxnError: the transaction is not open.
            StreamBatchError: `batch` is not this transaction's to commit (nothing is committed).
        """
        def gone(result):  # a commit lost in flight took effect if the open transaction's row is gone
            return lambda conn: NOT_DONE if conn.execute(sa.select(s.txns.c.TXN_ID).where(
                s.txns.c.TXN_ID == txn_id)).first() else result

        if self.db.dialect == "postgresql" and not wrote and batch is None and self.db.run(
                f"commit transaction {txn_id}", lambda conn: self.db.driver_rows(
                    conn, _COMMIT_WITHOUT_WRITES, {"txn": txn_id})[0][0], single_statement=True, done_check=gone(1)):
            return  # nothing written: one round trip
        if self.db.dialect == "sqlite" and not wrote and batch is None:
            def committing(conn: Connection) -> str | None:
                return self._commit_sqlite(conn, txn_id)
        else:
            def committing(conn: Connection) -> str | None:
                return self._commit(conn, txn_id, batch)
        conflict = self.db.run(f"commit transaction {txn_id}", committing, done_check=gone(None))
        if conflict:
            raise WriteConflictError(f"transaction {txn_id} was aborted due to a write conflict: {conflict}")

    def _commit_sqlite(self, conn: Connection, txn_id: int) -> str | None:
        """`_commit` on SQLite for a caller that did not say it wrote: a transaction that wrote nothing (and is not a
        compactor's) is committed in plain statements on the driver's cursor (SQLite's write lock held as briefly as
        possible); any other goes the general way, told the type the first statement found."""
        found = self.db.driver_rows(conn, _STATE_SQLITE, {"txn": txn_id})
        if not found or found[0][0] != TXN_OPEN:
            return self._commit(conn, txn_id)  # raises the state error
        _, txn_type, has_components = found[0]
        if has_components or txn_type in _COMPACTOR_TYPES:
            return self._commit(conn, txn_id, txn_type=txn_type or 0)
        for statement in _FORGET_SQLITE:
            self.db.driver_rows(conn, statement, {"txn": txn_id})
        return None

    def _commit(self, conn: Connection, txn_id: int, batch: BatchMark | None = None,
                txn_type: int | None = None) -> str | None:
        """Commit in the caller's database transaction; `txn_type`: the transaction is known to be open, of this
        type."""
        if txn_type is None:
            txn_type = self.require_open(conn, txn_id, "commit")
        tc = s.txn_components.c
        operations = set(conn.execute(sa.select(tc.TC_OPERATION_TYPE).where(tc.TC_TXNID == txn_id).distinct())
                         .scalars().all())
        now = self.db.clock.now_ms()
        if operations & set(_UPDATE_DELETE):
            # Hold NEXT_TXN_ID until this commit is visible (Hive's commitTxn does the same): no transaction can open
            # with a snapshot that misses this commit yet an id above its commit id, which would hide a conflict.
            commit_id = conn.execute(sa.select(s.next_txn_id.c.NTXN_NEXT).with_for_update()).scalar_one() - 1
            conflict = self._find_write_conflict(conn, txn_id)
            if conflict is not None:
                self._abort(conn, txn_id)
                return conflict
            conn.execute(s.write_set.insert().from_select(
                ["WS_DATABASE", "WS_TABLE", "WS_PARTITION", "WS_TXNID", "WS_COMMIT_ID", "WS_OPERATION_TYPE"],
                sa.select(tc.TC_DATABASE, tc.TC_TABLE, tc.TC_PARTITION, tc.TC_TXNID, sa.literal(commit_id),
                          tc.TC_OPERATION_TYPE).where(tc.TC_TXNID == txn_id, tc.TC_OPERATION_TYPE.in_(_UPDATE_DELETE))))
        if operations:
            update_delete = sa.case((tc.TC_OPERATION_TYPE.in_(_UPDATE_DELETE), "Y"), else_="N")
            conn.execute(s.completed_txn_components.insert().from_select(
                ["CTC_TXNID", "CTC_DATABASE", "CTC_TABLE", "CTC_PARTITION", "CTC_TIMESTAMP", "CTC_WRITEID",
                 "CTC_UPDATE_DELETE"],
                sa.select(tc.TC_TXNID, tc.TC_DATABASE, tc.TC_TABLE, tc.TC_PARTITION, sa.literal(now), tc.TC_WRITEID,
                          update_delete).where(tc.TC_TXNID == txn_id, tc.TC_OPERATION_TYPE != Operation.COMPACT.value)))
            self._collapse_completed(conn, txn_id)
            conn.execute(s.txn_components.delete().where(tc.TC_TXNID == txn_id))
        if txn_type in (TxnType.COMPACTION, TxnType.REBALANCE_COMPACTION):
            # Hold NEXT_TXN_ID until this commit is visible: a transaction opened from now on gets an id at or
            # above `following` and sees the compaction's output, so the cleaner's watermark stays exact.
            following = conn.execute(sa.select(s.next_txn_id.c.NTXN_NEXT).with_for_update()).scalar_one()
            conn.execute(s.compaction_queue.update().where(s.compaction_queue.c.CQ_TXN_ID == txn_id)
                         .values(CQ_NEXT_TXN_ID=following, CQ_COMMIT_TIME=now))
            if txn_type == TxnType.REBALANCE_COMPACTION:
                # A rebalance gives rows new ROW__IDs: recorded as an update of its partition in WRITE_SET, so an
                # update or delete that began before this commit (its ROW__IDs read from the old files) fails at its
                # own commit with a write conflict instead of deleting the wrong rows (Hive locks it as UPDATE).
                cq = s.compaction_queue.c
                conn.execute(s.write_set.insert().from_select(
                    ["WS_DATABASE", "WS_TABLE", "WS_PARTITION", "WS_TXNID", "WS_COMMIT_ID", "WS_OPERATION_TYPE"],
                    sa.select(cq.CQ_DATABASE, cq.CQ_TABLE, cq.CQ_PARTITION, sa.literal(txn_id),
                              sa.literal(following - 1), sa.literal(Operation.UPDATE.value))
                    .where(cq.CQ_TXN_ID == txn_id)))
        if batch is not None:
            mark_batch(conn, batch, txn_id, now)
        conn.execute(s.hive_locks.delete().where(s.hive_locks.c.HL_TXNID == txn_id))
        conn.execute(s.txn_staging.delete().where(s.txn_staging.c.TS_TXNID == txn_id))
        conn.execute(s.min_history_write_id.delete().where(s.min_history_write_id.c.MH_TXNID == txn_id))
        conn.execute(s.txns.delete().where(s.txns.c.TXN_ID == txn_id))
        return None

    @staticmethod
    def _collapse_completed(conn: Connection, txn_id: int) -> None:
        """Keep COMPLETED_TXN_COMPONENTS at one row per partition and write: this commit's row stands for the older
        rows of the same partition (what Hive's housekeeping removeDuplicateCompletedTxnComponents does later), so
        the table grows with the partitions awaiting compaction, not with the commits."""
        tc = s.txn_components.c
        mine = conn.execute(sa.select(tc.TC_DATABASE, tc.TC_TABLE, tc.TC_PARTITION, sa.func.max(tc.TC_WRITEID)).where(
            tc.TC_TXNID == txn_id, tc.TC_OPERATION_TYPE != Operation.COMPACT.value, tc.TC_WRITEID.is_not(None))
            .group_by(tc.TC_DATABASE, tc.TC_TABLE, tc.TC_PARTITION)).all()
        for database, table, partition, write_id in mine:
            fold_completed_components(conn, database, table, partition, write_id)

    @staticmethod
    def _find_write_conflict(conn: Connection, txn_id: int) -> str | None:
        ws, tc = s.write_set.c, s.txn_components.c
        same_partition = sa.or_(ws.WS_PARTITION == tc.TC_PARTITION,
                                sa.and_(ws.WS_PARTITION.is_(None), tc.TC_PARTITION.is_(None)))
        row = conn.execute(
            sa.select(ws.WS_TXNID, ws.WS_COMMIT_ID, ws.WS_DATABASE, ws.WS_TABLE, ws.WS_PARTITION, ws.WS_OPERATION_TYPE,
                      tc.TC_OPERATION_TYPE)
            .select_from(s.write_set.join(s.txn_components, sa.and_(ws.WS_DATABASE == tc.TC_DATABASE,
                                                                    ws.WS_TABLE == tc.TC_TABLE, same_partition)))
            .where(tc.TC_TXNID == txn_id, ws.WS_COMMIT_ID >= txn_id, ws.WS_TXNID != txn_id,
                   ws.WS_OPERATION_TYPE.in_(_UPDATE_DELETE), tc.TC_OPERATION_TYPE.in_(_UPDATE_DELETE))
            .order_by(ws.WS_COMMIT_ID).limit(1)).first()
        if row is None:
            return None
        names = {"u": "update", "d": "delete"}
        where = f"{row.WS_DATABASE}.{row.WS_TABLE}" + (f"/{row.WS_PARTITION}" if row.WS_PARTITION else "")
        return (f"{names[row.TC_OPERATION_TYPE]} of {where} conflicts with the {names[row.WS_OPERATION_TYPE]} "
                f"committed by transaction {row.WS_TXNID} (commit id {row.WS_COMMIT_ID})")

    def abort(self, txn_id: int) -> None:
        """Abort an open transaction and release its locks; its writes stay invisible until cleaned.

        Raises:
            TxnAbortedError, NoSuchTxnError: the transaction is not open.
        """
        def abort_(conn: Connection) -> None:
            self.require_open(conn, txn_id, "abort")
            self._abort(conn, txn_id)

        self.db.run(f"abort transaction {txn_id}", abort_)

    @staticmethod
    def _abort(conn: Connection, txn_id: int) -> None:
        conn.execute(s.txns.update().where(s.txns.c.TXN_ID == txn_id).values(TXN_STATE=TXN_ABORTED))
        TxnStore.release(conn, txn_id)

    @staticmethod
    def release(conn: Connection, txn_id: int) -> None:
        """What an aborted transaction no longer holds: its locks and the tables it named."""
        conn.execute(s.hive_locks.delete().where(s.hive_locks.c.HL_TXNID == txn_id))
        conn.execute(s.min_history_write_id.delete().where(s.min_history_write_id.c.MH_TXNID == txn_id))

    def abort_txns(self, txn_ids: Iterable[int]) -> dict[int, str | None]:
        """Abort several transactions; returns, per id, None on success or the reason it was not aborted."""
        results: dict[int, str | None] = {}
        for txn_id in txn_ids:
            try:
                self.abort(txn_id)
                results[txn_id] = None
            except (TxnStateError, NoSuchTxnError) as exc:
                results[txn_id] = str(exc)
        return results

    # --- heartbeats and timeouts ----------------------------------------------------------------------------------
    def heartbeat(self, txn_id: int) -> None:
        """Keep an open transaction alive.

        Raises:
            TxnAbortedError: it timed out or was aborted; NoSuchTxnError: unknown or committed.
        """
        def beat(conn: Connection) -> None:
            updated = conn.execute(
                s.txns.update().where(s.txns.c.TXN_ID == txn_id, s.txns.c.TXN_STATE == TXN_OPEN)
                .values(TXN_LAST_HEARTBEAT=self.db.clock.now_ms(),
                        TXN_HEARTBEAT_COUNT=sa.func.coalesce(s.txns.c.TXN_HEARTBEAT_COUNT, 0) + 1)).rowcount
            if updated != 1:
                raise self._state_error(conn, txn_id, "heartbeat")

        self.db.run(f"heartbeat transaction {txn_id}", beat, idempotent=True)

    def heartbeat_range(self, low: int, high: int) -> tuple[list[int], list[int]]:
        """Heartbeat every transaction in low..high (a streaming batch); returns (aborted ids, unknown ids)."""
        def beat(conn: Connection) -> tuple[list[int], list[int]]:
            now = self.db.clock.now_ms()
            conn.execute(s.txns.update().where(s.txns.c.TXN_ID.between(low, high), s.txns.c.TXN_STATE == TXN_OPEN)
                         .values(TXN_LAST_HEARTBEAT=now))
            states = dict(conn.execute(sa.select(s.txns.c.TXN_ID, s.txns.c.TXN_STATE)
                                       .where(s.txns.c.TXN_ID.between(low, high))).all())
            aborted = sorted(t for t, state in states.items() if state == TXN_ABORTED)
            unknown = [t for t in range(low, high + 1) if t not in states]
            return aborted, unknown

        return self.db.run(f"heartbeat transactions {low}..{high}", beat, idempotent=True)

    def perform_timeouts(self) -> list[int]:
        """Abort open transactions whose last heartbeat is older than hive.txn.timeout; drop stale txn-less locks."""
        def time_out(conn: Connection) -> list[int]:
            cutoff = self.db.clock.now_ms() - self.txn_timeout_ms
            stale = conn.execute(sa.select(s.txns.c.TXN_ID).where(
                s.txns.c.TXN_STATE == TXN_OPEN, s.txns.c.TXN_LAST_HEARTBEAT < cutoff,
                sa.func.coalesce(s.txns.c.TXN_TYPE, 0) != TxnType.REPL_CREATED).order_by(s.txns.c.TXN_ID)).scalars().all()
            for txn_id in stale:
                if conn.execute(s.txns.update().where(s.txns.c.TXN_ID == txn_id, s.txns.c.TXN_STATE == TXN_OPEN,
                                                      s.txns.c.TXN_LAST_HEARTBEAT < cutoff)
                                .values(TXN_STATE=TXN_ABORTED)).rowcount:
                    conn.execute(s.hive_locks.delete().where(s.hive_locks.c.HL_TXNID == txn_id))
            conn.execute(s.hive_locks.delete().where(s.hive_locks.c.HL_TXNID == 0,
                                                     s.hive_locks.c.HL_LAST_HEARTBEAT < cutoff))
            return list(stale)

        return self.db.run("time out transactions", time_out)

    # --- write ids and components --------------------------------------------------------------------------------
    def allocate_write_ids(self, txn_ids: Sequence[int], database: str, table: str) -> dict[int, int]:
        """The write id of each open transaction for a table, allocating new ones in transaction order."""
        database, table = database.lower(), table.lower()

        def allocate(conn: Connection) -> dict[int, int]:
            for txn_id in txn_ids:
                self.require_open(conn, txn_id, f"allocate a write id for {database}.{table} in")
            t2w = s.txn_to_write_id.c
            existing = dict(conn.execute(sa.select(t2w.T2W_TXNID, t2w.T2W_WRITEID).where(
                t2w.T2W_DATABASE == database, t2w.T2W_TABLE == table, t2w.T2W_TXNID.in_(list(txn_ids)))).all())
            missing = sorted(t for t in txn_ids if t not in existing)
            if missing:
                first = self._reserve_write_ids(conn, database, table, len(missing))
                rows = [{"T2W_TXNID": t, "T2W_DATABASE": database, "T2W_TABLE": table, "T2W_WRITEID": first + i}
                        for i, t in enumerate(missing)]
                conn.execute(s.txn_to_write_id.insert(), rows)
                existing.update({r["T2W_TXNID"]: r["T2W_WRITEID"] for r in rows})
            return {t: existing[t] for t in txn_ids}

        return self.db.run(f"allocate write ids for {database}.{table}", allocate)

    @staticmethod
    def _reserve_write_ids(conn: Connection, database: str, table: str, count: int) -> int:
        nwi = s.next_write_id.c
        following = conn.execute(s.next_write_id.update().where(nwi.NWI_DATABASE == database, nwi.NWI_TABLE == table)
                                 .values(NWI_NEXT=nwi.NWI_NEXT + count).returning(nwi.NWI_NEXT)).scalar_one_or_none()
        if following is not None:
            return following - count
        # First write to the table: create the counter row unless a concurrent first writer just did, then take ids.
        insert = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(s.next_write_id)
        conn.execute(insert.values(NWI_DATABASE=database, NWI_TABLE=table, NWI_NEXT=1).on_conflict_do_nothing())
        return conn.execute(s.next_write_id.update().where(nwi.NWI_DATABASE == database, nwi.NWI_TABLE == table)
                            .values(NWI_NEXT=nwi.NWI_NEXT + count).returning(nwi.NWI_NEXT)).scalar_one() - count

    def add_components(self, txn_id: int, database: str, table: str, partitions: Sequence[str | None],
                       operation: Operation) -> None:
        """Record what a transaction writes (Hive does this when it takes the write locks): TXN_COMPONENTS rows."""
        database, table = database.lower(), table.lower()

        def add(conn: Connection) -> None:
            self.require_open(conn, txn_id, "record writes of")
            write_id = conn.execute(sa.select(s.txn_to_write_id.c.T2W_WRITEID).where(
                s.txn_to_write_id.c.T2W_TXNID == txn_id, s.txn_to_write_id.c.T2W_DATABASE == database,
                s.txn_to_write_id.c.T2W_TABLE == table)).scalar_one_or_none()
            conn.execute(s.txn_components.insert(), [
                {"TC_TXNID": txn_id, "TC_DATABASE": database, "TC_TABLE": table, "TC_PARTITION": partition,
                 "TC_OPERATION_TYPE": Operation(operation).value, "TC_WRITEID": write_id} for partition in partitions])

        self.db.run(f"record writes of transaction {txn_id}", add)

    # --- staging of writes (not in Hive) --------------------------------------------------------------------------
    def register_staging(self, txn_id: int, database: str, table: str, partition: str | None) -> None:
        """Record, before any file is written, where open transaction `txn_id` stages (partition None: anywhere in
        the table), so housekeeping can remove what a killed write leaves. Commit forgets it (all is published)."""
        database, table = database.lower(), table.lower()

        def add(conn: Connection) -> None:
            self.require_open(conn, txn_id, "stage files of")
            conn.execute(s.txn_staging.insert().values(TS_TXNID=txn_id, TS_DATABASE=database, TS_TABLE=table,
                                                       TS_PARTITION=partition))

        self.db.run(f"record staging of transaction {txn_id}", add)

    def abandoned_staging(self, *, limit: int = 1000) -> list[StagingRecord]:
        """Staging records of transactions that are no longer open (aborted, timed out or gone), oldest first."""
        ts, t = s.txn_staging.c, s.txns.c

        def read(conn: Connection) -> list[StagingRecord]:
            open_ = sa.exists().where(t.TXN_ID == ts.TS_TXNID, t.TXN_STATE == TXN_OPEN)
            rows = conn.execute(sa.select(ts.TS_TXNID, ts.TS_DATABASE, ts.TS_TABLE, ts.TS_PARTITION).distinct()
                                .where(~open_).order_by(ts.TS_TXNID).limit(limit)).all()
            return [StagingRecord(*row) for row in rows]

        return self.db.run("find abandoned staging", read, write=False)

    def write_id_of(self, txn_id: int, database: str, table: str) -> int | None:
        """The write id transaction `txn_id` holds on `database.table`, None if it holds none (index T2W_TXNID_IDX)."""
        t2w = s.txn_to_write_id.c
        return self.db.run(f"read the write id of transaction {txn_id}", lambda conn: conn.execute(
            sa.select(t2w.T2W_WRITEID).where(t2w.T2W_TXNID == txn_id, t2w.T2W_DATABASE == database,
                                             t2w.T2W_TABLE == table)).scalar_one_or_none(), write=False)

    def forget_staging(self, record: StagingRecord) -> None:
        """Drop one staging record (its directories are gone); idempotent."""
        ts = s.txn_staging.c
        same_partition = s.same_partition(ts.TS_PARTITION, record.partition)
        self.db.run(f"forget staging of transaction {record.txn_id}", lambda conn: conn.execute(
            s.txn_staging.delete().where(ts.TS_TXNID == record.txn_id, ts.TS_DATABASE == record.database,
                                         ts.TS_TABLE == record.table, same_partition)))

    # --- snapshots ------------------------------------------------------------------------------------------------
    def snapshot(self, tables: Sequence[str] = (), *, current_txn: int | None = None) -> Snapshot:
        """The ValidTxnList and the ValidWriteIdLists of `tables` (`db.table`) from one consistent read.

        With `current_txn`, the tables it has not named yet are named for it (MIN_HISTORY_WRITE_ID, with the lowest
        write id the snapshot may read): the cleaner then waits for it only on these tables.

        Raises:
            TxnStateError: `current_txn` named other tables first and a compaction of a new one committed while it
                was open (`holds.check_may_name`): read that table in a new transaction.
        """
        def read(conn: Connection) -> tuple[Snapshot, set[tuple[str, str]]]:
            txns = self._valid_txns(conn, current_txn)
            named = holds.named_tables(conn, current_txn) if current_txn is not None and tables else set()
            return Snapshot(txns, {name: self._valid_write_ids(conn, name, txns, current_txn) for name in tables}), named

        snapshot, named = self.db.run("read snapshot", read, write=False, snapshot=True)
        if current_txn is not None:
            missing = {name: ids for name, ids in snapshot.write_ids.items() if _split_name(name) not in named}
            if missing:
                self._name_tables(current_txn, missing)
        return snapshot

    def _name_tables(self, txn_id: int, write_ids: dict[str, ValidWriteIdList]) -> None:
        """Record the tables an open transaction reads, with the lowest write id it may read in each (Hive 4's
        addWriteIdsToMinHistory: the lowest open write id of its snapshot, else the high watermark + 1)."""
        def name_(conn: Connection) -> None:
            if conn.execute(s.txns.update().where(s.txns.c.TXN_ID == txn_id, s.txns.c.TXN_STATE == TXN_OPEN)
                            .values(TXN_STATE=TXN_OPEN)).rowcount != 1:
                return  # it ended meanwhile: an ended transaction holds nothing back
            named = holds.named_tables(conn, txn_id)
            rows = []
            for name, ids in write_ids.items():
                database, table = _split_name(name)
                if (database, table) in named:
                    continue
                holds.check_may_name(conn, txn_id, database, table, named=named, dialect=self.db.dialect)
                lowest = ids.min_open if ids.min_open != LONG_MAX else ids.high_watermark + 1
                rows.append({"MH_TXNID": txn_id, "MH_DATABASE": database, "MH_TABLE": table, "MH_WRITEID": lowest})
            if rows:
                conn.execute(s.min_history_write_id.insert(), rows)

        self.db.run(f"name the tables transaction {txn_id} reads", name_)

    def valid_txns(self, current_txn: int | None = None) -> ValidTxnList:
        return self.snapshot((), current_txn=current_txn).txns

    def valid_write_ids(self, database: str, table: str, *, current_txn: int | None = None) -> ValidWriteIdList:
        name = full_table_name(database, table)
        return self.snapshot([name], current_txn=current_txn).write_ids[name]

    def _valid_txns(self, conn: Connection, current_txn: int | None) -> ValidTxnList:
        """Hive's createValidReadTxnList: a transaction sees what committed below it, and its own writes."""
        found = self.db.driver_rows(conn, _SNAPSHOT_TXNS, {})
        high = found[0][0] - 1
        if current_txn:
            high = min(high, current_txn)
        rows = [(txn_id, state) for _, txn_id, state in found if txn_id is not None and txn_id <= high]
        open_ids = tuple(t for t, state in rows if state == TXN_OPEN and t != current_txn)
        aborted = tuple(t for t, state in rows if state == TXN_ABORTED)
        return ValidTxnList(high_watermark=high, open_ids=open_ids, aborted_ids=aborted,
                            min_open=min(open_ids, default=LONG_MAX))

    def _valid_write_ids(self, conn: Connection, name: str, txns: ValidTxnList,
                         current_txn: int | None) -> ValidWriteIdList:
        """The table's write ids as `txns` sees them: write ids of invalid transactions are exceptions.

        Cost follows the open and aborted transactions, not the table's history (which housekeeping trims): the
        high watermark is the table's newest write id (NEXT_WRITE_ID) stepped down past the write ids of transactions
        above the snapshot's high watermark, read by index range; the exceptions are the write ids of those and of
        the open and aborted transactions (TXNS, joined by index). Every write id not found so belongs to a committed
        transaction at or below the snapshot's high watermark, because history is trimmed only below the lowest open
        or aborted transaction (a snapshot's own open transaction included).
        """
        database, _, table = name.partition(".")
        of_table = {"database": database, "table": table}
        found = self.db.driver_rows(conn, _SNAPSHOT_LATER_WRITES, dict(of_table, high=txns.high_watermark))
        following = found[0][0] or 1
        later = {write_id: txn_id for _, write_id, txn_id in found if write_id is not None}
        high = following - 1
        while high in later:
            high -= 1
        invalid = {write_id: txn_id for txn_id, write_id in self.db.driver_rows(conn, _SNAPSHOT_INVALID_WRITES, of_table)
                   if write_id is not None and write_id <= high}
        invalid.update((write_id, txn_id) for write_id, txn_id in later.items() if write_id <= high)
        open_ids: list[int] = []
        aborted: list[int] = []
        for write_id in sorted(invalid):
            txn_id = invalid[write_id]
            if txn_id == current_txn:
                continue
            (aborted if txns.is_aborted(txn_id) else open_ids).append(write_id)
        return ValidWriteIdList(table_name=name, high_watermark=high, open_ids=tuple(open_ids),
                                aborted_ids=tuple(aborted), min_open=min(open_ids, default=LONG_MAX))

    # --- inspection ------------------------------------------------------------------------------------------------
    def show_transactions(self) -> list[TxnInfo]:
        """Open and aborted transactions (SHOW TRANSACTIONS)."""
        t = s.txns.c
        rows = self.db.run("show transactions", lambda conn: conn.execute(
            sa.select(t.TXN_ID, t.TXN_STATE, t.TXN_STARTED, t.TXN_LAST_HEARTBEAT, t.TXN_USER, t.TXN_HOST,
                      t.TXN_AGENT_INFO, t.TXN_TYPE).where(t.TXN_STATE.in_((TXN_OPEN, TXN_ABORTED)))
            .order_by(t.TXN_ID)).all(), write=False)
        return [TxnInfo(*row) for row in rows]

    def transactions_page(self, states: Sequence[str] = (TXN_OPEN, TXN_ABORTED), *, offset: int = 0,
                          limit: int = 50) -> tuple[list[TxnInfo], dict[str, int]]:
        """One page of SHOW TRANSACTIONS: open ones first, then aborted ones, each oldest first, read by index with
        OFFSET/LIMIT; and how many there are of each state. Cost follows the page (and a count by the state index),
        not the number of transactions."""
        t = s.txns.c
        columns = (t.TXN_ID, t.TXN_STATE, t.TXN_STARTED, t.TXN_LAST_HEARTBEAT, t.TXN_USER, t.TXN_HOST,
                   t.TXN_AGENT_INFO, t.TXN_TYPE)

        def read(conn: Connection) -> tuple[list[TxnInfo], dict[str, int]]:
            counts = {state: 0 for state in (TXN_OPEN, TXN_ABORTED)}
            counts.update(dict(conn.execute(sa.select(t.TXN_STATE, sa.func.count()).where(
                t.TXN_STATE.in_((TXN_OPEN, TXN_ABORTED))).group_by(t.TXN_STATE)).all()))
            rows: list[tuple[Any, ...]] = []  # the TXNS rows of the page, database values as TxnInfo takes them
            skip, left = offset, limit
            for state in (TXN_OPEN, TXN_ABORTED):  # open first: they hold the cleaner back
                if state not in states or left <= 0:
                    continue
                if skip >= counts[state]:
                    skip -= counts[state]
                    continue
                rows += conn.execute(sa.select(*columns).where(t.TXN_STATE == state).order_by(t.TXN_ID)
                                     .offset(skip).limit(left)).all()
                left, skip = limit - len(rows), 0
            return [TxnInfo(*row) for row in rows], counts

        return self.db.run("show transactions", read, write=False, snapshot=True)

    def min_open_txn(self) -> int | None:
        """The lowest open transaction id (the cleaner's watermark), or None."""
        return self.db.run("find lowest open transaction", lambda conn: conn.execute(
            sa.select(sa.func.min(s.txns.c.TXN_ID)).where(s.txns.c.TXN_STATE == TXN_OPEN)).scalar_one_or_none(),
            write=False)

    def next_txn_id(self) -> int:
        return self.db.run("read next transaction id", lambda conn: conn.execute(
            sa.select(s.next_txn_id.c.NTXN_NEXT)).scalar_one(), write=False)
