"""acid_core.metrics and acid_core.alerts on both databases: Hive's ACID gauges from the metastore, the failed
threshold and long-running alerts, the HadoopJobId compare-and-swap, and the numbers a compaction and a cleaning
report (events and bytes read, written, removed)."""

from __future__ import annotations

from acid_core import alerts
from acid_core.compaction.cleaner import clean
from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore.compactions import CompactionType
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.metrics import collect, gauges, initiator_gauges
from acid_core.writer import EmbeddedWriter


def _table(ms, name="t"):
    return ms.catalog.create_table("default", name, (("id", "int"), ("name", "string")),
                                   params={"transactional": "true"})


def _insert(ms, name: str, rows) -> None:
    from acid_core.metastore.txns import Operation

    info = ms.catalog.get_table("default", name)
    txn_id = ms.txns.open_txn()
    write_id = ms.txns.allocate_write_ids([txn_id], "default", name)[txn_id]
    ms.txns.add_components(txn_id, "default", name, [None], Operation.INSERT)
    EmbeddedWriter(info.location, columns=info.columns, partition_keys=[]).insert(rows, write_id=write_id)
    ms.txns.commit(txn_id)


def test_gauges_count_queue_states_transactions_and_locks_with_their_ages(ms, clock):
    _table(ms)
    empty = gauges(collect(ms))
    assert all(value == 0 for value in empty.values()) and all(name.startswith("acid.") for name in empty)
    first = ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id
    _table(ms, "u")
    clock.advance(5_000)
    ms.compactions.enqueue("default", "u", None, CompactionType.MINOR)
    opened = ms.txns.open_txn()
    ms.locks.acquire([LockComponent("default", "t", None, LockType.SHARED_READ)], txn_id=opened)
    aborted = ms.txns.open_txn()
    ms.txns.abort(aborted)
    clock.advance(10_000)
    ms.compactions.claim(worker_id="host-w", compaction_id=first)
    clock.advance(3_000)

    values = gauges(collect(ms))

    assert values["acid.compaction_num_initiated"] == 1
    assert values["acid.compaction_num_working"] == 1
    assert values["acid.compaction_num_ready_for_cleaning"] == 0
    assert values["acid.compaction_oldest_enqueue_age_in_sec"] == 13.0  # u, queued 13 s ago
    assert values["acid.compaction_oldest_working_age_in_sec"] == 3.0
    assert values["acid.num_open_transactions"] == 1 and values["acid.oldest_open_txn_age_in_sec"] == 13.0
    assert values["acid.num_aborted_transactions"] == 1 and values["acid.oldest_aborted_txn_age_in_sec"] == 13.0
    assert values["acid.num_locks"] == 1 and values["acid.oldest_lock_age_in_sec"] == 13.0


def test_failed_threshold_alert_fires_when_the_last_n_attempts_failed(ms):
    _table(ms)
    queue = ms.compactions
    ids = []
    for _ in range(3):
        compaction_id = queue.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id
        queue.mark_failed(compaction_id, "OSError: disk full")
        ids.append(compaction_id)
        entry = queue.show(compaction_id=compaction_id)[0]
        reached = alerts.failed_threshold_reached(ms, entry, threshold=2)
        assert (reached is not None) == (len(ids) >= 2)
    assert reached.kind == alerts.FAILED_THRESHOLD_REACHED and "last 2 compactions failed" in reached.summary
    assert alerts.failed_threshold_reached(ms, entry, threshold=0) is None  # 0 turns the check off, as in Hive
    assert alerts.consecutive_failures(ms, "default", "t", None, limit=10) == 3
    failed = alerts.compaction_failed(entry, "OSError: disk full")
    assert failed.as_dict()["summary"] == f"compaction {ids[-1]} (major) of default.t failed: OSError: disk full"


def test_long_running_alert_and_the_job_id_compare_and_swap(ms, clock):
    _table(ms)
    compaction_id = ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id
    ms.compactions.claim(worker_id="host-w", compaction_id=compaction_id)
    assert not ms.compactions.set_hadoop_job_id(compaction_id, "local-1", worker_id="host-other")
    assert ms.compactions.set_hadoop_job_id(compaction_id, "local-1", worker_id="host-w")
    assert ms.compactions.get(compaction_id).hadoop_job_id == "local-1"
    assert alerts.working_too_long(ms, warning_ms=60_000) == []
    clock.advance(61_000)
    [alert] = alerts.working_too_long(ms, warning_ms=60_000)
    assert alert.kind == alerts.WORKING_TOO_LONG and alert.compaction_id == compaction_id
    assert "working for 1 min" in alert.summary and "job local-1" in alert.summary


def test_worker_reports_events_and_bytes_and_the_cleaner_bytes_removed(ms):
    _table(ms)
    for start in (0, 100, 200):
        _insert(ms, "t", [(i, f"row {i}") for i in range(start, start + 100)])
    compaction_id = ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id

    outcome = CompactionWorker(ms, job_id="local-42").run(compaction_id)

    assert outcome.inserts == 300 and outcome.events_read == 300
    assert outcome.bytes_read > 0 and outcome.bytes_written > 0
    assert ms.compactions.get(compaction_id).hadoop_job_id == "local-42"
    [result] = clean(ms, log=lambda line: None)
    assert result.outcome == "cleaned" and len(result.removed) == 3
    assert result.bytes_removed == outcome.bytes_read  # the three deltas it merged, their every file


def test_initiator_gauges_count_due_and_failed_partitions():
    from acid_core.compaction.candidates import Candidate
    from acid_core.compaction.initiator import (WHY, WHY_BELOW_THRESHOLD, WHY_BUDGET_SPENT, WHY_FAILED_THRESHOLD,
                                                Decision)

    candidate = Candidate("default", "t", None)
    decisions = [Decision(candidate, CompactionType.MAJOR, "11 deltas > delta.num.threshold 10"),
                 Decision(candidate, CompactionType.MINOR, "budget spent: ...", why=WHY_BUDGET_SPENT),
                 Decision(candidate, None, "compaction is not initiated since the last 2 consecutive compaction "
                                           "attempts failed (...)", why=WHY_FAILED_THRESHOLD),
                 Decision(candidate, None, "3 deltas <= delta.num.threshold 10", why=WHY_BELOW_THRESHOLD)]
    gauges = initiator_gauges(decisions)
    assert {name: value for name, value in gauges.items() if not name.startswith("acid.initiator_partitions_") or
            name in ("acid.initiator_partitions_due", "acid.initiator_partitions_over_failed_threshold")} == {
        "acid.initiator_partitions_due": 2, "acid.initiator_partitions_over_failed_threshold": 1,
        "acid.initiator_candidates": 4}
    assert {name.removeprefix("acid.initiator_partitions_"): value for name, value in gauges.items()
            if value and name.removeprefix("acid.initiator_partitions_").replace("_", " ") in WHY} == {
        "queued": 1, "budget_spent": 1, "failed_threshold": 1, "below_threshold": 1}
    assert all(f"acid.initiator_partitions_{why.replace(' ', '_')}" in gauges for why in WHY)
