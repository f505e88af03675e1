"""Spark reads, writes and compacts a table whose warehouse is on the S3 server (tests/s3_server.py): inserts,
UPDATE, DELETE and MERGE write their delta directories under their final names (no staging, no rename), a Spark
read merges them, a major compaction on Spark writes its base in place, and the server saw no server-side copy."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from acid_core.compaction.cleaner import clean
from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionType
from acid_core.storage.fs import FileSystem
from spark_jobs import write
from spark_jobs.compact import SparkRunner
from spark_jobs.read import read_table

pytestmark = pytest.mark.spark

COLUMNS = [("id", "int"), ("name", "string"), ("amount", "decimal(10,2)")]


@pytest.fixture
def s3_store(tmp_path, s3_warehouse):
    metastore = Metastore(f"sqlite:///{tmp_path}/metastore.db", warehouse=s3_warehouse)
    metastore.init()
    metastore.catalog.create_table("default", "parts", COLUMNS, partition_keys=[("ds", "string")],
                                   params={"transactional": "true"})
    yield metastore
    metastore.close()


def listing(location: str) -> list[str]:
    fs, path = FileSystem.resolve(location)
    return sorted(entry.name for entry in fs.list_dir(path, missing_ok=True))


def spark_rows(spark, store) -> dict[int, tuple]:
    frame = read_table(spark, store, "default", "parts")
    return {row["id"]: (row["name"], float(row["amount"]), row["ds"]) for row in frame.collect()}


def test_spark_writes_reads_and_compacts_on_s3_without_server_side_copies(spark, s3_store, s3_server):
    store = s3_store
    rows = [(i, f"n{i}", D(i), "a" if i % 2 else "b") for i in range(40)]
    model = {i: (f"n{i}", float(i), "a" if i % 2 else "b") for i in range(40)}
    source = spark.createDataFrame(rows, "id int, name string, amount decimal(10,2), ds string").repartition(3)
    write.insert(store, "default", "parts", source)
    write.update(spark, store, "default", "parts", "id < 10", {"name": "'updated'"})
    for i in range(10):
        model[i] = ("updated",) + model[i][1:]
    write.delete(spark, store, "default", "parts", "id >= 35")
    for i in range(35, 40):
        del model[i]
    updates = spark.createDataFrame([(1, "merged", D(100), "a"), (101, "new", D(101), "a")],
                                    "id int, name string, amount decimal(10,2), ds string")
    write.merge(spark, store, "default", "parts", updates, "t.id = s.id AND t.ds = s.ds",
                matched_update={"name": "s.name", "amount": "s.amount"},
                not_matched_insert={"id": "s.id", "name": "s.name", "amount": "s.amount", "ds": "s.ds"})
    model[1] = ("merged", 100.0, "a")
    model[101] = ("new", 101.0, "a")
    assert spark_rows(spark, store) == model
    location = store.catalog.get_table("default", "parts").location
    assert not [name for name in listing(f"{location}/ds=a") if name.startswith(".")]  # nothing staged

    compaction_id = store.compactions.enqueue("default", "parts", "ds=a", CompactionType.MAJOR).compaction_id
    outcome = CompactionWorker(store, runner=SparkRunner(spark)).run(compaction_id)
    assert outcome.result == "compacted", outcome.message
    assert [r.outcome for r in clean(store, log=lambda line: None)] == ["cleaned"]
    [base] = listing(f"{location}/ds=a")
    assert base.startswith("base_") and "_v" in base
    assert spark_rows(spark, store) == model
    counts = s3_server.counts()
    assert not counts.get("CopyObject") and not counts.get("UploadPartCopy"), counts


def test_the_hiveacid_source_writes_on_s3_without_server_side_copies_and_a_failed_write_leaves_nothing(
        spark, s3_store, s3_server):
    """Append (several tasks), INSERT OVERWRITE of one partition, a bucketed append, and an overwrite whose task fails:
    the bases and deltas are written under their final names, the failed write's base is removed (by its abort and
    housekeeping), and the server saw no CopyObject."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    from acid_core.write.table_write import remove_abandoned_staging

    store = s3_store
    store.catalog.create_table("default", "bucketed", COLUMNS[:2], params={"transactional": "true"},
                               bucket_columns=["id"], num_buckets=4)
    schema = "id int, name string, amount decimal(10,2), ds string"

    def save(frame, table, mode):
        frame.write.format("hiveacid").option("metastore", store.url).mode(mode).save(f"default.{table}")

    def read(table):
        frame = spark.read.format("hiveacid").option("metastore", store.url).load(f"default.{table}")
        return sorted(tuple(row) for row in frame.collect())

    rows = [(i, f"n{i}", D(i), "a" if i % 2 else "b") for i in range(20)]
    save(spark.createDataFrame(rows, schema).repartition(3), "parts", "append")
    over = [(100, "over", D(1), "a")]
    save(spark.createDataFrame(over, schema), "parts", "overwrite")
    expected = sorted([r for r in rows if r[3] == "b"] + over)
    assert read("parts") == expected
    save(spark.createDataFrame([(i, f"b{i}") for i in range(30)], "id int, name string").repartition(2), "bucketed",
         "append")
    assert read("bucketed") == sorted((i, f"b{i}") for i in range(30))

    @F.udf(IntegerType())
    def failing(value):
        if value == 3:
            raise ValueError("task failure on purpose")
        return value

    doomed = spark.createDataFrame([(i, "doomed", D(0), "a") for i in range(6)], schema).withColumn("id", failing("id"))
    with pytest.raises(Exception, match="task failure on purpose"):
        save(doomed.repartition(2), "parts", "overwrite")
    remove_abandoned_staging(store)
    location = store.catalog.get_table("default", "parts").location
    assert [name for name in listing(f"{location}/ds=a") if name.startswith("base_")] == ["base_0000002"]
    assert read("parts") == expected
    counts = s3_server.counts()
    assert not counts.get("CopyObject") and not counts.get("UploadPartCopy"), counts
