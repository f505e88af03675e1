"""The `hiveacid` data source's batch write (spark_jobs/datasource_write.py), through its public API only: the format
name, `mode` and the options, on the tests' local Spark session.

After every write the table holds what a model of appends and INSERT OVERWRITEs says, read both by the data source
and by acid_core's own merge-on-read (`support.read_tables.expected_rows`); what lies on disk is checked where Hive's
layout matters (one file per bucket, every row in its Hive bucket, keys ascending, nothing hidden left behind).
"""

from __future__ import annotations

import collections
import time

import pyarrow.orc as orc
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType
from support.read_tables import Table, expected_rows
from support.timeouts import timing_out

from acid_core.format.bucketing import bucket_function
from acid_core.format.layout import parse_directory
from acid_core.format.orc_events import EventFile
from acid_core.storage.fs import FileSystem
from acid_core.write.table_write import remove_abandoned_staging

pytestmark = pytest.mark.spark


def save(df, store, table, mode="append", **options):
    writer = df.write.format("hiveacid").option("metastore", store.url).mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(f"default.{table}")


def read(spark, store, table) -> list[tuple]:
    rows = spark.read.format("hiveacid").option("metastore", store.url).load(f"default.{table}").collect()
    return sorted(tuple(row) for row in rows)


def stored(store, table) -> list[tuple]:
    """acid_core's own read of the table, as tuples of its columns and partition columns."""
    return sorted(tuple(row.values()) for row in expected_rows(store, table, include_row_id=False))


def frame(spark, rows, schema="id bigint, name string, amount double, region string"):
    return spark.createDataFrame(rows, schema)


def hidden_or_parts(location: str) -> list[str]:
    """Staging directories and unjoined parts anywhere under a table's location."""
    fs, root = FileSystem.resolve(location)
    found, stack = [], [root]
    while stack:
        for entry in fs.list_dir(stack.pop()):
            if entry.name.startswith(".") or ".part-" in entry.name:
                found.append(entry.path)
            elif entry.is_dir:
                stack.append(entry.path)
    return found


def swept_by_housekeeping(spark, store, location: str) -> None:
    """Housekeeping, run once the failed write's tasks are gone (its runs are minutes apart), removes what the write
    staged: what the abort found, and what tasks Spark was still killing wrote after it (the abort leaves the staging
    record for that). A sweep the moment the write failed could forget the record before such a task wrote."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + 60
    while sum(executor.numRunningTasks() for executor in tracker.getExecutorInfos()) > 0:
        assert time.monotonic() < deadline, "the failed write's tasks still run after 60 s"
        time.sleep(0.1)
    _, problems = remove_abandoned_staging(store)
    assert problems == [] and hidden_or_parts(location) == []
    assert store.txns.abandoned_staging(limit=10) == []


def test_appends_and_overwrites_leave_the_table_as_the_model_says(spark, store):
    Table(store, "sales", partition_keys=[("region", "string")]).insert(
        [(1, "kept", 1.0)], partition={"region": "ap"})
    model = collections.Counter({(1, "kept", 1.0, "ap"): 1})

    first = [(i, f"n{i}", i / 2, "eu" if i % 2 else "us") for i in range(10)]
    save(frame(spark, first).repartition(3), store, "sales")
    model.update(first)
    assert read(spark, store, "sales") == stored(store, "sales") == sorted(model.elements())
    assert {p.spec["region"] for p in store.catalog.list_partitions("default", "sales")} == {"ap", "eu", "us"}

    again = [(i, "again", None, "us") for i in range(3)] + [(50, "new", 5.0, "sa")]  # a new partition too
    save(frame(spark, again), store, "sales", mode="append")
    model.update(again)
    assert read(spark, store, "sales") == sorted(model.elements())

    # INSERT OVERWRITE replaces exactly the partitions its rows fall in
    replacement = [(100, "over", 1.5, "eu"), (101, "over", 2.5, "eu"), (102, "over", None, "sa")]
    save(frame(spark, replacement), store, "sales", mode="overwrite")
    model = collections.Counter({row: n for row, n in model.items() if row[3] not in ("eu", "sa")})
    model.update(replacement)
    assert read(spark, store, "sales") == stored(store, "sales") == sorted(model.elements())

    save(frame(spark, [], schema="id bigint, name string, amount double, region string"), store, "sales",
         mode="overwrite")  # no rows: no partition replaced
    save(frame(spark, [(103, "after", 0.0, "eu")]), store, "sales")
    model.update([(103, "after", 0.0, "eu")])
    assert read(spark, store, "sales") == stored(store, "sales") == sorted(model.elements())

    location = store.catalog.get_table("default", "sales").location
    fs, _ = FileSystem.resolve(location)
    eu = sorted(entry.name for entry in fs.list_dir(f"{location}/region=eu"))
    assert [name for name in eu if name.startswith("base_")] == ["base_0000004"]  # Hive's INSERT OVERWRITE base
    assert hidden_or_parts(location) == []
    assert store.txns.snapshot(["default.sales"]).write_ids["default.sales"].open_ids == ()


def test_an_unpartitioned_overwrite_without_rows_empties_the_table(spark, store):
    Table(store, "plain").insert([(i, "old", 1.0) for i in range(5)])
    schema = "id bigint, name string, amount double"
    save(frame(spark, [], schema=schema), store, "plain", mode="overwrite")
    assert read(spark, store, "plain") == stored(store, "plain") == []
    save(frame(spark, [(7, "new", 2.0)], schema=schema), store, "plain")
    assert read(spark, store, "plain") == [(7, "new", 2.0)]


def test_columns_match_by_name_and_smaller_types_widen(spark, store):
    Table(store, "plain")
    df = spark.createDataFrame([("a", 1, 2.5), ("b", 2, None)], "NAME string, id int, amount float")
    save(df, store, "plain")
    assert read(spark, store, "plain") == [(1, "a", 2.5), (2, "b", None)]


def test_a_bucketed_table_gets_one_file_per_bucket_with_every_row_in_its_hive_bucket(spark, store):
    table = Table(store, "buckets", bucket_columns=["id"], num_buckets=8)
    rows = [(i * 7919 % 1000, f"r{i}", float(i)) for i in range(400)]
    schema = "id bigint, name string, amount double"
    save(frame(spark, rows, schema=schema).repartition(3), store, "buckets")
    save(frame(spark, rows[:50], schema=schema).repartition(2), store, "buckets", mode="append")
    model = collections.Counter(rows) + collections.Counter(rows[:50])
    assert read(spark, store, "buckets") == stored(store, "buckets") == sorted(model.elements())

    place = bucket_function(table.info.columns, ["id"], 8, version=2)
    fs, location = FileSystem.resolve(table.info.location)
    deltas = [entry for entry in fs.list_dir(location) if entry.is_dir]
    assert len(deltas) == 2 and all(parse_directory(d.name) is not None for d in deltas)
    for delta in deltas:
        names = sorted(entry.name for entry in fs.list_dir(delta.path) if entry.name.startswith("bucket_"))
        assert len(names) == len(set(names)) <= 8
        for name in names:
            events = orc.ORCFile(f"{delta.path}/{name}").read()
            keys = list(zip(events.column("originalTransaction").to_pylist(), events.column("bucket").to_pylist(),
                            events.column("rowId").to_pylist()))
            assert keys == sorted(set(keys))  # unique and ascending, across the joined parts
            assert {place(tuple(r.values())) for r in events.column("row").to_pylist()} == {int(name[7:])}
            assert EventFile(fs, f"{delta.path}/{name}").stats.inserts == len(keys)

    save(frame(spark, rows[:20], schema=schema).repartition(2), store, "buckets", mode="overwrite")
    assert read(spark, store, "buckets") == stored(store, "buckets") == sorted(rows[:20])
    assert hidden_or_parts(table.info.location) == []


def test_a_task_failing_leaves_the_table_and_its_directories_as_they_were(spark, store):
    table = Table(store, "sales", partition_keys=[("region", "string")])
    table.insert([(1, "kept", 1.0)], partition={"region": "eu"})
    before = stored(store, "sales")

    @F.udf(LongType())
    def explode_on_seven(value):
        if value == 7:
            raise ValueError("task failure on purpose")
        return value

    rows = [(i, "doomed", 1.0, ("eu", "us", "sa")[i % 3]) for i in range(12)]
    doomed = frame(spark, rows).repartition(4).withColumn("id", explode_on_seven("id"))
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception, match="task failure on purpose"):
            save(doomed, store, "sales", mode=mode)
        assert read(spark, store, "sales") == stored(store, "sales") == before
        swept_by_housekeeping(spark, store, table.info.location)
        assert {p.spec["region"] for p in store.catalog.list_partitions("default", "sales")} == {"eu"}
        assert store.txns.snapshot(["default.sales"]).write_ids["default.sales"].open_ids == ()
    save(frame(spark, [(2, "later", 2.0, "eu")]), store, "sales")  # the failed writes' locks are gone
    assert read(spark, store, "sales") == sorted(before + [(2, "later", 2.0, "eu")])


def test_a_write_longer_than_the_transaction_timeout_commits(spark, store):
    """Housekeeping times transactions out after 3 s while the write's one task takes about 7 s: the keeper the
    writer started heartbeats it meanwhile (its first heartbeat comes before 3 s even on a loaded machine)."""
    Table(store, "plain")

    @F.udf(LongType())
    def slowly(value):
        time.sleep(0.07)
        return value

    rows = [(i, "slow", 1.0) for i in range(100)]
    df = frame(spark, rows, schema="id bigint, name string, amount double").coalesce(1).withColumn("id", slowly("id"))
    with timing_out(store.url, 3000) as aborted:
        save(df, store, "plain", heartbeatSeconds="0.5")
    assert aborted == []
    assert read(spark, store, "plain") == sorted(rows)


@pytest.mark.parametrize(("columns", "options", "table", "message"), [
    ("id bigint, name string", {}, "default.plain", r"lacks column\(s\) \['amount'\]"),
    ("id bigint, name string, amount double, extra int", {}, "default.plain", r"has no column\(s\) \['extra'\]"),
    ("id string, name string, amount double", {}, "default.plain", "column id is string in the DataFrame, bigint"),
    ("id bigint, name string, amount double", {"rowId": "true"}, "default.plain",
     r"unknown option\(s\) \['rowid'\] for a write"),
    ("id bigint, name string, amount double", {}, "default.missing", "missing"),
    ("id bigint, name string, amount double", {}, "plain", "is not database.table"),
    ("id bigint, name string, amount double", {"heartbeatSeconds": "0"}, "default.plain",
     "option heartbeatSeconds must be a number of seconds above 0"),
])
def test_bad_input_gets_a_clear_error_and_writes_nothing(spark, store, columns, options, table, message):
    Table(store, "plain").insert([(1, "kept", 1.0)])
    df = spark.createDataFrame([], columns)
    writer = df.write.format("hiveacid").option("metastore", store.url).mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(Exception, match=message):
        writer.save(table)
    assert stored(store, "plain") == [(1, "kept", 1.0)]
    assert store.txns.snapshot(["default.plain"]).write_ids["default.plain"].open_ids == ()
