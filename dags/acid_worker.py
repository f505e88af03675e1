"""acid_worker: Hive's Worker — run the queued compactions on Spark, after each poll that queued some and on a timer.

One DAG per compaction pool (Hive 4's `hive.compactor.worker.pool`): `acid_worker` for the "default" pool and every
pool without workers of its own, and `acid_worker_<name>` for each labelled pool of ACID_COMPACTION_POOLS (made by
`worker_dag` below), whose compactions run in the Airflow pool `acid_compaction_<name>`: Airflow cannot give mapped
task instances different pools (apache/airflow#33657), so a pool is a DAG. A busy table in its own pool then takes
only that pool's slots. Each `compact` task is one worker slot that runs the pool's queue oldest first in long-lived
Spark applications (acid_plugin.batch): the start-up is paid per application, not per compaction. No work at import
time: acid_core and the hook are imported inside the tasks.
"""

from __future__ import annotations

import os

from acid_plugin.assets import COMPACTED, COMPACTED_TABLES, QUEUED
from acid_plugin.batch import AcidCompactionBatchOperator
from acid_plugin.params import check_setting_params, schedule_interval, setting_param
from acid_plugin.pools import airflow_pool, configured_pools, worker_dag_id
from airflow.sdk import AssetOrTimeSchedule, DeltaTriggerTimetable, dag, task

from acid_core import settings
from acid_core.errors import UsageError

MAX_ACTIVE_RUNS = 16


def default_workers(pool: str | None) -> int:
    """How many `compact` tasks a run starts at most: the Airflow pool's slots as `make run` and docker-compose set
    them (a labelled pool's own slots, else ACID_WORKER_THREADS, Hive's hive.compactor.worker.threads; default 1;
    a bad value, which `make run` refuses, counts as unset). More would only wait for a slot; a run's tasks all pull
    from the same queue."""
    try:
        threads = settings.WORKER_THREADS.from_environ(os.environ)
    except UsageError:
        threads = settings.WORKER_THREADS.default
    if pool is None:
        return threads
    return next((setting.slots or threads for setting in configured_pools() if setting.name == pool), threads)


DOC_MD = """
### ACID worker{title}

Hive's Worker{of_pool}: runs the compactions waiting in the queue of the `acid_metastore` connection (state
`initiated`, queued by `acid_initiator`, by `acid_compact` with `wait` false, by `ALTER TABLE ... COMPACT`, or put back
by `acid_housekeeping`){which}.

1. **`list_compactions`** counts the waiting compactions (oldest first, its XCom `waiting` lists at most 100 of them)
   and starts as many `compact` workers as the pool has slots (`workers`), fewer if fewer wait, sharing
   `max_compactions` between them.
2. **`compact`** (acid_plugin.batch) is one worker slot in the Airflow pool `{airflow_pool}`, whose slots are this
   pool's worker-thread count (`hive.compactor.worker{threads}.threads`) and so cap its compactions running at once.
   It runs the pool's compactions one after another in a long-lived Spark application (`spark_jobs/compact.py
   --batch`, connection `spark_default`), each time taking the oldest waiting entry, so entries start in enqueue
   order whichever run's task got the slot; it stops when none waits, after its share of `max_compactions`, or after
   `batch_seconds` (the compaction in hand finishes). An entry whose `compactor.spark.*` settings differ from the
   running application's gets an application of its own. Each compaction has its own lines in the task log (its
   HadoopJobId names the application and the Spark job), metrics and alerts, and a summary in the task's return
   value (the map label lists the compaction ids). The task emits `acid_compacted` (which starts `acid_cleaner`;
   its `extra` lists the compactions) and `acid_compacted.<db>.<table>`; it is skipped when nothing was waiting or
   everything was refused for lack of work (Hive's refusal, not a failure); it fails, without retries, naming them,
   when compactions failed (the others ran); a killed application fails it retryably (housekeeping puts its
   compaction in hand back). Claims are compare-and-swaps, so no entry runs twice.

**When it runs.** On every `acid_compaction_queued` asset event (a poll of `acid_initiator` that queued something)
and every `ACID_WORKER_INTERVAL_SECONDS` (default 60), for entries queued another way. Up to 16 runs at once; a
running worker also takes what was queued after it started.
"""


def worker_dag(pool: str | None, *, labelled: tuple[str, ...] = ()):
    """The worker DAG of compaction pool `pool` (None: the default pool's `acid_worker`, which also serves every pool
    not in `labelled`, and, after `pool_timeout_seconds`, theirs too, as Hive's default pool does)."""
    dag_id = worker_dag_id(pool)
    params = {
        setting.param_name: setting_param(setting) for setting in settings.for_dag("acid_worker")
        if pool is None or setting is not settings.POOL_TIMEOUT}
    params[settings.WORKER_THREADS.param_name] = setting_param(
        settings.WORKER_THREADS, default=default_workers(pool), description="Start at most this many compaction "
        "workers; the Airflow pool's slots, the default, cap how many run at once")
    if pool is None:
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
            timetable=DeltaTriggerTimetable(schedule_interval(settings.WORKER_INTERVAL)), assets=[QUEUED]),
        catchup=False,
        max_active_runs=MAX_ACTIVE_RUNS,
        tags=["acid", "compaction"],
        doc_md=doc,
        params=params,
    )
    def worker():
        @task
        def list_compactions(params=None, ti=None) -> list[dict]:
            """The `compact` workers of this run: `{"max_compactions": n}` each, as many as the pool has slots and
            compactions wait."""
            return _list_compactions(pool, labelled, params, ti)

        AcidCompactionBatchOperator.partial(
            task_id="compact", pool=airflow_pool(pool), outlets=[COMPACTED, COMPACTED_TABLES],
            map_index_template="{{ acid_compaction }}", compaction_pool=pool, other_than=labelled if pool is None else (),
            pool_timeout_seconds="{{ params.pool_timeout_seconds | default(0) }}",
            batch_seconds="{{ params.batch_seconds }}").expand_kwargs(list_compactions())

    return worker()


def _list_compactions(pool: str | None, labelled: tuple[str, ...], params, ti) -> list[dict]:
    import logging

    from acid_plugin.hooks import AcidMetastoreHook

    from acid_core.compaction.batch import QueueSelection

    log = logging.getLogger("airflow.task")
    check_setting_params(params, settings.for_dag("acid_worker"))
    limit, workers = int(params["max_compactions"]), int(params["workers"])
    selection = QueueSelection(pool=pool, other_than=labelled if pool is None else (),
                               pool_timeout_ms=int(params.get("pool_timeout_seconds") or 0) * 1000)
    with AcidMetastoreHook().metastore() as metastore:
        waiting = selection.waiting(metastore, limit=min(limit, max(workers, 100)))
    count = min(len(waiting), limit, workers)
    shares = [limit // count + (1 if index < limit % count else 0) for index in range(count)] if count else []
    ti.xcom_push(key="waiting", value=[entry.id for entry in waiting])
    log.info("worker: %s%d compactions of pool %s waiting, oldest first: %s; %d workers", "at least " if len(
        waiting) >= 100 else "", len(waiting), pool or "default (and unlisted pools)",
        [entry.id for entry in waiting], count)
    return [{"max_compactions": share} for share in shares]


_LABELLED = tuple(setting.name for setting in configured_pools())
worker_dag(None, labelled=_LABELLED)
for _name in _LABELLED:
    worker_dag(_name)
