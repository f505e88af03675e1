"""acid_initiator: Hive's Initiator on a schedule — queue the compactions tables need; `acid_worker` runs them.

No work at import time: acid_core and the hook are imported inside the tasks.
"""

from __future__ import annotations

from acid_plugin.assets import QUEUED
from acid_plugin.params import schedule_interval, setting_params
from airflow.sdk import Param, dag, task

from acid_core import settings

# The registry's settings this DAG takes as Params: checked in `poll` (the trigger form would clamp a number to a
# schema range without a word).
SETTINGS = settings.for_dag("acid_initiator")

# Where the poll keeps its cursor, + "." + the metastore connection id. The name is from when it held the time of the
# last poll in milliseconds; the core still accepts such a value as a cursor, so an upgrade continues where it was.
CURSOR_VARIABLE = "acid_initiator_last_check_ms"

DOC_MD = """
### ACID initiator

Hive's Initiator against the metastore of the `acid_metastore` connection. It only queues compactions; the
`acid_worker` DAG runs them, so a long compaction never delays the next poll.

1. **`poll`** reads the candidates from the metastore, not from the file system: partitions with commits since the
   previous poll, partitions whose last compaction failed or did not initiate, and partitions with aborted
   transactions (more than `aborted_threshold`, or older than `aborted_time_threshold_seconds`). For each it skips
   tables or databases with `no_auto_compaction`, partitions with a compaction already initiated or working, and
   partitions whose last `failed_threshold` compactions failed (until `failed_retry_seconds` passed); then it lists
   that one partition and applies the thresholds (`delta_num_threshold`, `delta_pct_threshold`, per-table
   `compactorthreshold.*` properties win) and queues a minor or major compaction.
   One poll looks at no more than `fetch_size` candidates (`metastore.compactor.fetch.size`): when there are more
   (the first poll of a large metastore, a burst of writes), it says so and the next poll continues where this one
   stopped, so every poll stays bounded and the backlog is worked through over several polls.
2. **`wake_workers`** emits the `acid_compaction_queued` asset when the poll queued something, which starts an
   `acid_worker` run at once; it is skipped when nothing was queued.

Under load the due compactions are queued by benefit over cost (the deltas and delete deltas they remove from every
read, per byte they rewrite), so within a poll the most useful go first; with `budget_bytes` a pool's compactions of
one poll rewrite at most that much (its first always fits) and the rest are recorded `did not initiate` ("budget
spent: ...", in SHOW COMPACTIONS) and queued first at the next poll, so none starves. Every decision says why in one
word (`why`: queued, below threshold, no_auto_compaction, in queue, failed threshold, budget spent, not eligible,
error), counted in the metrics `acid.initiator_partitions_<why>`.

`dry_run` logs what would be queued and why (the `decisions` XCom) and changes nothing. Where the next poll
continues is kept in the Airflow Variable `acid_initiator_last_check_ms.<connection id>` (an opaque cursor); delete
it, or use `full_scan`, to start again from the first recorded write.
The schedule is `ACID_INITIATOR_INTERVAL_SECONDS` (default 300, `hive.compactor.check.interval`). Every setting:
docs/settings.md.
"""


@dag(
    dag_id="acid_initiator",
    description="Hive's Initiator: queue the compactions that tables and partitions need (runs none)",
    schedule=schedule_interval(settings.INITIATOR_INTERVAL),
    catchup=False,
    max_active_runs=1,
    tags=["acid", "compaction"],
    doc_md=DOC_MD,
    params={
        "dry_run": Param(False, type="boolean", description="Log what would be queued and why; change nothing."),
        "full_scan": Param(False, type="boolean",
                           description="Start again from the first recorded write, not where the last poll stopped."),
        **setting_params(SETTINGS),
    },
)
def acid_initiator():
    @task(multiple_outputs=False)  # one XCom, not one per key
    def poll(params=None, ti=None) -> dict:
        """One initiator cycle. Returns `{"queued": [compaction ids], "complete": bool, "cursor": str}`: the
        compactions this poll queued (none on a dry run), and whether it saw every candidate."""
        import logging

        from acid_plugin.hooks import AcidMetastoreHook
        from acid_plugin.params import check_setting_params
        from airflow.sdk import Variable
        from airflow.sdk.exceptions import AirflowFailException

        from acid_core.compaction.initiator import initiator_cycle
        from acid_core.errors import UsageError

        log = logging.getLogger("airflow.task")
        try:
            check_setting_params(params, SETTINGS)
        except ValueError as exc:
            raise AirflowFailException(f"initiator: {exc}") from None
        hook = AcidMetastoreHook()
        dry_run = bool(params["dry_run"])
        fetch_size = int(params["fetch_size"])
        key = f"{CURSOR_VARIABLE}.{hook.acid_metastore_conn_id}"
        cursor = None if params["full_scan"] else Variable.get(key, default=None)
        with hook.metastore() as metastore:
            try:
                cycle = initiator_cycle(
                    metastore, cursor=cursor or None, fetch_size=fetch_size, dry_run=dry_run,
                    aborted_threshold=int(params["aborted_threshold"]),
                    aborted_time_threshold_ms=_ms(params["aborted_time_threshold_seconds"]),
                    delta_num_threshold=int(params["delta_num_threshold"]),
                    delta_pct_threshold=float(params["delta_pct_threshold"]),
                    failed_threshold=int(params["failed_threshold"]),
                    failed_retry_time_ms=_ms(params["failed_retry_seconds"]),
                    budget_bytes=int(params.get("budget_bytes") or 0))
            except UsageError as exc:  # a cursor no poll wrote
                raise AirflowFailException(f"initiator: {exc} (Airflow Variable {key}): delete the Variable, or "
                                           "run with full_scan, to start again from the first recorded write") from None
        report = []
        for decision in cycle.decisions:
            kind = decision.compaction_type.display if decision.compaction_type else None
            verb = "would queue" if dry_run else "queued"
            queued = kind and decision.why == "queued"
            what = f"{verb} {kind} in pool {decision.pool or 'default'}" if queued else f"not queued: {decision.why}"
            log.info("initiator: %s: %s (%s)", decision.candidate.full_partition_name, what, decision.reason)
            report.append({"partition": decision.candidate.full_partition_name, "type": kind,
                           "pool": (decision.pool or "default") if kind else None, "why": decision.why,
                           "reason": decision.reason, "compaction_id": decision.compaction_id})
        ti.xcom_push(key="decisions", value=report)
        if not dry_run:
            from acid_plugin.metrics import emit_gauges

            from acid_core.operations.metrics import initiator_gauges

            emit_gauges(initiator_gauges(cycle.decisions))
        if not cycle.complete:
            log.info("initiator: fetch_size %d cut the candidates short; the next poll continues from there",
                     fetch_size)
        if dry_run:
            log.info("initiator: dry run, %d candidates looked at; nothing queued", len(cycle.decisions))
            return {"queued": [], "complete": cycle.complete, "cursor": cursor}
        Variable.set(key, cycle.cursor)
        queued = [d.compaction_id for d in cycle.decisions if d.compaction_type and d.compaction_id is not None]
        log.info("initiator: %d candidates, %d compactions queued: %s", len(cycle.decisions), len(queued), queued)
        return {"queued": queued, "complete": cycle.complete, "cursor": cycle.cursor}

    @task(outlets=[QUEUED])
    def wake_workers(polled: dict) -> list[int]:
        """Emit `acid_compaction_queued` (acid_worker runs on it) when the poll queued something; skip otherwise."""
        from airflow.sdk.exceptions import AirflowSkipException

        if not polled["queued"]:
            raise AirflowSkipException("nothing queued: no acid_compaction_queued event")
        return polled["queued"]

    wake_workers(poll())


def _ms(seconds) -> int:
    seconds = int(seconds)
    return seconds * 1000 if seconds >= 0 else -1


acid_initiator()
