"""Spark inserts into a bucketed table: the insert as it was before issue 25 (Hive's bucket hash row by row in Python,
a shuffle that adaptive execution packs into as few tasks as 64 MiB allows, every 10,000-row Spark batch grouped and
written as it came) vs today's (`acid_core.format.bucketing.bucket_numbers` on whole Arrow columns, a shuffle into as many
tasks as the application has slots, batches of 131,072 rows grouped at once), side by side in one run, and whether
they write the same files.

Data: `--rows 2000000` rows (id bigint, name string, amount double) from `spark.range`, inserted with
`spark_jobs.write.insert` into a table CLUSTERED BY (id) INTO `--buckets 32` BUCKETS (bucketing_version 2), once per
way and round, on one SparkSession (local[2], as make run's spark_default). Each round inserts into a fresh table of its
own; the rounds alternate the order of the two ways. Printed: each way's median insert time over `--rounds 3`, the
ratio (goal >= 5x), the load average at the start and the end, and whether every bucket file holds the same rows with
the same ROW__IDs under both ways (compared per bucket file, row ids and values); and the floor of any such insert:
the same plan with identity Python functions and Spark's noop sink (`floor_plan`), timed in the same rounds.

Run: `.venv/bin/python bench/bench_bucketing.py [--rows 2000000] [--buckets 32] [--rounds 3]` (a few minutes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def per_row_with_bucket(frame, table):
    """The insert path's bucketing as it was: `to_pylist` on every column and the per-row function (the baseline)."""
    import pyarrow as pa
    from pyspark.sql.types import LongType, StructField, StructType

    from acid_core.format.bucketing import bucket_function
    from spark_jobs.write import BUCKET

    place = bucket_function(table.columns, table.bucket_columns, table.num_buckets, version=table.bucketing_version)
    names = [c.name for c in table.columns]
    schema = StructType(frame.schema.fields + [StructField(BUCKET, LongType())])

    def add(batches):
        for batch in batches:
            columns = [batch.column(batch.schema.get_field_index(n)).to_pylist() for n in names]
            yield batch.append_column(BUCKET, pa.array([place(row) for row in zip(*columns)], pa.int64()))

    return frame.mapInArrow(add, schema)


def floor_plan(frame, slots: int):
    """The insert's plan with nothing done in it: the rows through a Python worker, a shuffle into `slots` tasks by
    a bucket number (here computed by Spark), through a Python worker again, into Spark's noop sink. No insert that
    hashes or writes in Python workers can take less time than this."""
    from pyspark.sql import functions as F

    identity = frame.mapInArrow(lambda batches: batches, frame.schema)
    shuffled = identity.repartition(slots, F.pmod(F.hash("id"), F.lit(32)))
    return shuffled.mapInArrow(lambda batches: batches, frame.schema)


def before_insert_frame(write_, frame, statement_id: int):
    """`spark_jobs.write._insert_frame` of a bucketed table as it was before issue 25 (the baseline)."""
    from pyspark.sql import functions as F

    from acid_core.format.layout import delta_dir_name
    from spark_jobs import write

    table = write_.table
    final = delta_dir_name(write_.write_id, write_.write_id, statement_id=statement_id)
    keys = [k.name for k in table.partition_keys]
    frame = per_row_with_bucket(frame, table).repartition(*([F.col(k) for k in keys] + [F.col(write.BUCKET)]))
    return write._run(write_, frame, write.file_task(write_, statement_id, final, bucketed=True),
                      lambda task, batches: write._write_inserts(task, batches, gather_rows=1))


def bucket_contents(location: str) -> dict[str, list]:
    """Every bucket file's rows (ROW__ID and values), by file name, under the table's delta directories."""
    import pyarrow.orc as orc

    found = {}
    for directory in sorted(Path(location).iterdir()):
        if not directory.name.startswith("delta_"):
            continue
        for path in sorted(directory.glob("bucket_*")):
            table = orc.ORCFile(str(path)).read()
            row = table.column("row").combine_chunks()
            found[path.name] = sorted(zip(table.column("bucket").to_pylist(), table.column("rowId").to_pylist(),
                                          row.field("id").to_pylist(), row.field("name").to_pylist()))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--buckets", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from pyspark.sql import functions as F

    import spark_jobs.write as write
    from acid_core.metastore import Metastore
    from spark_jobs.session import build_session

    today = write._insert_frame
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        store = Metastore(f"sqlite:///{scratch}/metastore.db", warehouse=f"{scratch}/warehouse")
        store.init()
        spark = build_session("bench-bucketing", master="local[2]")
        frame = (spark.range(args.rows).select(F.col("id"), F.concat(F.lit("name-"), (F.col("id") % 997).cast("string"))
                                               .alias("name"), (F.col("id") / 8).alias("amount")))
        times: dict[str, list[float]] = {"row by row": [], "vectorized": [], "floor": []}
        locations: dict[str, str] = {}
        try:
            for round_number in range(args.rounds + 1):  # round 0 warms the session up, untimed
                order = ["row by row", "vectorized"] if round_number % 2 else ["vectorized", "row by row"]
                for way in order:
                    name = f"t{round_number}_{way.replace(' ', '_')}"
                    store.catalog.create_table("default", name, [("id", "bigint"), ("name", "string"),
                                                                 ("amount", "double")],
                                               params={"transactional": "true"}, bucket_columns=["id"],
                                               num_buckets=args.buckets)
                    write._insert_frame = before_insert_frame if way == "row by row" else today
                    started = time.perf_counter()
                    write.insert(store, "default", name, frame)
                    if round_number:
                        times[way].append(time.perf_counter() - started)
                    locations[way] = store.catalog.get_table("default", name).location
                started = time.perf_counter()
                floor_plan(frame, spark.sparkContext.defaultParallelism).write.format("noop").mode("overwrite").save()
                if round_number:
                    times["floor"].append(time.perf_counter() - started)
        finally:
            write._insert_frame = today
            spark.stop()
        same = bucket_contents(locations["row by row"]) == bucket_contents(locations["vectorized"])
        store.close()
    slow, fast = statistics.median(times["row by row"]), statistics.median(times["vectorized"])
    print(f"Spark insert of {args.rows:,} rows into a {args.buckets}-bucket table (local[2]), median of "
          f"{args.rounds} rounds:")
    print(f"  before issue 25 (row by row): {slow:7.2f} s   {', '.join(f'{t:.2f}' for t in times['row by row'])}")
    print(f"  today (vectorized):           {fast:7.2f} s   {', '.join(f'{t:.2f}' for t in times['vectorized'])}")
    floor = statistics.median(times["floor"])
    print(f"  the plan's floor (identity functions, noop sink): {floor:7.2f} s, at most {slow / floor:.1f}x "
          "for any insert hashing or writing in Python")
    print(f"  speed-up: {slow / fast:.1f}x (goal >= 5x); same bucket files, rows and ROW__IDs: {same}")
    print(f"  load average: {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end (2 cores)")


if __name__ == "__main__":
    main()
