"""acid_compact: queue a major, minor or rebalance compaction of one table or partition, and run it, on demand.

No work at import time: the hook and the metastore are imported inside the tasks (at the top only the core's light
`acid_core.compaction.codes`, for the compaction type words).
"""

from __future__ import annotations

from acid_core.compaction.codes import MAX_REBALANCE_BUCKETS, REQUESTABLE_TYPES
from acid_plugin.assets import COMPACTED
from acid_plugin.operators import COMPACTION_POOL, AcidCompactionOperator
from acid_plugin.params import PARTITION, POOL_NAME, table_params
from airflow.sdk import Param, dag, task

DOC_MD = """
### ACID compact

Queues a compaction (`ALTER TABLE ... [PARTITION (...)] COMPACT 'major'|'minor'|'rebalance' [CLUSTERED INTO n
BUCKETS]`) of one full ACID table of the
`acid_metastore` connection, then, when `wait` is true, runs it as a spark-submit job (`spark_jobs/compact.py`
through the `spark_default` connection, in the `acid_compaction` pool) exactly as `acid_worker` would.
With `wait` false the worker DAG of its pool (`acid_worker`, or `acid_worker_<pool>`) runs it at its next run
(within `ACID_WORKER_INTERVAL_SECONDS`).

- `partition` is a partition name such as `ds=2026-01-01/hr=3`; it is required for a partitioned table (and must
  exist in the catalog), refused for an unpartitioned one.
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
- Unknown tables, tables that are not full ACID and malformed or unknown partitions fail `enqueue`, which names
  the problem; nothing is queued.
- `enqueue` returns the compaction id; `compact` returns `{"compaction_id", "state", ...}`. A successful run ends in
  `ready for cleaning` and emits the `acid_compacted` asset, which starts `acid_cleaner`.
"""


@dag(
    dag_id="acid_compact",
    schedule=None,
    catchup=False,
    tags=["acid", "compaction"],
    doc_md=DOC_MD,
    params={
        **table_params(),
        "partition": Param(None, type=["null", "string"], pattern=PARTITION,
                           description="Partition name, e.g. ds=2026-01-01/hr=3 (null for an unpartitioned table)."),
        "type": Param("major", type="string", enum=list(REQUESTABLE_TYPES), description="Compaction type."),
        "number_of_buckets": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_REBALANCE_BUCKETS,
                                   description="rebalance only: CLUSTERED INTO n BUCKETS (empty: the number of "
                                               "bucket ids the partition has now)."),
        "pyspark_memory": Param(None, type=["null", "string"], pattern=r"^[0-9]{1,9}[kKmMgGtT]?[bB]?$",
                                description="The Spark job's Python worker memory cap (spark.executor.pyspark.memory"
                                            ", e.g. 3g) for this run; empty: the table's "
                                            "compactor.spark.executor.pyspark.memory, else 2g."),
        "properties": Param({}, type="object", maxProperties=64,
                            description="This run's WITH OVERWRITE TBLPROPERTIES: compactor.spark.<setting> (e.g. "
                                        "compactor.spark.executor.memory: 8g) and the job queue "
                                        "(compactor.hive.compactor.job.queue), over the table's and the database's."),
        "pool": Param(None, type=["null", "string"], pattern=POOL_NAME,
                      description="Compaction pool (POOL 'name'); empty: the table's or database's "
                                  "hive.compactor.worker.pool, else default."),
        "wait": Param(True, type="boolean", description="Run the compaction on Spark in this DAG run."),
    },
)
def acid_compact():
    @task
    def enqueue(params=None) -> int:
        """Check the table and partition, queue the compaction; returns its id (or the already queued one's)."""
        import logging
        import re

        from acid_core.errors import AcidError
        from acid_core.layout import parse_partition_dir_name
        from acid_core.compaction.codes import REBALANCE_BUCKETED_MESSAGE, CompactionType, check_number_of_buckets
        from acid_core.metastore.properties import PYSPARK_MEMORY_PROPERTY, spark_conf_of
        from acid_plugin.hooks import AcidMetastoreHook

        log = logging.getLogger("airflow.task")
        database, table, partition = params["database"], params["table"], params.get("partition")
        if partition is not None and not re.match(PARTITION, partition):
            raise ValueError(f"acid_compact: malformed partition {partition!r}: expected key=value[/key=value...]")
        compaction_type = CompactionType.parse(params["type"])
        buckets = params.get("number_of_buckets")
        try:
            check_number_of_buckets(compaction_type, buckets)
        except AcidError as exc:
            raise ValueError(f"acid_compact: {exc}") from None
        with AcidMetastoreHook().metastore() as metastore:
            try:
                info = metastore.catalog.require_transactional(database, table)
                if compaction_type is CompactionType.REBALANCE and info.num_buckets > 0:
                    raise ValueError(f"cannot rebalance {info.full_name}: {REBALANCE_BUCKETED_MESSAGE}")
                if info.partition_keys:
                    if partition is None:
                        raise ValueError(f"table {info.full_name} is partitioned: give a partition")
                    name = info.partition_name(parse_partition_dir_name(partition))
                    known = {p.name for p in metastore.catalog.list_partitions(database, table)}
                    if name not in known:
                        raise ValueError(f"table {info.full_name} has no partition {name!r}")
                elif partition is not None:
                    raise ValueError(f"table {info.full_name} is not partitioned, got partition {partition!r}")
                else:
                    name = None
            except AcidError as exc:
                raise RuntimeError(f"acid_compact: refusing {database}.{table}: {exc}") from exc
            memory = params.get("pyspark_memory")
            overwrite = {str(key): str(value) for key, value in (params.get("properties") or {}).items()}
            if memory:
                overwrite[PYSPARK_MEMORY_PROPERTY] = memory
            try:
                for key, value in overwrite.items():  # every one must be a compaction setting, and a valid one
                    if spark_conf_of(key, value, what="the properties param's") is None:
                        raise ValueError(f"acid_compact: the properties param's {key!r} is not a compaction setting "
                                         "(compactor.spark.<setting> or compactor.hive.compactor.job.queue)")
                result = metastore.compactions.enqueue(
                    info.database, info.name, name, compaction_type, number_of_buckets=buckets,
                    pool=params.get("pool") or None, properties=overwrite or None)
            except AcidError as exc:
                raise ValueError(f"acid_compact: {exc}") from None
        log.info("acid_compact: %s", result.message)
        return result.compaction_id

    @task.short_circuit
    def run_now(compaction_id: int, params=None) -> bool:
        """Go on to the Spark job when `wait`; otherwise the acid_worker DAG runs the compaction at its next run."""
        import logging

        if not params["wait"]:
            logging.getLogger("airflow.task").info(
                "acid_compact: compaction %d queued; the worker DAG of its pool runs it at its next run", compaction_id)
        return bool(params["wait"])

    compaction_id = enqueue()
    compact = AcidCompactionOperator(task_id="compact", compaction_id=compaction_id, pool=COMPACTION_POOL,
                                     outlets=[COMPACTED])
    run_now(compaction_id) >> compact


acid_compact()
