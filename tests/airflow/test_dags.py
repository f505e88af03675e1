"""The Airflow DAGs for real: DagBag parsing, and `dag.test()` runs against a SQLite metastore and real table files."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = (("id", "int"), ("name", "string"))


@pytest.fixture(scope="module")
def dagbag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags"), bundle_path=ROOT / "dags", bundle_name="dags-folder")


def test_dags_import_without_errors(airflow_db, dagbag):
    assert dagbag.import_errors == {}
    assert {"acid_cleaner", "acid_housekeeping"} <= set(dagbag.dag_ids)
    for dag_id in ("acid_cleaner", "acid_housekeeping"):
        dag = dagbag.get_dag(dag_id)
        assert set(dag.tags) == {"acid", "maintenance"}
        assert dag.doc_md and dag.max_active_runs == 1 and not dag.catchup


def test_dags_parse_in_under_a_second_each(airflow_db, dagbag):
    durations = {Path(stat.file).name: stat.duration for stat in dagbag.dagbag_stats}
    assert set(durations) >= {"acid_cleaner.py", "acid_housekeeping.py"}
    slow = {name: duration for name, duration in durations.items() if duration.total_seconds() >= 1}
    assert slow == {}


def test_hook_builds_metastore_from_connection(acid_connection, warehouse):
    from acid_plugin.hooks import AcidMetastoreHook

    metastore = AcidMetastoreHook().get_metastore()
    try:
        assert metastore.url == acid_connection
    finally:
        metastore.close()


def test_housekeeping_dag_aborts_timed_out_txn(acid_connection, make_ms, dagbag):
    from acid_core.metastore.engine import ManualClock

    old = make_ms(clock=ManualClock())  # 2023: every heartbeat it writes is long past hive.txn.timeout
    stale = old.txns.open_txn()
    old.txns.allocate_write_ids([stale], "default", "t")  # wrote something, so it stays visible once aborted
    assert {info.txn_id: info.state for info in old.txns.show_transactions()} == {stale: "o"}

    dag_run = dagbag.get_dag("acid_housekeeping").test()

    assert dag_run.state == "success"
    assert {info.txn_id: info.state for info in make_ms().txns.show_transactions()} == {stale: "a"}
    assert _returned(dag_run, "housekeep_metastore")["timed_out_txns"] == [stale]


def _compacted_table(ms) -> tuple[Path, int]:
    from acid_core.compaction.worker import CompactionWorker
    from acid_core.metastore.compactions import CompactionType
    from acid_core.metastore.txns import Operation
    from acid_core.writer import EmbeddedWriter

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


def _returned(dag_run, task_id: str):
    """The task's return value (XCom `return_value`) in `dag_run`."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=dag_run.run_id, key="return_value", dag_ids=dag_run.dag_id,
                                   task_ids=task_id)
        return XComModel.deserialize_value(session.execute(query).scalars().one())


def _dirs(location: Path) -> list[str]:
    return sorted(p.name for p in location.iterdir() if not p.name.startswith((".", "_")))


def test_cleaner_dag_dry_run_removes_nothing_then_real_run_cleans(acid_connection, make_ms, dagbag):
    from acid_core.metastore.compactions import CompactionState

    ms = make_ms()
    location, compaction_id = _compacted_table(ms)
    before = _dirs(location)
    assert len(before) == 4 and before[0].startswith("base_")
    dag = dagbag.get_dag("acid_cleaner")

    dry = dag.test(run_conf={"dry_run": True})

    assert dry.state == "success"
    assert _dirs(location) == before
    assert ms.compactions.get(compaction_id).state == CompactionState.READY_FOR_CLEANING
    [summary] = _returned(dry, "clean_compactions")
    assert summary["compaction_id"] == compaction_id and summary["outcome"] == "dry run"
    assert sorted(Path(path).name for path in summary["removed"]) == before[1:]

    real = dag.test(run_conf={"dry_run": False})

    assert real.state == "success"
    assert _dirs(location) == [before[0]]
    assert ms.compactions.get(compaction_id).state == CompactionState.SUCCEEDED
    assert [entry["outcome"] for entry in _returned(real, "clean_compactions")] == ["cleaned"]
