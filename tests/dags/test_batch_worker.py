"""acid_worker's workers run many compactions in one long-lived Spark application (acid_plugin.batch), through the real
DAGs with `dag.test()` and real spark-submit jobs on local Spark.

A killed application in the middle of a batch: every entry of the batch is compacted once, or put back by housekeeping
and compacted once later. Entries whose `compactor.spark.*` settings differ get applications of their own, in
enqueue order. A failing compaction does not stop its neighbours and fails the task naming it.
"""

from __future__ import annotations

import threading
import time

import psutil
import pytest
from support.dag_support import COLUMNS, dirs, insert, returned, returned_all, task_states

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

WORKER = {"max_compactions": 100, "workers": 1, "batch_seconds": 600, "pool_timeout_seconds": 43200}
HOUSEKEEPING = {"worker_timeout_seconds": 1, "txn_timeout_seconds": 300, "lease_timeout_seconds": 300,
                "history_succeeded": 3, "history_failed": 3, "history_did_not_initiate": 2, "history_refused": 3,
                "history_timeout_seconds": 604800}


def _table(ms, name: str, days: list[str], *, params: dict | None = None, big: str | None = None) -> None:
    """`default.<name>` partitioned by ds; each day two one-row deltas, day `big` three deltas of 150,000 rows (its
    compaction takes a few seconds)."""
    from acid_core.write.table import AcidTable

    info = ms.catalog.create_table("default", name, COLUMNS, params={"transactional": "true", **(params or {})},
                                   partition_keys=[("ds", "string")])
    for day in days:
        if day != big:
            for number in range(2):
                insert(ms, name, day, [(number, day)])
            continue
        for chunk in range(3):
            with AcidTable(ms, info).new_write(agent_info="test writer", partition={"ds": day}) as write:
                write.insert([(chunk * 150_000 + i, f"row-{i:06d}") for i in range(150_000)], partition={"ds": day})


def _rows(ms, name: str, day: str) -> list[tuple]:
    from acid_core.read.merge import read_snapshot

    snapshot = ms.txns.snapshot([f"default.{name}"])
    table = read_snapshot(ms.catalog.get_table("default", name).partition_location(f"ds={day}"),
                          write_ids=snapshot.write_ids[f"default.{name}"], txns=snapshot.txns)
    return sorted(zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))


def _kill_batch_application_when(condition, *, timeout: float = 300) -> threading.Thread:
    """A thread that, once `condition()` holds, SIGKILLs this process's descendants running `compact.py --batch`
    (spark-submit's JVM and the Python driver): the long-lived application dies mid-batch."""
    def watch():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                for child in psutil.Process().children(recursive=True):
                    try:
                        if "--batch" in child.cmdline():
                            child.kill()
                    except psutil.Error:
                        pass
                return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_killed_application_mid_batch_loses_nothing_and_runs_nothing_twice(acid_connection, make_ms, dagbag):
    from acid_core.metastore.codes import CompactionState, CompactionType

    ms = make_ms()
    days = ["d1", "d2", "d3", "d4", "d5"]
    _table(ms, "t", days, big="d3")
    before = {day: _rows(ms, "t", day) for day in days}
    dirs_before = {day: dirs(ms.catalog.get_table("default", "t").partition_location(f"ds={day}")) for day in days}
    ids = [ms.compactions.enqueue("default", "t", f"ds={day}", CompactionType.MAJOR).compaction_id for day in days]

    def big_one_is_working() -> bool:
        entry = ms.compactions.get(ids[2])
        return entry.state is CompactionState.WORKING and entry.txn_id is not None

    watcher = _kill_batch_application_when(big_one_is_working)
    killed = dagbag.get_dag("acid_worker").test(run_conf=WORKER)
    watcher.join()

    assert killed.state == "failed" and task_states(killed)["compact[0]"] == "failed"  # retryable: interrupted
    first = [ms.compactions.get(i) for i in ids]
    compacted = [e.id for e in first if e.state is CompactionState.READY_FOR_CLEANING]
    in_hand = [e.id for e in first if e.state is CompactionState.WORKING]
    waiting = [e.id for e in first if e.state is CompactionState.INITIATED]
    assert sorted(compacted + in_hand + waiting) == ids  # nothing failed, nothing lost
    assert compacted == ids[:2] and ids[2] in in_hand  # the oldest first; the big one (and its group) in hand
    assert in_hand + waiting == ids[2:]

    time.sleep(max(0.0, max(e.start_ms for e in first if e.id in in_hand) / 1000 + 1.1 - time.time()))
    housekept = dagbag.get_dag("acid_housekeeping").test(run_conf=HOUSEKEEPING)
    assert housekept.state == "success"
    assert sorted(returned(housekept, "housekeep_metastore")["reverted_compactions"]) == in_hand

    retried = dagbag.get_dag("acid_worker").test(run_conf=WORKER)

    assert retried.state == "success"
    [batch] = returned_all(retried, "compact")
    assert [s["compaction_id"] for s in batch["compactions"]] == ids[2:]  # the put-back ones first: oldest
    after = [ms.compactions.get(i) for i in ids]
    assert {e.state for e in after} == {CompactionState.READY_FOR_CLEANING}
    assert [e.txn_id for e in after[:2]] == [e.txn_id for e in first[:2]]  # not run again
    open_txns = {txn.txn_id for txn in ms.txns.show_transactions() if txn.state_name == "OPEN"}
    for before_kill, now in zip(first[2:], after[2:]):
        if before_kill.id in in_hand:  # the killed attempt's transaction was aborted; a new one compacted it
            assert now.txn_id != before_kill.txn_id and before_kill.txn_id not in open_txns
    for day in days:
        location = ms.catalog.get_table("default", "t").partition_location(f"ds={day}")
        new = [name for name in dirs(location) if name not in dirs_before[day]]
        assert len(new) == 1 and new[0].startswith("base_") and "_v" in new[0], new  # compacted exactly once
        assert not [name for name in dirs(location) if name.startswith(".")]  # no leftover of the killed attempt
        assert _rows(ms, "t", day) == before[day]


def test_entries_with_other_spark_settings_get_their_own_application_in_enqueue_order(acid_connection, make_ms,
                                                                                       dagbag):
    from acid_core.metastore.codes import CompactionState, CompactionType

    ms = make_ms()
    _table(ms, "plain", ["a1", "a2"])
    _table(ms, "roomy", ["b1"], params={"compactor.spark.executor.pyspark.memory": "3g"})
    ids = [ms.compactions.enqueue("default", table, f"ds={day}", CompactionType.MAJOR).compaction_id
           for table, day in (("plain", "a1"), ("roomy", "b1"), ("plain", "a2"))]

    run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)

    assert run.state == "success"
    [batch] = returned_all(run, "compact")
    assert batch["applications"] == 3 and [s["compaction_id"] for s in batch["compactions"]] == ids
    entries = [ms.compactions.get(i) for i in ids]
    assert {e.state for e in entries} == {CompactionState.READY_FOR_CLEANING}
    applications = [e.hadoop_job_id.split("/")[0] for e in entries]
    assert len(set(applications)) == 3  # plain, then roomy (3g), then plain again: order kept
    assert [e.start_ms for e in entries] == sorted(e.start_ms for e in entries)


def test_a_failing_compaction_fails_the_task_by_name_and_its_neighbours_compact(acid_connection, make_ms, dagbag):
    from pathlib import Path

    from acid_core.metastore.codes import CompactionState, CompactionType

    ms = make_ms()
    _table(ms, "t", ["d1", "d2", "d3"])
    location = Path(ms.catalog.get_table("default", "t").partition_location("ds=d2"))
    [broken, *_] = sorted(location.glob("delta_*/bucket_*"))
    broken.write_bytes(b"not an ORC file")  # its compaction fails
    ids = [ms.compactions.enqueue("default", "t", f"ds={day}", CompactionType.MAJOR).compaction_id
           for day in ("d1", "d2", "d3")]

    run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)

    assert run.state == "failed" and task_states(run)["compact[0]"] == "failed"
    states = [ms.compactions.get(i).state for i in ids]
    assert states == [CompactionState.READY_FOR_CLEANING, CompactionState.FAILED, CompactionState.READY_FOR_CLEANING]
    [batch] = returned_all(run, "compact")  # pushed before the task failed
    assert [(s["compaction_id"], s["state"]) for s in batch["compactions"]] == [
        (ids[0], "ready for cleaning"), (ids[1], "failed"), (ids[2], "ready for cleaning")]
    assert batch["compactions"][1]["message"].startswith(f"compaction {ids[1]} failed: ")


def test_an_entry_whose_settings_cannot_be_used_is_recorded_failed_and_starts_no_application(
        acid_connection, make_ms, dagbag, recording_spark_submit):
    from acid_core.metastore.codes import CompactionState, CompactionType

    ms = make_ms()
    _table(ms, "t", ["d1"])
    compaction_id = ms.compactions.enqueue("default", "t", "ds=d1", CompactionType.MAJOR).compaction_id
    # a value no launcher can use, written behind the catalog's checks (as an older version or another tool could)
    import sqlalchemy as sa

    from acid_core.metastore import schema

    table_id = ms.db.run("find the table", lambda conn: conn.execute(
        sa.select(schema.tbls.c.TBL_ID).where(schema.tbls.c.TBL_NAME == "t")).scalar_one(), write=False)
    ms.db.run("write a bad property", lambda conn: conn.execute(schema.table_params.insert().values(
        TBL_ID=table_id, PARAM_KEY="compactor.spark.executor.pyspark.memory", PARAM_VALUE="lots")))

    run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)

    assert run.state == "failed" and task_states(run)["compact[0]"] == "failed"
    entry = ms.compactions.get(compaction_id)
    assert entry.state is CompactionState.FAILED and "pyspark.memory" in entry.error_message
    assert recording_spark_submit.commands() == []  # no application was started for it
