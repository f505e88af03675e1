"""What `df.write.format("hiveacid")` writes, read by Hive 2.3.10's own readers (row mode and vectorized).

One unpartitioned table takes two appends from several Spark tasks (one file per task), an INSERT OVERWRITE (a
`base_N`) and a later append; one bucketed table takes appends whose tasks' parts the commit joined into one file per
bucket, and an overwrite. Hive reads each table directory under the metastore's snapshot and must give the rows,
ROW__IDs included, that acid_core's merge-on-read gives. One JVM reads everything.
"""

from __future__ import annotations

import pytest

from acid_core.read.merge import read_snapshot
from acid_core.write.table import AcidTable

from .harness import HiveHarness, sort_rows

pytestmark = [pytest.mark.interop, pytest.mark.spark]

COLUMNS = (("id", "int"), ("name", "string"))
SCHEMA = "id int, name string"
MODES = ("row", "vectorized")


def _save(spark, store, rows, table, mode, partitions):
    (spark.createDataFrame(rows, SCHEMA).repartition(partitions).write.format("hiveacid")
     .option("metastore", store.url).mode(mode).save(f"default.{table}"))


def _ours(store, table):
    info = AcidTable.load(store, "default", table).info
    snapshot = store.txns.snapshot([info.full_name])
    rows = read_snapshot(info.location, write_ids=snapshot.write_ids[info.full_name], txns=snapshot.txns,
                         include_row_id=True).to_pylist()
    return info.location, str(snapshot.write_ids[info.full_name]), sort_rows(rows)


def test_hive_reads_what_the_data_source_wrote(spark, store, hive):
    store.catalog.create_table("default", "plain", list(COLUMNS), params={"transactional": "true"})
    store.catalog.create_table("default", "bucketed", list(COLUMNS), params={"transactional": "true"},
                               bucket_columns=["id"], num_buckets=4)
    for table in ("plain", "bucketed"):
        _save(spark, store, [(i, f"first {i}") for i in range(40)], table, "append", 3)
        _save(spark, store, [(i, f"second {i}") for i in range(30, 60)], table, "append", 2)
    _save(spark, store, [(i, f"over {i}") for i in range(10)], "plain", "overwrite", 2)
    _save(spark, store, [(i, f"after {i}") for i in range(5)], "plain", "append", 1)
    _save(spark, store, [(i, f"over {i}") for i in range(25)], "bucketed", "overwrite", 3)

    expected, jobs = {}, []
    for table in ("plain", "bucketed"):
        location, write_ids, rows = _ours(store, table)
        assert rows, table
        expected[table] = rows
        jobs += [HiveHarness.read_job(location, columns=COLUMNS, write_ids=write_ids, mode=mode) for mode in MODES]
    outcomes = iter(hive.batch(jobs))
    for table in ("plain", "bucketed"):
        for mode in MODES:
            outcome = next(outcomes)
            assert outcome["ok"], f"Hive 2.3 {mode} reader failed on {table}: {outcome['error']}"
            assert sort_rows(outcome["result"]) == expected[table], (table, mode)
    assert len(expected["plain"]) == 15 and len(expected["bucketed"]) == 25
