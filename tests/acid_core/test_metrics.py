"""acid_core.operations.metrics and acid_core.operations.alerts on both databases: Hive's ACID gauges from the metastore (queue, hosts,
transactions, aborted transactions per partition, locks) and its delta gauges from the queued partitions' listings,
the failed threshold and long-running alerts, the threshold rules with their levels, overrides and escalations, the
HadoopJobId compare-and-swap, and the numbers a compaction and a cleaning report (events and bytes read, written,
removed)."""

from __future__ import annotations

from pathlib import Path

from acid_core.compaction.cleaner import clean
from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore.codes import CompactionType
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.operations import alerts
from acid_core.operations.metrics import (
    all_metrics,
    collect,
    collect_deltas,
    delta_gauges,
    gauges,
    initiator_gauges,
    metric_name,
    worst_partitions,
)
from acid_core.write.writer import EmbeddedWriter


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
    ms.compactions.enqueue("default", "u", None, CompactionType.MINOR, initiator_id="host-b-initiator")
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
    assert values["acid.num_open_non_repl_transactions"] == 1
    assert values["acid.oldest_open_non_repl_txn_id"] == opened
    assert values["acid.oldest_open_non_repl_txn_age_in_sec"] == 13.0
    assert values["acid.num_aborted_transactions"] == 1 and values["acid.oldest_aborted_txn_age_in_sec"] == 13.0
    assert values["acid.oldest_aborted_txn_id"] == aborted
    assert values["acid.num_locks"] == 1 and values["acid.oldest_lock_age_in_sec"] == 13.0
    # t's request is manual (`<host>-manual`: not an initiator), u's came from host-b's initiator; one worker host
    assert values["acid.compaction_num_initiators"] == 1 and values["acid.compaction_num_workers"] == 1
    assert values["acid.tables_with_x_aborted_transactions"] == 0  # the aborted transaction wrote nothing
    assert set(values) == {f"acid.{m.name}" for m in all_metrics().values()
                           if m.kind == "gauge" and not m.name.startswith(("initiator_", "compaction_num_active",
                                                                            "compaction_num_small",
                                                                            "compaction_num_obsolete"))}


def test_ready_for_cleaning_ages_hosts_of_recent_history_and_partitions_with_many_aborts(ms, clock):
    from acid_core.metastore.txns import Operation

    _table(ms)
    entry = ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR,
                                   initiator_id="host-a-initiator").compaction_id
    ms.compactions.claim(worker_id="host-a-airflow.acid_worker.compact.try1", compaction_id=entry)
    ms.compactions.mark_failed(entry, "boom")  # history now: host-a initiated and worked it
    clock.advance(1_000)
    ms.compactions.record_did_not_initiate("default", "t", None, CompactionType.MAJOR, "boom",
                                           initiator_id="host-b-initiator")
    aborted = []
    for _ in range(3):
        txn_id = ms.txns.open_txn()
        ms.txns.allocate_write_ids([txn_id], "default", "t")
        ms.txns.add_components(txn_id, "default", "t", [None], Operation.INSERT)
        ms.txns.abort(txn_id)
        aborted.append(txn_id)

    reading = collect(ms, aborted_txns_threshold=2)
    values = gauges(reading)

    assert values["acid.compaction_num_initiators"] == 2 and values["acid.compaction_num_workers"] == 1
    assert values["acid.tables_with_x_aborted_transactions"] == 1 and reading.aborted_txns_partitions == ("default.t",)
    assert gauges(collect(ms, aborted_txns_threshold=3))["acid.tables_with_x_aborted_transactions"] == 0
    assert values["acid.oldest_aborted_txn_id"] == aborted[0]
    clock.advance(3_600_001)  # an hour on: the history no longer counts as recent
    later = gauges(collect(ms))
    assert later["acid.compaction_num_initiators"] == 0 and later["acid.compaction_num_workers"] == 0


def test_delta_gauges_count_active_small_and_obsolete_deltas_of_queued_partitions(ms):
    _table(ms)
    for start in (0, 100, 200):
        _insert(ms, "t", [(i, f"row {i}") for i in range(start, start + 100)])
    assert collect_deltas(ms).partitions == ()  # nothing queued: nothing listed
    compaction_id = ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id

    [before] = collect_deltas(ms).partitions
    assert (before.key, before.active, before.small, before.obsolete) == ("default.t", 3, 0, 0)  # no base: none small

    CompactionWorker(ms, job_id="local-1").run(compaction_id)  # ready for cleaning: the three deltas are obsolete
    _insert(ms, "t", [(1000, "one more")])
    reading = collect_deltas(ms, small_delta_pct=0.9)
    [after] = reading.partitions
    assert (after.active, after.small, after.obsolete) == (1, 1, 3)
    assert delta_gauges(reading) == {"acid.compaction_num_active_deltas": 1, "acid.compaction_num_small_deltas": 1,
                                     "acid.compaction_num_obsolete_deltas": 3}
    assert worst_partitions(reading)["compaction_num_obsolete_deltas"] == ["default.t", 3]
    assert collect_deltas(ms, small_delta_pct=0.0).partitions[0].small == 0
    assert collect_deltas(ms, max_partitions=0) == type(reading)()

    _table(ms, "u")
    ms.compactions.enqueue("default", "u", None, CompactionType.MAJOR)
    location = ms.catalog.get_table("default", "u").location
    (Path(location.removeprefix("file://")) / "delta_x_y").mkdir(parents=True)  # a partition that cannot be read
    reading = collect_deltas(ms)
    assert [p.key for p in reading.partitions] == ["default.t"]  # reported, skipped, the others still counted
    [error] = reading.errors
    assert error.startswith("default.u: InvalidNameError: ")


def test_threshold_rules_levels_overrides_and_escalations():
    import pytest

    from acid_core.errors import UsageError

    hour = 3600
    values = {"acid.compaction_oldest_enqueue_age_in_sec": 2 * hour, "acid.compaction_num_initiators": 1,
              "acid.compaction_num_obsolete_deltas": 250, "acid.oldest_open_non_repl_txn_age_in_sec": 0,
              "acid.oldest_open_non_repl_txn_id": 0}
    found = alerts.threshold_alerts(values, about={"compaction_num_obsolete_deltas": "default.t/ds=1"})
    assert [(a.kind, a.level, a.threshold) for a in found] == [
        ("oldest_initiated_compaction", "warning", hour), ("obsolete_deltas", "warning", 200)]
    assert found[0].summary.startswith("the oldest initiated compaction has waited 2 h 0 min (over 1 h 0 min: "
                                       "warning, metastore.compactor.oldest.initiated.compaction.time.threshold")
    assert "default.t/ds=1 has 250 obsolete deltas still on disk" in found[1].summary
    assert found[1].as_dict()["metric"] == "compaction_num_obsolete_deltas" and found[1].as_dict()["value"] == 250
    critical = alerts.threshold_alerts({**values, "acid.compaction_oldest_enqueue_age_in_sec": 13 * hour})
    assert (critical[0].level, critical[0].threshold) == ("critical", 12 * hour)
    assert alerts.threshold_alerts({}) == []  # gauges not collected raise nothing

    rules = alerts.rules_with({"obsolete_deltas": {"warning": 300, "critical": 1000},
                               "oldest_initiated_compaction": {"warning": None}})
    assert [a.kind for a in alerts.threshold_alerts(values, rules)] == []
    with pytest.raises(UsageError, match="alert rule 'nope' does not exist"):
        alerts.rules_with({"nope": {"warning": 1}})
    with pytest.raises(UsageError, match="warning must be a number >= 0 or null"):
        alerts.rules_with({"obsolete_deltas": {"warning": -1}})
    with pytest.raises(UsageError, match="expected"):
        alerts.rules_with({"obsolete_deltas": {"warn": 1}})

    sent, levels = alerts.escalations(found, {})
    assert [a.kind for a in sent] == ["oldest_initiated_compaction", "obsolete_deltas"]
    assert alerts.escalations(found, levels) == ([], levels)  # the same levels again: nothing new
    sent, levels = alerts.escalations(critical, levels)
    assert [(a.kind, a.level) for a in sent] == [("oldest_initiated_compaction", "critical")]
    sent, levels = alerts.escalations(found, levels)  # back to warning: remembered, not sent
    assert sent == [] and levels["oldest_initiated_compaction"] == "warning"
    sent, levels = alerts.escalations([], levels)  # cleared: forgotten, so a new rise alerts again
    assert sent == [] and levels == {}


def test_only_registered_metric_names_can_be_sent():
    import pytest

    assert metric_name("num_locks") == "acid.num_locks"
    with pytest.raises(KeyError, match="not in acid_core.operations.metrics.all_metrics"):
        metric_name("num_lockz")


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
    from acid_core.compaction.initiator import (
        WHY,
        WHY_BELOW_THRESHOLD,
        WHY_BUDGET_SPENT,
        WHY_FAILED_THRESHOLD,
        Decision,
    )

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
