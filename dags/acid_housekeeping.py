"""acid_housekeeping: Hive's metastore housekeeping on a schedule (time-outs, dead workers, leases, history).

No work at import time: acid_core and the hook are imported inside the task.
"""

from __future__ import annotations

from datetime import timedelta

from acid_plugin.params import setting_params
from airflow.sdk import dag, task

from acid_core import settings

# The registry's settings this DAG takes as Params: checked in the tasks (the trigger form would clamp a number to a
# schema range without a word).
SETTINGS = settings.for_dag("acid_housekeeping")

DOC_MD = """
### ACID housekeeping

Runs `acid_core.operations.housekeeping.housekeep` once against the metastore of the `acid_metastore` connection, like Hive's
AcidHouseKeeperService, AcidCompactionHouseKeeperService, AcidTxnCleanerService and the Initiator's
revertTimedoutWorkers:

1. abort transactions whose heartbeat is older than `txn_timeout_seconds` (`hive.txn.timeout`) and release their
   locks;
2. put `working` compactions older than `worker_timeout_seconds` (`hive.compactor.worker.timeout`) back to
   `initiated`, aborting their compactor transactions and removing only their hidden result directories;
3. expire reader leases older than `lease_timeout_seconds`; 4. purge compaction history, keeping the newest
   `history_*` entries per partition and state (`metastore.compactor.history.retention.*`) in partitions with
   recent or aging entries; 5. forget what no snapshot can need: WRITE_SET rows no transaction can conflict with,
   aborted transactions whose writes the cleaner removed (or that wrote nothing), TXN_TO_WRITE_ID rows below the
   lowest open or aborted transaction (100,000 a run at most), and COMPLETED_TXN_COMPONENTS rows that a newer write
   of the same partition stands for. A run costs what it removes plus the open and aborted transactions, not the
   history, so snapshots and their ValidTxnList stay as small as the open work.

Every step is a compare-and-swap or an idempotent delete, so overlapping runs are safe.

Beside it, `metrics` sends Hive's ACID gauges (queue counts and ages, initiator and worker hosts, open and aborted
transactions, locks; then the delta counts of at most `delta_metrics_partitions` queued partitions, which it lists)
through Airflow's `Stats` (docs/operations.md, "Metrics and alerts"); `alert_thresholds` checks them against the alert rules
(Hive's and Cloudera's thresholds; the Variable `acid_alert_rules` changes them) and alerts (the configured notifier)
once per level a rule rises to; `alert_long_running` alerts once per attempt on each compaction `working` longer
than `working_warning_seconds`.
"""


@dag(
    dag_id="acid_housekeeping",
    description="Time-outs, dead compaction workers, killed writes' staging, reader leases, history purge",
    schedule=timedelta(minutes=1),
    catchup=False,
    max_active_runs=1,
    tags=["acid", "maintenance"],
    doc_md=DOC_MD,
    params=setting_params(SETTINGS),
)
def acid_housekeeping():
    @task(multiple_outputs=False)  # one XCom, not one per key
    def housekeep_metastore(params=None) -> dict:
        """One housekeeping run; returns what changed."""
        import dataclasses
        import logging

        from acid_plugin.hooks import AcidMetastoreHook
        from acid_plugin.params import check_setting_params

        from acid_core.metastore.compaction_history import HistoryRetention
        from acid_core.operations.housekeeping import housekeep

        log = logging.getLogger("airflow.task")
        check_setting_params(params, SETTINGS)  # refused in words, never clamped
        history = HistoryRetention(succeeded=int(params["history_succeeded"]), failed=int(params["history_failed"]),
                                   did_not_initiate=int(params["history_did_not_initiate"]),
                                   refused=int(params["history_refused"]),
                                   timeout_ms=int(params["history_timeout_seconds"]) * 1000)
        with AcidMetastoreHook().metastore(txn_timeout_ms=int(params["txn_timeout_seconds"]) * 1000) as metastore:
            report = housekeep(metastore, worker_timeout_ms=int(params["worker_timeout_seconds"]) * 1000,
                               lease_timeout_ms=int(params["lease_timeout_seconds"]) * 1000, history=history)
        log.info("housekeeping: %s", report.summary())
        for problem in report.problems:
            log.warning("housekeeping problem: %s", problem)
        summary = {name: list(value) if isinstance(value, tuple) else value
                   for name, value in dataclasses.asdict(report).items()}
        summary["summary"] = report.summary()
        return summary

    @task(multiple_outputs=False)  # one XCom, not one per gauge
    def metrics(params=None) -> dict:
        """Send Hive's ACID gauges through Airflow's Stats, then the delta gauges (which list partitions); returns
        `{"gauges": {name: value}, "about": {gauge: the partitions it is about}}` for `alert_thresholds`."""
        import logging

        from acid_plugin.hooks import AcidMetastoreHook
        from acid_plugin.metrics import emit_gauges
        from acid_plugin.params import check_setting_params

        from acid_core.operations.metrics import collect, collect_deltas, delta_gauges, gauges, worst_partitions

        log = logging.getLogger("airflow.task")
        check_setting_params(params, SETTINGS)
        with AcidMetastoreHook().metastore() as metastore:
            reading = collect(metastore, aborted_txns_threshold=int(params["aborted_txns_threshold"]))
            values = gauges(reading)
            emit_gauges(values)  # before any listing: a slow filesystem never delays these
            about = {"tables_with_x_aborted_transactions": ", ".join(reading.aborted_txns_partitions)}
            if int(params["delta_metrics_partitions"]) > 0:
                deltas = collect_deltas(metastore, max_partitions=int(params["delta_metrics_partitions"]),
                                        small_delta_pct=float(params["small_delta_pct"]))
                for error in deltas.errors:
                    log.warning("delta metrics: partition not listed: %s", error)
                counted = delta_gauges(deltas)
                emit_gauges(counted)
                values.update(counted)
                about.update({name: key for name, (key, _) in worst_partitions(deltas).items()})
        return {"gauges": values, "about": about}

    @task
    def alert_thresholds(reading: dict, **context) -> list[str]:
        """Check the gauges against the alert rules (Variable `acid_alert_rules`), alert once per level a rule
        rises to; returns the rules alerted."""
        from acid_plugin.alerts import configured_rules, send_escalations
        from acid_plugin.hooks import AcidMetastoreHook

        from acid_core.operations.alerts import threshold_alerts

        found = threshold_alerts(reading["gauges"], configured_rules(), about=reading["about"])
        sent = send_escalations(context, found, conn_id=AcidMetastoreHook().acid_metastore_conn_id)
        return [alert.kind for alert in sent]

    @task
    def alert_long_running(params=None, **context) -> list[int]:
        """Alert on compactions working longer than `working_warning_seconds`, once per attempt (the Airflow
        Variable `acid_working_alerted.<connection>` remembers which); returns their ids."""
        import json

        from acid_plugin.alerts import send_alerts
        from acid_plugin.hooks import AcidMetastoreHook
        from airflow.sdk import Variable

        from acid_core.operations.alerts import working_too_long

        hook = AcidMetastoreHook()
        with hook.metastore() as metastore:
            found = working_too_long(metastore, warning_ms=int(params["working_warning_seconds"]) * 1000)
            starts = {alert.compaction_id: metastore.compactions.get(alert.compaction_id) for alert in found}
        key = f"acid_working_alerted.{hook.acid_metastore_conn_id}"
        alerted = json.loads(Variable.get(key, default="{}"))
        current = {str(i): entry.start_ms for i, entry in starts.items() if entry is not None}
        fresh = [alert for alert in found if alerted.get(str(alert.compaction_id)) != current.get(
            str(alert.compaction_id))]
        send_alerts(context, fresh)
        if current != alerted:
            Variable.set(key, json.dumps(current))
        return [alert.compaction_id for alert in fresh]

    housekeep_metastore()
    alert_thresholds(metrics())
    alert_long_running()


acid_housekeeping()
