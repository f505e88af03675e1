"""acid_worker: Hive's Worker — run the queued compactions on Spark, after each poll that queued some and on a timer.

No work at import time: acid_core and the hook are imported inside the tasks.
"""

from __future__ import annotations

from acid_plugin.assets import COMPACTED, QUEUED
from acid_plugin.operators import COMPACTION_POOL, AcidCompactionOperator
from acid_plugin.params import interval_from_env
from airflow.sdk import AssetOrTimeSchedule, DeltaTriggerTimetable, Param, dag, task

# Which compactions each worker run took, + "." + the metastore connection id: {run id: [compaction ids in map-index
# order]}. A run leaves out what a still-active run took and has not run yet, so overlapping runs do not line up the
# same entries (running one twice is prevented in the metastore anyway: see AcidCompactionOperator).
LISTED_VARIABLE = "acid_worker_listed"
MAX_ACTIVE_RUNS = 16
FINISHED_TASK_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})

DOC_MD = """
### ACID worker

Hive's Worker: runs the compactions waiting in the queue of the `acid_metastore` connection (state `initiated`,
queued by `acid_initiator`, by `acid_compact` with `wait` false, by `ALTER TABLE ... COMPACT`, or put back by
`acid_housekeeping`).

1. **`list_compactions`** takes the initiated compactions, oldest first, at most `max_compactions`, leaving out the
   ones a still-active run of this DAG took and has not run yet.
2. **`compact`** is mapped over them: one spark-submit job each (`spark_jobs/compact.py`, connection
   `spark_default`), in the pool `acid_compaction`, whose slots are the worker-thread count
   (`hive.compactor.worker.threads`) and so cap the compactions running at once. A task succeeds when its entry is
   `ready for cleaning` (or `refused` for lack of work) and emits the `acid_compacted` asset, which starts
   `acid_cleaner`; it fails with the queue's error message when the compaction failed. An entry another worker
   holds is skipped and one compacted already succeeds without running anything, so no entry runs twice.

**When it runs.** On every `acid_compaction_queued` asset event (a poll of `acid_initiator` that queued something)
and every `ACID_WORKER_INTERVAL_SECONDS` (default 60), for entries queued another way. Up to 16 runs at once: a
run waits for its compactions, so a compaction queued while a long one runs starts in the next run as soon as the
pool has a free slot.
"""


@dag(
    dag_id="acid_worker",
    schedule=AssetOrTimeSchedule(
        timetable=DeltaTriggerTimetable(interval_from_env("ACID_WORKER_INTERVAL_SECONDS", 60)), assets=[QUEUED]),
    catchup=False,
    max_active_runs=MAX_ACTIVE_RUNS,
    tags=["acid", "compaction"],
    doc_md=DOC_MD,
    params={
        "max_compactions": Param(100, type="integer", minimum=0, maximum=10000,
                                 description="Run at most this many queued compactions in this DAG run."),
    },
)
def acid_worker():
    @task(max_active_tis_per_dag=1)  # one listing at a time: each sees what the previous ones took
    def list_compactions(params=None, ti=None) -> list[int]:
        """The ids of the initiated compactions this run takes: oldest first, at most `max_compactions`, none that a
        still-active run of this DAG took and has not run yet."""
        import json
        import logging

        from acid_plugin.hooks import AcidMetastoreHook
        from airflow.sdk import Variable

        log = logging.getLogger("airflow.task")
        hook = AcidMetastoreHook()
        key = f"{LISTED_VARIABLE}.{hook.acid_metastore_conn_id}"
        try:
            stored = json.loads(Variable.get(key, default="{}"))
            listed = {str(run): [int(i) for i in ids] for run, ids in stored.items() if run != ti.run_id}
        except (ValueError, TypeError, AttributeError):
            log.warning("worker: ignoring the unreadable Variable %s", key)
            listed = {}
        kept, held = _held_by_other_runs(ti, listed)
        limit = int(params["max_compactions"])
        with hook.metastore() as metastore:
            waiting = metastore.compactions.initiated(limit=limit + len(held))
        taken = [entry.id for entry in waiting if entry.id not in held][:limit]
        Variable.set(key, json.dumps({**kept, **({ti.run_id: taken} if taken else {})}))
        if held:
            log.info("worker: %d initiated compactions are waiting in other runs of this DAG: %s", len(held),
                     sorted(held))
        log.info("worker: %d compactions to run: %s", len(taken), taken)
        return taken

    AcidCompactionOperator.partial(task_id="compact", pool=COMPACTION_POOL, outlets=[COMPACTED],
                                   map_index_template="{{ acid_compaction }}").expand(compaction_id=list_compactions())


def _held_by_other_runs(ti, listed: dict[str, list[int]]) -> tuple[dict[str, list[int]], set[int]]:
    """Of the runs in `listed`, those with a `compact` task that has not finished, and the compaction ids of those
    tasks. A run that ended has finished all its tasks (the scheduler skips what never ran); a deleted run has none.
    One task-state query for all of them (at most max_active_runs runs stay listed)."""
    if not listed:
        return {}, set()
    states = ti.get_task_states(dag_id=ti.dag_id, task_ids=["compact"], run_ids=list(listed))
    kept, held = {}, set()
    for run_id, ids in listed.items():
        task_states = states.get(run_id) or {}
        # "compact_<i>" once mapped; before that one unmapped "compact" stands for all of them
        pending = {compaction_id for index, compaction_id in enumerate(ids)
                   if _word(task_states.get(f"compact_{index}", task_states.get("compact", "removed")))
                   not in FINISHED_TASK_STATES}
        if pending:
            kept[run_id] = ids  # the whole list: its positions are the map indexes
            held |= pending
    return kept, held


def _word(state) -> str | None:
    """A task state as its word ("running"), whether it came as an enum member or a string."""
    return getattr(state, "value", state)


acid_worker()
