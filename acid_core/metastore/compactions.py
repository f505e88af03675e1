"""The compaction queue's moves: COMPACTION_QUEUE into COMPLETED_COMPACTIONS with Hive's states and rules.

initiated -> working -> ready for cleaning -> (history) succeeded; failed, refused, did not initiate and aborted go
straight to history. Each move is a compare-and-swap on CQ_STATE; history rows keep the queue row's id.
The types and states are `acid_core.metastore.codes`, the row mapping `compaction_rows`, SHOW COMPACTIONS and the
history's purge `compaction_history`.

Over 500 lines because the queue is one state machine: every move (enqueue, claim, the compactor transaction,
compacted, cleaned, failed, refused, aborted, reverted, orphaned, ready to clean) is a compare-and-swap that reads and
writes the same rows under the same rules, and splitting them would spread one set of invariants over several files.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core import settings
from acid_core.errors import CompactionStateError, MetastoreError, UsageError
from acid_core.format.validity import ValidTxnList
from acid_core.metastore import compaction_history, holds
from acid_core.metastore import schema as s
from acid_core.metastore.catalog import Catalog, check_identifier
from acid_core.metastore.codes import QUEUE_STATES, CompactionState, CompactionType, check_number_of_buckets
from acid_core.metastore.compaction_history import HistoryRetention
from acid_core.metastore.compaction_rows import CompactionInfo, history_values, info_from_history, info_from_queue
from acid_core.metastore.engine import NOT_DONE, Database
from acid_core.metastore.pools import DEFAULT_POOL, check_pool_name, pool_of
from acid_core.metastore.properties import spark_conf_of
from acid_core.metastore.txns import TXN_ABORTED, TXN_OPEN, Operation, TxnStore, TxnType

CLEANER_RETRY_RETENTION_MS = settings.RETRY_RETENTION.default_ms  # hive.compactor.cleaner.retry.retention.time
CLEANER_MAX_ATTEMPTS = settings.MAX_ATTEMPTS.default  # hive.compactor.cleaner.retry.maxattempts
ABORTED_BY_REQUEST = "Compaction Aborted by Abort Comapction request."  # Hive's text, spelling included


def _compactor_high_watermark(conn: Connection, database: str, table: str) -> int:
    """What a compactor would compact up to now: below the lowest open write id, else the table's highest write id.

    A `ready for cleaning` entry at this watermark already did that work (Hive's CompactFunction refuses a repeat).
    """
    t2w = s.txn_to_write_id.c
    lowest_open = conn.execute(sa.select(sa.func.min(t2w.T2W_WRITEID)).select_from(
        s.txn_to_write_id.join(s.txns, s.txns.c.TXN_ID == t2w.T2W_TXNID)).where(
        t2w.T2W_DATABASE == database, t2w.T2W_TABLE == table, s.txns.c.TXN_STATE == TXN_OPEN)).scalar_one_or_none()
    if lowest_open is not None:
        return lowest_open - 1
    following = conn.execute(sa.select(s.next_write_id.c.NWI_NEXT).where(
        s.next_write_id.c.NWI_DATABASE == database, s.next_write_id.c.NWI_TABLE == table)).scalar_one_or_none()
    return (following or 1) - 1


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    compaction_id: int
    accepted: bool
    state: CompactionState
    message: str


ORPHAN_GRACE_MS = 30_000  # an unreferenced compactor transaction younger than this is left to its worker


class CompactionQueue:
    """Enqueue, claim, complete and clean compactions."""

    def __init__(self, db: Database, catalog: Catalog) -> None:
        self.db = db
        self.catalog = catalog

    def _next_id(self, conn: Connection) -> int:
        return conn.execute(s.next_compaction_queue_id.update()
                            .values(NCQ_NEXT=s.next_compaction_queue_id.c.NCQ_NEXT + 1)
                            .returning(s.next_compaction_queue_id.c.NCQ_NEXT)).scalar_one() - 1

    def enqueue(self, database: str, table: str, partition: str | None, compaction_type: CompactionType, *,
                initiator_id: str | None = None, initiator_version: str | None = None, pool: str | None = None,
                properties: Mapping[str, str] | None = None, run_as: str | None = None,
                number_of_buckets: int | None = None) -> EnqueueResult:
        """Queue a compaction unless one for the same partition is already initiated or working (Hive's compact()).

        `number_of_buckets` is a rebalance's CLUSTERED INTO n BUCKETS (CQ_NUMBER_OF_BUCKETS). `pool` is the request's
        compaction pool (CQ_POOL_NAME, `POOL 'name'`); without one, the table's `hive.compactor.worker.pool`, else
        its database's, else "default", read in the same database transaction (what Hive's initiator and ALTER TABLE
        ... COMPACT choose: `acid_core.metastore.pools.pool_of`).

        Raises:
            MetastoreError: the names are not identifiers, the partition is missing for a partitioned table, given
                for an unpartitioned one, or not a canonical `k=v/...` name of the table's keys.
            NoSuchObjectError, NotTransactionalError: the table does not exist or is not a full ACID table.
            UsageError: a number of buckets for a compaction other than a rebalance, or outside 1..4096;
                InvalidPoolNameError (a UsageError) for a pool name, given or from a property, that no pool may have.
        """
        database, table = check_identifier(database, "database"), check_identifier(table, "table")
        check_number_of_buckets(CompactionType(compaction_type), number_of_buckets)
        if pool is not None:
            check_pool_name(pool)
        for key, value in (properties or {}).items():  # the job's Spark settings (compactor.spark.*, the job queue)
            spark_conf_of(key, value, what="compaction request")
        cq = s.compaction_queue.c
        now = self.db.clock.now_ms()

        def enqueue_(conn: Connection) -> EnqueueResult:
            info = self.catalog.require_transactional_in(conn, database, table)
            if partition is not None:
                info.check_partition_name(partition)
            elif info.partition_keys:
                raise MetastoreError(f"cannot compact {info.full_name} as a whole: it is partitioned by "
                                     f"{[key.name for key in info.partition_keys]}; name one partition")
            chosen = pool
            if chosen is None:
                chosen = pool_of(info.params, table=info.full_name)
            if chosen is None:
                chosen = pool_of({}, self.catalog.get_database_in(conn, database).params)
            if self.db.dialect == "postgresql":  # Hive's CompactionScheduler mutex
                conn.execute(sa.select(s.next_compaction_queue_id.c.NCQ_NEXT).with_for_update()).all()
            same = (cq.CQ_PARTITION == partition) if partition is not None else cq.CQ_PARTITION.is_(None)
            existing = conn.execute(sa.select(cq.CQ_ID, cq.CQ_STATE).where(
                cq.CQ_DATABASE == database, cq.CQ_TABLE == table, same,
                sa.or_(cq.CQ_STATE.in_((CompactionState.INITIATED.value, CompactionState.WORKING.value)),
                       sa.and_(cq.CQ_STATE == CompactionState.READY_FOR_CLEANING.value,
                               cq.CQ_HIGHEST_WRITE_ID == _compactor_high_watermark(conn, database, table))))
                .order_by(cq.CQ_ID).limit(1)).first()
            if existing is not None:
                state = CompactionState(existing.CQ_STATE)
                return EnqueueResult(existing.CQ_ID, False, state, f"Compaction is already scheduled with "
                                     f"state='{state.display}' and id={existing.CQ_ID}")
            compaction_id = self._next_id(conn)
            conn.execute(s.compaction_queue.insert().values(
                CQ_ID=compaction_id, CQ_DATABASE=database, CQ_TABLE=table, CQ_PARTITION=partition,
                CQ_STATE=CompactionState.INITIATED.value, CQ_TYPE=CompactionType(compaction_type).value,
                CQ_TBLPROPERTIES=json.dumps(dict(properties), sort_keys=True) if properties else None,
                CQ_ENQUEUE_TIME=now, CQ_RUN_AS=run_as or self.db.identity.user,
                CQ_INITIATOR_ID=initiator_id or f"{self.db.identity.host}-manual",
                CQ_INITIATOR_VERSION=initiator_version, CQ_POOL_NAME=chosen or DEFAULT_POOL, CQ_RETRY_RETENTION=0,
                CQ_NUMBER_OF_BUCKETS=number_of_buckets))
            return EnqueueResult(compaction_id, True, CompactionState.INITIATED,
                                 f"Compaction enqueued with id {compaction_id}")

        return self.db.run(f"enqueue compaction of {database}.{table}", enqueue_)

    def get(self, compaction_id: int) -> CompactionInfo | None:
        """A queue entry, else the history entry with that id."""
        return self.db.run(f"read compaction {compaction_id}", lambda conn: self.get_in(conn, compaction_id),
                           write=False)

    def _require(self, conn: Connection, compaction_id: int, allowed: Iterable[CompactionState], action: str):
        allowed = tuple(allowed)
        row = conn.execute(s.compaction_queue.update().where(
            s.compaction_queue.c.CQ_ID == compaction_id,
            s.compaction_queue.c.CQ_STATE.in_([state.value for state in allowed]))
            .values(CQ_STATE=s.compaction_queue.c.CQ_STATE).returning(*s.compaction_queue.c)).first()
        if row is None:
            current = self.get_in(conn, compaction_id)
            where = f"it is {current.state.display}" if current else "no such compaction"
            raise CompactionStateError(f"cannot {action} compaction {compaction_id}: {where} "
                                       f"(needs {' or '.join(state.display for state in allowed)})")
        return info_from_queue(row)

    @staticmethod
    def get_in(conn: Connection, compaction_id: int) -> CompactionInfo | None:
        row = conn.execute(sa.select(s.compaction_queue).where(s.compaction_queue.c.CQ_ID == compaction_id)).first()
        if row is not None:
            return info_from_queue(row)
        row = conn.execute(sa.select(s.completed_compactions).where(s.completed_compactions.c.CC_ID == compaction_id)).first()
        return info_from_history(row) if row is not None else None

    def initiated(self, *, limit: int | None = None, pool: str | None = None, other_than: Collection[str] = (),
                  pool_timeout_ms: int = 0) -> list[CompactionInfo]:
        """Queue entries waiting for a worker, oldest first (the order `claim` takes them in).

        Args:
            pool: only the entries of this compaction pool (what a labelled pool's worker takes).
            other_than: only the entries of pools other than these (what the default pool's worker takes: "default"
                and every pool without workers of its own); an entry without a pool is in "default".
            pool_timeout_ms: with `other_than`, also the entries of those pools that have waited longer than this
                (Hive's hive.compactor.worker.pool.timeout: a stopped or starved pool holds nothing for ever); 0: never.

        Raises:
            UsageError: both `pool` and `other_than`, or a negative time-out.
        """
        if pool is not None and other_than:
            raise UsageError("list initiated compactions of one pool or of all pools but some, not both")
        if pool_timeout_ms < 0:
            raise UsageError(f"compaction pool time-out {pool_timeout_ms} ms is negative (0 turns it off)")
        cq = s.compaction_queue.c
        pool_name = sa.func.coalesce(cq.CQ_POOL_NAME, DEFAULT_POOL)
        where = [cq.CQ_STATE == CompactionState.INITIATED.value]
        if pool is not None:
            where.append(pool_name == pool)
        elif other_than:
            wanted: sa.ColumnElement[bool] = pool_name.not_in(sorted(set(other_than)))
            if pool_timeout_ms > 0:
                wanted = sa.or_(wanted, cq.CQ_ENQUEUE_TIME < self.db.clock.now_ms() - pool_timeout_ms)
            where.append(wanted)
        query = sa.select(s.compaction_queue).where(*where).order_by(cq.CQ_ENQUEUE_TIME, cq.CQ_ID)
        if limit is not None:
            query = query.limit(limit)
        return self.db.run("list initiated compactions",
                           lambda conn: [info_from_queue(row) for row in conn.execute(query).all()], write=False)

    def claim(self, *, worker_id: str, compaction_id: int | None = None, pool: str | None = None,
              worker_version: str | None = None) -> CompactionInfo | None:
        """initiated -> working: the given entry, or the oldest initiated one (of `pool`). None when there is none."""
        cq = s.compaction_queue.c

        def claim_(conn: Connection) -> CompactionInfo | None:
            if compaction_id is None:
                query = sa.select(cq.CQ_ID).where(cq.CQ_STATE == CompactionState.INITIATED.value)
                if pool:
                    query = query.where(cq.CQ_POOL_NAME == pool)
                query = query.order_by(cq.CQ_ENQUEUE_TIME, cq.CQ_ID).limit(1)
                if self.db.dialect == "postgresql":
                    query = query.with_for_update(skip_locked=True)
                target = conn.execute(query).scalar_one_or_none()
                if target is None:
                    return None
            else:
                target = compaction_id
            row = conn.execute(s.compaction_queue.update().where(
                cq.CQ_ID == target, cq.CQ_STATE == CompactionState.INITIATED.value).values(
                CQ_STATE=CompactionState.WORKING.value, CQ_WORKER_ID=worker_id[:128], CQ_WORKER_VERSION=worker_version,
                CQ_START=self.db.clock.now_ms()).returning(*s.compaction_queue.c)).first()
            if row is None and compaction_id is not None:
                current = self.get_in(conn, compaction_id)
                where = f"it is {current.state.display}" if current else "no such compaction"
                raise CompactionStateError(f"cannot claim compaction {compaction_id}: {where} (needs initiated)")
            return info_from_queue(row) if row is not None else None

        return self.db.run("claim a compaction", claim_)

    def open_compactor_txn(self, compaction_id: int, txns: TxnStore, *, worker_id: str, txn_type: TxnType,
                           agent_info: str) -> int:
        """Open the compactor's transaction and record it on its `working` entry in one database transaction, so no
        compactor transaction exists that no entry references (a worker killed in between would leave one that only
        hive.txn.timeout ends). The transaction names its table; the cleaner treats it as reading its partition only.

        Raises:
            CompactionStateError: the entry is not working, or another worker holds it now.
        """
        def open_(conn: Connection) -> int:
            info = self._require(conn, compaction_id, [CompactionState.WORKING], "open a transaction for")
            if info.worker_id != worker_id[:128]:
                raise CompactionStateError(f"cannot open a transaction for compaction {compaction_id}: worker "
                                           f"{info.worker_id!r} holds it now, not {worker_id!r}")
            [txn_id] = txns.open_in(conn, 1, txn_type=txn_type, agent_info=agent_info,
                                    tables=[(info.database, info.table)])
            conn.execute(s.compaction_queue.update().where(s.compaction_queue.c.CQ_ID == compaction_id)
                         .values(CQ_TXN_ID=txn_id))
            return txn_id

        return self.db.run(f"open the transaction of compaction {compaction_id}", open_)

    def set_compactor_txn(self, compaction_id: int, txn_id: int, highest_write_id: int, *,
                          worker_id: str | None = None) -> None:
        """Record the compactor's transaction and high watermark; a COMPACT component lets an abort clean its output.

        Raises:
            CompactionStateError: the entry is not working, or (given `worker_id`) another worker holds it now: a
                worker presumed dead and put back must not attach its transaction to the attempt that replaced it.
        """
        def set_(conn: Connection) -> None:
            info = self._require(conn, compaction_id, [CompactionState.WORKING], "attach a transaction to")
            if worker_id is not None and info.worker_id != worker_id[:128]:
                raise CompactionStateError(f"cannot attach transaction {txn_id} to compaction {compaction_id}: "
                                           f"worker {info.worker_id!r} holds it now, not {worker_id!r}")
            conn.execute(s.compaction_queue.update().where(s.compaction_queue.c.CQ_ID == compaction_id)
                         .values(CQ_TXN_ID=txn_id, CQ_HIGHEST_WRITE_ID=highest_write_id))
            conn.execute(s.txn_components.insert().values(
                TC_TXNID=txn_id, TC_DATABASE=info.database, TC_TABLE=info.table, TC_PARTITION=info.partition,
                TC_OPERATION_TYPE=Operation.COMPACT.value, TC_WRITEID=highest_write_id))

        self.db.run(f"attach transaction {txn_id} to compaction {compaction_id}", set_)

    def set_hadoop_job_id(self, compaction_id: int, job_id: str, *, worker_id: str) -> bool:
        """Record the job running a `working` entry (CQ_HADOOP_JOB_ID, SHOW COMPACTIONS' HadoopJobId: Hive's worker
        records its MapReduce job id; here the Spark application id). A compare-and-swap on the state and worker, so
        an attempt put back by housekeeping does not label the one that replaced it. Returns whether it was set."""
        cq = s.compaction_queue.c

        def set_(conn: Connection) -> bool:
            return conn.execute(s.compaction_queue.update().where(
                cq.CQ_ID == compaction_id, cq.CQ_STATE == CompactionState.WORKING.value,
                cq.CQ_WORKER_ID == worker_id[:128]).values(CQ_HADOOP_JOB_ID=job_id[:32])).rowcount == 1

        return self.db.run(f"set the job id of compaction {compaction_id}", set_)

    def mark_compacted(self, compaction_id: int) -> None:
        """working -> ready for cleaning, only while its compactor transaction is still open.

        The transaction's row is locked first (PostgreSQL), so a concurrent time-out either aborts it before (and this
        refuses) or after this change (and `fail_abandoned` finds the entry): no entry is left ready for cleaning with
        a transaction that can never commit.

        Raises:
            CompactionStateError: the entry is not working, or its compactor transaction is no longer open.
        """
        def mark(conn: Connection) -> None:
            info = self._require(conn, compaction_id, [CompactionState.WORKING], "mark compacted")
            if info.txn_id is not None:
                query = sa.select(s.txns.c.TXN_STATE).where(s.txns.c.TXN_ID == info.txn_id)
                if self.db.dialect == "postgresql":
                    query = query.with_for_update()
                if conn.execute(query).scalar_one_or_none() != TXN_OPEN:
                    raise CompactionStateError(f"cannot mark compaction {compaction_id} compacted: its compactor "
                                               f"transaction {info.txn_id} is no longer open (aborted or timed out)")
            conn.execute(s.compaction_queue.update().where(s.compaction_queue.c.CQ_ID == compaction_id)
                         .values(CQ_STATE=CompactionState.READY_FOR_CLEANING.value))

        self.db.run(f"mark compaction {compaction_id} compacted", mark,
                    done_check=self._in_state(compaction_id, CompactionState.READY_FOR_CLEANING))

    def _in_state(self, compaction_id: int, state: CompactionState):
        """A `done_check`: a move lost in flight took effect if the entry is in its target state now."""
        def check(conn: Connection):
            current = self.get_in(conn, compaction_id)
            return None if current is not None and current.state is state else NOT_DONE

        return check

    def _to_history(self, conn: Connection, info: CompactionInfo, state: CompactionState, message: str | None) -> None:
        conn.execute(s.completed_compactions.insert().values(history_values(info, state, self.db.clock.now_ms(), message)))
        conn.execute(s.compaction_queue.delete().where(s.compaction_queue.c.CQ_ID == info.id))

    def mark_cleaned(self, compaction_id: int) -> None:
        """ready for cleaning -> history succeeded; forget completed and aborted components it covered."""
        def mark(conn: Connection) -> None:
            info = self._require(conn, compaction_id, [CompactionState.READY_FOR_CLEANING], "mark cleaned")
            self._to_history(conn, info, CompactionState.SUCCEEDED, None)
            ctc, tc = s.completed_txn_components.c, s.txn_components.c
            same_ctc = [ctc.CTC_DATABASE == info.database, ctc.CTC_TABLE == info.table]
            if info.partition is not None:
                same_ctc.append(ctc.CTC_PARTITION == info.partition)
            if info.highest_write_id is not None:
                conn.execute(s.completed_txn_components.delete().where(*same_ctc,
                                                                       ctc.CTC_WRITEID <= info.highest_write_id))
                aborted = sa.select(s.txns.c.TXN_ID).where(s.txns.c.TXN_STATE == TXN_ABORTED)
                same_tc = [tc.TC_DATABASE == info.database, tc.TC_TABLE == info.table, tc.TC_TXNID.in_(aborted),
                           tc.TC_WRITEID <= info.highest_write_id]
                if info.partition is not None:
                    same_tc.append(tc.TC_PARTITION == info.partition)
                conn.execute(s.txn_components.delete().where(*same_tc))

        self.db.run(f"mark compaction {compaction_id} cleaned", mark,
                    done_check=self._in_state(compaction_id, CompactionState.SUCCEEDED))

    def fail_abandoned(self) -> list[CompactionInfo]:
        """Fail `ready for cleaning` entries whose compactor transaction ended without committing (Hive 4 fails them too).

        A worker that dies between marking its compaction compacted and committing leaves such an entry; once the
        transaction is aborted (hive.txn.timeout, ABORT TRANSACTIONS) it can never commit, its `_v<txn>` output is
        invisible and is removed as aborted by the cleaning of a later compaction, and the entry, left as it was,
        would hold back the cleaning of every later compaction of its partition. Each move is a compare-and-swap
        that re-checks, in the same statement, that the transaction is not open and never committed.
        Returns the entries moved to history as failed. The sweep is idempotent, so a commit whose outcome a lost
        connection left unknown (a metastore restart under the cleaner) is swept again, not raised: if it had taken
        effect, the second sweep finds nothing and returns [] (the entries are in the history all the same).
        """
        cq, t = s.compaction_queue.c, s.txns.c

        def fail(conn: Connection) -> list[CompactionInfo]:
            still_open = sa.exists().where(t.TXN_ID == cq.CQ_TXN_ID, t.TXN_STATE == TXN_OPEN)
            abandoned = (cq.CQ_STATE == CompactionState.READY_FOR_CLEANING.value, cq.CQ_TXN_ID.is_not(None),
                         cq.CQ_NEXT_TXN_ID.is_(None), ~still_open)
            failed = []
            for compaction_id in conn.execute(sa.select(cq.CQ_ID).where(*abandoned).order_by(cq.CQ_ID)).scalars().all():
                row = conn.execute(s.compaction_queue.update().where(cq.CQ_ID == compaction_id, *abandoned)
                                   .values(CQ_STATE=cq.CQ_STATE).returning(*s.compaction_queue.c)).first()
                if row is None:
                    continue
                info = info_from_queue(row)
                self._to_history(conn, info, CompactionState.FAILED,
                                 f"compactor transaction {info.txn_id} ended without committing after the compaction "
                                 "was marked ready for cleaning (its worker died or timed out); its output is "
                                 "invisible and is removed as aborted")
                failed.append(info)
            return failed

        return self.db.run("fail compactions whose compactor transaction aborted", fail, idempotent=True)

    def mark_failed(self, compaction_id: int, message: str) -> None:
        """initiated / working / ready for cleaning -> history failed, with the error."""
        def mark(conn: Connection) -> None:
            info = self._require(conn, compaction_id, QUEUE_STATES, "mark failed")
            self._to_history(conn, info, CompactionState.FAILED, message[:20000])

        self.db.run(f"mark compaction {compaction_id} failed", mark)

    def record_cleaner_error(self, compaction_id: int, message: str, *, retry_retention_ms: int = CLEANER_RETRY_RETENTION_MS,
                             max_attempts: int = CLEANER_MAX_ATTEMPTS) -> CompactionInfo:
        """A cleaning attempt failed: back off (Hive's TaskHandler.handleCleanerAttemptFailure), or give up.

        The entry stays `ready for cleaning` with CQ_RETRY_RETENTION = 2^attempts x `retry_retention_ms` (so
        `ready_to_clean` skips it that long) and the error recorded; when it had been retried `max_attempts` times
        already, it is marked failed with the error. Returns the entry as it is afterwards.

        Raises:
            CompactionStateError: the entry is not ready for cleaning (someone else finished it meanwhile).
        """
        cq = s.compaction_queue.c

        def record(conn: Connection) -> CompactionInfo:
            info = self._require(conn, compaction_id, [CompactionState.READY_FOR_CLEANING], "record a cleaning error for")
            attempts = 0
            if info.retry_retention_ms > 0 and retry_retention_ms > 0:
                attempts = int(math.log2(max(1, info.retry_retention_ms // retry_retention_ms))) + 1
            if attempts >= max_attempts:
                self._to_history(conn, info, CompactionState.FAILED,
                                 f"cleaning failed {attempts + 1} times (hive.compactor.cleaner.retry.maxattempts "
                                 f"{max_attempts} retries); last error: {message}"[:20000])
            else:
                conn.execute(s.compaction_queue.update().where(cq.CQ_ID == compaction_id).values(
                    CQ_RETRY_RETENTION=(2 ** attempts) * retry_retention_ms, CQ_ERROR_MESSAGE=message[:20000],
                    CQ_CLEANER_START=None))
            after = self.get_in(conn, compaction_id)
            assert after is not None, "the entry was just read and moved in this transaction"  # queue or history
            return after

        return self.db.run(f"record a cleaning error of compaction {compaction_id}", record)

    def mark_refused(self, compaction_id: int, message: str) -> None:
        """initiated / working / ready for cleaning -> history refused (nothing to compact, or NO_CLEANUP)."""
        def mark(conn: Connection) -> None:
            info = self._require(conn, compaction_id, QUEUE_STATES, "refuse")
            self._to_history(conn, info, CompactionState.REFUSED, message[:20000])

        self.db.run(f"refuse compaction {compaction_id}", mark)

    def record_did_not_initiate(self, database: str, table: str, partition: str | None,
                                compaction_type: CompactionType, message: str, *,
                                initiator_id: str | None = None, pool: str | None = None) -> int:
        """A history entry `did not initiate` for a candidate the initiator could not queue (drives failure limits)."""
        def record(conn: Connection) -> int:
            compaction_id = self._next_id(conn)
            now = self.db.clock.now_ms()
            conn.execute(s.completed_compactions.insert().values(
                CC_ID=compaction_id, CC_DATABASE=database.lower(), CC_TABLE=table.lower(), CC_PARTITION=partition,
                CC_STATE=CompactionState.DID_NOT_INITIATE.value, CC_TYPE=CompactionType(compaction_type).value,
                CC_ENQUEUE_TIME=now, CC_START=now, CC_END=now, CC_ERROR_MESSAGE=message[:20000],
                CC_INITIATOR_ID=initiator_id or self.db.identity.host, CC_POOL_NAME=pool or DEFAULT_POOL))
            return compaction_id

        return self.db.run(f"record a compaction of {database}.{table} that did not initiate", record)

    def abort_compactions(self, compaction_ids: Iterable[int], *, by: str | None = None,
                          working: bool = False) -> dict[int, str]:
        """ABORT COMPACTIONS: initiated entries move to history as aborted; the message per id says what happened.

        `by` names who aborted, in the entry's message ("Compaction Aborted by admin from the ACID view."; Hive's own
        text otherwise). With `working` (beyond Hive: the ACID view's Abort), a running compaction is aborted too: its
        entry moves to history and its compactor transaction is aborted in the same database transaction, so
        whatever it writes can never commit; its worker notices at its next heartbeat or state change, cancels its
        tasks and removes its output.
        """
        allowed = (CompactionState.INITIATED, CompactionState.WORKING) if working else (CompactionState.INITIATED,)
        message = f"Compaction Aborted by {by}." if by else ABORTED_BY_REQUEST
        results: dict[int, str] = {}
        for compaction_id in compaction_ids:
            def abort(conn: Connection, compaction_id=compaction_id) -> str:
                current = self.get_in(conn, compaction_id)
                if current is None:
                    return "No Such Compaction Id Available"
                if current.state not in allowed or current.end_ms is not None:
                    return f"Error while aborting compaction as compaction is in state-{current.state.display}"
                info = self._require(conn, compaction_id, allowed, "abort")
                if info.txn_id is not None and conn.execute(s.txns.update().where(
                        s.txns.c.TXN_ID == info.txn_id, s.txns.c.TXN_STATE == TXN_OPEN)
                        .values(TXN_STATE=TXN_ABORTED)).rowcount:
                    TxnStore.release(conn, info.txn_id)
                self._to_history(conn, info, CompactionState.ABORTED, message)
                return "Successfully aborted compaction"

            results[compaction_id] = self.db.run(f"abort compaction {compaction_id}", abort)
        return results

    def orphaned_compactor_txns(self, grace_ms: int = ORPHAN_GRACE_MS) -> list[int]:
        """Open compactor transactions that no queue entry references, older than `grace_ms`: their worker died
        before recording them (an older worker recorded its transaction after its lock and snapshot), or the entry
        moved on without them. One whose entry went to history in the last `grace_ms` is left to its worker.
        Housekeeping aborts them at once instead of waiting for hive.txn.timeout."""
        t, cq, cc = s.txns.c, s.compaction_queue.c, s.completed_compactions.c

        def find(conn: Connection) -> list[int]:
            now = self.db.clock.now_ms()
            referenced = sa.select(cq.CQ_TXN_ID).where(cq.CQ_TXN_ID.is_not(None))
            candidates = conn.execute(sa.select(t.TXN_ID).where(
                t.TXN_STATE == TXN_OPEN, t.TXN_TYPE.in_((int(TxnType.COMPACTION), int(TxnType.REBALANCE_COMPACTION))),
                t.TXN_STARTED < now - grace_ms, t.TXN_ID.not_in(referenced)).order_by(t.TXN_ID)).scalars().all()
            if not candidates:
                return []
            recent = set(conn.execute(sa.select(cc.CC_TXN_ID).where(
                cc.CC_TXN_ID.in_(candidates), cc.CC_END >= now - grace_ms)).scalars().all())
            return [txn_id for txn_id in candidates if txn_id not in recent]

        return self.db.run("find orphaned compactor transactions", find, write=False)

    def revert_timed_out_workers(self, timeout_ms: int) -> list[CompactionInfo]:
        """Put back `working` entries older than hive.compactor.worker.timeout (their worker died) as `initiated`,
        and at once those whose compactor transaction is no longer open (timed out or aborted: the worker stopped
        heartbeating it, and could not commit its work any more).

        Returns the reverted entries as they were just before (worker, compactor transaction), read in the same
        database transaction as the change, so the caller aborts exactly the transactions of the attempts it put back.
        """
        cq = s.compaction_queue.c

        def revert(conn: Connection) -> list[CompactionInfo]:
            cutoff = self.db.clock.now_ms() - timeout_ms
            txn_ended = sa.and_(cq.CQ_TXN_ID.is_not(None), ~sa.select(s.txns.c.TXN_ID).where(
                s.txns.c.TXN_ID == cq.CQ_TXN_ID, s.txns.c.TXN_STATE == TXN_OPEN).exists())
            query = (sa.select(s.compaction_queue)
                     .where(cq.CQ_STATE == CompactionState.WORKING.value, sa.or_(cq.CQ_START < cutoff, txn_ended))
                     .order_by(cq.CQ_ID))
            if self.db.dialect == "postgresql":
                query = query.with_for_update()
            reverted = []
            for info in [info_from_queue(row) for row in conn.execute(query).all()]:
                changed = conn.execute(s.compaction_queue.update().where(
                    cq.CQ_ID == info.id, cq.CQ_STATE == CompactionState.WORKING.value, cq.CQ_START == info.start_ms)
                    .values(CQ_STATE=CompactionState.INITIATED.value, CQ_WORKER_ID=None, CQ_START=None,
                            CQ_TXN_ID=None, CQ_HIGHEST_WRITE_ID=None)).rowcount
                if changed:
                    reverted.append(info)
            return reverted

        return self.db.run("revert timed-out compaction workers", revert)

    def ready_to_clean(self, *, retention_ms: int = 0) -> list[CompactionInfo]:
        """Entries the cleaner may work on now (Hive's findReadyToClean), honouring reader leases per table.

        Ready means: compacted, its retention time passed, every transaction open when it committed that may read
        its table has finished (Hive 4's MIN_HISTORY_WRITE_ID rule, `holds`: a transaction that named other tables
        only does not hold it back, a compactor's holds only its own partition), no reader lease of its table took its snapshot before the compaction became visible, and it has the lowest
        highest-write-id of its partition's ready entries.
        """
        cq = s.compaction_queue.c

        def find(conn: Connection) -> list[CompactionInfo]:
            now = self.db.clock.now_ms()
            held = holds.watermarks(conn)
            rows = conn.execute(sa.select(s.compaction_queue).where(
                cq.CQ_STATE == CompactionState.READY_FOR_CLEANING.value,
                cq.CQ_TYPE != CompactionType.ABORT_TXN_CLEANUP.value).order_by(cq.CQ_ID)).all()
            leases = conn.execute(sa.select(s.reader_leases.c.RL_DATABASE, s.reader_leases.c.RL_TABLE,
                                            s.reader_leases.c.RL_VALID_TXNS)).all()
            lease_txns: dict[tuple[str, str], list[ValidTxnList]] = {}
            for database, table, text in leases:
                lease_txns.setdefault((database, table), []).append(ValidTxnList.parse(text))
            lowest: dict[tuple, int] = {}
            for row in rows:
                key = (row.CQ_DATABASE, row.CQ_TABLE, row.CQ_PARTITION)
                lowest[key] = min(lowest.get(key, row.CQ_HIGHEST_WRITE_ID or 0), row.CQ_HIGHEST_WRITE_ID or 0)
            ready = []
            for row in rows:
                info = info_from_queue(row)
                if (info.highest_write_id or 0) != lowest[(info.database, info.table, info.partition)]:
                    continue
                if info.commit_ms is not None and info.commit_ms > now - info.retry_retention_ms - retention_ms:
                    continue
                if info.txn_id is not None and info.next_txn_id is None:
                    continue  # the compactor's transaction has not committed (it may still abort)
                if held.holds(info.database, info.table, info.partition, info.next_txn_id):
                    continue  # a transaction open when it committed may read its table (`holds`)
                if info.txn_id and any(not snapshot.is_valid(info.txn_id)
                                       for snapshot in lease_txns.get((info.database, info.table), [])):
                    continue
                ready.append(info)
            return ready

        return self.db.run("find compactions ready to clean", find, write=False, snapshot=True)

    def show(self, *, compaction_id: int | None = None, database: str | None = None, table: str | None = None,
             partition: str | None = None, pool: str | None = None, compaction_type: CompactionType | None = None,
             state: CompactionState | None = None, limit: int | None = None) -> list[CompactionInfo]:
        """SHOW COMPACTIONS (`compaction_history.show`)."""
        return compaction_history.show(self.db, compaction_id=compaction_id, database=database, table=table,
                                       partition=partition, pool=pool, compaction_type=compaction_type, state=state,
                                       limit=limit)

    def purge_history(self, retention: HistoryRetention = HistoryRetention(), *, since_ms: int | None = None) -> int:
        """Purge old history entries (`compaction_history.purge`)."""
        return compaction_history.purge(self.db, retention, since_ms=since_ms)
