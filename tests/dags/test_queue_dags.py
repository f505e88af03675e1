"""acid_initiator and acid_worker apart: a poll only queues (it never waits on a compaction), its cursor carries a
cut-short poll over to the next one, and worker runs never run one queue entry twice. `dag.test()` runs against a real
SQLite metastore and real table files; no test here starts Spark (where a worker task could reach it, the spark-submit
binary is made one that does not exist, so a compaction that did start would fail and be recorded failed)."""

from __future__ import annotations

import json

import pytest
from support.dag_support import COLUMNS, asset_events, insert, returned, returned_all, task_states

pytestmark = pytest.mark.airflow

# dag.test() keeps the previous run's conf values on the shared DAG object, so every run gives every param.
INITIATOR = {"dry_run": False, "full_scan": False, "fetch_size": 1000, "delta_num_threshold": 1,
             "delta_pct_threshold": 0.1, "aborted_threshold": 1000, "aborted_time_threshold_seconds": 43200,
             "failed_threshold": 2, "failed_retry_seconds": 604800}
WORKER = {"max_compactions": 100}
CURSOR = "acid_initiator_last_check_ms.acid_metastore"
OTHER_WORKER = "otherhost-airflow.acid_worker.compact[0].try1"  # a task of another run of acid_worker


@pytest.fixture
def no_spark(monkeypatch):
    """A spark-submit that cannot start: a compaction task that got as far as submitting fails."""
    import shutil

    assert shutil.which("spark3-submit") is None
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark3-submit"}}))


def _partitioned(ms, name: str, days: list[str], *, deltas: int = 2):
    """`default.<name>` partitioned by ds, each day `deltas` one-row deltas (> delta_num_threshold 1, no base:
    a major compaction is due). A metastore on a ManualClock writes them a second apart, long ago."""
    ms.catalog.create_table("default", name, COLUMNS, params={"transactional": "true"},
                            partition_keys=[("ds", "string")])
    for day in days:
        for number in range(deltas):
            insert(ms, name, day, [(number, day)])
            if hasattr(ms.db.clock, "advance"):
                ms.db.clock.advance(1000)


def _variable(key: str):
    from airflow.models.variable import Variable

    return Variable.get(key, default_var=None)


def test_a_poll_queues_and_finishes_while_a_compaction_is_working(acid_connection, make_ms, dagbag, no_spark):
    """One long compaction (working) holds nothing up: the poll queues the other partitions, runs no compaction,
    and wakes the worker through the asset; a poll that queued nothing emits nothing."""
    from acid_core.metastore.codes import CompactionState, CompactionType

    ms = make_ms()
    _partitioned(ms, "sales", ["a", "b"])
    long_one = ms.compactions.enqueue("default", "sales", "ds=a", CompactionType.MAJOR).compaction_id
    ms.compactions.claim(worker_id=OTHER_WORKER, compaction_id=long_one)  # its Spark job runs for hours
    events = asset_events("acid_compaction_queued")
    initiator = dagbag.get_dag("acid_initiator")

    polled = initiator.test(run_conf=INITIATOR)

    assert polled.state == "success"
    assert task_states(polled) == {"poll": "success", "wake_workers": "success"}
    [queued] = returned(polled, "poll")["queued"]
    assert returned(polled, "wake_workers") == [queued]
    decisions = {d["partition"]: d for d in returned(polled, "poll", key="decisions")}
    assert decisions["default.sales/ds=b"]["compaction_id"] == queued
    assert decisions["default.sales/ds=a"]["type"] is None  # already working: skipped, not waited for
    assert ms.compactions.get(queued).state is CompactionState.INITIATED  # queued, not run
    assert ms.compactions.get(long_one).state is CompactionState.WORKING
    assert asset_events("acid_compaction_queued") == events + 1

    again = initiator.test(run_conf=INITIATOR)  # nothing written since: nothing to queue

    assert again.state == "success"
    assert returned(again, "poll")["queued"] == []
    assert task_states(again) == {"poll": "success", "wake_workers": "skipped"}
    assert asset_events("acid_compaction_queued") == events + 1


def test_a_poll_cut_short_by_fetch_size_continues_at_the_next_poll(acid_connection, make_ms, dagbag):
    """The first poll of a metastore with a backlog of writes: fetch_size bounds each poll, the stored cursor
    carries the rest over, and over several polls every partition is initiated, each once. A dry run does not move
    the cursor."""
    from acid_core.metastore.engine import ManualClock

    ms = make_ms()
    days = [f"2026-01-0{day}" for day in range(1, 8)]
    _partitioned(make_ms(clock=ManualClock()), "many", days)  # written in 2023, before the platform polled
    initiator = dagbag.get_dag("acid_initiator")

    dry = initiator.test(run_conf={**INITIATOR, "dry_run": True, "fetch_size": 3})

    assert dry.state == "success" and _variable(CURSOR) is None
    assert returned(dry, "poll")["complete"] is False and len(returned(dry, "poll", key="decisions")) <= 3

    queued: dict[str, int] = {}
    cursors = []
    for _ in range(len(days)):  # at most one poll per partition; fewer when fetch_size holds several
        run = initiator.test(run_conf={**INITIATOR, "fetch_size": 3})
        assert run.state == "success"
        polled, decisions = returned(run, "poll"), returned(run, "poll", key="decisions")
        assert len(decisions) <= 3
        for decision in decisions:
            if decision["compaction_id"] is not None:
                assert decision["partition"] not in queued, "initiated twice"
                queued[decision["partition"]] = decision["compaction_id"]
        assert polled["cursor"] == _variable(CURSOR) and isinstance(polled["cursor"], str)
        cursors.append(polled["cursor"])
        if polled["complete"]:
            break
    assert len(cursors) >= 3  # 7 partitions, 3 a poll
    assert len(set(cursors)) == len(cursors)  # every poll moved the cursor on
    assert sorted(queued) == [f"default.many/ds={day}" for day in days]
    assert sorted(entry.id for entry in ms.compactions.initiated()) == sorted(queued.values())

    settled = initiator.test(run_conf={**INITIATOR, "fetch_size": 3})

    assert returned(settled, "poll")["queued"] == [] and returned(settled, "poll")["complete"] is True


def test_a_millisecond_variable_from_before_the_upgrade_is_a_cursor(acid_connection, make_ms, dagbag):
    """The Variable held the time of the last poll in milliseconds: a poll continues from it and stores a cursor."""
    from airflow.models.variable import Variable

    ms = make_ms()
    Variable.set(CURSOR, str(ms.db.clock.now_ms() - 3_600_000))  # the last poll of the old DAG, an hour ago
    _partitioned(ms, "upgraded", ["a"])

    run = dagbag.get_dag("acid_initiator").test(run_conf=INITIATOR)

    assert run.state == "success"
    assert [d["partition"] for d in returned(run, "poll", key="decisions")] == ["default.upgraded/ds=a"]
    assert len(returned(run, "poll")["queued"]) == 1
    assert _variable(CURSOR) == returned(run, "poll")["cursor"]

    Variable.set(CURSOR, "yesterday")  # not a cursor: the poll says which Variable and what to do
    bad = dagbag.get_dag("acid_initiator").test(run_conf=INITIATOR)

    assert bad.state == "failed" and task_states(bad)["poll"] == "failed"
    assert _variable(CURSOR) == "yesterday" and len(ms.compactions.show(table="upgraded")) == 1


def _other_workers(ms, *, claim: int, compact: int):
    """An Airflow listener: when a worker run has counted the waiting compactions, other workers act before its
    `compact` task starts — entry `claim` is claimed by a task of another run (still running), `compact` is
    compacted by another."""
    from airflow.listeners import hookimpl

    from acid_core.compaction.worker import CompactionWorker

    class OtherWorkers:
        @hookimpl
        def on_task_instance_success(self, previous_state, task_instance):
            if task_instance.dag_id == "acid_worker" and task_instance.task_id == "list_compactions":
                ms.compactions.claim(worker_id=OTHER_WORKER, compaction_id=claim)
                CompactionWorker(ms, worker_id="otherhost-airflow.acid_worker.compact[1].try1").run(compact)

    return OtherWorkers()


def test_worker_runs_do_not_run_one_entry_twice(acid_connection, make_ms, dagbag, no_spark):
    """Entries counted by this run but claimed or compacted by another worker meanwhile are not taken: the worker
    finds nothing waiting, is skipped, and submits nothing (no spark-submit: it would have failed)."""
    from airflow.sdk.listener import get_listener_manager

    from acid_core.metastore.codes import CompactionState, CompactionType

    ms = make_ms()
    _partitioned(ms, "sales", ["a", "b"])
    held = ms.compactions.enqueue("default", "sales", "ds=a", CompactionType.MAJOR).compaction_id
    done = ms.compactions.enqueue("default", "sales", "ds=b", CompactionType.MAJOR).compaction_id
    listener = _other_workers(ms, claim=held, compact=done)
    get_listener_manager().add_listener(listener)
    try:
        run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)
    finally:
        get_listener_manager().pm.unregister(listener)

    assert run.state == "success"
    assert returned(run, "list_compactions", key="waiting") == [held, done]
    assert task_states(run) == {"list_compactions": "success", "compact[0]": "skipped"}
    [result] = returned_all(run, "compact")
    assert result == {"compactions": [], "applications": 0, "stopped": "queue empty"}
    held_entry, done_entry = ms.compactions.get(held), ms.compactions.get(done)
    assert (held_entry.state, held_entry.worker_id) == (CompactionState.WORKING, OTHER_WORKER)  # left to its owner
    assert done_entry.state is CompactionState.READY_FOR_CLEANING and done_entry.worker_id.startswith("otherhost-")
    assert ms.compactions.show(state=CompactionState.FAILED) == []  # nothing was submitted


def test_a_worker_run_starts_as_many_workers_as_slots_and_compactions_wait(acid_connection, make_ms, dagbag):
    """`workers` caps the `compact` tasks of a run (the pool's slots), fewer when fewer wait, and `max_compactions`
    is shared between them; an empty queue starts none."""
    from acid_core.metastore.codes import CompactionType

    ms = make_ms()
    _partitioned(ms, "sales", ["a", "b", "c"])
    ids = [ms.compactions.enqueue("default", "sales", f"ds={day}", CompactionType.MAJOR).compaction_id
           for day in "abc"]
    worker = dagbag.get_dag("acid_worker")

    two = worker.test(run_conf={**WORKER, "workers": 2, "max_compactions": 5}, mark_success_pattern="compact")
    assert returned(two, "list_compactions") == [{"max_compactions": 3}, {"max_compactions": 2}]
    assert returned(two, "list_compactions", key="waiting") == ids

    many = worker.test(run_conf={**WORKER, "workers": 8, "max_compactions": 100}, mark_success_pattern="compact")
    assert len(returned(many, "list_compactions")) == 3  # no more workers than waiting compactions

    empty = worker.test(run_conf={**WORKER, "max_compactions": 0})
    assert empty.state == "success" and returned(empty, "list_compactions") == []
    assert task_states(empty) == {"list_compactions": "success", "compact": "skipped"}  # mapped over nothing
