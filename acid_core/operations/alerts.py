"""What an operator should be told about, decided from the metastore; sending it is the orchestrator's business.

Each alert is an `Alert` value with a level (`warning` or `critical`). Three are about one compaction: it failed; its
partition's failures reached `failed.compacts.threshold` (the initiator skips it until `failed.retry.time` passes,
Hive's checkFailedCompactions); it has been `working` longer than a warning age (its worker may be stuck, long before
housekeeping's `hive.compactor.worker.timeout` puts it back). The others are threshold rules on the gauges of
`acid_core.operations.metrics` (`DEFAULT_RULES`: Hive's AcidMetricLogger thresholds and Cloudera's compaction observability
defaults, each overridable, `rules_with`); `escalations` keeps a rule from alerting again until its level rises.
Cost: one indexed history query of at most `threshold` rows per failed compaction; one query of the queue per stuck
check; the threshold rules read only the gauges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import sqlalchemy as sa

from acid_core.errors import UsageError
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.codes import CompactionState
from acid_core.metastore.compaction_rows import CompactionInfo, info_from_queue
from acid_core.operations.metrics import PREFIX

COMPACTION_FAILED = "compaction_failed"
FAILED_THRESHOLD_REACHED = "failed_threshold_reached"
WORKING_TOO_LONG = "working_too_long"
WARNING, CRITICAL = "warning", "critical"
LEVELS = (WARNING, CRITICAL)  # in rising order


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert: its kind (the constants above, or a rule's name), a one-line summary, its level, the compaction it
    is about (a rule's alert: none) and, for a rule's, the gauge, its value and the threshold it passed."""

    kind: str
    summary: str
    compaction_id: int | None
    database: str | None
    table: str | None
    partition: str | None
    level: str = WARNING
    metric: str | None = None
    value: float | None = None
    threshold: float | None = None

    def as_dict(self) -> dict:
        return {"kind": self.kind, "summary": self.summary, "level": self.level, "compaction_id": self.compaction_id,
                "database": self.database, "table": self.table, "partition": self.partition, "metric": self.metric,
                "value": self.value, "threshold": self.threshold}


def _where(entry: CompactionInfo) -> str:
    return f"{entry.database}.{entry.table}" + (f" partition {entry.partition}" if entry.partition else "")


def compaction_failed(entry: CompactionInfo, message: str) -> Alert:
    return Alert(COMPACTION_FAILED, f"compaction {entry.id} ({entry.type.display.lower()}) of {_where(entry)} "
                 f"failed: {message}", entry.id, entry.database, entry.table, entry.partition, WARNING)


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
                 entry.id, entry.database, entry.table, entry.partition, CRITICAL)


def working_too_long(metastore: Metastore, *, warning_ms: int) -> list[Alert]:
    """An alert for each entry `working` for longer than `warning_ms` (oldest first)."""
    cq = s.compaction_queue.c

    def read(conn) -> list[CompactionInfo]:
        cutoff = metastore.db.clock.now_ms() - warning_ms
        return [info_from_queue(row) for row in conn.execute(sa.select(s.compaction_queue).where(
            cq.CQ_STATE == CompactionState.WORKING.value, cq.CQ_START < cutoff).order_by(cq.CQ_START)).all()]

    now = metastore.db.clock.now_ms()
    return [Alert(WORKING_TOO_LONG, f"compaction {entry.id} ({entry.type.display.lower()}) of {_where(entry)} has "
                  f"been working for {(now - (entry.start_ms or now)) / 60000:.0f} min (worker {entry.worker_id}, "
                  f"job {entry.hadoop_job_id or 'unknown'})", entry.id, entry.database, entry.table, entry.partition)
            for entry in metastore.db.run("find long-running compactions", read, write=False)]


@dataclass(frozen=True, slots=True)
class AlertRule:
    """A threshold rule on one gauge of `acid_core.operations.metrics` (`metric`, after `acid.`): an alert at `warning` when the
    gauge is above that value, at `critical` above that one (None: that level off). `source` names where the
    numbers come from (Hive's MetastoreConf, Cloudera's defaults); `what` says what is wrong (a format over the
    gauges' short names, `value` and `about`: the partitions the gauge is about), `advice` what to do."""

    name: str
    metric: str
    warning: float | None
    critical: float | None
    source: str
    what: str
    advice: str
    seconds: bool = False  # the gauge is an age: shown as a duration

    def level_of(self, value: float) -> tuple[str, float] | None:
        """The level `value` reaches and the threshold it passed, or None."""
        if self.critical is not None and value > self.critical:
            return CRITICAL, self.critical
        if self.warning is not None and value > self.warning:
            return WARNING, self.warning
        return None


_STUCK_CLEANER = ("the cleaner is behind or held back: the ACID view's Health tab says by what (an open transaction "
                  "older than the compaction, a reader lease, the retention time); see acid_cleaner's log")
DEFAULT_RULES = (
    AlertRule("oldest_initiated_compaction", "compaction_oldest_enqueue_age_in_sec", 3600, 43200,
              "metastore.compactor.oldest.initiated.compaction.time.threshold.warning / .error (Cloudera: "
              "oldest initiated compaction passed threshold)",
              "the oldest initiated compaction has waited {value}",
              "add worker slots (ACID_WORKER_THREADS, the compaction pools) or see why acid_worker does not take it",
              seconds=True),
    AlertRule("oldest_ready_for_cleaning", "oldest_ready_for_cleaning_age_in_sec", 86400, None,
              "metastore.compactor.oldest.uncleaned.compaction.time.threshold",
              "the oldest compaction ready for cleaning has waited {value}", _STUCK_CLEANER, seconds=True),
    AlertRule("oldest_open_transaction", "oldest_open_non_repl_txn_age_in_sec", 86400, 259200,
              "metastore.compactor.oldest.open.txn.threshold.warning / .error",
              "transaction {oldest_open_non_repl_txn_id:.0f} has been open for {value}",
              "it holds back the cleaner of what it may read: abort it (ABORT TRANSACTIONS) if its client is gone",
              seconds=True),
    AlertRule("oldest_aborted_transaction", "oldest_aborted_txn_age_in_sec", 86400, 172800,
              "metastore.compactor.oldest.uncleaned.aborted.txn.time.threshold.warning / .error",
              "aborted transaction {oldest_aborted_txn_id:.0f} has not been cleaned for {value}",
              "its writes wait for a compaction of their partition (the initiator's aborted thresholds) and the "
              "cleaner: see the partition's health", seconds=True),
    AlertRule("tables_with_aborted_transactions", "tables_with_x_aborted_transactions", None, 1,
              "metastore.compactor.tables.with.aborted.txn.threshold, partitions with more than "
              "metastore.acidmetrics.table.aborted.txns.threshold aborted transactions each",
              "{value:.0f} partitions each have more than the aborted-transactions threshold ({about})",
              "compact them (every read skips their aborted writes) and find the writer that aborts"),
    AlertRule("initiator_hosts", "compaction_num_initiators", 1, None,
              "Cloudera: more than one host is initiating compaction",
              "initiators on {value:.0f} hosts queued compactions in the last hour",
              "two deployments (or a second initiator) poll this metastore: keep one. With an executor that runs "
              "each task on another host (several Celery workers, Kubernetes) the host changes between polls: "
              "raise this rule's warning or turn it off"),
    AlertRule("active_deltas", "compaction_num_active_deltas", 100, None,
              "metastore.deltametrics.delta.num.threshold (Hive's AcidMetricLogger warns on such a partition)",
              "{about} has {value:.0f} active deltas", "compact it: every read merges them"),
    AlertRule("small_deltas", "compaction_num_small_deltas", 100, None,
              "metastore.deltametrics.delta.num.threshold, deltas under metastore.deltametrics.delta.pct.threshold "
              "of the base", "{about} has {value:.0f} small deltas",
              "a writer commits many small batches (streaming): batch its commits, or lower the table's "
              "compactor thresholds so minor compactions merge them sooner"),
    AlertRule("obsolete_deltas", "compaction_num_obsolete_deltas", 200, None,
              "Cloudera: more than 200 obsolete deltas (Hive lists those over "
              "metastore.deltametrics.obsolete.delta.num.threshold)",
              "{about} has {value:.0f} obsolete deltas still on disk", _STUCK_CLEANER),
)
ALERT_KINDS = (COMPACTION_FAILED, FAILED_THRESHOLD_REACHED, WORKING_TOO_LONG, *(r.name for r in DEFAULT_RULES))


def rules_with(overrides: Mapping[str, Mapping[str, float | None]] | None,
               rules: tuple[AlertRule, ...] = DEFAULT_RULES) -> tuple[AlertRule, ...]:
    """`rules` with the deployment's thresholds: `{"<rule>": {"warning": <number or null>, "critical": ...}}`; a
    level left out keeps its default, null turns it off.

    Raises:
        UsageError: an unknown rule or level, or a threshold that is not a number >= 0 (naming it).
    """
    by_name = {rule.name: rule for rule in rules}
    changed = dict(by_name)
    for name, levels in (overrides or {}).items():
        if name not in by_name:
            raise UsageError(f"alert rule {name!r} does not exist; the rules: {', '.join(by_name)}")
        if not isinstance(levels, Mapping) or set(levels) - set(LEVELS):
            raise UsageError(f"alert rule {name}: expected {{\"warning\": <number or null>, \"critical\": <number "
                             f"or null>}}, got {levels!r}")
        for level, value in levels.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value < 0):
                raise UsageError(f"alert rule {name}: {level} must be a number >= 0 or null (off), got {value!r}")
        rule = by_name[name]  # a level left out keeps the rule's value
        changed[name] = replace(rule, warning=levels.get(WARNING, rule.warning),
                                critical=levels.get(CRITICAL, rule.critical))
    return tuple(changed.values())


def _duration(seconds: float) -> str:
    """`3 h 5 min`, `12 min`, `40 s`."""
    seconds = int(seconds)
    if seconds >= 86400:
        return f"{seconds // 86400} d {seconds % 86400 // 3600} h"
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 60} min" if seconds >= 60 else f"{seconds} s"


class _Values(dict):
    def __missing__(self, key: str) -> float:
        return 0.0


def threshold_alerts(gauges: Mapping[str, float], rules: tuple[AlertRule, ...] = DEFAULT_RULES, *,
                     about: Mapping[str, str] | None = None) -> list[Alert]:
    """The alerts the rules raise on one reading of the gauges (`acid.<name>` -> value, as `acid_core.operations.metrics`
    names them); a rule whose gauge is not in the reading (not collected) raises none. `about`: per gauge (short
    name), the partitions it is about, for the summary."""
    values = _Values({name.removeprefix(f"{PREFIX}."): value for name, value in gauges.items()})
    found = []
    for rule in rules:
        value = gauges.get(f"{PREFIX}.{rule.metric}")
        if value is None or (reached := rule.level_of(value)) is None:
            continue
        level, threshold = reached
        shown = _duration(value) if rule.seconds else value
        what = rule.what.format_map(_Values(values, value=shown, about=(about or {}).get(rule.metric, "?")))
        limit = _duration(threshold) if rule.seconds else f"{threshold:g}"
        found.append(Alert(rule.name, f"{what} (over {limit}: {level}, {rule.source}); {rule.advice}", None, None,
                           None, None, level, rule.metric, float(value), float(threshold)))
    return found


def escalations(found: list[Alert], sent: Mapping[str, str]) -> tuple[list[Alert], dict[str, str]]:
    """Which rule alerts to send, given the level each rule last alerted at (`sent`: kind -> level): those whose
    level rose (none -> warning -> critical); and the levels to remember. A rule that falls back (or clears) is
    remembered at its new level (or forgotten), so it alerts again when it rises again."""
    rank = {level: number for number, level in enumerate(LEVELS, start=1)}
    fresh = [alert for alert in found if rank[alert.level] > rank.get(sent.get(alert.kind, ""), 0)]
    return fresh, {alert.kind: alert.level for alert in found}
