"""Hive's metastore housekeeping in one call, free of any scheduler: time-outs, dead workers, leases, history, garbage.

Reproduces Hive's AcidHouseKeeperService (performTimeOuts, performWriteSetGC), AcidCompactionHouseKeeperService
(purgeCompactionHistory), AcidTxnCleanerService (cleanEmptyAbortedAndCommittedTxns) and the Initiator's
revertTimedoutWorkers. Every step is a compare-and-swap or an idempotent delete, so two housekeepers may run at
once and a second run right after the first changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core import settings
from acid_core.compaction.plan import is_output_of_attempt
from acid_core.errors import AcidError, NoSuchTxnError, TxnStateError, UsageError
from acid_core.metastore import Metastore, holds
from acid_core.metastore import schema as s
from acid_core.metastore.codes import CompactionState
from acid_core.metastore.compaction_history import HistoryRetention
from acid_core.metastore.compaction_rows import CompactionInfo
from acid_core.metastore.locations import data_location
from acid_core.metastore.txns import TXN_ABORTED, TXN_OPEN, fold_completed_components
from acid_core.storage.fs import ensure_inside
from acid_core.write.table_write import remove_abandoned_staging

DEFAULT_WORKER_TIMEOUT_MS = settings.WORKER_TIMEOUT.default_ms  # hive.compactor.worker.timeout
DEFAULT_LEASE_TIMEOUT_MS = settings.LEASE_TIMEOUT.default_ms  # like hive.txn.timeout, for reader leases
TRIM_BATCH = 100_000  # TXN_TO_WRITE_ID rows trimmed per run at most
# Partitions with commits (compaction history entries) this recent get their COMPLETED_TXN_COMPONENTS collapsed
# (history purged): a run looks at what changed lately, by index, not at the whole history.
COLLAPSE_WINDOW_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class HousekeepingReport:
    """What one housekeeping run changed, step by step."""

    timed_out_txns: tuple[int, ...] = ()
    failed_compactions: tuple[int, ...] = ()
    reverted_compactions: tuple[int, ...] = ()
    aborted_compactor_txns: tuple[int, ...] = ()
    removed_directories: tuple[str, ...] = ()
    removed_staging: tuple[str, ...] = ()
    expired_leases: tuple[int, ...] = ()
    purged_history: int = 0
    removed_aborted_txns: tuple[int, ...] = ()
    removed_write_set_rows: int = 0
    trimmed_write_id_rows: int = 0
    collapsed_completed_rows: int = 0
    problems: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether this run changed anything in the metastore or on the filesystem."""
        return bool(self.timed_out_txns or self.failed_compactions or self.reverted_compactions or self.aborted_compactor_txns
                    or self.removed_directories or self.removed_staging or self.expired_leases or self.purged_history
                    or self.removed_aborted_txns or self.removed_write_set_rows or self.trimmed_write_id_rows
                    or self.collapsed_completed_rows)

    def summary(self) -> str:
        """One line for a log."""
        return (f"timed out {len(self.timed_out_txns)} transactions, failed {len(self.failed_compactions)} "
                f"compactions whose compactor transaction aborted after they were compacted, reverted {len(self.reverted_compactions)} "
                f"compactions (aborted {len(self.aborted_compactor_txns)} compactor transactions, removed "
                f"{len(self.removed_directories)} hidden directories), removed {len(self.removed_staging)} staging "
                f"directories of killed writes, expired {len(self.expired_leases)} reader "
                f"leases, purged {self.purged_history} history entries, removed {len(self.removed_aborted_txns)} "
                f"aborted transactions with nothing left to clean, {self.removed_write_set_rows} WRITE_SET rows, "
                f"{self.trimmed_write_id_rows} TXN_TO_WRITE_ID rows and {self.collapsed_completed_rows} duplicate "
                "COMPLETED_TXN_COMPONENTS rows"
                + (f"; {len(self.problems)} problems" if self.problems else ""))


def housekeep(metastore: Metastore, *, worker_timeout_ms: int = DEFAULT_WORKER_TIMEOUT_MS,
              lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS, history: HistoryRetention = HistoryRetention(),
              clean_empty_aborted: bool = True) -> HousekeepingReport:
    """Run every housekeeping step once, in Hive's order, and say what changed.

    1. abort transactions (and release their locks) whose heartbeat is older than hive.txn.timeout, then fail
       `ready for cleaning` compactions whose compactor transaction so ended without committing;
    2. put `working` compactions older than `worker_timeout_ms`, or whose compactor transaction ended (timed out),
       back to `initiated`, abort their compactor transactions if still open and remove their hidden result
       directories (`.<name>.tmp-c<id>`), nothing else; abort compactor transactions no queue entry references
       (`orphaned_compactor_txns`, after 30 s) and forget the tables of ended transactions (MIN_HISTORY_WRITE_ID);
       remove the staging directories (`.<name>.tmp-t<txn>`) of writes whose transaction is no longer open (not in
       Hive: a killed write's leftovers);
    3. expire reader leases not heartbeated for `lease_timeout_ms`;
    4. purge compaction history beyond `history`;
    5. forget what no snapshot can need (Hive's performWriteSetGC, cleanEmptyAbortedAndCommittedTxns,
       cleanTxnToWriteIdTable and removeDuplicateCompletedTxnComponents): WRITE_SET rows no open or future
       transaction can conflict with; aborted transactions with nothing left to clean (if `clean_empty_aborted`,
       `_forget_aborted`); TXN_TO_WRITE_ID rows below the lowest open or aborted transaction; COMPLETED_TXN_COMPONENTS
       rows that a newer write id of the same partition stands for. Each is a delete by index, so a run costs what it
       removes plus the open and aborted transactions, not the history.

    Raises:
        UsageError: a timeout is not positive (it would revert live workers or drop live leases).
        MetastoreError: the metastore failed during a step; steps already done stay done, rerun to finish.
    """
    for name, value in (("worker_timeout_ms", worker_timeout_ms), ("lease_timeout_ms", lease_timeout_ms)):
        if value <= 0:
            raise UsageError(f"{name} must be positive, got {value!r}: a zero timeout would take work away from "
                             "live workers and readers")
    timed_out = metastore.txns.perform_timeouts()
    failed = metastore.compactions.fail_abandoned()
    reverted, aborted, removed, problems = _revert_dead_workers(metastore, worker_timeout_ms)
    for txn_id in metastore.compactions.orphaned_compactor_txns():
        try:
            metastore.txns.abort(txn_id)
            aborted.append(txn_id)
        except (TxnStateError, NoSuchTxnError):
            pass  # its worker ended it meanwhile
    metastore.db.run("forget the tables of ended transactions", holds.purge_ended)
    staging, staging_problems = remove_abandoned_staging(metastore)
    expired = metastore.leases.expire(lease_timeout_ms)
    purged = metastore.compactions.purge_history(history, since_ms=metastore.db.clock.now_ms() - COLLAPSE_WINDOW_MS)
    write_set_rows = metastore.db.run("garbage-collect WRITE_SET", _collect_write_set)
    cutoff = metastore.db.clock.now_ms() - metastore.txns.txn_timeout_ms
    removed_txns = metastore.db.run("forget aborted transactions with nothing left to clean",
                                    lambda conn: _forget_aborted(conn, cutoff)) if clean_empty_aborted else []
    trimmed = metastore.db.run("trim TXN_TO_WRITE_ID", _trim_write_id_history)
    collapsed = metastore.db.run("collapse COMPLETED_TXN_COMPONENTS", lambda conn: _collapse_completed(
        conn, metastore.db.clock.now_ms() - COLLAPSE_WINDOW_MS))
    return HousekeepingReport(
        timed_out_txns=tuple(timed_out), failed_compactions=tuple(entry.id for entry in failed),
        reverted_compactions=tuple(reverted), aborted_compactor_txns=tuple(aborted),
        removed_directories=tuple(removed), removed_staging=tuple(staging), expired_leases=tuple(expired), purged_history=purged,
        removed_aborted_txns=tuple(removed_txns), removed_write_set_rows=write_set_rows, trimmed_write_id_rows=trimmed,
        collapsed_completed_rows=collapsed, problems=tuple(problems + staging_problems))


def _revert_dead_workers(metastore: Metastore, worker_timeout_ms: int
                         ) -> tuple[list[int], list[int], list[str], list[str]]:
    """Step 2. Each reverted entry comes back as it was, with the compactor transaction of the attempt put back."""
    reverted = metastore.compactions.revert_timed_out_workers(worker_timeout_ms)
    aborted: list[int] = []
    removed: list[str] = []
    problems: list[str] = []
    for entry in reverted:
        if entry.txn_id is not None:
            try:
                metastore.txns.abort(entry.txn_id)
                aborted.append(entry.txn_id)
            except (TxnStateError, NoSuchTxnError):
                pass  # timed out in step 1 already, or gone
        try:
            removed.extend(_remove_hidden_results(metastore, entry))
        except AcidError as exc:
            problems.append(f"compaction {entry.id}: hidden result directories not removed: {exc}")
    return [entry.id for entry in reverted], aborted, removed, problems


def _remove_hidden_results(metastore: Metastore, entry: CompactionInfo) -> list[str]:
    """Delete the result directories of the reverted attempt in its partition (hidden `.<name>_v<txn>.tmp-c<id>`, or
    on an object store `<name>_v<txn>`: its transaction was aborted just before, so no reader uses them), and nothing
    else: not those of a newer attempt that claimed the entry meanwhile (they carry its transaction).

    Skipped when a new worker claimed the entry meanwhile (it removes leftovers itself before writing).
    """
    current = metastore.compactions.get(entry.id)
    if current is None or current.state is not CompactionState.INITIATED:
        return []
    if entry.txn_id is None:
        return []  # the attempt died before it had a transaction, so before it wrote anything
    where = data_location(metastore.catalog.get_table(entry.database, entry.table), entry.partition)
    fs, location = where.fs, where.path
    removed = []
    for child in fs.list_dir(location, missing_ok=True):
        if child.is_dir and is_output_of_attempt(child.name, entry.id, entry.txn_id):  # hidden, or final names
            fs.delete_dir(ensure_inside(location, child.path, fs=fs))
            removed.append(child.path)
    return removed


def _forget_aborted(conn: Connection, cutoff_ms: int) -> list[int]:
    """Aborted transactions with nothing left to clean (Hive's cleanEmptyAbortedAndCommittedTxns): no TXN_COMPONENTS
    (never recorded a write, or the cleaner removed what it wrote: `mark_cleaned` drops the components up to the
    compaction's highest write id) and no staging record (housekeeping removed its staging directories). Its write ids
    then name no row on disk, so they may turn valid. One that holds a write id goes only once its last heartbeat is
    older than hive.txn.timeout (`cutoff_ms`): a writer that was aborted while still running has stopped by then
    (its heartbeat and commit fail, and it removes what it published)."""
    t = s.txns.c
    quiet = sa.or_(t.TXN_LAST_HEARTBEAT < cutoff_ms, ~sa.exists().where(s.txn_to_write_id.c.T2W_TXNID == t.TXN_ID))
    removed = conn.execute(s.txns.delete().where(
        t.TXN_STATE == TXN_ABORTED,
        ~sa.exists().where(s.txn_components.c.TC_TXNID == t.TXN_ID),
        ~sa.exists().where(s.txn_staging.c.TS_TXNID == t.TXN_ID), quiet).returning(t.TXN_ID)).scalars().all()
    return sorted(removed)


def _lowest_uncommitted(conn: Connection) -> int:
    """Hive's min_uncommitted_txnid: every transaction below it committed (or was an aborted one now forgotten), so
    every snapshot sees all of them (a snapshot's high watermark is at least its own open transaction)."""
    t = s.txns.c
    candidates = [conn.execute(sa.select(s.next_txn_id.c.NTXN_NEXT)).scalar_one(),
                  conn.execute(sa.select(sa.func.min(s.write_set.c.WS_COMMIT_ID))).scalar_one_or_none(),
                  conn.execute(sa.select(sa.func.min(t.TXN_ID)).where(t.TXN_STATE.in_((TXN_OPEN, TXN_ABORTED))))
                  .scalar_one_or_none()]
    return min(value for value in candidates if value is not None)


def _trim_write_id_history(conn: Connection) -> int:
    """Hive's cleanTxnToWriteIdTable: TXN_TO_WRITE_ID rows of transactions below the lowest uncommitted one. A
    snapshot finds its high watermark from NEXT_WRITE_ID and its exceptions from the rows that stay, so nothing it
    computes changes; NEXT_WRITE_ID keeps write ids from repeating. At most about `batch` rows go per run (the
    oldest, found by index; TRIM_BATCH), so the first run on a long history stays short and later runs
    finish it."""
    t2w = s.txn_to_write_id.c
    below = _lowest_uncommitted(conn)
    cut = conn.execute(sa.select(t2w.T2W_TXNID).where(t2w.T2W_TXNID < below).order_by(t2w.T2W_TXNID)
                       .offset(TRIM_BATCH).limit(1)).scalar_one_or_none()
    return conn.execute(s.txn_to_write_id.delete().where(
        t2w.T2W_TXNID < (cut if cut is not None else below))).rowcount


def _collapse_completed(conn: Connection, since_ms: int, *, limit: int = 1000) -> int:
    """Hive's removeDuplicateCompletedTxnComponents: in each partition with several COMPLETED_TXN_COMPONENTS rows,
    the row of the highest write id stands for the others (it takes their newest time and their update/delete
    flag). Every commit already collapses its own partition's rows, so only partitions with commits since
    `since_ms` are looked at (by index), at most `limit` of them per run; older leftovers go with the partition's
    next commit or compaction."""
    ctc = s.completed_txn_components.c
    # newest first, in timestamp order (a DISTINCT here would make SQLite scan the partition index instead)
    rows = conn.execute(sa.select(ctc.CTC_DATABASE, ctc.CTC_TABLE, ctc.CTC_PARTITION).where(
        ctc.CTC_TIMESTAMP >= since_ms).order_by(ctc.CTC_TIMESTAMP.desc()).limit(4 * limit)).all()
    recent = list(dict.fromkeys(tuple(row) for row in rows))[:limit]
    removed = 0
    for database, table, partition in recent:
        lowest, write_id, newest = conn.execute(sa.select(
            sa.func.min(ctc.CTC_WRITEID), sa.func.max(ctc.CTC_WRITEID), sa.func.max(ctc.CTC_TIMESTAMP)).where(
            ctc.CTC_DATABASE == database, ctc.CTC_TABLE == table, s.same_partition(ctc.CTC_PARTITION, partition),
            ctc.CTC_WRITEID.is_not(None))).one()
        if lowest is not None and lowest < write_id:
            removed += fold_completed_components(conn, database, table, partition, write_id, newest_ms=newest)
    return removed


def _collect_write_set(conn: Connection) -> int:
    """WRITE_SET rows committed below the lowest open transaction (else below NEXT_TXN_ID) can conflict with no one:
    a transaction conflicts only with commits at or above its own id (Hive's performWriteSetGC)."""
    lowest_open = sa.select(sa.func.min(s.txns.c.TXN_ID)).where(s.txns.c.TXN_STATE == TXN_OPEN).scalar_subquery()
    following = sa.select(s.next_txn_id.c.NTXN_NEXT).scalar_subquery()
    return conn.execute(s.write_set.delete().where(
        s.write_set.c.WS_COMMIT_ID < sa.func.coalesce(lowest_open, following))).rowcount


__all__ = ["DEFAULT_LEASE_TIMEOUT_MS", "DEFAULT_WORKER_TIMEOUT_MS", "HousekeepingReport", "housekeep"]
