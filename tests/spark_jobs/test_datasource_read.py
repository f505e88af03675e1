"""The `hiveacid` data source's batch read (spark_jobs/datasource.py), through its public API only: the format name
and its options, on the tests' local Spark session (`build_session` registered the source).

Every read is compared with `spark_jobs.read.read_table` on the same table (rows in order, schema), and reads with
`row__id` with acid_core's own merge-on-read (`support.read_tables.expected_rows`). The read plans and runs in Spark's
Python workers, which a test cannot patch: what a read lists and opens is what the kernel saw (`support.open_watch`).
"""

from __future__ import annotations

import datetime
import decimal
import io

import pytest
from pyspark.errors import AnalysisException
from support.open_watch import OpenWatch
from support.read_tables import Table, expected_rows, spark_rows
from support.sql_sessions import run

from acid_cli.sql.session import Session
from acid_core.format.layout import DEFAULT_PARTITION_NAME
from acid_core.format.validity import LONG_MAX
from spark_jobs.datasource import HiveAcidDataSource
from spark_jobs.read import plan_table_read, read_table

pytestmark = pytest.mark.spark

REGIONS, YEARS = ("eu", "us"), (2023, 2024, 2025)


def hiveacid(spark, store, **options):
    """`spark.read.format("hiveacid")` on the test's metastore, with `options`."""
    reader = spark.read.format("hiveacid").option("metastore", store.url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


@pytest.fixture
def sales(store) -> Table:
    """`default.sales (id, name, amount) PARTITIONED BY (region string, year int)`: six partitions of 30 rows and one
    with a NULL year (Hive's default partition), deletes in each, an update, an aborted and an open write."""
    table = Table(store, "sales", partition_keys=[("region", "string"), ("year", "int")])
    for number, (region, year) in enumerate((r, y) for r in REGIONS for y in YEARS):
        spec = {"region": region, "year": year}
        table.insert([(number * 100 + i, f"n{i}", float(i)) for i in range(30)], partition=spec)
        table.delete([number * 100 + i for i in range(number, 30, 7)], partition=spec)
    table.update([(103, "updated", 0.5)], partition={"region": "eu", "year": 2024})
    table.insert([(900 + i, "aborted", None) for i in range(5)], partition={"region": "us", "year": 2024},
                 outcome="abort")
    table.insert([(950 + i, "open", None) for i in range(5)], partition={"region": "eu", "year": 2023},
                 outcome="open")
    null_year = {"region": "eu", "year": DEFAULT_PARTITION_NAME}  # as Hive's dynamic partitioning names it
    table.insert([(990 + i, "no year", 9.0) for i in range(4)], partition=null_year)
    return table


def test_rows_and_schema_are_read_tables(spark, store, sales):
    oracle = read_table(spark, store, "default", "sales")
    df = hiveacid(spark, store).load("default.sales")
    assert df.schema == oracle.schema and df.columns == ["id", "name", "amount", "region", "year"]
    rows = spark_rows(df)
    assert rows == spark_rows(oracle)
    assert len(rows) == 6 * 30 - sum(len(range(n, 30, 7)) for n in range(6)) + 4
    names = {r["name"] for r in rows}
    assert {"aborted", "open"}.isdisjoint(names) and {"updated", "no year"} <= names
    assert [r for r in rows if r["year"] is None] == [
        {"id": 990 + i, "name": "no year", "amount": 9.0, "region": "eu", "year": None} for i in range(4)]
    assert spark_rows(hiveacid(spark, store, table="DEFAULT.Sales").load()) == rows
    assert spark_rows(hiveacid(spark, store, table="default.sales").load("default.sales")) == rows


def test_row_id_option(spark, store, sales, capsys):
    df = hiveacid(spark, store, rowId="true").load("default.sales")
    assert df.columns == ["row__id", "id", "name", "amount", "region", "year"]
    assert df.schema == read_table(spark, store, "default", "sales", include_row_id=True).schema
    assert spark_rows(df) == expected_rows(store, "sales")
    assert hiveacid(spark, store, ROWID="False").load("default.sales").columns[0] == "id"
    df.where("year = 2024").explain(mode="extended")
    plans = capsys.readouterr().out
    assert "BatchScan hiveacid" in plans and store.url not in plans  # Spark shows no option of the source


def test_units_are_the_input_partitions_and_an_empty_table_reads_empty(spark, store):
    table = Table(store, "striped", stripe_rows=1024)
    table.insert([(i, f"n{i}", float(i)) for i in range(3000)])  # one file of three stripes: three units
    table.insert([(i, "more", None) for i in range(3000, 3100)])
    table.delete(list(range(0, 3100, 7)))
    assert len(plan_table_read(store, "default", "striped").units) == 4
    df = hiveacid(spark, store, rowId="true").load("default.striped")
    assert df.rdd.getNumPartitions() == 4
    assert spark_rows(df) == expected_rows(store, "striped")

    Table(store, "nothing_yet", partition_keys=[("day", "string")]).insert([(1, "x", None)], partition={"day": "d"},
                                                                           outcome="abort")
    empty = hiveacid(spark, store).load("default.nothing_yet")
    assert empty.collect() == [] and empty.schema == read_table(spark, store, "default", "nothing_yet").schema


def test_every_hive_type_reads_as_read_table_reads_it(spark, store):
    columns = [("t", "tinyint"), ("s", "smallint"), ("i", "int"), ("b", "bigint"), ("f", "float"), ("d", "double"),
               ("dec", "decimal(12,3)"), ("str", "string"), ("vc", "varchar(10)"), ("c", "char(4)"),
               ("flag", "boolean"), ("bin", "binary"), ("day", "date"), ("ts", "timestamp"),
               ("arr", "array<int>"), ("m", "map<string,bigint>"), ("st", "struct<x:int,y:array<string>>")]
    table = Table(store, "typed", columns=columns, partition_keys=[("ds", "date")])
    row = (1, 2, 3, 4, 1.5, 2.25, decimal.Decimal("123456789.125"), "ü", "short", "ab", True, b"\x00\xff",
           datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 23, 59, 58, 123456), [1, None, 3], {"k": 7},
           (5, ["a", None]))
    table.insert([row, tuple([None] * len(columns))], partition={"ds": "2024-02-29"})
    oracle = read_table(spark, store, "default", "typed", include_row_id=True)
    df = hiveacid(spark, store, rowId="true").load("default.typed")
    assert df.schema == oracle.schema
    assert spark_rows(df) == spark_rows(oracle)
    assert spark_rows(df)[0]["ds"] == datetime.date(2024, 2, 29)


def test_valid_write_ids_read_an_older_snapshot(spark, store):
    table = Table(store, "history", partition_keys=[("year", "int")])
    table.insert([(i, "first", 1.0) for i in range(20)], partition={"year": 2024})
    with table.transaction(partition={"year": 2024}) as late:  # open while the older snapshot is taken
        late.insert([(i, "late", 2.0) for i in range(100, 105)], partition={"year": 2024})
        then = str(store.txns.valid_write_ids("default", "history"))
        before = spark_rows(read_table(spark, store, "default", "history", include_row_id=True))
    assert f":{late.write_id}:" in then  # listed as open
    table.delete([0, 1, 2], partition={"year": 2024})
    table.insert([(i, "second", 3.0) for i in range(20, 25)], partition={"year": 2025})
    aborted = table.insert([(i, "aborted", None) for i in range(30, 35)], partition={"year": 2025}, outcome="abort")

    old = hiveacid(spark, store, rowId="true", validWriteIds=then).load("default.history")
    assert spark_rows(old) == before and len(before) == 20 and {r["name"] for r in before} == {"first"}
    now = spark_rows(hiveacid(spark, store, rowId="true").load("default.history"))
    assert now == spark_rows(read_table(spark, store, "default", "history", include_row_id=True))
    assert len(now) == 27 and {r["name"] for r in now} == {"first", "late", "second"}

    high = store.txns.valid_write_ids("default", "history").high_watermark
    for value, message in [
        ("not a list", r"option validWriteIds: 'not a list'"),
        (f"default.sales:1:{LONG_MAX}::", r"is a write-id list of default\.sales, not of default\.history"),
        (f"default.history:{high + 5}:{LONG_MAX}::", rf"high watermark {high + 5} is above default\.history's"),
        (f"default.history:{high}:{LONG_MAX}:{late.write_id}:", rf"minimum open write id {LONG_MAX} is not the least "
                                                                rf"of its open write ids \({late.write_id}\)"),
        (f"default.history:{high}:{LONG_MAX}::", rf"would read write id {aborted} of default\.history, which is "
                                                 "aborted"),
    ]:
        with pytest.raises(AnalysisException, match=message):
            hiveacid(spark, store, validWriteIds=value).load("default.history")


def _partition_dirs(matching) -> set[str]:
    return {f"region={region}/year={year}" for region, year in matching}


ALL_SALES = _partition_dirs((region, year) for region in REGIONS for year in YEARS) | {
    f"region=eu/year={DEFAULT_PARTITION_NAME}"}


@pytest.mark.parametrize(("condition", "keep", "matching"), [
    ("year = 2024", lambda r: r["year"] == 2024, [("eu", 2024), ("us", 2024)]),
    ("region = 'us' AND year IN (2023, 2025)", lambda r: r["region"] == "us" and r["year"] in (2023, 2025),
     [("us", 2023), ("us", 2025)]),
    ("year >= 2025 AND id % 2 = 0", lambda r: r["year"] is not None and r["year"] >= 2025 and r["id"] % 2 == 0,
     [("eu", 2025), ("us", 2025)]),
    ("year IS NOT NULL AND region <=> 'eu' AND amount < 10", lambda r: r["year"] is not None and r["region"] == "eu"
     and r["amount"] is not None and r["amount"] < 10, [("eu", 2023), ("eu", 2024), ("eu", 2025)]),
])
def test_a_partition_filter_lists_and_opens_only_the_matching_partitions(spark, store, sales, condition, keep,
                                                                           matching):
    everything = spark_rows(read_table(spark, store, "default", "sales"))
    expected = [r for r in everything if keep(r)]
    assert expected
    pruning = hiveacid(spark, store, partitionPruning="true").load("default.sales")
    with OpenWatch(sales.info.location) as watch:
        assert spark_rows(pruning.where(condition)) == expected
        assert watch.touched(depth=2) == _partition_dirs(matching)  # listed, footers and rows read: nothing else
    units = sum(len(plan_table_read(store, "default", "sales", partition={"region": region, "year": year}).units)
                for region, year in matching)
    assert pruning.where(condition).rdd.getNumPartitions() == units

    everywhere = hiveacid(spark, store).load("default.sales")  # without the option: every partition, same rows
    with OpenWatch(sales.info.location) as watch:
        assert spark_rows(everywhere.where(condition)) == expected
        assert watch.touched(depth=2) == ALL_SALES


def test_a_filtered_read_returns_what_acid_sql_select_returns(spark, store, sales):
    session = Session(store, io.StringIO(), "jsonl")
    session.engine()._spark = spark  # share the test session instead of building another
    try:
        selected = run(session, "SELECT id, name, amount, region, year FROM default.sales "
                                "WHERE region = 'eu' AND year >= 2024")
    finally:
        session._engine._spark = None
    df = hiveacid(spark, store, partitionPruning="true").load("default.sales").where("region = 'eu' AND year >= 2024")
    assert selected
    assert sorted(tuple(row) for row in df.collect()) == sorted(tuple(row.values()) for row in selected)


def test_date_partitions_are_pruned_by_date_comparisons(spark, store):
    table = Table(store, "daily", partition_keys=[("day", "date")])
    days = [datetime.date(2024, 1, 1) + datetime.timedelta(days=offset) for offset in range(5)]
    for number, day in enumerate(days):
        table.insert([(number * 10 + i, str(day), float(i)) for i in range(10)], partition={"day": str(day)})
    everything = spark_rows(read_table(spark, store, "default", "daily"))
    new_year = datetime.date(2023, 12, 31)
    for condition, keep, kept in [
        ("day BETWEEN '2024-01-02' AND '2024-01-03'", lambda r: days[1] <= r["day"] <= days[2], days[1:3]),
        ("day IN (DATE '2024-01-05', DATE '2023-12-31')", lambda r: r["day"] in (days[4], new_year), days[4:]),
        ("day > '2024-01-03' AND id < 45", lambda r: r["day"] > days[2] and r["id"] < 45, days[3:]),
        ("day = '2024-01-05' OR id = 3", lambda r: r["day"] == days[4] or r["id"] == 3, days),  # an OR: not pushed
    ]:
        df = hiveacid(spark, store, partitionPruning="true").load("default.daily")  # one DataFrame per query
        with OpenWatch(table.info.location) as watch:
            assert spark_rows(df.where(condition)) == [r for r in everything if keep(r)], condition
            assert watch.touched() == {f"day={day}" for day in kept}, condition


@pytest.mark.parametrize(("condition", "keep", "null_year_read"), [
    ("amount > 20 AND name LIKE 'n2%'",
     lambda r: r["amount"] is not None and r["amount"] > 20 and r["name"].startswith("n2"), True),
    ("year = 2024 OR id = 3", lambda r: r["year"] == 2024 or r["id"] == 3, True),
    # Spark infers `year IS NOT NULL` from these (it pushes that filter too): only the NULL partition is pruned
    ("NOT (year = 2024)", lambda r: r["year"] is not None and r["year"] != 2024, False),
    ("cast(year AS string) = '2023'", lambda r: r["year"] == 2023, False),
])
def test_filters_that_do_not_select_partitions_still_give_the_right_rows(spark, store, sales, condition, keep,
                                                                          null_year_read):
    everything = spark_rows(read_table(spark, store, "default", "sales"))
    df = hiveacid(spark, store, partitionPruning="true").load("default.sales")
    with OpenWatch(sales.info.location) as watch:
        rows = spark_rows(df.where(condition))
        touched = watch.touched(depth=2)
    assert rows == [r for r in everything if keep(r)] and rows
    assert touched == ALL_SALES - (set() if null_year_read else {f"region=eu/year={DEFAULT_PARTITION_NAME}"})


def test_is_null_on_a_partition_column_reads_only_hives_default_partition(spark, store, sales):
    everything = spark_rows(read_table(spark, store, "default", "sales"))
    df = hiveacid(spark, store, partitionPruning="true").load("default.sales")
    with OpenWatch(sales.info.location) as watch:
        rows = spark_rows(df.where("year IS NULL"))
        touched = watch.touched(depth=2)
    assert rows == [r for r in everything if r["year"] is None] and rows
    assert touched == {f"region=eu/year={DEFAULT_PARTITION_NAME}"}


def test_a_dataframe_queried_again_after_a_filtered_query(spark, store, sales):
    """Spark 4.3 keeps the plan a query with pushed filters made on the DataFrame's data source (not on that query's
    scan); a later query on the same DataFrame with no filter Spark can push gets that plan again without asking the
    reader. Without pruning every plan reads every partition and the answers stay right; with it (opt-in for that
    reason: spark_jobs/datasource.py) the later query reads what the earlier one kept. When the pruning half fails,
    Spark scopes the plan to the scan: pruning can then be the default, and this test lose that half."""
    everything = spark_rows(read_table(spark, store, "default", "sales"))
    only_2024 = [r for r in everything if r["year"] == 2024]
    for options, after in [({}, everything), ({"partitionPruning": "true"}, only_2024)]:
        df = hiveacid(spark, store, **options).load("default.sales")
        assert df.count() == len(everything)  # planned without filters
        assert spark_rows(df.where("year = 2024")) == only_2024
        assert spark_rows(df) == after, options  # the plan of the query before, reused
        assert spark_rows(df.where("year = 2024 OR id >= 0")) == after, options  # an OR: not pushed either
        assert spark_rows(df.where("id >= 0")) == everything  # a filter Spark pushes: planned again


def test_the_table_changing_under_a_loaded_dataframe_is_an_error(spark, store):
    table = Table(store, "changing")
    table.insert([(1, "a", 1.0)])
    df = hiveacid(spark, store).load("default.changing")
    store.catalog.drop_table("default", "changing")
    Table(store, "changing", columns=[("id", "bigint"), ("label", "string")])
    with pytest.raises(AnalysisException, match=r"table default\.changing changed its columns, partition keys or "
                                                r"location since this DataFrame was loaded: load it again"):
        df.collect()


def test_a_user_registers_the_source_and_the_default_metastore_is_the_acid_commands(spark, store):
    """What `spark.dataSource.register` captures: the class and the workers' environment (`spark.executorEnv.*`,
    here set on the running context), where the default URL is resolved by the function the `acid` command uses."""
    table = Table(store, "registered")
    table.insert([(i, f"r{i}", None) for i in range(10)])
    environment = spark.sparkContext.environment
    environment["ACID_METASTORE_URL"] = store.url
    try:
        spark.dataSource.register(HiveAcidDataSource)
        df = spark.read.format("hiveacid").load("default.registered")
        assert spark_rows(df) == spark_rows(read_table(spark, store, "default", "registered"))
    finally:
        del environment["ACID_METASTORE_URL"]
        spark.dataSource.register(HiveAcidDataSource)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")  # Spark's default; build_session turns it on
    try:
        rows = spark_rows(hiveacid(spark, store).load("default.registered").where("id > 4"))
        assert rows == [r for r in spark_rows(read_table(spark, store, "default", "registered")) if r["id"] > 4]
        with pytest.raises(AnalysisException, match=r"spark\.sql\.python\.filterPushdown\.enabled"):
            hiveacid(spark, store, partitionPruning="true").load("default.registered").collect()
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_bad_input_gets_a_clear_error_naming_it(spark, store):
    Table(store, "plain")
    store.catalog.create_table("default", "plain_orc", [("id", "bigint")])
    with pytest.raises(AnalysisException, match=r'no table to read: load\("db\.table"\) or option\("table"'):
        hiveacid(spark, store).load()
    for options, table, message in [
        ({}, "default.nope", r"table default\.nope does not exist"),
        ({}, "plain", r"table 'plain' is not database\.table"),
        ({}, "default.plain_orc", r"table default\.plain_orc is not a full ACID table"),
        ({"table": "default.other"}, "default.plain", r"load\('default\.plain'\) and option table 'default\.other' "
                                                      "name different tables"),
        ({"rowId": "yes"}, "default.plain", r"option rowId must be true or false, got 'yes'"),
        ({"partitionPruning": "1"}, "default.plain", r"option partitionPruning must be true or false, got '1'"),
        ({"validWriteId": "x"}, "default.plain", r"unknown option\(s\) \['validwriteid'\]"),
    ]:
        with pytest.raises(AnalysisException, match=message):
            hiveacid(spark, store, **options).load(table)
    secret = "postgresql://acid:s3cret-password@db.example:no-port/metastore"
    with pytest.raises(AnalysisException, match=r"option metastore <unparsable URL> is not a SQLAlchemy URL") as error:
        spark.read.format("hiveacid").option("metastore", secret).load("default.plain")
    assert "s3cret" not in str(error.value)
    with pytest.raises(AnalysisException, match=r"the schema given \(struct<id:bigint>\) is not the schema of "
                                                r"default\.plain"):
        hiveacid(spark, store).schema("id bigint").load("default.plain").collect()
