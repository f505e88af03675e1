"""What an operator should be told about, decided from the metastore; sending it is the orchestrator's business.

Three alerts, each an `Alert` value: a compaction failed; a partition's failures reached
`failed.compacts.threshold` (the initiator skips it until `failed.retry.time` passes, Hive's
checkFailedCompactions); an entry has been `working` longer than a warning age (its worker may be stuck, long before
housekeeping's `hive.compactor.worker.timeout` puts it back). Cost: one indexed history query of at most `threshold`
rows per failed compaction; one query of the queue per stuck check.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from acid_core.compaction.codes import CompactionState
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.compactions import CompactionInfo, _from_queue

COMPACTION_FAILED = "compaction_failed"
FAILED_THRESHOLD_REACHED = "failed_threshold_reached"
WORKING_TOO_LONG = "working_too_long"


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert: its kind (the constants above), a one-line summary, and the compaction it is about."""

    kind: str
    summary: str
    compaction_id: int
    database: str
    table: str
    partition: str | None

    def as_dict(self) -> dict:
        return {"kind": self.kind, "summary": self.summary, "compaction_id": self.compaction_id,
                "database": self.database, "table": self.table, "partition": self.partition}


def _where(entry: CompactionInfo) -> str:
    return f"{entry.database}.{entry.table}" + (f" partition {entry.partition}" if entry.partition else "")


def compaction_failed(entry: CompactionInfo, message: str) -> Alert:
    return Alert(COMPACTION_FAILED, f"compaction {entry.id} ({entry.type.display.lower()}) of {_where(entry)} "
                 f"failed: {message}", entry.id, entry.database, entry.table, entry.partition)


def consecutive_failures(metastore: Metastore, database: str, table: str, partition: str | None, *,
                         limit: int) -> int:
    """How many of the partition's newest succeeded-or-failed history entries (at most `limit`) failed in a row:
    the count Hive's checkFailedCompactions compares with failed.compacts.threshold (by the history's index)."""
    cc = s.completed_compactions.c
    states = metastore.db.run("read compaction history", lambda conn: conn.execute(
        sa.select(cc.CC_STATE).where(
            cc.CC_DATABASE == database, cc.CC_TABLE == table, s.same_partition(cc.CC_PARTITION, partition),
            cc.CC_STATE.in_((CompactionState.SUCCEEDED.value, CompactionState.FAILED.value)))
        .order_by(cc.CC_ID.desc()).limit(limit)).scalars().all(), write=False)
    streak = 0
    for state in states:
        if state != CompactionState.FAILED.value:
            break
        streak += 1
    return streak


def failed_threshold_reached(metastore: Metastore, entry: CompactionInfo, *, threshold: int) -> Alert | None:
    """After `entry` failed: an alert when its partition's last `threshold` compactions all failed (the initiator
    now skips the partition), else None. `threshold` <= 0 turns the check off, as in Hive."""
    if threshold <= 0:
        return None
    if consecutive_failures(metastore, entry.database, entry.table, entry.partition, limit=threshold) < threshold:
        return None
    return Alert(FAILED_THRESHOLD_REACHED, f"{_where(entry)}: the last {threshold} compactions failed "
                 f"(failed.compacts.threshold {threshold}); the initiator skips it until failed.retry.time passes "
                 f"or a compaction is requested by hand (latest: compaction {entry.id})",
                 entry.id, entry.database, entry.table, entry.partition)


def working_too_long(metastore: Metastore, *, warning_ms: int) -> list[Alert]:
    """An alert for each entry `working` for longer than `warning_ms` (oldest first)."""
    cq = s.compaction_queue.c

    def read(conn) -> list[CompactionInfo]:
        cutoff = metastore.db.clock.now_ms() - warning_ms
        return [_from_queue(row) for row in conn.execute(sa.select(s.compaction_queue).where(
            cq.CQ_STATE == CompactionState.WORKING.value, cq.CQ_START < cutoff).order_by(cq.CQ_START)).all()]

    now = metastore.db.clock.now_ms()
    return [Alert(WORKING_TOO_LONG, f"compaction {entry.id} ({entry.type.display.lower()}) of {_where(entry)} has "
                  f"been working for {(now - (entry.start_ms or now)) / 60000:.0f} min (worker {entry.worker_id}, "
                  f"job {entry.hadoop_job_id or 'unknown'})", entry.id, entry.database, entry.table, entry.partition)
            for entry in metastore.db.run("find long-running compactions", read, write=False)]
