"""The Airflow DAGs for real: DagBag parsing, and `dag.test()` runs against a SQLite metastore and real table files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.dag_support import COLUMNS, dirs, returned

pytestmark = pytest.mark.airflow


# dag.test() keeps the previous run's conf values on the shared DAG object, so every run gives every param.
HOUSEKEEPING = {"worker_timeout_seconds": 86400, "txn_timeout_seconds": 300, "lease_timeout_seconds": 300,
                "history_succeeded": 3, "history_failed": 3, "history_did_not_initiate": 2, "history_refused": 3,
                "history_timeout_seconds": 604800}
DAG_IDS = {"acid_initiator", "acid_worker", "acid_compact", "acid_table_settings", "acid_cleaner", "acid_housekeeping"}


def test_dags_import_without_errors(airflow_db, dagbag):
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == DAG_IDS
    for dag_id in DAG_IDS:
        dag = dagbag.get_dag(dag_id)
        assert "acid" in dag.tags and dag.doc_md and not dag.catchup, dag_id
    for dag_id in ("acid_initiator", "acid_cleaner", "acid_housekeeping"):
        assert dagbag.get_dag(dag_id).max_active_runs == 1
    assert dagbag.get_dag("acid_worker").max_active_runs == 16  # a long compaction does not hold back new entries


def test_initiator_only_queues_and_wakes_the_worker_through_an_asset(dagbag):
    """The initiator runs no compaction: it emits `acid_compaction_queued`, on which (and on its timer) the worker is
    scheduled."""
    from acid_plugin.operators import AcidCompactionOperator

    initiator, worker = dagbag.get_dag("acid_initiator"), dagbag.get_dag("acid_worker")
    assert [t.task_id for t in initiator.topological_sort()] == ["poll", "wake_workers"]
    assert not any(isinstance(t, AcidCompactionOperator) for t in initiator.tasks)
    assert [outlet.name for outlet in initiator.get_task("wake_workers").outlets] == ["acid_compaction_queued"]
    assert "max_compactions" not in initiator.params and initiator.params["fetch_size"] == 1000
    assert [t.task_id for t in worker.topological_sort()] == ["list_compactions", "compact"]
    assert type(worker.timetable).__name__ == "AssetOrTimeSchedule"
    assert [asset.name for asset in worker.timetable.asset_condition.objects] == ["acid_compaction_queued"]
    assert worker.timetable.timetable.delta.total_seconds() == 60  # and on its timer (ACID_WORKER_INTERVAL_SECONDS)
    # each compact task is a worker slot pulling the queue oldest first in long-lived Spark applications
    assert worker.get_task("compact").operator_name == "AcidCompactionBatchOperator"
    assert worker.params["workers"] == 1 and worker.params["batch_seconds"] == 600  # ACID_WORKER_THREADS unset


def test_compaction_tasks_feed_the_cleaner_through_an_asset(dagbag):
    """Compaction tasks run in the acid_compaction pool and emit `acid_compacted`; the cleaner is scheduled on it
    (and on its timer)."""
    worker, compact, cleaner = (dagbag.get_dag(d) for d in ("acid_worker", "acid_compact", "acid_cleaner"))
    for task in (worker.get_task("compact"), compact.get_task("compact")):
        assert task.pool == "acid_compaction"
        # acid_compacted, and through an alias each table's own asset (acid_compacted.<db>.<table>)
        assert [outlet.name for outlet in task.outlets] == ["acid_compacted", "acid_compacted_tables"]
    assert type(cleaner.timetable).__name__ == "AssetOrTimeSchedule"
    assert [asset.name for asset in cleaner.timetable.asset_condition.objects] == ["acid_compacted"]
    assert cleaner.timetable.timetable.delta.total_seconds() == 300  # and on its timer (ACID_CLEANER_INTERVAL_SECONDS)


def test_dags_parse_in_under_a_second_each(airflow_db, dagbag):
    durations = {Path(stat.file).name: stat.duration for stat in dagbag.dagbag_stats}
    assert set(durations) == {f"{dag_id}.py" for dag_id in DAG_IDS}
    slow = {name: duration for name, duration in durations.items() if duration.total_seconds() >= 1}
    assert slow == {}


def test_schedule_interval_from_environment_is_checked(monkeypatch):
    from datetime import timedelta

    from acid_plugin.params import schedule_interval

    from acid_core import settings
    from acid_core.errors import UsageError

    name = settings.INITIATOR_INTERVAL.env_var
    monkeypatch.delenv(name, raising=False)
    assert schedule_interval(settings.INITIATOR_INTERVAL) == timedelta(seconds=300)
    monkeypatch.setenv(name, "60")
    assert schedule_interval(settings.INITIATOR_INTERVAL) == timedelta(seconds=60)
    for bad, said in (("0", "=0 is out of range"), ("-5", "=-5 is out of range"), ("1m", "='1m' is not a whole"),
                      ("1.5", "='1.5' is not a whole")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(UsageError, match=f"^{name}{re.escape(said)}"):
            schedule_interval(settings.INITIATOR_INTERVAL)


def test_hook_builds_metastore_from_connection(acid_connection, warehouse):
    from acid_plugin.hooks import AcidMetastoreHook

    metastore = AcidMetastoreHook().get_metastore()
    try:
        assert metastore.url == acid_connection
    finally:
        metastore.close()


@pytest.mark.parametrize("fields, url", [
    ({"host": "postgresql+psycopg2://db.example:5433/acid", "login": "acid", "password": "s3cr:t@"},
     "postgresql+psycopg2://acid:s3cr%3At%40@db.example:5433/acid"),
    ({"host": "db.example", "port": 5433, "schema": "acid", "login": "acid", "password": "pw"},
     "postgresql+psycopg2://acid:pw@db.example:5433/acid"),
    ({"host": "db.example", "schema": "acid", "login": "acid", "password": "pw", "extra": {"driver": "postgresql"}},
     "postgresql://acid:pw@db.example/acid"),
    ({"host": "sqlite:////data/metastore.db"}, "sqlite:////data/metastore.db"),
])
def test_hook_takes_the_credentials_from_the_login_and_password_fields(monkeypatch, fields, url):
    from acid_plugin.hooks import AcidMetastoreHook

    monkeypatch.setenv("AIRFLOW_CONN_ACID_HOOK_TEST", json.dumps({"conn_type": "generic", **fields}))
    assert AcidMetastoreHook("acid_hook_test").get_url() == url


def test_hook_refuses_a_password_in_the_host(monkeypatch):
    from acid_plugin.hooks import AcidMetastoreHook

    from acid_core.errors import MetastoreError

    monkeypatch.setenv("AIRFLOW_CONN_ACID_HOOK_TEST", json.dumps(
        {"conn_type": "generic", "host": "postgresql+psycopg2://acid:leaked@db.example/acid"}))
    with pytest.raises(MetastoreError) as raised:
        AcidMetastoreHook("acid_hook_test").get_url()
    message = str(raised.value)
    assert message.startswith("connection 'acid_hook_test': metastore URL postgresql+psycopg2://acid:***@db.example/acid "
                              "holds a password") and "leaked" not in message


def test_housekeeping_dag_aborts_timed_out_txn(acid_connection, make_ms, dagbag):
    from acid_core.metastore.engine import ManualClock
    from acid_core.metastore.txns import Operation

    old = make_ms(clock=ManualClock())  # 2023: every heartbeat it writes is long past hive.txn.timeout
    stale = old.txns.open_txn()
    old.txns.allocate_write_ids([stale], "default", "t")
    old.txns.add_components(stale, "default", "t", [None], Operation.INSERT)  # wrote: kept, aborted, until cleaned
    assert {info.txn_id: info.state for info in old.txns.show_transactions()} == {stale: "o"}

    dag_run = dagbag.get_dag("acid_housekeeping").test(run_conf=HOUSEKEEPING)

    assert dag_run.state == "success"
    assert {info.txn_id: info.state for info in make_ms().txns.show_transactions()} == {stale: "a"}
    assert returned(dag_run, "housekeep_metastore")["timed_out_txns"] == [stale]


def test_housekeeping_dag_honours_txn_timeout_and_history_params(acid_connection, make_ms, dagbag):
    import time

    from support.queue_tables import ensure_table

    from acid_core.metastore.codes import CompactionType

    ms = make_ms()
    ensure_table(ms, "default", "t", None)
    open_txn = ms.txns.open_txn()
    ms.txns.allocate_write_ids([open_txn], "default", "t")
    done = []
    for _ in range(3):  # three succeeded compactions of one partition in the history
        compaction_id = ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id
        ms.compactions.claim(worker_id="w", compaction_id=compaction_id)
        ms.compactions.mark_compacted(compaction_id)
        ms.compactions.mark_cleaned(compaction_id)
        done.append(compaction_id)
    time.sleep(1.1)  # the open transaction's heartbeat is now older than a one-second hive.txn.timeout

    dag_run = dagbag.get_dag("acid_housekeeping").test(
        run_conf={**HOUSEKEEPING, "txn_timeout_seconds": 1, "history_succeeded": 1})

    assert dag_run.state == "success"
    report = returned(dag_run, "housekeep_metastore")
    assert report["timed_out_txns"] == [open_txn] and report["purged_history"] == 2
    assert [entry.id for entry in ms.compactions.show()] == done[-1:]


def _compacted_table(ms) -> tuple[Path, int]:
    from acid_core.compaction.worker import CompactionWorker
    from acid_core.metastore.codes import CompactionType
    from acid_core.metastore.txns import Operation
    from acid_core.write.writer import EmbeddedWriter

    info = ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"})
    writer = EmbeddedWriter(info.location, columns=info.columns)
    for rows in ([(1, "a")], [(2, "b")], [(3, "c")]):
        txn_id = ms.txns.open_txn()
        write_id = ms.txns.allocate_write_ids([txn_id], "default", "t")[txn_id]
        ms.txns.add_components(txn_id, "default", "t", [None], Operation.INSERT)
        writer.insert(rows, write_id=write_id)
        ms.txns.commit(txn_id)
    compaction_id = ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id
    CompactionWorker(ms).run(compaction_id)
    return Path(info.location), compaction_id


def test_cleaner_dag_dry_run_removes_nothing_then_real_run_cleans(acid_connection, make_ms, dagbag):
    from acid_core.metastore.codes import CompactionState

    ms = make_ms()
    location, compaction_id = _compacted_table(ms)
    before = dirs(location)
    assert len(before) == 4 and before[0].startswith("base_")
    dag = dagbag.get_dag("acid_cleaner")

    dry = dag.test(run_conf={"dry_run": True})

    assert dry.state == "success"
    assert dirs(location) == before
    assert ms.compactions.get(compaction_id).state == CompactionState.READY_FOR_CLEANING
    [summary] = returned(dry, "clean_compactions")
    assert summary["compaction_id"] == compaction_id and summary["outcome"] == "dry run"
    assert sorted(Path(path).name for path in summary["removed"]) == before[1:]

    real = dag.test(run_conf={"dry_run": False})

    assert real.state == "success"
    assert dirs(location) == [before[0]]
    assert ms.compactions.get(compaction_id).state == CompactionState.SUCCEEDED
    assert [entry["outcome"] for entry in returned(real, "clean_compactions")] == ["cleaned"]
