"""A major compaction of one bucket split over Spark tasks: the parts are written on the executors and
concatenated on the driver into the bucket's one file, every row and ROW__ID kept."""

from __future__ import annotations

import os

import pytest
from support.compaction_tables import check_result_directory, directories, make_table, read_rows, write_history

from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore.codes import CompactionType
from acid_core.metastore.txns import Operation
from spark_jobs.compact import SparkRunner

pytestmark = pytest.mark.spark


def test_a_split_major_on_spark_keeps_every_row_and_row_id_in_one_file(spark, store):
    table = make_table(store, "big", stripe_rows=200)
    write_history(table, None)
    with table.transaction() as txn:
        txn.insert([(i, f"big{i}") for i in range(1000, 9000)])
    with table.transaction(operation=Operation.DELETE) as txn:
        txn.delete(list(range(1000, 9000, 3)))
    before = read_rows(table)
    queued = store.compactions.enqueue("default", "big", None, CompactionType.MAJOR)
    outcome = CompactionWorker(store, runner=SparkRunner(spark, split_rows=2000)).run(queued.compaction_id)
    # 8,016 rows: 5 parts of 2,000, rounded up to a multiple of the 2 tasks local[2] runs at once
    assert outcome.result == "compacted" and "in 1 buckets (6 tasks)" in outcome.message, outcome.message
    assert read_rows(table) == before
    (base,) = [d for d in directories(table.location()) if d.startswith("base_")]
    events = check_result_directory(os.path.join(table.location(), base), operation=0)
    assert len(events) == len(before)
