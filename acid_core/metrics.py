"""Hive's ACID metrics (AcidMetricsService / MetricsConstants, Hive 4) computed from the metastore.

`collect` reads the queue, the open and aborted transactions and the locks with a few bounded, indexed statements
(COMPACTION_QUEUE holds only pending work; TXNS is searched by its state index; HIVE_LOCKS holds only live locks),
never a history table; `gauges` names the values as the README's "Metrics and alerts" table does. Emitting them
(StatsD, OpenTelemetry) is the orchestrator's business (`plugins/acid_plugin/metrics.py`).
Cost: four aggregate statements, whatever the size of the history.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core.compaction.codes import CompactionState
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.txns import TXN_ABORTED, TXN_OPEN

PREFIX = "acid"  # every metric name starts with it (after the deployment's own [metrics] statsd_prefix)


@dataclass(frozen=True, slots=True)
class AcidMetrics:
    """One reading of the metastore's ACID health; ages in seconds, 0 when there is nothing of that kind."""

    num_initiated: int = 0
    num_working: int = 0
    num_ready_for_cleaning: int = 0
    oldest_enqueue_age_s: float = 0.0  # oldest `initiated` entry, since it was queued
    oldest_working_age_s: float = 0.0  # oldest `working` entry, since its worker claimed it
    oldest_cleaning_age_s: float = 0.0  # oldest `ready for cleaning` entry, since its compaction committed
    num_open_txns: int = 0
    oldest_open_txn_age_s: float = 0.0
    num_aborted_txns: int = 0
    oldest_aborted_txn_age_s: float = 0.0
    num_locks: int = 0
    oldest_lock_age_s: float = 0.0


def _age_s(now_ms: int, since_ms: int | None) -> float:
    return max(0.0, (now_ms - since_ms) / 1000) if since_ms is not None else 0.0


def collect(metastore: Metastore, *, now_ms: int | None = None) -> AcidMetrics:
    """Read the metastore's ACID metrics in one read-only snapshot."""
    cq, t, hl = s.compaction_queue.c, s.txns.c, s.hive_locks.c
    working_or_later = {CompactionState.WORKING.value: cq.CQ_START,
                        CompactionState.READY_FOR_CLEANING.value: sa.func.coalesce(cq.CQ_COMMIT_TIME, cq.CQ_START)}

    def read(conn: Connection) -> AcidMetrics:
        now = now_ms if now_ms is not None else metastore.db.clock.now_ms()
        counts: dict[str, int] = {}
        oldest: dict[str, int | None] = {}
        for state, since in ((CompactionState.INITIATED.value, cq.CQ_ENQUEUE_TIME), *working_or_later.items()):
            count, first = conn.execute(sa.select(sa.func.count(), sa.func.min(since))
                                        .where(cq.CQ_STATE == state)).one()
            counts[state], oldest[state] = count, first
        txns = {state: conn.execute(sa.select(sa.func.count(), sa.func.min(t.TXN_STARTED))
                                    .where(t.TXN_STATE == state)).one() for state in (TXN_OPEN, TXN_ABORTED)}
        locks, first_lock = conn.execute(sa.select(sa.func.count(), sa.func.min(
            sa.func.coalesce(hl.HL_ACQUIRED_AT, hl.HL_LAST_HEARTBEAT)))).one()
        initiated, working = CompactionState.INITIATED.value, CompactionState.WORKING.value
        ready = CompactionState.READY_FOR_CLEANING.value
        return AcidMetrics(
            num_initiated=counts[initiated], num_working=counts[working], num_ready_for_cleaning=counts[ready],
            oldest_enqueue_age_s=_age_s(now, oldest[initiated]), oldest_working_age_s=_age_s(now, oldest[working]),
            oldest_cleaning_age_s=_age_s(now, oldest[ready]),
            num_open_txns=txns[TXN_OPEN][0], oldest_open_txn_age_s=_age_s(now, txns[TXN_OPEN][1]),
            num_aborted_txns=txns[TXN_ABORTED][0], oldest_aborted_txn_age_s=_age_s(now, txns[TXN_ABORTED][1]),
            num_locks=locks, oldest_lock_age_s=_age_s(now, first_lock))

    return metastore.db.run("read ACID metrics", read, write=False, snapshot=True)


def gauges(metrics: AcidMetrics) -> dict[str, float]:
    """The gauges of a reading by metric name (Hive's MetricsConstants names, under `acid.`)."""
    return {
        f"{PREFIX}.compaction_num_initiated": metrics.num_initiated,
        f"{PREFIX}.compaction_num_working": metrics.num_working,
        f"{PREFIX}.compaction_num_ready_for_cleaning": metrics.num_ready_for_cleaning,
        f"{PREFIX}.compaction_oldest_enqueue_age_in_sec": metrics.oldest_enqueue_age_s,
        f"{PREFIX}.compaction_oldest_working_age_in_sec": metrics.oldest_working_age_s,
        f"{PREFIX}.compaction_oldest_cleaning_age_in_sec": metrics.oldest_cleaning_age_s,
        f"{PREFIX}.num_open_transactions": metrics.num_open_txns,
        f"{PREFIX}.oldest_open_txn_age_in_sec": metrics.oldest_open_txn_age_s,
        f"{PREFIX}.num_aborted_transactions": metrics.num_aborted_txns,
        f"{PREFIX}.oldest_aborted_txn_age_in_sec": metrics.oldest_aborted_txn_age_s,
        f"{PREFIX}.num_locks": metrics.num_locks,
        f"{PREFIX}.oldest_lock_age_in_sec": metrics.oldest_lock_age_s,
    }


def initiator_gauges(decisions) -> dict[str, float]:
    """What one initiator poll saw (Hive 4 feeds its delta metrics from what its services list, too): candidates
    over a delta threshold (queued or due), those skipped because their last compactions failed
    (failed.compacts.threshold), and how many partitions had each answer to "why (not yet)"
    (`acid.initiator_partitions_<why>`: queued, below_threshold, no_auto_compaction, in_queue, failed_threshold,
    budget_spent, not_eligible, error). `decisions`: `acid_core.compaction.initiator.Decision`s."""
    from acid_core.compaction.initiator import WHY, WHY_FAILED_THRESHOLD

    due = sum(1 for d in decisions if d.compaction_type is not None)
    gauges = {f"{PREFIX}.initiator_partitions_due": due,
              f"{PREFIX}.initiator_partitions_over_failed_threshold": sum(
                  1 for d in decisions if d.why == WHY_FAILED_THRESHOLD),
              f"{PREFIX}.initiator_candidates": len(decisions)}
    for why in WHY:
        gauges[f"{PREFIX}.initiator_partitions_{why.replace(' ', '_')}"] = sum(1 for d in decisions if d.why == why)
    return gauges
