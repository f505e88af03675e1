"""Run every capped-memory job of test_capped_memory.py in one fresh Spark application whose Python workers are
capped (`spark.executor.pyspark.memory`): `python capped_jobs.py METASTORE_URL WAREHOUSE CAP RESULT_FILE`.

The tables (built by the test with tests/support/big_partition.py) are `default.major`, `minor`, `rebalance` and `plain`, and
laid out as Hive's writer lays files out (64 MiB stripes by ORC's compressed-size rule), `hive_major` and `hive_plain`.
Each job's outcome goes to RESULT_FILE as JSON {job: {"ok": bool, "error": str, ...figures}}; one job failing does
not stop the others. A fresh process because a SparkContext's settings are fixed for its life.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support.*

from acid_core.compaction.worker import CompactionWorker  # noqa: E402
from acid_core.metastore import Metastore  # noqa: E402
from acid_core.metastore.codes import CompactionType  # noqa: E402
from spark_jobs.compact import SPLIT_ROWS, SparkRunner  # noqa: E402
from spark_jobs.session import build_session  # noqa: E402
from support.big_partition import digest  # noqa: E402

WRITE_ROWS = 2_600_000
MEMORY_SIGNS = r"MemoryError|Cannot allocate memory|bad_alloc|Python worker exited unexpectedly|crashed"
PAYLOAD = 1000


def compact(spark, store: Metastore, table: str, kind: str) -> dict:
    enqueued = store.compactions.enqueue("default", table, None, CompactionType.parse(kind),
                                         number_of_buckets=4 if kind == "rebalance" else None)
    # Major in one task, not split over the idle slot: one task streams the whole bucket under the cap.
    runner = SparkRunner(spark, split_rows=None if kind == "major" else SPLIT_ROWS)  # hive_major: one task too
    outcome = CompactionWorker(store, worker_id="capped", runner=runner).run(enqueued.compaction_id)
    return {"result": outcome.result, "message": outcome.message, "after": digest(store, table)}


def read(spark, store: Metastore, table: str = "plain") -> dict:
    from pyspark.sql import functions as F

    from spark_jobs.read import read_table

    frame = read_table(spark, store, "default", table)
    row = frame.agg(F.count("*").alias("rows"), F.sum("id").alias("id_sum"),
                    F.sum(F.length("payload")).alias("payload_bytes")).collect()[0]
    return {"rows": row["rows"], "id_sum": row["id_sum"], "payload_bytes": row["payload_bytes"]}


def write(spark, store: Metastore) -> dict:
    """One Spark task (one writer, so one bucket file) inserts rows of PAYLOAD bytes each."""
    from pyspark.sql import functions as F

    from spark_jobs.write import insert

    store.catalog.create_table("default", "written", [("id", "bigint"), ("payload", "string"),
                                                      ("amount", "double"), ("quantity", "int")],
                               params={"transactional": "true"})
    frame = spark.range(0, WRITE_ROWS, numPartitions=1).select(
        F.col("id"), F.substring(F.repeat(F.col("id").cast("string"), PAYLOAD), 1, PAYLOAD).alias("payload"),
        (F.col("id") % 10_000 / 7.0).alias("amount"), (F.col("id") % 97).cast("int").alias("quantity"))
    summary = insert(store, "default", "written", frame)
    return {"inserted": summary.inserted, "after": digest(store, "written")}


def whole_partition(spark, store: Metastore) -> dict:
    """The control: one task holding the whole partition in memory at once, as compaction did before it streamed."""
    from acid_core.read.merge import read_snapshot

    location = store.catalog.get_table("default", "plain").location
    snapshot = store.txns.snapshot(["default.plain"])
    write_ids, txns = str(snapshot.write_ids["default.plain"]), str(snapshot.txns)

    def whole(_):
        from acid_core.format.validity import ValidTxnList, ValidWriteIdList

        table = read_snapshot(location, write_ids=ValidWriteIdList.parse(write_ids), txns=ValidTxnList.parse(txns))
        return [table.num_rows]

    return {"rows": spark.sparkContext.parallelize([0], 1).mapPartitions(whole).collect()[0]}


def whole_stripe(spark, store: Metastore) -> dict:
    """The control of the Hive-shaped jobs: one task decoding the first stripe of hive_plain's base at once (what
    reads and compactions did before they streamed inside stripes)."""
    location = store.catalog.get_table("default", "hive_plain").location

    def decode(_):
        import glob

        import pyarrow.orc as pa_orc

        path = glob.glob(f"{location}/base_*/bucket_*")[0]
        with open(path, "rb") as handle:
            return [pa_orc.ORCFile(handle).read_stripe(0).num_rows]

    return {"rows": spark.sparkContext.parallelize([0], 1).mapPartitions(decode).collect()[0]}


def main() -> int:
    url, warehouse, cap, result_file = sys.argv[1:5]
    spark = build_session("capped-memory-tests", master="local[2]", conf={"spark.executor.pyspark.memory": cap})
    store = Metastore(url, warehouse=warehouse)
    jobs = {"major": lambda: compact(spark, store, "major", "major"),
            "minor": lambda: compact(spark, store, "minor", "minor"),
            "rebalance": lambda: compact(spark, store, "rebalance", "rebalance"),
            "read": lambda: read(spark, store), "write": lambda: write(spark, store),
            "whole_partition": lambda: whole_partition(spark, store),
            "hive_major": lambda: compact(spark, store, "hive_major", "major"),
            "hive_read": lambda: read(spark, store, "hive_plain"),
            "whole_stripe": lambda: whole_stripe(spark, store)}
    results = {}
    for name, job in jobs.items():
        try:
            results[name] = {"ok": True, **job()}
        except Exception as exc:  # reported to the test, which decides
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            raised = [line for line in lines if re.match(r"[A-Za-z_.]*(Error|Exception)\b", line)]
            # out of memory shows as a MemoryError, or, where native code's allocation fails, as the worker crashing
            memory = [line for line in lines if re.search(MEMORY_SIGNS, line)]
            results[name] = {"ok": False,
                             "error": " | ".join(memory[:2] + raised[-3:] or lines[-1:] or [repr(exc)])[:2000]}
    Path(result_file).write_text(json.dumps(results))
    store.close()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
