"""acid_core.compaction.batch: many queued compactions one after another in one process, on both metastores.

Entries start in enqueue order whoever else takes entries meanwhile; a failing compaction is recorded failed and the
next one runs; the batch stops in front of an entry another application must run, at its limits, with an empty
queue, and when its runner can run no more; each compaction is its own claim, transaction and HadoopJobId.
"""

from __future__ import annotations

import pytest
from support.committed_writes import insert

from acid_core.compaction.batch import (
    LIMIT_REACHED,
    OTHER_SETTINGS,
    QUEUE_EMPTY,
    RUNNER_DOWN,
    BatchWorker,
    QueueSelection,
)
from acid_core.compaction.worker import local_runner
from acid_core.errors import UsageError
from acid_core.metastore.codes import CompactionState, CompactionType

COLUMNS = [("id", "int"), ("day", "string")]
WORKER = "host-airflow.acid_worker.compact[0].try1"


def _partitioned(ms, name: str, days: list[str], *, deltas: int = 2) -> None:
    ms.catalog.create_table("default", name, COLUMNS, params={"transactional": "true"},
                            partition_keys=[("ds", "string")])
    for day in days:
        for number in range(deltas):
            insert(ms, name, day, [(number, day)])


def _queue(ms, name: str, days: list[str], **options) -> list[int]:
    return [ms.compactions.enqueue("default", name, f"ds={day}", CompactionType.MAJOR, **options).compaction_id
            for day in days]


class Recorder:
    """The batch's on_start / on_end, recording the order of events."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.ended = []

    def start(self, entry) -> None:
        self.started.append(entry.id)

    def end(self, item) -> None:
        self.ended.append(item)


def _batch(ms, recorder: Recorder, *, runner=local_runner, selection=None, **options) -> BatchWorker:
    return BatchWorker(ms, worker_id=WORKER, runner=runner, selection=selection or QueueSelection(), on_start=recorder.start,
                       on_end=recorder.end, **options)


def test_a_batch_runs_the_queue_in_enqueue_order_each_compaction_on_its_own(ms):
    days = ["d1", "d2", "d3", "d4"]
    _partitioned(ms, "t", days)
    ids = _queue(ms, "t", days)
    recorder = Recorder()

    end = _batch(ms, recorder, job_id="local-1").run(max_compactions=100, max_seconds=600)

    assert (end.reason, end.ran) == (QUEUE_EMPTY, 4)
    assert recorder.started == ids and [item.compaction_id for item in recorder.ended] == ids
    assert {item.result for item in recorder.ended} == {"compacted"}
    entries = [ms.compactions.get(i) for i in ids]
    assert {e.state for e in entries} == {CompactionState.READY_FOR_CLEANING}
    assert len({e.txn_id for e in entries}) == 4  # a compactor transaction each
    assert {e.worker_id for e in entries} == {WORKER} and {e.hadoop_job_id for e in entries} == {"local-1"}
    assert [e.start_ms for e in entries] == sorted(e.start_ms for e in entries)
    assert all(item.stats["events_written"] == 2 and item.stats["bytes_written"] > 0 for item in recorder.ended)


def test_a_failing_compaction_does_not_fail_its_neighbours(ms, monkeypatch):
    days = ["d1", "d2", "d3"]
    _partitioned(ms, "t", days)
    ids = _queue(ms, "t", days)

    def runner(plan):
        if plan.compaction_id == ids[1]:
            raise OSError("disk full")
        return local_runner(plan)

    recorder = Recorder()
    end = _batch(ms, recorder, runner=runner).run(max_compactions=100, max_seconds=600)

    assert (end.reason, end.ran) == (QUEUE_EMPTY, 3)
    assert [item.result for item in recorder.ended] == ["compacted", "failed", "compacted"]
    assert recorder.ended[1].message == f"compaction {ids[1]} failed: OSError: disk full"
    states = [ms.compactions.get(i).state for i in ids]
    assert states == [CompactionState.READY_FOR_CLEANING, CompactionState.FAILED, CompactionState.READY_FOR_CLEANING]
    assert ms.compactions.get(ids[1]).error_message == "OSError: disk full"


def test_an_entry_taken_by_another_worker_meanwhile_is_passed_over_in_order(ms):
    days = ["d1", "d2", "d3"]
    _partitioned(ms, "t", days)
    ids = _queue(ms, "t", days)
    recorder = Recorder()
    original = QueueSelection.next_waiting

    class Racing(QueueSelection):  # another worker claims the oldest just after this batch saw it
        def next_waiting(self, metastore):
            entry = original(self, metastore)
            if entry is not None and entry.id == ids[0] and entry.state is CompactionState.INITIATED:
                metastore.compactions.claim(worker_id="otherhost-w", compaction_id=ids[0])
            return entry

    end = _batch(ms, recorder, selection=Racing()).run(max_compactions=100, max_seconds=600)

    assert recorder.started == ids[1:] and end.ran == 2
    assert ms.compactions.get(ids[0]).worker_id == "otherhost-w"  # left to its owner, not run twice


def test_a_batch_stops_at_its_limits_and_in_front_of_another_applications_entry(ms):
    days = ["d1", "d2", "d3", "d4"]
    _partitioned(ms, "t", days)
    ids = _queue(ms, "t", days)

    first = Recorder()
    end = _batch(ms, first).run(max_compactions=1, max_seconds=600)
    assert (end.reason, end.ran, first.started) == (LIMIT_REACHED, 1, ids[:1])

    timed = Recorder()
    assert _batch(ms, timed).run(max_compactions=10, max_seconds=0).reason == LIMIT_REACHED and not timed.started

    other = Recorder()
    end = _batch(ms, other, accepts=lambda entry: "wants 8g" if entry.id == ids[2] else None).run(
        max_compactions=10, max_seconds=600)
    assert (end.reason, end.next_compaction_id, other.started) == (OTHER_SETTINGS, ids[2], ids[1:2])
    assert f"compaction {ids[2]} needs another application: wants 8g" == end.message
    assert ms.compactions.get(ids[2]).state is CompactionState.INITIATED  # not claimed: the other app takes it

    with pytest.raises(UsageError, match="limits of at least 0"):
        _batch(ms, Recorder()).run(max_compactions=-1, max_seconds=1)


def test_a_batch_takes_only_its_pool_and_stops_when_its_runner_is_down(ms):
    _partitioned(ms, "t", ["d1", "d2", "d3"])
    default, = _queue(ms, "t", ["d1"])
    etl = _queue(ms, "t", ["d2", "d3"], pool="etl")

    recorder = Recorder()
    _batch(ms, recorder, selection=QueueSelection(pool="etl")).run(max_compactions=10, max_seconds=600)
    assert recorder.started == etl and ms.compactions.get(default).state is CompactionState.INITIATED

    class DeadRunner:
        def __call__(self, plan):
            raise AssertionError("never called")

        def usable(self):
            return False

    down = Recorder()
    end = _batch(ms, down, runner=DeadRunner(), selection=QueueSelection(other_than=("etl",))).run(
        max_compactions=10, max_seconds=600)
    assert end.reason == RUNNER_DOWN and not down.started
    assert ms.compactions.get(default).state is CompactionState.INITIATED


class GroupRunner:
    """A runner that runs several plans in one call (as SparkRunner.run_group does in one Spark job), recording the
    groups; a plan of `failing` fails alone."""

    parallelism = 2

    def __init__(self, failing: int | None = None) -> None:
        self.groups: list[list[int]] = []
        self.failing = failing

    def __call__(self, plan):
        self.groups.append([plan.compaction_id])
        return local_runner(plan)

    def run_group(self, plans):
        self.groups.append([plan.compaction_id for plan in plans])
        return [OSError("disk full") if plan.compaction_id == self.failing else local_runner(plan) for plan in plans]


def test_consecutive_entries_of_a_table_run_together_in_queue_order(ms):
    _partitioned(ms, "t", ["d1", "d2", "d3"])
    _partitioned(ms, "u", ["d1"])
    t1, t2 = _queue(ms, "t", ["d1", "d2"])
    [u1] = _queue(ms, "u", ["d1"])
    [t3] = _queue(ms, "t", ["d3"])
    runner = GroupRunner(failing=t2)
    recorder = Recorder()

    end = _batch(ms, recorder, runner=runner).run(max_compactions=100, max_seconds=600)

    assert end.ran == 4 and recorder.started == [t1, t2, u1, t3]  # never past an older entry of another table
    assert runner.groups == [[t1, t2], [u1], [t3]]  # a group of the two oldest of t; u alone; then t again
    assert [item.result for item in recorder.ended] == ["compacted", "failed", "compacted", "compacted"]
    assert recorder.ended[1].message == f"compaction {t2} failed: OSError: disk full"
    states = [ms.compactions.get(i).state for i in (t1, t2, u1, t3)]
    assert states == [CompactionState.READY_FOR_CLEANING, CompactionState.FAILED,
                      CompactionState.READY_FOR_CLEANING, CompactionState.READY_FOR_CLEANING]
    txns = {ms.compactions.get(i).txn_id for i in (t1, u1, t3)}
    assert len(txns) == 3  # each its own compactor transaction, even in one group
