"""acid_initiator: Hive's Initiator and Worker on a schedule — queue the compactions tables need, then run them on Spark.

No work at import time: acid_core and the hook are imported inside the tasks.
"""

from __future__ import annotations

from acid_plugin.assets import COMPACTED
from acid_plugin.operators import COMPACTION_POOL, AcidCompactionOperator
from acid_plugin.params import interval_from_env
from airflow.sdk import Param, dag, task

LAST_CHECK_VARIABLE = "acid_initiator_last_check_ms"  # + "." + the metastore connection id
CHECK_SLACK_MS = 60_000  # look a minute further back than the last poll: a commit may land while a poll reads

DOC_MD = """
### ACID initiator

One cycle of Hive's Initiator and Workers against the metastore of the `acid_metastore` connection:

1. **`poll`** reads the candidates from the metastore, not from the file system: partitions with commits since the
   previous poll, partitions whose last compaction failed or did not initiate, and partitions with aborted
   transactions (more than `aborted_threshold`, or older than `aborted_time_threshold_seconds`). For each it skips
   tables or databases with `no_auto_compaction`, partitions with a compaction already initiated or working, and
   partitions whose last `failed_threshold` compactions failed (until `failed_retry_seconds` passed); then it lists
   that one partition and applies the thresholds (`delta_num_threshold`, `delta_pct_threshold`, per-table
   `compactorthreshold.*` properties win) and queues a minor or major compaction. It returns the ids of the
   initiated compactions (oldest first, at most `max_compactions`), including ones queued by hand or put back by
   `acid_housekeeping`.
2. **`compact`** is mapped over those ids: one spark-submit job each (`spark_jobs/compact.py`, connection
   `spark_default`), in the pool `acid_compaction`, whose slots are the worker-thread count
   (`hive.compactor.worker.threads`). A task succeeds when its entry is `ready for cleaning` (or `refused` for lack
   of work) and emits the `acid_compacted` asset, which starts `acid_cleaner`; it fails with the queue's error
   message when the compaction failed.

`dry_run` logs what would be queued and why (the `decisions` XCom) and changes nothing. `full_scan` ignores the
time of the previous poll (kept in the Airflow Variable `acid_initiator_last_check_ms.<connection id>`).
The schedule is `ACID_INITIATOR_INTERVAL_SECONDS` (default 300, `hive.compactor.check.interval`).
"""


@dag(
    dag_id="acid_initiator",
    schedule=interval_from_env("ACID_INITIATOR_INTERVAL_SECONDS", 300),
    catchup=False,
    max_active_runs=1,
    tags=["acid", "compaction"],
    doc_md=DOC_MD,
    params={
        "dry_run": Param(False, type="boolean", description="Log what would be queued and why; change nothing."),
        "full_scan": Param(False, type="boolean",
                           description="Consider every partition with recorded writes, not only those since the last poll."),
        "delta_num_threshold": Param(10, type="integer", minimum=0, description="hive.compactor.delta.num.threshold"),
        "delta_pct_threshold": Param(0.1, type="number", minimum=0, description="hive.compactor.delta.pct.threshold"),
        "aborted_threshold": Param(1000, type="integer", minimum=0, description="hive.compactor.abortedtxn.threshold"),
        "aborted_time_threshold_seconds": Param(
            43200, type="integer", minimum=-1,
            description="hive.compactor.aborted.txn.time.threshold in seconds (-1 disables it)."),
        "failed_threshold": Param(2, type="integer", minimum=0,
                                  description="metastore.compactor.initiator.failed.compacts.threshold"),
        "failed_retry_seconds": Param(604800, type="integer", minimum=0,
                                      description="metastore.compactor.initiator.failed.retry.time in seconds"),
        "max_compactions": Param(100, type="integer", minimum=0, maximum=10000,
                                 description="Run at most this many queued compactions in this DAG run."),
    },
)
def acid_initiator():
    @task
    def poll(params=None, ti=None) -> list[int]:
        """One initiator cycle; returns the ids of the compactions to run (none on a dry run)."""
        import logging

        from acid_core.compaction.initiator import run_initiator
        from acid_plugin.hooks import AcidMetastoreHook
        from airflow.sdk import Variable

        log = logging.getLogger("airflow.task")
        hook = AcidMetastoreHook()
        dry_run = bool(params["dry_run"])
        key = f"{LAST_CHECK_VARIABLE}.{hook.acid_metastore_conn_id}"
        previous = None if params["full_scan"] else Variable.get(key, default=None)
        last_checked_ms = int(previous) - CHECK_SLACK_MS if previous else None
        with hook.metastore() as metastore:
            started_ms = metastore.db.clock.now_ms()
            decisions = run_initiator(
                metastore, dry_run=dry_run, last_checked_ms=last_checked_ms,
                aborted_threshold=int(params["aborted_threshold"]),
                aborted_time_threshold_ms=_ms(params["aborted_time_threshold_seconds"]),
                delta_num_threshold=int(params["delta_num_threshold"]),
                delta_pct_threshold=float(params["delta_pct_threshold"]),
                failed_threshold=int(params["failed_threshold"]),
                failed_retry_time_ms=_ms(params["failed_retry_seconds"]))
            report = []
            for decision in decisions:
                kind = decision.compaction_type.display if decision.compaction_type else None
                verb = "would queue" if dry_run else "queued"
                what = f"{verb} {kind}" if kind else "skipped"
                log.info("initiator: %s: %s (%s)", decision.candidate.full_partition_name, what, decision.reason)
                report.append({"partition": decision.candidate.full_partition_name, "type": kind,
                               "reason": decision.reason, "compaction_id": decision.compaction_id})
            ti.xcom_push(key="decisions", value=report)
            if dry_run:
                log.info("initiator: dry run, %d candidates looked at; nothing queued or run", len(decisions))
                return []
            Variable.set(key, str(started_ms))
            waiting = metastore.compactions.initiated(limit=int(params["max_compactions"]))
        log.info("initiator: %d candidates, %d compactions to run: %s", len(decisions), len(waiting),
                 [entry.id for entry in waiting])
        return [entry.id for entry in waiting]

    AcidCompactionOperator.partial(task_id="compact", pool=COMPACTION_POOL, outlets=[COMPACTED],
                                   map_index_template="{{ acid_compaction }}").expand(compaction_id=poll())


def _ms(seconds) -> int:
    seconds = int(seconds)
    return seconds * 1000 if seconds >= 0 else -1


acid_initiator()
