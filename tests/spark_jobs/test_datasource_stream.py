"""The `hiveacid` data source as a Structured Streaming sink (spark_jobs/datasource_stream.py), through the public API
only: `writeStream.format("hiveacid")`, its options and Spark's checkpoint.

Input is JSON files read one or two per micro-batch. After every run the table holds each input row exactly once
(a model: a Counter of the rows), read by the data source and by acid_core's own merge-on-read. Crashes are real: a
batch committed in the metastore whose commit Spark never recorded (its commit log entry removed, as a crash leaves
it), and a driver killed with SIGKILL in the middle of a batch (its first task's files staged) and right after a
batch committed, each restarted from its checkpoint.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType
from support.compaction_support import ROOT, compact_environment, data_source_lookup_probe
from support.processes import kill_session
from support.read_tables import Table, expected_rows
from support.timeouts import timing_out

from acid_core.format.layout import parse_write_staging_name
from acid_core.write.table_write import remove_abandoned_staging

pytestmark = pytest.mark.spark

SCHEMA = "id bigint, name string, amount double"


def write_inputs(directory: Path, files: int, rows: int, first: int = 0) -> list[tuple]:
    """`files` JSON files of `rows` rows each, named in the order a file source takes them; returns the rows."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for number in range(first, first + files):
        lines = [(number * 1000 + i, f"file {number}", float(i)) for i in range(rows)]
        path = directory / f"part-{number:04d}.json"
        path.write_text("".join(json.dumps(dict(zip(("id", "name", "amount"), row))) + "\n" for row in lines))
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))  # a file source takes the oldest first
        written += lines
    return written


def stored(store, table) -> list[tuple]:
    return sorted(tuple(row.values()) for row in expected_rows(store, table, include_row_id=False))


def query_id(checkpoint: Path) -> str:
    return json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]


def staging_left(location: str) -> list[Path]:
    return sorted(p for p in Path(location).rglob(".*") if p.is_dir() and parse_write_staging_name(p.name))


def run_stream(spark, store, source: Path, checkpoint: Path, table: str, *, files_per_batch: int = 1):
    query = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", files_per_batch).json(str(source))
             .writeStream.format("hiveacid").option("metastore", store.url)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(f"default.{table}"))
    assert query.awaitTermination(180), "the query did not finish"
    assert query.exception() is None


def test_each_micro_batch_is_one_transaction_and_a_replayed_batch_is_skipped(spark, store, tmp_path):
    table = Table(store, "events")
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    model = collections.Counter(write_inputs(source, files=3, rows=20))
    run_stream(spark, store, source, checkpoint, "events")
    assert stored(store, "events") == sorted(model.elements())
    app = query_id(checkpoint)
    state = store.streams.state(app, "default", "events")
    assert (state.last_batch, state.pending_txn_id) == (2, None)
    deltas = sorted(p.name for p in Path(table.info.location).iterdir() if p.name.startswith("delta_"))
    assert deltas == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000", "delta_0000003_0000003_0000"]

    # the driver died after the metastore committed batch 2 and before Spark recorded it: Spark replays batch 2
    for name in ("2", ".2.crc"):
        (checkpoint / "commits" / name).unlink()
    run_stream(spark, store, source, checkpoint, "events")
    assert stored(store, "events") == sorted(model.elements())
    assert store.streams.state(app, "default", "events").last_batch == 2
    assert store.txns.snapshot(["default.events"]).write_ids["default.events"].is_aborted(4)  # the replay's write

    more = write_inputs(source, files=2, rows=5, first=3)
    model.update(more)
    run_stream(spark, store, source, checkpoint, "events")
    assert sorted(tuple(r) for r in spark.read.format("hiveacid").option("metastore", store.url)
                  .load("default.events").collect()) == stored(store, "events") == sorted(model.elements())
    assert store.streams.state(app, "default", "events").last_batch == 4
    remove_abandoned_staging(store)
    assert staging_left(table.info.location) == []


def test_a_micro_batch_longer_than_the_transaction_timeout_commits(spark, store, tmp_path):
    """Housekeeping times transactions out after 3 s while one micro-batch takes about 6 s: the query's keeper
    heartbeats the batch's transaction meanwhile."""
    Table(store, "events")
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    rows = write_inputs(source, files=1, rows=60)

    @F.udf(LongType())
    def slowly(value):
        time.sleep(0.1)
        return value

    with timing_out(store.url, 3000) as aborted:
        query = (spark.readStream.schema(SCHEMA).json(str(source)).coalesce(1).withColumn("id", slowly("id"))
                 .writeStream.format("hiveacid").option("metastore", store.url).option("heartbeatSeconds", "0.5")
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start("default.events"))
        assert query.awaitTermination(180)
        assert query.exception() is None
    assert aborted == []
    assert stored(store, "events") == sorted(rows)


def test_a_partitioned_and_bucketed_table_takes_a_stream(spark, store, tmp_path):
    Table(store, "regional", columns=[("id", "bigint"), ("name", "string")], partition_keys=[("amount", "string")],
          bucket_columns=["id"], num_buckets=4)
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    rows = write_inputs(source, files=2, rows=30)
    query = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
             .selectExpr("id", "name", "cast(amount % 3 as string) as amount").writeStream.format("hiveacid")
             .option("metastore", store.url).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start("default.regional"))
    assert query.awaitTermination(180)
    expected = sorted((i, name, str(amount % 3)) for i, name, amount in rows)
    assert stored(store, "regional") == expected
    assert {p.spec["amount"] for p in store.catalog.list_partitions("default", "regional")} == {"0.0", "1.0", "2.0"}


def test_bad_streaming_options_get_a_clear_error(spark, store, tmp_path):
    Table(store, "events")
    source = tmp_path / "in"
    write_inputs(source, files=1, rows=2)
    stream = spark.readStream.schema(SCHEMA).json(str(source))
    with pytest.raises(Exception, match="only the append output mode"):
        query = (stream.groupBy("name").count().selectExpr("count as id", "name", "0.0 as amount").writeStream
                 .format("hiveacid").option("metastore", store.url).outputMode("complete")
                 .option("checkpointLocation", str(tmp_path / "c1")).start("default.events"))
        query.awaitTermination(120)
        raise query.exception() or AssertionError("the complete mode was taken")
    assert stored(store, "events") == []


# A streaming query as a driver process of its own, to be killed: two files per micro-batch (two tasks, run one
# after the other on local[1]), each row taking 0.1 s in a Python UDF, until every file is written. While the file
# `hold` exists, a batch's second task waits (up to 120 s) before each row: its first task's files are staged by then,
# so the test kills the query inside a batch, not in a race with its commit.
CHILD = textwrap.dedent("""
    import os, sys, time
    from pyspark import TaskContext
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType
    from spark_jobs.session import build_session

    url, source, checkpoint, hold = sys.argv[1:5]
    # Each batch's two files are read as one partition; repartition(2) gives it two write tasks, so that the first
    # stages its files while the second is held.
    spark = build_session("killed-stream", master="local[1]")

    @F.udf(LongType())
    def slowly(value):
        deadline = time.monotonic() + 120
        if TaskContext.get().partitionId() > 0 and os.path.exists(hold):
            open(hold + ".held", "a").close()  # a task of this batch is held: the batch cannot commit
        while TaskContext.get().partitionId() > 0 and os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)
        return value

    query = (spark.readStream.schema("id bigint, name string, amount double").option("maxFilesPerTrigger", 2)
             .json(source).repartition(2).withColumn("id", slowly("id"))
             .writeStream.format("hiveacid").option("metastore", url).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start("default.events"))
    query.awaitTermination(600)
    spark.stop()
""")


@pytest.mark.slow
def test_a_query_killed_in_and_between_batches_and_restarted_writes_every_row_once(store, tmp_path):
    table = Table(store, "events")
    source, checkpoint, hold = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "hold"
    model = collections.Counter(write_inputs(source, files=8, rows=6))
    environment = compact_environment(tmp_path / "home")
    # the control of test_compact_job's check that a compaction skips Spark's look-up of Python data sources
    looked_up = data_source_lookup_probe(environment, tmp_path / "probe")

    def start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", CHILD, store.url, str(source), str(checkpoint), str(hold)],
                                cwd=ROOT, env=environment, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)

    def state():
        if not (checkpoint / "metadata").exists():
            return None
        return store.streams.state(query_id(checkpoint), "default", "events")

    def stop(process: subprocess.Popen) -> None:
        kill_session(process.pid)
        process.wait(timeout=30)
        process.stderr.close()

    def wait_until(condition, process, what: str, seconds: float = 180):
        deadline = time.monotonic() + seconds
        while not condition():
            assert process.poll() is None, f"the query ended before {what}: {process.stderr.read()[-3000:]}"
            assert time.monotonic() < deadline, f"no {what} within {seconds} s"
            time.sleep(0.05)

    # run 1: killed in the middle of a batch, its first task's files staged, its second task held
    process = start()
    try:
        wait_until(lambda: (s := state()) is not None and s.last_batch >= 0, process, "first commit")
        hold.touch()
        # held: else the batch that staged its files may have passed the hold before it was set, and commit before
        # the kill
        held = Path(f"{hold}.held")
        wait_until(lambda: held.exists() and state().pending_txn_id is not None and staging_left(table.info.location),
                   process, "files staged in a batch whose other task is held")
    finally:
        stop(process)
        hold.unlink()
    killed_in = state()
    assert killed_in.pending_txn_id is not None and killed_in.last_batch < 3
    assert looked_up.exists()  # a session that registers the hiveacid source: Spark looked up Python's sources
    assert stored(store, "events") == sorted(r for r in model.elements()
                                             if r[0] // 1000 < 2 * (killed_in.last_batch + 1))

    # run 2: killed as soon as a batch committed (before Spark may record it)
    process = start()
    try:
        wait_until(lambda: state().last_batch > killed_in.last_batch, process, "a commit after the restart")
    finally:
        stop(process)

    # run 3: to the end
    process = start()
    try:
        _, errors = process.communicate(timeout=300)
    finally:
        kill_session(process.pid)
    assert process.returncode == 0, errors[-3000:]
    assert stored(store, "events") == sorted(model.elements())  # every row once
    final = state()
    assert final.pending_txn_id is None and final.last_batch >= 3
    assert store.txns.snapshot(["default.events"]).write_ids["default.events"].open_ids == ()
    remove_abandoned_staging(store)
    assert staging_left(table.info.location) == []
