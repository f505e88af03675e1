"""acid_compact: queue a major, minor or rebalance compaction of one table or partition, and run it, on demand.

No work at import time: the hook and the metastore are imported inside the tasks (at the top only the core's light
`acid_core.metastore.codes`, for the compaction type words, and the settings registry).
"""

from __future__ import annotations

from acid_plugin.assets import COMPACTED, COMPACTED_TABLES
from acid_plugin.operators import COMPACTION_POOL, AcidCompactionOperator
from acid_plugin.params import PARTITION, PARTITION_EXPECTED, POOL_NAME, number_param, setting_param, table_params
from airflow.sdk import Param, dag, task

from acid_core import settings
from acid_core.metastore.codes import MAX_REBALANCE_BUCKETS, REQUESTABLE_TYPES
from acid_core.settings import Bounds

NUMBERS = {"number_of_buckets": Bounds(1, MAX_REBALANCE_BUCKETS)}  # a request's, not a setting
SETTINGS = settings.for_dag("acid_compact")  # the settings a request may set for itself

DOC_MD = """
### ACID compact

Queues a compaction (`ALTER TABLE ... [PARTITION (...)] COMPACT 'major'|'minor'|'rebalance' [CLUSTERED INTO n
BUCKETS]`) of one full ACID table of the
`acid_metastore` connection, then, when `wait` is true, runs it as a spark-submit job (`spark_jobs/compact.py`
through the `spark_default` connection, in the `acid_compaction` pool) exactly as `acid_worker` would.
With `wait` false the worker DAG of its pool (`acid_worker`, or `acid_worker_<pool>`) runs it at its next run
(within `ACID_WORKER_INTERVAL_SECONDS`).

- `partition` is a partition name such as `ds=2026-01-01/hr=3` (it must exist in the catalog; refused for an
  unpartitioned table). Empty on a partitioned table: every partition with something to compact is queued, as
  `ALTER TABLE t COMPACT 'major'` does in Hive 4 (none: the run ends as skipped, with the reason).
- `rebalance` (Hive 4) rewrites an unbucketed table's partition into `number_of_buckets` bucket files of about
  equal size (empty: as many as it has bucket ids now), so one huge `bucket_00000` is compacted by as many Spark
  tasks from then on. Rows keep their write ids and get new ROW__IDs; it takes an exclusive write lock, and an
  update or delete that read the old ROW__IDs fails with a write conflict. Refused on bucketed tables.
- `pyspark_memory` caps the Spark job's Python workers for this run (`spark.executor.pyspark.memory`, queued as
  the request's `compactor.spark.executor.pyspark.memory`, as `WITH OVERWRITE TBLPROPERTIES` does); without it the
  table property of that name applies, else 2g. A compaction streams its bucket, so the cap need not grow with it.
- `properties` are this run's `WITH OVERWRITE TBLPROPERTIES`: any `compactor.spark.<setting>` (executor memory and
  cores, dynamic allocation, ...: resources and tuning only) and the job queue `compactor.hive.compactor.job.queue`,
  over the table's and the database's; anything else is refused before the compaction is queued.
- `pool` queues it in that compaction pool (Hive 4's `POOL 'name'`); empty: the table's `hive.compactor.worker.pool`,
  else its database's, else `default`. With `wait` false the pool's worker DAG runs it (`acid_worker_<pool>` for a
  pool of ACID_COMPACTION_POOLS, else `acid_worker`); with `wait` this run does, in the `acid_compaction` pool.
- When a compaction of the same partition is already queued, its id is used and reported.
- `database` and `table` are required (no default). A malformed name or partition, an unknown type or pool name
  and an out-of-range number are refused by the trigger itself (form or REST API: a 400 with the param's message;
  no run is made). Unknown tables, tables that are not full ACID and unknown partitions fail `enqueue` with one line
  naming the problem (an unknown partition: with the table's partitions), no traceback; nothing is queued.
  `enqueue`'s XCom `outcome` says the same for API callers: `{"ok": false, "reason": ..., "partitions": [...]}`.
- `enqueue` returns the compaction ids (XCom `outcome`: `{"ok": true, "compaction_ids": [...], ...}`); `compact`
  is mapped over them, each labelled `<id>: <type> <db.table> partition <name>`, and returns
  `{"compaction_id", "state", ...}`. A compaction that ends `ready for cleaning` emits the `acid_compacted` asset
  (which starts `acid_cleaner`) and `acid_compacted.<db>.<table>`, both with the database, table, partition,
  compaction id and type in the event's `extra`. One the worker refuses for lack of work ends as skipped, with
  Hive's reason, and emits nothing.
"""


@dag(
    dag_id="acid_compact",
    description="Queue a major, minor or rebalance compaction of a table or partition (or of every partition that "
                "needs one) and run it on Spark",
    schedule=None,
    catchup=False,
    tags=["acid", "compaction"],
    doc_md=DOC_MD,
    params={
        **table_params(),
        "partition": Param(None, type=["null", "string"], pattern=PARTITION, maxLength=1000,
                           description=f"Partition name, {PARTITION_EXPECTED}; empty: the whole table (every "
                                       "partition that needs it, on a partitioned table)."),
        "type": Param("major", type="string", enum=list(REQUESTABLE_TYPES), description="Compaction type."),
        "number_of_buckets": number_param(
            NUMBERS["number_of_buckets"], None, "rebalance only: CLUSTERED INTO n BUCKETS (empty: the number of "
            "bucket ids the partition has now)", nullable=True, refuse_on_trigger=True),
        "pyspark_memory": setting_param(
            settings.PYSPARK_MEMORY, nullable=True, description="The Spark job's Python worker memory cap "
            "(spark.executor.pyspark.memory) for this run",
            empty=f"the table's {settings.PYSPARK_MEMORY.property_key}, else {settings.PYSPARK_MEMORY.default}"),
        "properties": Param({}, type="object", maxProperties=64,
                            description="This run's WITH OVERWRITE TBLPROPERTIES: compactor.spark.<setting> (e.g. "
                                        "compactor.spark.executor.memory: 8g) and the job queue "
                                        "(compactor.hive.compactor.job.queue), over the table's and the database's."),
        "pool": Param(None, type=["null", "string"], pattern=POOL_NAME,
                      description="Compaction pool (POOL 'name': letters, digits, _, - and .); empty: the table's or "
                                  "database's hive.compactor.worker.pool, else default."),
        "wait": Param(True, type="boolean", description="Run the compactions on Spark in this DAG run."),
    },
)
def acid_compact():
    @task(map_index_template="{{ acid_request }}", retries=0)  # a refusal is final (outcomes.refuse)
    def enqueue(params=None, ti=None) -> list[int]:
        """Check the request, queue the compactions; returns their ids (an already queued one's id is reused)."""
        return _enqueue(params, ti)

    @task.short_circuit
    def run_now(compaction_ids: list[int], params=None) -> bool:
        """Go on to the Spark jobs when `wait`; otherwise the acid_worker DAG runs the compactions at its next run."""
        import logging

        if not params["wait"]:
            logging.getLogger("airflow.task").info(
                "acid_compact: compactions %s queued; the worker DAG of their pool runs them at its next run",
                list(compaction_ids))
        return bool(params["wait"])

    compaction_ids = enqueue()
    compact = AcidCompactionOperator.partial(
        task_id="compact", pool=COMPACTION_POOL, outlets=[COMPACTED, COMPACTED_TABLES],
        map_index_template="{{ acid_compaction }}").expand(compaction_id=compaction_ids)
    run_now(compaction_ids) >> compact


def _enqueue(params, ti) -> list[int]:
    """The `enqueue` task: refusals fail it with one line and an `outcome` XCom; nothing to compact skips it. The
    request's rules are `acid sql`'s (`acid_core.compaction.requests.check_request`)."""
    import logging

    from acid_plugin.hooks import AcidMetastoreHook
    from acid_plugin.outcomes import nothing_to_do, push_outcome, refuse
    from acid_plugin.params import check_numbers, check_partition, check_setting_params
    from airflow.sdk import get_current_context

    from acid_core.compaction.requests import PARTITIONS_SHOWN, check_request
    from acid_core.errors import AcidError, NoSuchPartitionError

    log = logging.getLogger("airflow.task")
    database, table, partition = params["database"], params["table"], params.get("partition") or None
    request = {"database": database, "table": table, "partition": partition}
    get_current_context()["acid_request"] = (  # the task's label in the UI: which table this run compacts
        f"{database}.{table}" + (f" partition {partition}" if partition else " (every partition that needs it)"))
    overwrite = dict(params.get("properties") or {})
    if params.get("pyspark_memory"):
        overwrite[settings.PYSPARK_MEMORY.property_key] = params["pyspark_memory"]
    try:
        check_partition(partition)
        check_numbers(params, NUMBERS)
        check_setting_params(params, SETTINGS)
    except (ValueError, AcidError) as exc:
        raise refuse(ti, f"acid_compact: {exc}", **request) from None
    with AcidMetastoreHook().metastore() as metastore:
        try:
            checked = check_request(metastore, database, table, params["type"], partition=partition,
                                    number_of_buckets=params.get("number_of_buckets"), pool=params.get("pool") or None,
                                    properties=overwrite, compaction_settings_only=True)
        except NoSuchPartitionError as exc:  # the outcome lists the partitions for API callers
            raise refuse(ti, f"acid_compact: {exc}", **request, partitions=exc.partitions[:PARTITIONS_SHOWN],
                         more_partitions=max(0, len(exc.partitions) - PARTITIONS_SHOWN)) from None
        except AcidError as exc:  # an unknown table, not a full ACID table, a request Hive refuses
            raise refuse(ti, f"acid_compact: refusing {database}.{table}: {exc}", **request) from None
        info = checked.table
        if not checked.targets:
            raise nothing_to_do(ti, f"acid_compact: no partition of {info.full_name} has anything to compact; "
                                    "nothing queued", **request, compaction_ids=[])
        try:
            results = [metastore.compactions.enqueue(info.database, info.name, target, checked.compaction_type,
                                                     number_of_buckets=checked.number_of_buckets, pool=checked.pool,
                                                     properties=checked.properties) for target in checked.targets]
        except AcidError as exc:
            raise refuse(ti, f"acid_compact: {exc}", **request) from None
    for result in results:
        log.info("acid_compact: %s", result.message)
    ids = [result.compaction_id for result in results]
    push_outcome(ti, ok=True, reason=f"acid_compact: {len(ids)} compactions of {info.full_name} queued: {ids}",
                 **request, compaction_ids=ids, partitions=[t for t in checked.targets if t is not None])
    return ids


acid_compact()
