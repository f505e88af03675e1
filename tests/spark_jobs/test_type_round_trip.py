"""timestamp, char(n) and varchar(n) written through Spark and read back through Spark and through acid_core.

Spark's write and read use one mapping (spark_jobs.types): Hive's `timestamp` is TimestampNTZType, char and varchar
are StringType. Values come back as Hive stores them: timestamps to the microsecond (before and after the epoch),
varchar cut to its length, char cut and padded with spaces to its length (Hive's HiveChar.getPaddedValue).
Not covered: times in the last second before the epoch with a fraction of a millisecond or more, which pyorc's
writer (char/varchar tables) stores one second late (the ORC ambiguity of negative seconds); pyarrow's does not.
"""

from __future__ import annotations

import datetime
import glob
import os

import pyarrow as pa
import pyorc
import pytest
from pyspark.sql.types import IntegerType, StringType, TimestampNTZType

from acid_core.format.bucketing import bucket_function
from acid_core.format.types import parse_type
from acid_core.read.merge import read_snapshot
from spark_jobs import write
from spark_jobs.read import read_table

pytestmark = pytest.mark.spark

TIMES = [datetime.datetime(2024, 2, 29, 23, 59, 58, 123456), datetime.datetime(1969, 12, 31, 23, 59, 58, 999999),
         datetime.datetime(1700, 1, 1, 0, 0, 0, 1), None]
TEXT_COLUMNS = [("id", "int"), ("ts", "timestamp"), ("c", "char(5)"), ("v", "varchar(4)")]
TEXT_ROWS = [(1, TIMES[0], "ab", "abcdef"), (2, TIMES[1], "üß", "xy"), (3, TIMES[2], "abcdefg", ""),
             (4, None, None, None)]
TEXT_EXPECTED = [(1, TIMES[0], "ab   ", "abcd"), (2, TIMES[1], "üß   ", "xy"), (3, TIMES[2], "abcde", ""),
                 (4, None, None, None)]


def acid_core_rows(store, table: str) -> tuple[pa.Schema, list[tuple]]:
    """The table's rows as acid_core's merge reader returns them (timestamps cut to microseconds for comparison)."""
    info = store.catalog.get_table("default", table)
    snapshot = store.txns.snapshot([info.full_name])
    data = read_snapshot(info.location, write_ids=snapshot.write_ids[info.full_name], txns=snapshot.txns)
    columns = [data.column(i).cast(pa.timestamp("us")) if pa.types.is_timestamp(data.schema.field(i).type)
               else data.column(i) for i in range(data.num_columns)]
    return data.schema, sorted(zip(*(c.to_pylist() for c in columns)), key=lambda row: row[0])


def orc_row_types(store, table: str) -> set[str]:
    """The `row` struct types of the table's data files, as ORC (and so Hive) sees them."""
    types = set()
    for path in glob.glob(os.path.join(store.catalog.get_table("default", table).location, "delta_*", "bucket_*")):
        with open(path, "rb") as stream:
            types.add(str(pyorc.Reader(stream).schema.fields["row"]))
    return types


@pytest.mark.parametrize("timestamp_type", ["timestamp", "timestamp_ntz"])
def test_timestamp_char_and_varchar_round_trip(spark, store, timestamp_type):
    """Char/varchar tables are written row by row (pyorc keeps the ORC types); the source timestamp column may be
    Spark's session-zone TimestampType (the session is UTC) or TimestampNTZType: both store the same wall clock."""
    store.catalog.create_table("default", "texts", TEXT_COLUMNS, params={"transactional": "true"})
    frame = spark.createDataFrame(TEXT_ROWS, f"id int, ts {timestamp_type}, c string, v string").repartition(2)
    assert write.insert(store, "default", "texts", frame).inserted == 4

    df = read_table(spark, store, "default", "texts")
    assert [(f.name, f.dataType) for f in df.schema.fields] == [
        ("id", IntegerType()), ("ts", TimestampNTZType()), ("c", StringType()), ("v", StringType())]
    assert sorted((tuple(row) for row in df.collect()), key=lambda row: row[0]) == TEXT_EXPECTED

    schema, rows = acid_core_rows(store, "texts")
    assert rows == TEXT_EXPECTED
    assert [field.type for field in schema] == [parse_type(t).to_arrow() for _, t in TEXT_COLUMNS]
    assert orc_row_types(store, "texts") == {"struct<id:int,ts:timestamp,c:char(5),v:varchar(4)>"}


def test_timestamps_round_trip_through_the_columnar_writer(spark, store):
    """Without char/varchar columns Spark's tasks write with pyarrow's ORC writer: the same values come back."""
    store.catalog.create_table("default", "times", [("id", "int"), ("ts", "timestamp"), ("s", "string")],
                               params={"transactional": "true"})
    source = [(i, ts, f"s{i}") for i, ts in enumerate(TIMES)]
    write.insert(store, "default", "times", spark.createDataFrame(source, "id int, ts timestamp_ntz, s string"))

    df = read_table(spark, store, "default", "times")
    assert df.schema["ts"].dataType == TimestampNTZType()
    assert sorted((tuple(row) for row in df.collect()), key=lambda row: row[0]) == source
    assert acid_core_rows(store, "times")[1] == source
    assert orc_row_types(store, "times") == {"struct<id:int,ts:timestamp,s:string>"}


def test_spark_updates_keep_char_padding_and_timestamps(spark, store):
    """A split-update reads rows through Spark and writes them back: nothing is padded twice or shifted in time."""
    store.catalog.create_table("default", "texts", TEXT_COLUMNS, params={"transactional": "true"})
    write.insert(store, "default", "texts", spark.createDataFrame(TEXT_ROWS, "id int, ts timestamp, c string, v string"))
    write.update(spark, store, "default", "texts", "id <= 2", {"v": "'new'"})

    expected = [(1, TIMES[0], "ab   ", "new"), (2, TIMES[1], "üß   ", "new")] + TEXT_EXPECTED[2:]
    df = read_table(spark, store, "default", "texts")
    assert sorted((tuple(row) for row in df.collect()), key=lambda row: row[0]) == expected
    assert acid_core_rows(store, "texts")[1] == expected


def test_bucketed_char_rows_keep_their_bucket_through_a_spark_update(spark, store):
    """Spark reads char values padded and writes them back; Hive hashes char values without the padding, so the
    updated rows land in the bucket their first insert chose."""
    store.catalog.create_table("default", "clustered", TEXT_COLUMNS, bucket_columns=["c"], num_buckets=4,
                               params={"transactional": "true"})
    info = store.catalog.get_table("default", "clustered")
    place = bucket_function(info.columns, info.bucket_columns, info.num_buckets, version=info.bucketing_version)
    rows = [(i, None, f"k{i}", "v") for i in range(12)]
    write.insert(store, "default", "clustered", spark.createDataFrame(rows, "id int, ts timestamp, c string, v string"))
    write.update(spark, store, "default", "clustered", "id % 2 = 0", {"v": "'w'"})

    placed = {}
    for path in glob.glob(os.path.join(info.location, "delta_*", "bucket_*")):
        with open(path, "rb") as stream:
            for event in pyorc.Reader(stream, struct_repr=pyorc.StructRepr.DICT):
                row = event["row"]
                assert place(tuple(row.values())) == int(path.rsplit("_", 1)[1]), (path, row)
                placed.setdefault(row["id"], []).append(row["c"])
    assert placed == {i: [f"k{i}".ljust(5)] * (2 if i % 2 == 0 else 1) for i in range(12)}
