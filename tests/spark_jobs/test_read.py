"""Reading ACID tables from PySpark (spark_jobs/read.py) against acid_core's own merge-on-read, row for row.

Every comparison takes the rows `acid_core.read.merge.read_snapshot` returns for each partition under the same snapshot
(with row__id) and the catalog's partition values, in catalog partition order, and expects exactly those rows, in the
same order, from `read_table(...).collect()`.
"""

from __future__ import annotations

import datetime
import decimal
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
)
from support.read_tables import COLUMNS, Table, expected_rows, spark_rows

from acid_core.errors import MetastoreError, NotTransactionalError, PathOutsideTableError, SchemaMismatchError
from acid_core.format.layout import ACID_FORMAT_FILE, base_dir_name, bucket_file_name
from acid_core.format.orc_events import INSERT_OPERATION, EventFileWriter, parse_columns
from acid_core.format.rowid import encode_bucket
from acid_core.metastore import Metastore
from acid_core.write.streaming import StreamingConnection
from spark_jobs.read import (
    conform_array,
    hive_type_to_spark,
    leased_snapshot,
    plan_table_read,
    read_table,
    table_schema,
)
from spark_jobs.session import (
    DEFAULT_CONF,
    REPOSITORY_ROOT,
    SparkSetupError,
    check_pyspark_versions,
    resolve_master,
    session_conf,
)

pytestmark = pytest.mark.spark


def test_unpartitioned_table_with_deletes_and_updates(spark, store):
    table = Table(store, "plain")
    table.insert([(i, f"n{i}", i / 4) for i in range(40)])
    table.insert([(i, None, None) for i in range(40, 60)], writer_id=1)  # a second bucket file in one delta
    table.delete([3, 4, 41, 59])
    table.update([(10, "ten", 10.0), (45, "forty-five", None)])
    expected = expected_rows(store, "plain")
    assert len(expected) == 56 and {10, 45} <= {r["id"] for r in expected}
    assert spark_rows(read_table(spark, store, "default", "plain", include_row_id=True)) == expected
    without_row_id = [{k: v for k, v in r.items() if k != "row__id"} for r in expected]
    df = read_table(spark, store, "default", "PLAIN")
    assert df.columns == ["id", "name", "amount"]
    assert spark_rows(df) == without_row_id


def test_partitioned_table_reads_every_partition_or_the_ones_asked_for(spark, store):
    table = Table(store, "sales", partition_keys=[("region", "string"), ("year", "int")])
    for number, (region, year) in enumerate([("eu", 2023), ("eu", 2024), ("us", 2024)]):
        spec = {"region": region, "year": year}
        table.insert([(number * 100 + i, region, float(year)) for i in range(30)], partition=spec)
        table.delete([number * 100 + i for i in range(0, 30, 7)], partition=spec)
    table.update([(101, "changed", 0.5)], partition={"region": "eu", "year": 2024})
    df = read_table(spark, store, "default", "sales", include_row_id=True)
    assert df.schema["year"].dataType == IntegerType() and df.schema["region"].dataType == StringType()
    assert df.columns == ["row__id", "id", "name", "amount", "region", "year"]
    assert spark_rows(df) == expected_rows(store, "sales")

    one = {"region": "eu", "year": 2024}
    assert len(plan_table_read(store, "default", "sales", partition=one).partitions) == 1
    assert spark_rows(read_table(spark, store, "default", "sales", partition=one, include_row_id=True)) == \
        expected_rows(store, "sales", partition=one)
    eu = spark_rows(read_table(spark, store, "default", "sales", partition={"REGION": "eu"}))
    assert eu == expected_rows(store, "sales", partition={"region": "eu"}, include_row_id=False)
    assert {(r["region"], r["year"]) for r in eu} == {("eu", 2023), ("eu", 2024)}
    assert read_table(spark, store, "default", "sales", partition={"region": "asia"}).collect() == []
    with pytest.raises(MetastoreError, match=r"\['month'\] are not partition keys"):
        read_table(spark, store, "default", "sales", partition={"month": 1})


def test_a_partition_that_is_a_symbolic_link_out_of_the_table_is_not_read(store, tmp_path):
    table = Table(store, "linked", partition_keys=[("ds", "string")])
    table.insert([(1, "a", 1.0)], partition={"ds": "a"})
    table.insert([(2, "b", 2.0)], partition={"ds": "b"})
    partition = Path(table.info.location) / "ds=b"
    partition.rename(tmp_path / "outside")
    partition.symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(PathOutsideTableError, match="symbolic link"):
        plan_table_read(store, "default", "linked")
    assert len(plan_table_read(store, "default", "linked", partition={"ds": "a"}).partitions) == 1


def test_bucketed_table(spark, store):
    table = Table(store, "bucketed", bucket_columns=["id"], num_buckets=4)
    table.insert([(i, f"n{i}", None) for i in range(100)])
    table.insert([(i, f"n{i}", 1.0) for i in range(100, 150)])
    table.delete(list(range(0, 150, 9)))
    table.update([(i, "updated", 2.0) for i in range(1, 150, 13) if i % 9])
    plan = plan_table_read(store, "default", "bucketed")
    assert {Path(source.path).name for _, source, _ in plan.units} == {bucket_file_name(b) for b in range(4)}
    assert len({Path(source.path).parent.name for _, source, _ in plan.units}) == 3
    assert spark_rows(read_table(spark, store, "default", "bucketed", include_row_id=True)) == \
        expected_rows(store, "bucketed")


def test_open_and_aborted_transactions_stay_invisible(spark, store):
    table = Table(store, "events")
    table.insert([(i, "committed", None) for i in range(10)])
    table.insert([(i, "aborted", None) for i in range(10, 20)], outcome="abort")
    table.delete([0, 1], outcome="abort")
    open_write = table.insert([(i, "open", None) for i in range(20, 30)], outcome="open")
    open_txn = table.last_txn_id
    with StreamingConnection(store, "default", "events", batch_size=4) as stream:
        for index, outcome in enumerate(["commit", "abort", "commit", "open"]):
            stream.begin_transaction()
            stream.write([(100 + 10 * index + i, f"streamed-{outcome}", float(index)) for i in range(3)])
            if outcome == "commit":
                stream.commit_transaction()
            elif outcome == "abort":
                stream.abort_transaction()
        rows = spark_rows(read_table(spark, store, "default", "events", include_row_id=True))
        assert rows == expected_rows(store, "events")
        assert {r["name"] for r in rows} == {"committed", "streamed-commit"} and len(rows) == 16
        own = spark_rows(read_table(spark, store, "default", "events", include_row_id=True, txn_id=open_txn))
        assert own == expected_rows(store, "events", txn_id=open_txn)
        assert {r["row__id"]["writeid"] for r in own if r["name"] == "open"} == {open_write}
        assert {r["name"] for r in own} == {"committed", "open"}
        assert len(own) == 20  # the streamed transactions began after it: above its snapshot's high watermark


def test_sort_merge_path_equals_in_memory_registry(spark, store):
    table = Table(store, "churn", stripe_rows=1024, partition_keys=[("year", "int")])
    for year in (2023, 2024):
        spec = {"year": year}
        table.insert([(i, f"n{i}", float(i)) for i in range(3000)], partition=spec)  # three stripes
        table.insert([(i, "second", None) for i in range(3000, 3500)], partition=spec)
        if year == 2023:
            table.delete(list(range(0, 3500, 3)), partition=spec)
        table.delete(list(range(1, 3500, 10)), partition=spec)
    expected = expected_rows(store, "churn")
    registry = plan_table_read(store, "default", "churn")
    streamed = plan_table_read(store, "default", "churn", max_delete_events_in_memory=0)
    assert [p.sort_merge for p in registry.partitions] == [False, False]
    assert [p.sort_merge for p in streamed.partitions] == [True, True]
    mixed = plan_table_read(store, "default", "churn", max_delete_events_in_memory=800)
    assert [p.sort_merge for p in mixed.partitions] == [True, False]
    assert (len(registry.units), len(streamed.units)) == (8, 8)  # stripes are units on both delete paths
    assert spark_rows(read_table(spark, store, "default", "churn", include_row_id=True)) == expected
    assert spark_rows(read_table(spark, store, "default", "churn", include_row_id=True,
                                 max_delete_events_in_memory=0)) == expected
    assert spark_rows(read_table(spark, store, "default", "churn", include_row_id=True,
                                 max_delete_events_in_memory=800)) == expected  # 2023 streams, 2024 not


def _write_hive_base(location: str, write_id: int, rows: list[tuple], *, stripe_rows: int) -> None:
    """A base as Hive's compactor leaves it: `_col0`... column names, several stripes (as bench_snapshot_read.py)."""
    base = Path(location) / base_dir_name(write_id)
    base.mkdir(parents=True)
    columns = parse_columns([(f"_col{i}", t) for i, (_, t) in enumerate(COLUMNS[:2])])  # the file predates `amount`
    bucket = encode_bucket(0, 0)
    with open(base / bucket_file_name(0), "wb") as stream:
        writer = EventFileWriter(stream, columns, stripe_rows=stripe_rows)
        writer.write([(INSERT_OPERATION, write_id, bucket, i, write_id, row) for i, row in enumerate(rows)],
                      operation=INSERT_OPERATION)
        writer.close()
    (base / ACID_FORMAT_FILE).write_text("2")


def test_multi_stripe_hive_base_with_deltas(spark, store):
    table = Table(store, "compacted")
    with table.transaction() as write:  # files as Hive's writer leaves them
        _write_hive_base(table.info.location, write.write_id, [(i, f"base-{i}") for i in range(5000)], stripe_rows=1024)
    table.insert([(i, "delta", 1.5) for i in range(5000, 5100)])
    table.delete(list(range(0, 5100, 11)))
    plan = plan_table_read(store, "default", "compacted")
    base_units = [stripe for _, source, stripe in plan.units if "/base_" in source.path]
    assert base_units == [0, 1, 2, 3, 4]
    expected = expected_rows(store, "compacted")
    assert expected[0]["name"] == "base-1" and expected[0]["amount"] is None
    assert spark_rows(read_table(spark, store, "default", "compacted", include_row_id=True)) == expected
    assert spark_rows(read_table(spark, store, "default", "compacted", include_row_id=True,
                                 max_delete_events_in_memory=0)) == expected


def test_long_read_under_a_lease_keeps_its_rows_while_a_writer_commits(spark, store):
    table = Table(store, "busy")
    table.insert([(i, "first", None) for i in range(20)])
    with leased_snapshot(store, "default", "busy", heartbeat_interval_s=0.05) as lease:
        df = read_table(spark, store, "default", "busy", lease=lease, include_row_id=True)
        before = spark_rows(df)
        table.insert([(i, "later", None) for i in range(20, 30)])
        table.delete([0, 1, 2])
        assert spark_rows(df) == before  # the same DataFrame, run again
        assert spark_rows(read_table(spark, store, "default", "busy", lease=lease, include_row_id=True)) == before
        assert before == expected_rows(store, "busy", lease=lease) and len(before) == 20
        [row] = store.leases.list("default", "busy")
        deadline = time.monotonic() + 5
        while row["RL_LAST_HEARTBEAT"] == row["RL_STARTED"] and time.monotonic() < deadline:
            time.sleep(0.05)
            [row] = store.leases.list("default", "busy")
        assert row["RL_LAST_HEARTBEAT"] > row["RL_STARTED"]
    assert store.leases.list() == []
    assert len(read_table(spark, store, "default", "busy").collect()) == 27


def test_empty_tables_have_the_catalog_schema(spark, store):
    Table(store, "nothing", columns=[("id", "bigint"), ("tags", "array<string>")])
    df = read_table(spark, store, "default", "nothing", include_row_id=True)
    assert df.collect() == []
    assert df.schema == table_schema(store.catalog.get_table("default", "nothing"), include_row_id=True)
    assert df.columns == ["row__id", "id", "tags"]
    table = Table(store, "nothing_yet", partition_keys=[("day", "string")])
    table.insert([(1, "x", None)], partition={"day": "d1"}, outcome="abort")
    df = read_table(spark, store, "default", "nothing_yet")
    assert df.collect() == [] and df.columns == ["id", "name", "amount", "day"]


def test_every_hive_type_reads_as_acid_core_reads_it(spark, store):
    columns = [("t", "tinyint"), ("s", "smallint"), ("i", "int"), ("b", "bigint"), ("f", "float"), ("d", "double"),
               ("dec", "decimal(12,3)"), ("str", "string"), ("vc", "varchar(10)"), ("c", "char(4)"),
               ("flag", "boolean"), ("bin", "binary"), ("day", "date"), ("ts", "timestamp"),
               ("arr", "array<int>"), ("m", "map<string,bigint>"), ("st", "struct<x:int,y:array<string>>")]
    table = Table(store, "typed", columns=columns)
    rows = [(1, 2, 3, 4, 1.5, 2.25, decimal.Decimal("123456789.125"), "ü", "short", "ab", True, b"\x00\xff",
             datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 23, 59, 58, 123456), [1, None, 3],
             {"k": 7}, (5, ["a", None])),
            tuple([None] * len(columns))]
    table.insert(rows)
    df = read_table(spark, store, "default", "typed", include_row_id=True)
    assert df.schema["ts"].dataType == TimestampNTZType() and df.schema["dec"].dataType == DecimalType(12, 3)
    expected = expected_rows(store, "typed")
    for row in expected:  # pyarrow lists map entries as pairs, Spark as a dict
        row["m"] = None if row["m"] is None else dict(row["m"])
    assert spark_rows(df) == expected
    assert spark_rows(df)[0]["c"].startswith("ab")


def test_hive_type_strings_map_to_spark_types():
    assert hive_type_to_spark("map<string , struct<`a b`:decimal,c:array<varchar(3)>>>") == MapType(
        StringType(), StructType([StructField("a b", DecimalType(10, 0)), StructField("c", ArrayType(StringType()))]))
    assert hive_type_to_spark("BIGINT") == LongType()
    assert hive_type_to_spark("double precision") == hive_type_to_spark("double")
    for bad in ("uniontype<int,string>", "array<int", "int extra", "decimal(a)"):
        with pytest.raises(SchemaMismatchError, match="Hive type"):
            hive_type_to_spark(bad)


def test_nested_columns_conform_by_position():
    """Files name nested fields as their writer did and may predate fields added later; Spark gets the catalog's."""
    old = pa.array([{"_c0": 1, "_c1": [{"p": 5}]}, None, {"_c0": None, "_c1": None}],
                   pa.struct([("_c0", pa.int32()), ("_c1", pa.list_(pa.struct([("p", pa.int32())])))]))
    target = pa.struct([("x", pa.int64()), ("y", pa.list_(pa.struct([("q", pa.int32()), ("r", pa.string())]))),
                        ("z", pa.string())])
    assert conform_array(old.slice(0), target).to_pylist() == [
        {"x": 1, "y": [{"q": 5, "r": None}], "z": None}, None, {"x": None, "y": None, "z": None}]
    assert conform_array(old.slice(1), target).to_pylist()[1] == {"x": None, "y": None, "z": None}
    nanos = pa.array([1_700_000_000_123_456_789], pa.timestamp("ns"))
    assert conform_array(nanos, pa.timestamp("us")).to_pylist() == [datetime.datetime(2023, 11, 14, 22, 13, 20, 123456)]
    with pytest.raises(SchemaMismatchError, match="cannot read a column of type string as int32"):
        conform_array(pa.array(["x"]), pa.int32())


def test_snapshot_sources_are_checked(spark, store):
    Table(store, "a")
    Table(store, "b")
    store.catalog.create_table("default", "plain_orc", COLUMNS)
    with leased_snapshot(store, "default", "a") as lease:
        with pytest.raises(MetastoreError, match="not both"):
            read_table(spark, store, "default", "a", lease=lease, txn_id=1)
        with pytest.raises(MetastoreError, match="holds a snapshot of default.a, not of default.b"):
            read_table(spark, store, "default", "b", lease=lease)
    with pytest.raises(NotTransactionalError):
        read_table(spark, store, "default", "plain_orc")
    with pytest.raises(MetastoreError, match="not partitioned"):
        read_table(spark, store, "default", "a", partition={"day": "x"})


def test_session_defaults(spark, monkeypatch):
    for key, value in DEFAULT_CONF.items():
        assert spark.conf.get(key) == value
    assert spark.sparkContext.master == "local[2]"
    monkeypatch.setenv("ACID_SPARK_MASTER", "spark://master:7077")
    assert resolve_master() == "spark://master:7077" and resolve_master("local[1]") == "local[1]"
    monkeypatch.delenv("ACID_SPARK_MASTER")
    assert resolve_master() == "local[*]"
    local = session_conf("local[2]", {"spark.ui.enabled": True, "spark.sql.shuffle.partitions": 2})
    assert local["spark.ui.enabled"] == "true" and local["spark.sql.shuffle.partitions"] == "2"
    assert local["spark.executorEnv.PYTHONPATH"] == REPOSITORY_ROOT
    assert "spark.executorEnv.PYTHONPATH" not in session_conf("spark://master:7077")


def test_mismatched_pyspark_python_and_jars_are_refused(monkeypatch):
    import pyspark

    class Session:
        version, stopped = "4.3.0", False

        def stop(self):
            self.stopped = True

    session = Session()
    monkeypatch.setattr(pyspark, "__version__", "4.2.0")
    with pytest.raises(SparkSetupError, match=r"Python files are Spark 4\.2\.0 but its JVM jars are Spark 4\.3\.0"):
        check_pyspark_versions(session)
    assert session.stopped


@pytest.mark.postgres
def test_partitioned_read_on_postgresql(spark, postgres_url, tmp_path):
    store = Metastore(postgres_url, warehouse=str(tmp_path / "warehouse"))
    store.init()
    try:
        table = Table(store, "pg_sales", partition_keys=[("year", "int")])
        for year in (2023, 2024):
            table.insert([(i, f"y{year}", float(i)) for i in range(25)], partition={"year": year})
        table.delete([0, 5, 24], partition={"year": 2024})
        table.insert([(99, "open", None)], partition={"year": 2024}, outcome="open")
        assert spark_rows(read_table(spark, store, "default", "pg_sales", include_row_id=True)) == \
            expected_rows(store, "pg_sales")
    finally:
        store.close()


def test_a_read_task_loads_only_the_delete_events_of_the_buckets_it_reads(store, monkeypatch):
    """Each bucket's rows are deleted through that bucket's delete file (Hive writes a delete event into the bucket
    of the row); a task reading bucket 0 only builds a registry from bucket 0's delete files."""
    import spark_jobs.read as read_module
    from acid_core.read.merge import PartitionReader
    from acid_core.read.read_plan import file_bucket

    table = Table(store, "two_buckets", bucket_columns=["id"], num_buckets=2)
    table.insert([(i, f"n{i}", float(i)) for i in range(40)])
    table.delete(list(range(0, 40, 3)))
    plan = plan_table_read(store, "default", "two_buckets")
    assert {file_bucket(d.path) for d in plan.partitions[0].plan.deletes} == {0, 1}
    built = []
    original = PartitionReader.__init__

    def recording(self, fs, read_plan, *args, **kwargs):
        built.append(sorted(file_bucket(d.path) for d in read_plan.deletes))
        original(self, fs, read_plan, *args, **kwargs)

    monkeypatch.setattr(read_module.PartitionReader, "__init__", recording)
    names = tuple(c.name for c in plan.table.columns)
    schema = table_schema(plan.table, include_row_id=True)
    from pyspark.sql.pandas.types import to_arrow_schema

    units = read_module._ReadUnits(plan.partitions, plan.units, plan.write_ids, names, True,
                                   to_arrow_schema(schema, timezone="UTC"))
    first_bucket = [n for n, (_, source, _) in enumerate(plan.units) if source.path.endswith("bucket_00000")]
    rows = pa.Table.from_batches(list(units(iter([pa.record_batch([pa.array(first_bucket, pa.int64())],
                                                                   names=["id"])]))))
    assert built == [[0]]  # one registry, of bucket 0's delete files only
    expected = [r for r in expected_rows(store, "two_buckets") if r["row__id"]["bucketid"] == encode_bucket(0, 0)]
    assert rows.to_pylist() == expected


def test_python_workers_allocate_with_malloc(spark):
    """pyarrow's default mimalloc pool reserves address space far beyond its use, which spark.executor.pyspark.memory
    (an address-space limit) counts, and jemalloc keeps freed pages: the executors' Python workers use malloc."""
    def pool(batches):
        for _ in batches:
            yield pa.record_batch([pa.array([pa.default_memory_pool().backend_name])], names=["pool"])

    assert [row.pool for row in spark.range(1).mapInArrow(pool, "pool string").collect()] == ["system"]
