"""A compaction's self-verification on Spark: each task (on an executor) counts what it merges and reads its file
back, the driver compares the figures it gets back. A row lost on an executor is refused before the commit."""

from __future__ import annotations

import logging
import re

import pytest
from support.model import table_by_row_id, tree

from acid_core.compaction.verify import CompactionVerificationError
from acid_core.compaction.worker import CompactionWorker
from acid_core.format.rowid import RowId
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.read.merge import read_snapshot
from acid_core.write.table_write import TableWrite
from spark_jobs import compact

pytestmark = pytest.mark.spark


def write(store, *, rows=(), deletes=()) -> None:
    handle = TableWrite.open(store, "default", "t", agent_info="test")
    if rows:
        handle.insert(rows)
    if deletes:
        handle.delete(deletes)
    handle.commit()


def rows_of(store) -> dict:
    at = store.txns.snapshot(["default.t"])
    location = store.catalog.get_table("default", "t").location
    return table_by_row_id(read_snapshot(location, write_ids=at.write_ids["default.t"], txns=at.txns,
                                         include_row_id=True))


def losing_bucket_task(plan, background, events_read, events_written, tasks_done):
    """spark_jobs.compact._bucket_task, except that on the executor the first task of bucket 0 loses the first row
    it merged on its way to the writer (which then writes a file in perfect order, one row short)."""
    def task(work):
        from acid_core.compaction import execute

        real = execute._write_events

        def write_events(fs, plan_, work_, final, events, background_, checker=None):
            if work_.bucket != 0 or work_.part not in (None, 0):
                return real(fs, plan_, work_, final, events, background_, checker)

            def one_short():
                lost = False
                for table in events:
                    if not lost and table.num_rows:
                        table, lost = table.slice(1), True
                    yield table

            return real(fs, plan_, work_, final, one_short(), background_, checker)

        execute._write_events = write_events  # this Python worker may run other tasks later: put back below
        try:
            result = execute.run_bucket(plan, work, background=background)
        finally:
            execute._write_events = real
        events_read.add(result.events_read)
        events_written.add(result.inserts + result.deletes)
        tasks_done.add(1)
        return result

    return task


def test_a_row_lost_on_an_executor_is_refused_before_the_commit(spark, store, monkeypatch, caplog):
    store.catalog.create_table("default", "t", [("id", "bigint"), ("name", "string")],
                               params={"transactional": "true"})
    for first in (0, 300, 600):
        write(store, rows=[(i, f"r{i}") for i in range(first, first + 300)])
    write(store, deletes=[RowId(*key) for key, row in sorted(rows_of(store).items()) if row[0] % 5 == 0])
    location = store.catalog.get_table("default", "t").location
    files, rows = tree(location), rows_of(store)
    runner = compact.SparkRunner(spark, split_rows=200)  # bucket 0 in parts, one Spark task each

    monkeypatch.setattr(compact, "_bucket_task", losing_bucket_task)
    compaction_id = store.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id
    caplog.set_level(logging.ERROR, logger="acid_core.compaction.verify")
    with pytest.raises(CompactionVerificationError) as raised:
        CompactionWorker(store, runner=runner).run(compaction_id)

    message = str(raised.value)
    match = re.match(r"verification failed: base_0000004_v\d{7}/bucket_00000: expected (\d+) events "
                     r"\(checksum 0x[0-9a-f]{16}\), found (\d+) \(checksum 0x[0-9a-f]{16}\); nothing was committed",
                     message)
    assert match and int(match.group(2)) == int(match.group(1)) - 1 == len(rows) - 1, message
    assert runner.tasks_total > 2  # split: the figures of the parts were combined
    info = store.compactions.get(compaction_id)
    assert info.state is CompactionState.FAILED and info.error_message == f"CompactionVerificationError: {message}"
    assert tree(location) == files and rows_of(store) == rows
    assert any("verification failed" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)

    monkeypatch.undo()
    retry = store.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id
    outcome = CompactionWorker(store, runner=runner).run(retry)
    assert outcome.result == "compacted" and outcome.message.endswith(", verified"), outcome.message
    assert rows_of(store) == rows
