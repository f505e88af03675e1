"""Hive's ACID metrics (AcidMetricService, MetricsConstants, Hive 4) computed from the metastore, and the one list of
every metric this project sends (`METRICS`: name, kind, the Hive constant it takes its name from).

`collect` reads the queue, the open and aborted transactions, the aborted transactions' components, the locks and
the last hour of compaction history with a few bounded, indexed statements (COMPACTION_QUEUE holds only pending
work; TXNS is searched by its state index, TXN_COMPONENTS by its transaction index; HIVE_LOCKS holds only live
locks; COMPLETED_COMPACTIONS by its end-time index, one hour of it), never a whole history table. `collect_deltas`
counts active, small and obsolete deltas (Hive's delta metrics) in the partitions the queue names. `gauges` and
`delta_gauges` name the values as the "Metrics and alerts" table of docs/operations.md does. Emitting them (StatsD,
OpenTelemetry) is the orchestrator's business (`plugins/acid_plugin/metrics.py`).
Cost: `collect`, nine aggregate statements, whatever the size of the history; `collect_deltas`, one queue statement,
one snapshot per table, and per partition (at most `max_partitions`) one listing plus one per base and delta
directory its snapshot reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core.errors import AcidError
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.codes import CompactionState
from acid_core.metastore.txns import TXN_ABORTED, TXN_OPEN, full_table_name

PREFIX = "acid"  # every metric name starts with it (after the deployment's own [metrics] statsd_prefix)
GAUGE, COUNTER, TIMER = "gauge", "counter", "timer"

# Hive's defaults for what the gauges count (MetastoreConf)
ABORTED_TXNS_THRESHOLD = 1500  # metastore.acidmetrics.table.aborted.txns.threshold
DELTA_METRICS_MAX_PARTITIONS = 100  # metastore.deltametrics.max.cache.size
SMALL_DELTA_PCT = 0.01  # metastore.deltametrics.delta.pct.threshold
RECENT_MS = 3_600_000  # initiators and workers "seen recently": in the queue or the last hour's history
MANUAL = "manual"  # the thread part of a manual request's initiator id (Hive's MANUALLY_INITIATED_COMPACTION)


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric this project sends: its name after `acid.`, its StatsD kind, and the Hive constant whose name it
    carries (`MetricsConstants.X`), or None for a name of ours (Hive has none for it)."""

    name: str
    kind: str
    hive: str | None = None


def _metrics() -> tuple[Metric, ...]:
    from acid_core.compaction.initiator import WHY

    hive = "MetricsConstants."
    return (
        Metric("compaction_num_initiated", GAUGE, hive + "COMPACTION_STATUS_PREFIX + initiated"),
        Metric("compaction_num_working", GAUGE, hive + "COMPACTION_STATUS_PREFIX + working"),
        Metric("compaction_num_ready_for_cleaning", GAUGE, hive + "COMPACTION_STATUS_PREFIX + ready for cleaning"),
        Metric("compaction_oldest_enqueue_age_in_sec", GAUGE, hive + "COMPACTION_OLDEST_ENQUEUE_AGE"),
        Metric("compaction_oldest_working_age_in_sec", GAUGE, hive + "COMPACTION_OLDEST_WORKING_AGE"),
        Metric("compaction_oldest_cleaning_age_in_sec", GAUGE, hive + "COMPACTION_OLDEST_CLEANING_AGE"),
        Metric("oldest_ready_for_cleaning_age_in_sec", GAUGE, hive + "OLDEST_READY_FOR_CLEANING_AGE"),
        Metric("compaction_num_initiators", GAUGE, hive + "COMPACTION_NUM_INITIATORS"),
        Metric("compaction_num_workers", GAUGE, hive + "COMPACTION_NUM_WORKERS"),
        Metric("num_open_transactions", GAUGE, hive + "NUM_OPEN_TXNS"),
        Metric("oldest_open_txn_age_in_sec", GAUGE),  # Cloudera's name (its compaction observability docs)
        Metric("num_open_non_repl_transactions", GAUGE, hive + "NUM_OPEN_NON_REPL_TXNS"),
        Metric("oldest_open_non_repl_txn_id", GAUGE, hive + "OLDEST_OPEN_NON_REPL_TXN_ID"),
        Metric("oldest_open_non_repl_txn_age_in_sec", GAUGE, hive + "OLDEST_OPEN_NON_REPL_TXN_AGE"),
        Metric("num_aborted_transactions", GAUGE, hive + "NUM_ABORTED_TXNS"),
        Metric("oldest_aborted_txn_id", GAUGE, hive + "OLDEST_ABORTED_TXN_ID"),
        Metric("oldest_aborted_txn_age_in_sec", GAUGE, hive + "OLDEST_ABORTED_TXN_AGE"),
        Metric("tables_with_x_aborted_transactions", GAUGE, hive + "TABLES_WITH_X_ABORTED_TXNS"),
        Metric("num_locks", GAUGE, hive + "NUM_LOCKS"),
        Metric("oldest_lock_age_in_sec", GAUGE, hive + "OLDEST_LOCK_AGE"),
        Metric("compaction_num_active_deltas", GAUGE, hive + "COMPACTION_NUM_DELTAS"),
        Metric("compaction_num_small_deltas", GAUGE, hive + "COMPACTION_NUM_SMALL_DELTAS"),
        Metric("compaction_num_obsolete_deltas", GAUGE, hive + "COMPACTION_NUM_OBSOLETE_DELTAS"),
        Metric("initiator_candidates", GAUGE),
        Metric("initiator_partitions_due", GAUGE),
        Metric("initiator_partitions_over_failed_threshold", GAUGE),
        *(Metric(f"initiator_partitions_{why.replace(' ', '_')}", GAUGE) for why in WHY),
        *(Metric(f"compaction_{outcome}", COUNTER) for outcome in COMPACTION_OUTCOMES),
        Metric("compaction_duration", TIMER),
        *(Metric(f"compaction_{key}", COUNTER) for key in RUN_COUNTERS),
        Metric("cleaner_cleaned", COUNTER),
        Metric("cleaner_errors", COUNTER),
        Metric("cleaner_directories_removed", COUNTER),
        Metric("cleaner_bytes_removed", COUNTER),
        Metric("metastore_retries", COUNTER),
        Metric("metastore_unavailable", COUNTER),
    )


# a compaction run's outcome counters (acid.compaction_<outcome>): acid_core.compaction.attempt.Result's endings
COMPACTION_OUTCOMES = ("compacted", "refused", "failed", "interrupted", "aborted", "busy", "error")
RUN_COUNTERS = ("events_read", "events_written", "bytes_read", "bytes_written")  # a run's numbers, as counters


def all_metrics() -> dict[str, Metric]:
    """Every metric this project can send, by name (after `acid.`)."""
    return {metric.name: metric for metric in _metrics()}


def metric_name(name: str) -> str:
    """`acid.<name>` for a metric of `all_metrics()`.

    Raises:
        KeyError: `name` is not one of them (so nothing undocumented is ever sent).
    """
    if name not in _known():
        raise KeyError(f"metric {name!r} is not in acid_core.operations.metrics.all_metrics() (nor in docs/operations.md's table)")
    return f"{PREFIX}.{name}"


_KNOWN: set[str] = set()


def _known() -> set[str]:
    if not _KNOWN:
        _KNOWN.update(all_metrics())
    return _KNOWN


@dataclass(frozen=True, slots=True)
class AcidMetrics:
    """One reading of the metastore's ACID health; ages in seconds and ids 0 when there is nothing of that kind."""

    num_initiated: int = 0
    num_working: int = 0
    num_ready_for_cleaning: int = 0
    oldest_enqueue_age_s: float = 0.0  # oldest `initiated` entry, since it was queued
    oldest_working_age_s: float = 0.0  # oldest `working` entry, since its worker claimed it
    oldest_ready_for_cleaning_age_s: float = 0.0  # oldest `ready for cleaning` entry, since its compaction committed
    num_initiators: int = 0  # hosts whose initiator queued an entry recently (manual requests not counted)
    num_workers: int = 0  # hosts whose workers took an entry recently
    num_open_txns: int = 0
    oldest_open_txn_id: int = 0
    oldest_open_txn_age_s: float = 0.0
    num_aborted_txns: int = 0
    oldest_aborted_txn_id: int = 0
    oldest_aborted_txn_age_s: float = 0.0
    tables_with_aborted_txns: int = 0  # partitions (or tables) with more than `aborted_txns_threshold` aborted txns
    aborted_txns_partitions: tuple[str, ...] = ()  # the first 10 of them, most aborted first (`db.table/partition`)
    num_locks: int = 0
    oldest_lock_age_s: float = 0.0


def _age_s(now_ms: int, since_ms: int | None) -> float:
    return max(0.0, (now_ms - since_ms) / 1000) if since_ms is not None else 0.0


def host_of(worker_or_initiator_id: str | None) -> str | None:
    """The host of a `host-thread` id: what precedes its last `-` (Hive's MetaStoreUtils.getHostFromId); None
    without one."""
    host, dash, _ = (worker_or_initiator_id or "").rpartition("-")
    return host if dash and host else None


def delta_count_key(database: str, table: str, partition: str | None) -> str:
    """`db.table[/partition]`: how Hive names a partition in its delta metrics (AcidMetricService.getDeltaCountKey)."""
    return f"{database}.{table}" + (f"/{partition}" if partition else "")


def collect(metastore: Metastore, *, now_ms: int | None = None,
            aborted_txns_threshold: int = ABORTED_TXNS_THRESHOLD, recent_ms: int = RECENT_MS) -> AcidMetrics:
    """Read the metastore's ACID metrics in one read-only snapshot."""
    cq, cc, t, tc, hl = (s.compaction_queue.c, s.completed_compactions.c, s.txns.c, s.txn_components.c,
                         s.hive_locks.c)
    since = {CompactionState.INITIATED.value: cq.CQ_ENQUEUE_TIME, CompactionState.WORKING.value: cq.CQ_START,
             CompactionState.READY_FOR_CLEANING.value: sa.func.coalesce(cq.CQ_COMMIT_TIME, cq.CQ_START)}

    def read(conn: Connection) -> AcidMetrics:
        now = now_ms if now_ms is not None else metastore.db.clock.now_ms()
        counts: dict[str, int] = {}
        oldest: dict[str, int | None] = {}
        for state, column in since.items():
            count, first = conn.execute(sa.select(sa.func.count(), sa.func.min(column))
                                        .where(cq.CQ_STATE == state)).one()
            counts[state], oldest[state] = count, first
        txns = {state: conn.execute(sa.select(sa.func.count(), sa.func.min(t.TXN_ID), sa.func.min(t.TXN_STARTED))
                                    .where(t.TXN_STATE == state)).one() for state in (TXN_OPEN, TXN_ABORTED)}
        aborted_per_partition = sa.func.count(sa.distinct(t.TXN_ID))
        many_aborted = sorted(conn.execute(
            sa.select(tc.TC_DATABASE, tc.TC_TABLE, tc.TC_PARTITION, aborted_per_partition)
            .select_from(s.txn_components.join(s.txns, tc.TC_TXNID == t.TXN_ID))
            .where(t.TXN_STATE == TXN_ABORTED)
            .group_by(tc.TC_DATABASE, tc.TC_TABLE, tc.TC_PARTITION)
            .having(aborted_per_partition > aborted_txns_threshold)).all(), key=lambda row: -row[3])
        ids = [tuple(row) for row in conn.execute(sa.select(cq.CQ_INITIATOR_ID, cq.CQ_WORKER_ID).distinct()).all()]
        ids += [tuple(row) for row in conn.execute(sa.select(cc.CC_INITIATOR_ID, cc.CC_WORKER_ID).distinct().where(
            cc.CC_END >= now - recent_ms)).all()]
        locks, first_lock = conn.execute(sa.select(sa.func.count(), sa.func.min(
            sa.func.coalesce(hl.HL_ACQUIRED_AT, hl.HL_LAST_HEARTBEAT)))).one()
        initiated, working = CompactionState.INITIATED.value, CompactionState.WORKING.value
        ready = CompactionState.READY_FOR_CLEANING.value
        return AcidMetrics(
            num_initiated=counts[initiated], num_working=counts[working], num_ready_for_cleaning=counts[ready],
            oldest_enqueue_age_s=_age_s(now, oldest[initiated]), oldest_working_age_s=_age_s(now, oldest[working]),
            oldest_ready_for_cleaning_age_s=_age_s(now, oldest[ready]),
            num_initiators=len({host_of(initiator) for initiator, _ in ids
                                if host_of(initiator) and not initiator.endswith(f"-{MANUAL}")}),
            num_workers=len({host_of(worker) for _, worker in ids if host_of(worker)}),
            num_open_txns=txns[TXN_OPEN][0], oldest_open_txn_id=txns[TXN_OPEN][1] or 0,
            oldest_open_txn_age_s=_age_s(now, txns[TXN_OPEN][2]),
            num_aborted_txns=txns[TXN_ABORTED][0], oldest_aborted_txn_id=txns[TXN_ABORTED][1] or 0,
            oldest_aborted_txn_age_s=_age_s(now, txns[TXN_ABORTED][2]),
            tables_with_aborted_txns=len(many_aborted),
            aborted_txns_partitions=tuple(delta_count_key(db, table or "", partition)
                                          for db, table, partition, _ in many_aborted[:10]),
            num_locks=locks, oldest_lock_age_s=_age_s(now, first_lock))

    return metastore.db.run("read ACID metrics", read, write=False, snapshot=True)


def gauges(metrics: AcidMetrics) -> dict[str, float]:
    """The gauges of a reading by metric name (Hive's MetricsConstants names, under `acid.`).

    `compaction_oldest_cleaning_age_in_sec` is Hive's age since a cleaner started on the entry (CQ_CLEANER_START); the
    cleaner here takes an entry within one task and records no start, so it is measured from the compaction's
    commit, as `oldest_ready_for_cleaning_age_in_sec` is in Hive: an alert on it fires no later than Hive's would.
    `oldest_open_txn_age_in_sec` and the `_non_repl_` gauges carry the same values (no replication transactions here).
    """
    values = {
        "compaction_num_initiated": metrics.num_initiated,
        "compaction_num_working": metrics.num_working,
        "compaction_num_ready_for_cleaning": metrics.num_ready_for_cleaning,
        "compaction_oldest_enqueue_age_in_sec": metrics.oldest_enqueue_age_s,
        "compaction_oldest_working_age_in_sec": metrics.oldest_working_age_s,
        "compaction_oldest_cleaning_age_in_sec": metrics.oldest_ready_for_cleaning_age_s,
        "oldest_ready_for_cleaning_age_in_sec": metrics.oldest_ready_for_cleaning_age_s,
        "compaction_num_initiators": metrics.num_initiators,
        "compaction_num_workers": metrics.num_workers,
        "num_open_transactions": metrics.num_open_txns,
        "oldest_open_txn_age_in_sec": metrics.oldest_open_txn_age_s,
        "num_open_non_repl_transactions": metrics.num_open_txns,
        "oldest_open_non_repl_txn_id": metrics.oldest_open_txn_id,
        "oldest_open_non_repl_txn_age_in_sec": metrics.oldest_open_txn_age_s,
        "num_aborted_transactions": metrics.num_aborted_txns,
        "oldest_aborted_txn_id": metrics.oldest_aborted_txn_id,
        "oldest_aborted_txn_age_in_sec": metrics.oldest_aborted_txn_age_s,
        "tables_with_x_aborted_transactions": metrics.tables_with_aborted_txns,
        "num_locks": metrics.num_locks,
        "oldest_lock_age_in_sec": metrics.oldest_lock_age_s,
    }
    return {metric_name(name): value for name, value in values.items()}


@dataclass(frozen=True, slots=True)
class PartitionDeltas:
    """Hive's delta metrics of one partition (None: the unpartitioned table) under the current snapshot: its active
    deltas (insert and delete deltas a reader merges), those smaller than `small_delta_pct` of the base (Hive counts
    none without a base), and the obsolete deltas still on disk (superseded, for the cleaner)."""

    database: str
    table: str
    partition: str | None
    active: int
    small: int
    obsolete: int

    @property
    def key(self) -> str:
        return delta_count_key(self.database, self.table, self.partition)


@dataclass(frozen=True, slots=True)
class DeltaReading:
    """`collect_deltas`'s answer: the partitions it listed, and those it could not (one line each)."""

    partitions: tuple[PartitionDeltas, ...] = ()
    errors: tuple[str, ...] = ()


def collect_deltas(metastore: Metastore, *, max_partitions: int = DELTA_METRICS_MAX_PARTITIONS,
                   small_delta_pct: float = SMALL_DELTA_PCT) -> DeltaReading:
    """Count active, small and obsolete deltas (Hive's AcidMetricService delta metrics) in the partitions the queue
    names (initiated, working or ready for cleaning: those about to be compacted or cleaned, where deltas pile up),
    at most `max_partitions` of them, oldest entry first. Hive counts them when its initiator, worker and cleaner
    list a partition and caches them (COMPACTION_METRICS_CACHE); here they are counted when asked, which bounds the
    cost instead: one listing of each partition plus one of each base and delta directory its snapshot reads. A
    partition that cannot be listed (dropped meanwhile, unreachable) is reported in `errors` and skipped."""
    from acid_core.compaction.initiator import base_and_delta_sizes
    from acid_core.format.layout import DELETE_DELTA_PREFIX, DELTA_PREFIX, parse_bucket_file
    from acid_core.metastore.locations import data_location
    from acid_core.read.state import get_acid_state

    if max_partitions <= 0:
        return DeltaReading()
    cq = s.compaction_queue.c
    first = sa.func.min(cq.CQ_ID).label("first")
    queued = metastore.db.run("read the queued partitions", lambda conn: conn.execute(
        sa.select(cq.CQ_DATABASE, cq.CQ_TABLE, cq.CQ_PARTITION, first)
        .group_by(cq.CQ_DATABASE, cq.CQ_TABLE, cq.CQ_PARTITION).order_by(first).limit(max_partitions)).all(),
        write=False)
    tables: dict[tuple[str, str], tuple] = {}
    found, errors = [], []
    for database, table, partition, _ in queued:
        key = delta_count_key(database, table, partition)
        try:
            if (database, table) not in tables:
                info = metastore.catalog.get_table(database, table)
                name = full_table_name(info.database, info.name)
                snapshot = metastore.txns.snapshot([name])
                tables[(database, table)] = (info, snapshot.txns, snapshot.write_ids[name])
            info, txns, write_ids = tables[(database, table)]
            where = data_location(info, partition)
            state = get_acid_state(where.path, write_ids=write_ids, txns=txns, missing_ok=True, fs=where.fs)
        except AcidError as exc:
            errors.append(f"{key}: {type(exc).__name__}: {exc}")
            continue
        base_bytes, _ = base_and_delta_sizes(state)
        small = 0
        if base_bytes:
            listing = state.listing
            assert listing is not None  # get_acid_state's state carries the partition's listing
            for delta in state.deltas:
                size = sum(child.size for child in listing.children(delta.name)
                           if not child.is_dir and parse_bucket_file(child.name) is not None)
                small += size / base_bytes < small_delta_pct
        obsolete = sum(1 for name in state.obsolete if name.startswith((DELTA_PREFIX, DELETE_DELTA_PREFIX)))
        found.append(PartitionDeltas(database, table, partition, len(state.deltas), small, obsolete))
    return DeltaReading(tuple(found), tuple(errors))


def delta_gauges(reading: DeltaReading) -> dict[str, float]:
    """The delta gauges of a reading: each the largest value over the partitions listed (0 for none). Hive sends a
    map (partition -> count, its top `max.cache.size` over a threshold); its largest value is what a rule on it
    compares, and `worst_partitions` names the partition."""
    return {metric_name(name): max((getattr(p, field) for p in reading.partitions), default=0)
            for name, field in _DELTA_FIELDS.items()}


_DELTA_FIELDS = {"compaction_num_active_deltas": "active", "compaction_num_small_deltas": "small",
                 "compaction_num_obsolete_deltas": "obsolete"}


def worst_partitions(reading: DeltaReading) -> dict[str, list]:
    """For each delta gauge (name after `acid.`), the partition with the largest value: `[key, value]` (JSON-ready),
    or nothing when no partition has any."""
    worst = {}
    for name, field in _DELTA_FIELDS.items():
        top = max(reading.partitions, key=attrgetter(field), default=None)
        if top is not None and getattr(top, field):
            worst[name] = [top.key, getattr(top, field)]
    return worst


def initiator_gauges(decisions) -> dict[str, float]:
    """What one initiator poll saw (Hive 4 feeds its delta metrics from what its services list, too): candidates
    over a delta threshold (queued or due), those skipped because their last compactions failed
    (failed.compacts.threshold), and how many partitions had each answer to "why (not yet)"
    (`acid.initiator_partitions_<why>`: queued, below_threshold, no_auto_compaction, in_queue, failed_threshold,
    budget_spent, not_eligible, error). `decisions`: `acid_core.compaction.initiator.Decision`s."""
    from acid_core.compaction.initiator import WHY, WHY_FAILED_THRESHOLD

    due = sum(1 for d in decisions if d.compaction_type is not None)
    values = {"initiator_partitions_due": due,
              "initiator_partitions_over_failed_threshold": sum(1 for d in decisions if d.why == WHY_FAILED_THRESHOLD),
              "initiator_candidates": len(decisions)}
    for why in WHY:
        values[f"initiator_partitions_{why.replace(' ', '_')}"] = sum(1 for d in decisions if d.why == why)
    return {metric_name(name): value for name, value in values.items()}
