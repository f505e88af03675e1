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

from acid_core.compaction.plan import is_output_of_attempt
from acid_core.errors import AcidError, NoSuchTxnError, TxnStateError, UsageError
from acid_core.fs import ensure_inside
from acid_core.locations import data_location
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.compactions import CompactionInfo, CompactionState, HistoryRetention
from acid_core.metastore.txns import TXN_ABORTED, TXN_OPEN
from acid_core.table_write import remove_abandoned_staging

DEFAULT_WORKER_TIMEOUT_MS = 86_400_000  # hive.compactor.worker.timeout
DEFAULT_LEASE_TIMEOUT_MS = 300_000  # like hive.txn.timeout, for reader leases


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
    problems: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether this run changed anything in the metastore or on the filesystem."""
        return bool(self.timed_out_txns or self.failed_compactions or self.reverted_compactions or self.aborted_compactor_txns
                    or self.removed_directories or self.removed_staging or self.expired_leases or self.purged_history
                    or self.removed_aborted_txns or self.removed_write_set_rows)

    def summary(self) -> str:
        """One line for a log."""
        return (f"timed out {len(self.timed_out_txns)} transactions, failed {len(self.failed_compactions)} "
                f"compactions whose compactor transaction aborted after they were compacted, reverted {len(self.reverted_compactions)} "
                f"compactions (aborted {len(self.aborted_compactor_txns)} compactor transactions, removed "
                f"{len(self.removed_directories)} hidden directories), removed {len(self.removed_staging)} staging "
                f"directories of killed writes, expired {len(self.expired_leases)} reader "
                f"leases, purged {self.purged_history} history entries, removed {len(self.removed_aborted_txns)} "
                f"empty aborted transactions and {self.removed_write_set_rows} WRITE_SET rows"
                + (f"; {len(self.problems)} problems" if self.problems else ""))


def housekeep(metastore: Metastore, *, worker_timeout_ms: int = DEFAULT_WORKER_TIMEOUT_MS,
              lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS, history: HistoryRetention = HistoryRetention(),
              clean_empty_aborted: bool = True) -> HousekeepingReport:
    """Run every housekeeping step once, in Hive's order, and say what changed.

    1. abort transactions (and release their locks) whose heartbeat is older than hive.txn.timeout, then fail
       `ready for cleaning` compactions whose compactor transaction so ended without committing;
    2. put `working` compactions older than `worker_timeout_ms` back to `initiated`, abort their compactor
       transactions if still open and remove their hidden result directories (`.<name>.tmp-c<id>`), nothing else;
       remove the staging directories (`.<name>.tmp-t<txn>`) of writes whose transaction is no longer open (not in
       Hive: a killed write's leftovers);
    3. expire reader leases not heartbeated for `lease_timeout_ms`;
    4. purge compaction history beyond `history`;
    5. forget aborted transactions that wrote nothing (if `clean_empty_aborted`) and WRITE_SET rows no open or
       future transaction can conflict with.

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
    staging, staging_problems = remove_abandoned_staging(metastore)
    expired = metastore.leases.expire(lease_timeout_ms)
    purged = metastore.compactions.purge_history(history)
    removed_txns = metastore.db.run("remove empty aborted transactions", _remove_empty_aborted) \
        if clean_empty_aborted else []
    write_set_rows = metastore.db.run("garbage-collect WRITE_SET", _collect_write_set)
    return HousekeepingReport(
        timed_out_txns=tuple(timed_out), failed_compactions=tuple(entry.id for entry in failed),
        reverted_compactions=tuple(reverted), aborted_compactor_txns=tuple(aborted),
        removed_directories=tuple(removed), removed_staging=tuple(staging), expired_leases=tuple(expired), purged_history=purged,
        removed_aborted_txns=tuple(removed_txns), removed_write_set_rows=write_set_rows, problems=tuple(problems + staging_problems))


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
    """Delete the hidden result directories (`.<name>_v<txn>.tmp-c<id>`) of the reverted attempt in its partition,
    and nothing else: not those of a newer attempt that claimed the entry meanwhile (they carry its transaction).

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
        if child.is_dir and child.name.startswith(".") and is_output_of_attempt(child.name, entry.id, entry.txn_id):
            fs.delete_dir(ensure_inside(location, child.path, fs=fs))
            removed.append(child.path)
    return removed


def _remove_empty_aborted(conn: Connection) -> list[int]:
    """Aborted transactions with no TXN_COMPONENTS and no write id are indistinguishable from committed empty ones
    (Hive's cleanEmptyAbortedAndCommittedTxns). One that got a write id stays: its write id must stay invalid."""
    t = s.txns.c
    removed = conn.execute(s.txns.delete().where(
        t.TXN_STATE == TXN_ABORTED,
        ~sa.exists().where(s.txn_components.c.TC_TXNID == t.TXN_ID),
        ~sa.exists().where(s.txn_to_write_id.c.T2W_TXNID == t.TXN_ID)).returning(t.TXN_ID)).scalars().all()
    return sorted(removed)


def _collect_write_set(conn: Connection) -> int:
    """WRITE_SET rows committed below the lowest open transaction (else below NEXT_TXN_ID) can conflict with no one:
    a transaction conflicts only with commits at or above its own id (Hive's performWriteSetGC)."""
    lowest_open = sa.select(sa.func.min(s.txns.c.TXN_ID)).where(s.txns.c.TXN_STATE == TXN_OPEN).scalar_subquery()
    following = sa.select(s.next_txn_id.c.NTXN_NEXT).scalar_subquery()
    return conn.execute(s.write_set.delete().where(
        s.write_set.c.WS_COMMIT_ID < sa.func.coalesce(lowest_open, following))).rowcount


__all__ = ["DEFAULT_LEASE_TIMEOUT_MS", "DEFAULT_WORKER_TIMEOUT_MS", "HousekeepingReport", "housekeep"]
