"""Writing ACID tables from PySpark: insert, delete, update and merge, compared row by row with a plain model."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F

from acid_core.errors import AcidError
from acid_core.metastore import Metastore
from acid_core.read.merge import read_snapshot
from spark_jobs import write

pytestmark = pytest.mark.spark

COLUMNS = [("id", "int"), ("name", "string"), ("amount", "decimal(10,2)")]


@pytest.fixture
def store(tmp_path):
    metastore = Metastore(f"sqlite:///{tmp_path}/metastore.db", warehouse=str(tmp_path / "warehouse"))
    metastore.init()
    metastore.catalog.create_table("default", "plain", COLUMNS, params={"transactional": "true"})
    metastore.catalog.create_table("default", "parts", COLUMNS, partition_keys=[("ds", "string")],
                                   params={"transactional": "true"})
    metastore.catalog.create_table("default", "buckets", COLUMNS, bucket_columns=["id"], num_buckets=2,
                                   params={"transactional": "true"})
    yield metastore
    metastore.close()


def visible(store: Metastore, table: str) -> dict[int, tuple]:
    """id -> (name, amount[, ds]) as acid_core reads every partition under a fresh snapshot."""
    info = store.catalog.get_table("default", table)
    snapshot = store.txns.snapshot([info.full_name])
    locations = [(p.location, p.spec.get("ds")) for p in store.catalog.list_partitions("default", table)] \
        if info.partition_keys else [(info.location, None)]
    rows = {}
    for location, ds in locations:
        if not os.path.isdir(location):
            continue
        for row in read_snapshot(location, write_ids=snapshot.write_ids[info.full_name], txns=snapshot.txns).to_pylist():
            assert row["id"] not in rows, f"id {row['id']} visible twice"
            rows[row["id"]] = (row["name"], float(row["amount"])) + ((ds,) if ds else ())
    return rows


def frame(spark, rows, with_ds=False):
    schema = "id int, name string, amount decimal(10,2)" + (", ds string" if with_ds else "")
    return spark.createDataFrame(rows, schema)


def test_insert_delete_update_on_an_unpartitioned_table(spark, store):
    from decimal import Decimal as D

    model = {i: (f"n{i}", float(i)) for i in range(20)}
    summary = write.insert(store, "default", "plain", frame(spark, [(i, f"n{i}", D(i)) for i in range(20)]).repartition(3))
    assert summary.inserted == 20 and summary.deleted == 0
    location = store.catalog.get_table("default", "plain").location
    delta = f"delta_{summary.write_id:07d}_{summary.write_id:07d}_0000"
    assert delta in os.listdir(location)
    assert len([f for f in os.listdir(f"{location}/{delta}") if f.startswith("bucket_")]) >= 2  # one per writer
    assert visible(store, "plain") == model

    summary = write.delete(spark, store, "default", "plain", "id % 5 = 0")
    for i in range(0, 20, 5):
        del model[i]
    assert summary.deleted == 4 and visible(store, "plain") == model

    summary = write.update(spark, store, "default", "plain", "id > 15", {"name": "concat(name, '!')", "amount": "amount * 2"})
    for i in (16, 17, 18, 19):
        model[i] = (f"n{i}!", i * 2.0)
    assert summary.deleted == 4 and summary.inserted == 4 and visible(store, "plain") == model
    assert f"delete_delta_{summary.write_id:07d}_{summary.write_id:07d}_0000" in os.listdir(location)


def test_partitioned_and_bucketed_tables(spark, store):
    from decimal import Decimal as D

    rows = [(i, f"n{i}", D(i), "a" if i % 2 else "b") for i in range(10)]
    write.insert(store, "default", "parts", frame(spark, rows, with_ds=True))
    assert sorted(p.name for p in store.catalog.list_partitions("default", "parts")) == ["ds=a", "ds=b"]
    write.insert(store, "default", "parts", frame(spark, [(100, "x", D(1))]), partition={"ds": "c"})
    write.update(spark, store, "default", "parts", "ds = 'a' AND id < 5", {"name": "'upd'"})
    expected = {i: (f"n{i}", float(i), "a" if i % 2 else "b") for i in range(10)}
    expected.update({1: ("upd", 1.0, "a"), 3: ("upd", 3.0, "a"), 100: ("x", 1.0, "c")})
    assert visible(store, "parts") == expected

    write.insert(store, "default", "buckets", frame(spark, [(i, "b", D(i)) for i in range(30)]).repartition(4))
    location = store.catalog.get_table("default", "buckets").location
    (delta,) = [d for d in os.listdir(location) if d.startswith("delta_")]
    assert sorted(os.listdir(f"{location}/{delta}")) == ["_orc_acid_version", "bucket_00000", "bucket_00001"]
    write.delete(spark, store, "default", "buckets", "id < 10")
    assert sorted(visible(store, "buckets")) == list(range(10, 30))


def test_merge_update_delete_insert(spark, store):
    from decimal import Decimal as D

    write.insert(store, "default", "plain", frame(spark, [(i, f"n{i}", D(i)) for i in range(10)]))
    source = frame(spark, [(1, "one", D(100)), (2, "gone", D(0)), (50, "new", D(5))])
    summary = write.merge(spark, store, "default", "plain", source, "t.id = s.id",
                          matched_update={"name": "s.name", "amount": "s.amount"},
                          matched_update_condition="s.name <> 'gone'", matched_delete=True,
                          not_matched_insert={"id": "s.id", "name": "s.name", "amount": "s.amount"})
    expected = {i: (f"n{i}", float(i)) for i in range(10)}
    expected[1] = ("one", 100.0)
    del expected[2]
    expected[50] = ("new", 5.0)
    assert visible(store, "plain") == expected
    location = store.catalog.get_table("default", "plain").location
    w = summary.write_id
    names = set(os.listdir(location))
    assert {f"delete_delta_{w:07d}_{w:07d}_0000", f"delta_{w:07d}_{w:07d}_0000",
            f"delete_delta_{w:07d}_{w:07d}_0001", f"delta_{w:07d}_{w:07d}_0002"} <= names


def test_a_merge_of_a_few_rows_runs_a_few_tasks_not_a_fixed_count_per_statement(spark, store):
    """The matched rows are cached and written by each WHEN clause: the cached shuffle is coalesced by its data too
    (spark.sql.optimizer.canChangeCachedPlanOutputPartitioning), so no statement runs 200 mostly empty Python tasks."""
    from decimal import Decimal as D

    write.insert(store, "default", "plain", frame(spark, [(i, f"n{i}", D(i)) for i in range(10)]))
    context = spark.sparkContext
    context.setJobGroup("few-rows-merge", "a MERGE of three source rows")
    try:
        write.merge(spark, store, "default", "plain", frame(spark, [(1, "one", D(1)), (2, "gone", D(0)), (50, "x", D(5))]),
                    "t.id = s.id", matched_update={"name": "s.name"}, matched_update_condition="s.name <> 'gone'",
                    matched_delete=True, not_matched_insert={"id": "s.id", "name": "s.name", "amount": "s.amount"})
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    tracker = context.statusTracker()
    stages = [tracker.getStageInfo(stage) for job in tracker.getJobIdsForGroup("few-rows-merge")
              for stage in tracker.getJobInfo(job).stageIds]
    tasks = sum(stage.numCompletedTasks for stage in stages if stage is not None)
    assert 0 < tasks < 100, f"{tasks} tasks for a MERGE of three rows into ten"  # 1,400 before: 200 per statement


def test_merge_cardinality_violation_changes_nothing(spark, store):
    from decimal import Decimal as D

    write.insert(store, "default", "plain", frame(spark, [(1, "a", D(1))]))
    before = (visible(store, "plain"), sorted(os.listdir(store.catalog.get_table("default", "plain").location)))
    source = frame(spark, [(1, "x", D(1)), (1, "y", D(2))])
    with pytest.raises(AcidError, match="more than one source row"):
        write.merge(spark, store, "default", "plain", source, "t.id = s.id", matched_update={"name": "s.name"})
    assert (visible(store, "plain"), sorted(os.listdir(store.catalog.get_table("default", "plain").location))) == before
    assert [t.state for t in store.txns.show_transactions()] == ["a"]


def test_failed_job_aborts_and_leaves_no_files(spark, store):
    from decimal import Decimal as D

    write.insert(store, "default", "plain", frame(spark, [(1, "a", D(1))]))
    location = store.catalog.get_table("default", "plain").location
    before = sorted(os.listdir(location))
    bad = frame(spark, [(2, "b", D(2))]).withColumn("name", F.expr("raise_error('boom')"))
    with pytest.raises(Exception, match="boom"):
        write.insert(store, "default", "plain", bad)
    assert sorted(os.listdir(location)) == before
    assert visible(store, "plain") == {1: ("a", 1.0)}
    with pytest.raises(AcidError, match="partition and bucketing columns"):
        write.update(spark, store, "default", "parts", "true", {"ds": "'x'"})


def test_a_partition_that_is_a_symbolic_link_is_not_written_through(spark, store, tmp_path):
    from decimal import Decimal as D

    write.insert(store, "default", "parts", frame(spark, [(1, "a", D(1), "a"), (2, "b", D(2), "b")], with_ds=True))
    location = store.catalog.get_table("default", "parts").location
    outside = tmp_path / "outside"
    os.rename(f"{location}/ds=b", outside)
    os.symlink(outside, f"{location}/ds=b")
    before = sorted(os.listdir(outside))
    with pytest.raises(Exception, match="symbolic link") as caught:
        write.insert(store, "default", "parts", frame(spark, [(3, "c", D(3), "b")], with_ds=True))
    # refused by the Spark task before it staged anything there (the driver checks again before publishing)
    assert "PathOutsideTableError" in str(caught.value) and not isinstance(caught.value, AcidError)
    assert sorted(os.listdir(outside)) == before
    assert all(txn.state != "o" for txn in store.txns.show_transactions())  # the write was aborted


def test_random_dml_matches_an_independent_model(spark, store):
    """A seeded sequence of inserts, updates, deletes and merges on a partitioned table, checked after every step
    against a plain dict model."""
    import random
    from decimal import Decimal as D

    rng = random.Random(20261122)
    model: dict[int, tuple] = {}
    next_id = 0
    for step in range(6):
        kind = ["insert", "update", "delete", "merge"][step % 4] if step else "insert"
        if kind == "insert":
            rows = [(next_id + i, f"r{next_id + i}", D(rng.randrange(100)), rng.choice("ab")) for i in range(12)]
            next_id += 12
            write.insert(store, "default", "parts", frame(spark, rows, with_ds=True))
            model.update({r[0]: (r[1], float(r[2]), r[3]) for r in rows})
        elif kind == "update":
            limit = rng.randrange(next_id)
            write.update(spark, store, "default", "parts", f"id < {limit}", {"amount": "amount + 1"})
            model.update({k: (v[0], v[1] + 1, v[2]) for k, v in model.items() if k < limit})
        elif kind == "delete":
            modulus = rng.choice([3, 4, 5])
            write.delete(spark, store, "default", "parts", f"id % {modulus} = 1")
            model = {k: v for k, v in model.items() if k % modulus != 1}
        else:
            keys = rng.sample(range(next_id), 6) + [next_id, next_id + 1]  # matched (or deleted) ids and new ones
            next_id += 2
            source = spark.createDataFrame([(k, f"m{k}", D(7), "b") for k in keys],
                                           "id int, name string, amount decimal(10,2), ds string")
            write.merge(spark, store, "default", "parts", source, "t.id = s.id",
                        matched_update={"name": "s.name"},
                        not_matched_insert={"id": "s.id", "name": "s.name", "amount": "s.amount", "ds": "s.ds"})
            for k in keys:
                model[k] = (f"m{k}", model[k][1], model[k][2]) if k in model else (f"m{k}", 7.0, "b")
        assert visible(store, "parts") == model, f"step {step} ({kind})"


def test_conditions_may_qualify_columns_with_the_table_name(spark, store):
    from decimal import Decimal as D

    write.insert(store, "default", "plain", frame(spark, [(i, f"n{i}", D(i)) for i in range(6)]))
    assert write.delete(spark, store, "default", "plain", "plain.id < 2").deleted == 2
    assert write.update(spark, store, "default", "plain", "plain.id = 5", {"name": "upper(plain.name)"}).inserted == 1
    assert visible(store, "plain") == {2: ("n2", 2.0), 3: ("n3", 3.0), 4: ("n4", 4.0), 5: ("N5", 5.0)}


def test_insert_rows_are_grouped_by_partition_and_bucket_without_a_per_row_loop():
    """The vectorized grouping of a task's batch equals the per-row one: every (partition, bucket) once, its rows in
    input order, null partition values in Hive's default partition."""
    import numpy as np
    import pyarrow as pa

    from acid_core.format.layout import partition_dir_name

    batch = pa.record_batch([pa.array([1, 2, 3, 4, 5, 6]), pa.array(["a", None, "a", "b", None, "a"]),
                             pa.array([7, 7, 8, 7, 7, 7])], names=["id", "ds", "hr"])
    buckets = np.array([0, 0, 1, 0, 0, 0])
    groups = write._insert_groups(batch, ("ds", "hr"), buckets)
    expected: dict = {}
    for index, (ds, hr, bucket) in enumerate(zip(["a", None, "a", "b", None, "a"], [7, 7, 8, 7, 7, 7], buckets)):
        part = partition_dir_name({"ds": ds, "hr": str(hr)})
        expected.setdefault((part, int(bucket)), []).append(index)
    assert {(part, bucket): rows.tolist() for part, bucket, rows in groups} == expected
    assert len(groups) == len(expected) and "ds=__HIVE_DEFAULT_PARTITION__/hr=7" in {g[0] for g in groups}
    assert [rows.tolist() for _, _, rows in write._insert_groups(batch, (), np.zeros(6, int))] == [[0, 1, 2, 3, 4, 5]]


def test_a_delete_task_writes_its_files_batch_by_batch_in_key_order(spark, store):
    """Arrow batches of 7 rows: each delete task gets its (partition, bucket) groups sorted by Spark across many
    batches and writes each file as they come; every file holds its events in key order, each key once."""
    import glob
    from decimal import Decimal as D

    import pyarrow.orc as pa_orc

    rows = [(i, f"n{i}", D(i), f"d{i % 3}") for i in range(300)]
    write.insert(store, "default", "parts", frame(spark, rows, with_ds=True).repartition(4))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    try:
        summary = write.delete(spark, store, "default", "parts", "id % 5 <> 0")
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert summary.deleted == 240
    assert visible(store, "parts") == {i: (f"n{i}", float(i), f"d{i % 3}") for i in range(0, 300, 5)}
    files = glob.glob(f"{store.catalog.get_table('default', 'parts').location}/ds=*/delete_delta_*/bucket_*")
    keys_seen = 0
    for path in files:
        events = pa_orc.read_table(path, columns=["originalTransaction", "bucket", "rowId"]).to_pylist()
        keys = [tuple(e.values()) for e in events]
        assert keys == sorted(keys) and len(set(keys)) == len(keys), path
        keys_seen += len(keys)
    assert keys_seen == 240 and len(files) == 12  # 3 partitions x 4 writers' buckets


def test_shuffles_are_sized_by_their_data_not_a_fixed_count():
    from spark_jobs.session import session_conf

    conf = session_conf("local[2]")
    assert "spark.sql.shuffle.partitions" not in conf
    assert conf["spark.sql.adaptive.enabled"] == "true"
    assert conf["spark.sql.adaptive.coalescePartitions.parallelismFirst"] == "false"
    assert conf["spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"] == "true"
    assert conf["spark.executor.pyspark.memory"] == "2g"
