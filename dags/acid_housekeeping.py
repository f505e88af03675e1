"""acid_housekeeping: Hive's metastore housekeeping on a schedule (time-outs, dead workers, leases, history).

No work at import time: acid_core and the hook are imported inside the task.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param, dag, task

DOC_MD = """
### ACID housekeeping

Runs `acid_core.housekeeping.housekeep` once against the metastore of the `acid_metastore` connection, like Hive's
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
"""


@dag(
    dag_id="acid_housekeeping",
    schedule=timedelta(minutes=1),
    catchup=False,
    max_active_runs=1,
    tags=["acid", "maintenance"],
    doc_md=DOC_MD,
    params={
        "worker_timeout_seconds": Param(86400, type="integer", minimum=1,
                                        description="hive.compactor.worker.timeout in seconds."),
        "txn_timeout_seconds": Param(300, type="integer", minimum=1, description="hive.txn.timeout in seconds."),
        "lease_timeout_seconds": Param(300, type="integer", minimum=1,
                                       description="Reader leases not heartbeated for this long expire."),
        "history_succeeded": Param(3, type="integer", minimum=0, maximum=100,
                                   description="metastore.compactor.history.retention.succeeded"),
        "history_failed": Param(3, type="integer", minimum=0, maximum=100,
                                description="metastore.compactor.history.retention.failed"),
        "history_did_not_initiate": Param(2, type="integer", minimum=0, maximum=100,
                                          description="metastore.compactor.history.retention.did.not.initiate"),
        "history_refused": Param(3, type="integer", minimum=0, maximum=100,
                                 description="metastore.compactor.history.retention.refused"),
        "history_timeout_seconds": Param(604800, type="integer", minimum=0,
                                         description="metastore.compactor.history.retention.timeout in seconds."),
    },
)
def acid_housekeeping():
    @task
    def housekeep_metastore(params=None) -> dict:
        """One housekeeping run; returns what changed."""
        import dataclasses
        import logging

        from acid_core.housekeeping import housekeep
        from acid_core.metastore.compactions import HistoryRetention
        from acid_plugin.hooks import AcidMetastoreHook

        log = logging.getLogger("airflow.task")
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

    housekeep_metastore()


acid_housekeeping()
