"""acid_worker: Hive's Worker — run the queued compactions on Spark, after each poll that queued some and on a timer.

One DAG per compaction pool (Hive 4's `hive.compactor.worker.pool`): `acid_worker` for the "default" pool and every
pool without workers of its own, and `acid_worker_<name>` for each labelled pool of ACID_COMPACTION_POOLS (made by
`worker_dag` below), whose compactions run in the Airflow pool `acid_compaction_<name>`: Airflow cannot give mapped
task instances different pools (apache/airflow#33657), so a pool is a DAG. A busy table in its own pool then takes
only that pool's slots. No work at import time: acid_core and the hook are imported inside the tasks.
"""

from __future__ import annotations

from acid_plugin.assets import COMPACTED, COMPACTED_TABLES, QUEUED
from acid_plugin.operators import AcidCompactionOperator
from acid_plugin.params import Bounds, check_numbers, interval_from_env
from acid_plugin.pools import airflow_pool, configured_pools, worker_dag_id
from airflow.sdk import AssetOrTimeSchedule, DeltaTriggerTimetable, dag, task

MAX_ACTIVE_RUNS = 16
FINISHED_TASK_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
POOL_TIMEOUT_SECONDS = 12 * 3600  # Hive's hive.compactor.worker.pool.timeout
NUMBERS = {"max_compactions": Bounds(0, 10000), "pool_timeout_seconds": Bounds(0, 10**9)}


def listed_variable(pool: str | None, conn_id: str) -> str:
    """The Variable recording which compactions each run of a worker DAG took, {run id: [compaction ids in map-index
    order]}: `<dag id>_listed.<metastore connection id>` (`acid_worker_listed.acid_metastore` for the default pool),
    one per DAG. A run leaves out what a still-active run of its DAG took and has not run yet, so overlapping runs do
    not line up the same entries (running one twice is prevented in the metastore anyway: AcidCompactionOperator)."""
    return f"{worker_dag_id(pool)}_listed.{conn_id}"

DOC_MD = """
### ACID worker{title}

Hive's Worker{of_pool}: runs the compactions waiting in the queue of the `acid_metastore` connection (state
`initiated`, queued by `acid_initiator`, by `acid_compact` with `wait` false, by `ALTER TABLE ... COMPACT`, or put back
by `acid_housekeeping`){which}.

1. **`list_compactions`** takes those initiated compactions, oldest first, at most `max_compactions`, leaving out the
   ones a still-active run of this DAG took and has not run yet.
2. **`compact`** is mapped over them: one spark-submit job each (`spark_jobs/compact.py`, connection
   `spark_default`), in the Airflow pool `{airflow_pool}`, whose slots are this pool's worker-thread count
   (`hive.compactor.worker{threads}.threads`) and so cap its compactions running at once. A task succeeds when its
   entry is `ready for cleaning` and emits the `acid_compacted` asset, which starts `acid_cleaner`, and
   `acid_compacted.<db>.<table>` (both naming the compaction in the event's `extra`); one refused for lack of work
   (Hive's refusal, not a failure) is skipped and emits nothing; it fails with the queue's one-line error message
   when the compaction failed. An entry another worker
   holds is skipped and one compacted already succeeds without running anything, so no entry runs twice.

**When it runs.** On every `acid_compaction_queued` asset event (a poll of `acid_initiator` that queued something)
and every `ACID_WORKER_INTERVAL_SECONDS` (default 60), for entries queued another way. Up to 16 runs at once: a
run waits for its compactions, so a compaction queued while a long one runs starts in the next run as soon as the
pool has a free slot.
"""


def worker_dag(pool: str | None, *, labelled: tuple[str, ...] = ()):
    """The worker DAG of compaction pool `pool` (None: the default pool's `acid_worker`, which also serves every pool
    not in `labelled`, and, after `pool_timeout_seconds`, theirs too, as Hive's default pool does)."""
    dag_id = worker_dag_id(pool)
    params = {"max_compactions": NUMBERS["max_compactions"].param(
        100, "Run at most this many queued compactions in this DAG run")}
    if pool is None:
        params["pool_timeout_seconds"] = NUMBERS["pool_timeout_seconds"].param(
            POOL_TIMEOUT_SECONDS, "Also run compactions of the labelled pools (ACID_COMPACTION_POOLS) that have waited "
                                  "this long (Hive's hive.compactor.worker.pool.timeout); 0: never")
        doc = DOC_MD.format(title="", of_pool=" of the default compaction pool", threads="",
                            airflow_pool=airflow_pool(None),
                            which=(" whose pool is `default` or one without a worker DAG of its own (labelled pools, "
                                   "ACID_COMPACTION_POOLS: " + (", ".join(f"`{name}`" for name in labelled) or "none")
                                   + "; theirs too once they have waited `pool_timeout_seconds`)"))
    else:
        doc = DOC_MD.format(title=f": pool {pool}", of_pool=f" of compaction pool `{pool}`", threads=f".{pool}",
                            airflow_pool=airflow_pool(pool),
                            which=f" in the pool `{pool}` (`POOL '{pool}'`, or the table or database property "
                                  f"`hive.compactor.worker.pool` = `{pool}`)")

    @dag(
        dag_id=dag_id,
        description=(f"Hive's Worker for compaction pool {pool}: " if pool else "Hive's Worker: ")
        + "run the queued compactions on Spark, after each poll that queued some and on a timer",
        schedule=AssetOrTimeSchedule(
            timetable=DeltaTriggerTimetable(interval_from_env("ACID_WORKER_INTERVAL_SECONDS", 60)), assets=[QUEUED]),
        catchup=False,
        max_active_runs=MAX_ACTIVE_RUNS,
        tags=["acid", "compaction"],
        doc_md=doc,
        params=params,
    )
    def worker():
        @task(max_active_tis_per_dag=1)  # one listing at a time: each sees what the previous ones took
        def list_compactions(params=None, ti=None) -> list[int]:
            """The ids of the initiated compactions of this DAG's pool that this run takes: oldest first, at most
            `max_compactions`, none that a still-active run of this DAG took and has not run yet."""
            return _list_compactions(pool, labelled, params, ti)

        AcidCompactionOperator.partial(task_id="compact", pool=airflow_pool(pool), outlets=[COMPACTED, COMPACTED_TABLES],
                                       map_index_template="{{ acid_compaction }}").expand(
            compaction_id=list_compactions())

    return worker()


def _list_compactions(pool: str | None, labelled: tuple[str, ...], params, ti) -> list[int]:
    import json
    import logging

    from acid_plugin.hooks import AcidMetastoreHook
    from airflow.sdk import Variable

    log = logging.getLogger("airflow.task")
    check_numbers(params, {name: bound for name, bound in NUMBERS.items() if name in params})
    hook = AcidMetastoreHook()
    key = listed_variable(pool, hook.acid_metastore_conn_id)
    try:
        stored = json.loads(Variable.get(key, default="{}"))
        listed = {str(run): [int(i) for i in ids] for run, ids in stored.items() if run != ti.run_id}
    except (ValueError, TypeError, AttributeError):
        log.warning("worker: ignoring the unreadable Variable %s", key)
        listed = {}
    kept, held = _held_by_other_runs(ti, listed)
    limit = int(params["max_compactions"])
    if pool is None:  # the default pool: "default" and every pool without a worker DAG of its own
        which = {"other_than": labelled, "pool_timeout_ms": int(params.get("pool_timeout_seconds") or 0) * 1000}
    else:
        which = {"pool": pool}
    with hook.metastore() as metastore:
        waiting = metastore.compactions.initiated(limit=limit + len(held), **which)
    taken = [entry.id for entry in waiting if entry.id not in held][:limit]
    Variable.set(key, json.dumps({**kept, **({ti.run_id: taken} if taken else {})}))
    if held:
        log.info("worker: %d initiated compactions are waiting in other runs of this DAG: %s", len(held),
                 sorted(held))
    log.info("worker: %d compactions of pool %s to run: %s", len(taken), pool or "default (and unlisted pools)",
             taken)
    return taken


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


_LABELLED = tuple(setting.name for setting in configured_pools())
worker_dag(None, labelled=_LABELLED)
for _name in _LABELLED:
    worker_dag(_name)
