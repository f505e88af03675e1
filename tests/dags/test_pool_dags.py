"""Hive 4's compaction pools on Airflow: a table in pool `etl` (its `hive.compactor.worker.pool`, its database's, or
`ALTER TABLE ... COMPACT ... POOL 'etl'`) is queued in that pool, and with ACID_COMPACTION_POOLS=etl its compactions
are run by the `acid_worker_etl` DAG in the Airflow pool `acid_compaction_etl`, never by `acid_worker`, which runs the
default pool's and those of pools without a worker DAG (`adhoc` here). Real `dag.test()` runs over a real SQLite
metastore and real table files; spark-submit is a real executable that records its arguments and starts nothing (so
the compaction a worker would run first is recorded failed, as a job that died before its driver ran, and the worker
stops rather than fail the rest: see test_spark_settings.py)."""

from __future__ import annotations

import io
import json

import pytest
from support.dag_support import COLUMNS, ROOT, insert, returned, task_states

pytestmark = pytest.mark.airflow

INITIATOR = {"dry_run": False, "full_scan": False, "fetch_size": 1000, "delta_num_threshold": 1,
             "delta_pct_threshold": 0.1, "aborted_threshold": 1000, "aborted_time_threshold_seconds": 43200,
             "failed_threshold": 2, "failed_retry_seconds": 604800}


@pytest.fixture(scope="module")
def dagbag(airflow_db):
    """This repo's DAGs parsed with the labelled pool `etl` configured (and the variable kept for the task runs), and
    the Airflow pool `acid_compaction_etl` that deployment creates (make run's set-up does)."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.pool import Pool

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACID_COMPACTION_POOLS", "etl:1")
        Pool.create_or_update_pool("acid_compaction_etl", slots=1, description="hive.compactor.worker.etl.threads",
                                   include_deferred=False)
        yield DagBag(dag_folder=str(ROOT / "dags"), bundle_path=ROOT / "dags", bundle_name="dags-folder")


def _submitted_pools(record) -> list[list[str]]:
    """The pool arguments (`--pool P` or `--other-than P,...`) of every spark-submit command recorded, in order."""
    found = []
    for command in record.commands():
        argv = command["argv"]
        assert "--batch" in argv and "--compaction-id" not in argv
        found.append([arg for i, arg in enumerate(argv) if arg in ("--pool", "--other-than")
                      or argv[i - 1] in ("--pool", "--other-than")])
    return found


def _airflow_pools_of(dag_run) -> dict[int, str]:
    """Map index -> the Airflow pool each `compact` task instance of `dag_run` ran in (from Airflow's database)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id ==
                                                 dag_run.run_id, TaskInstance.task_id == "compact").all()
        return {ti.map_index: ti.pool for ti in tis}


def _sql(ms, text: str) -> list[dict]:
    """Run `acid sql` statements on `ms`; the rows of the last one (jsonl)."""
    from acid_cli.sql import run_script

    out = io.StringIO()
    run_script(text, metastore=ms, output_format="jsonl", out=out)
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def test_a_labelled_pools_compactions_run_in_its_own_dag_and_airflow_pool(acid_connection, make_ms, dagbag,
                                                                         recording_spark_submit):
    from acid_core.write.table import AcidTable

    ms = make_ms()
    ms.catalog.create_database("etl_db")
    ms.catalog.set_database_params("etl_db", {"hive.compactor.worker.pool": "etl"})
    for database, name, params in (("default", "by_table", {"hive.compactor.worker.pool": "etl"}),
                                   ("etl_db", "by_database", {}),
                                   ("default", "by_request", {}),
                                   ("default", "unlisted", {"hive.compactor.worker.pool": "adhoc"}),
                                   ("default", "plain", {})):
        ms.catalog.create_table(database, name, COLUMNS, params={"transactional": "true", **params})
        if database == "default":
            insert(ms, name, None, [(1, "a")])
            insert(ms, name, None, [(2, "b")])
    for number in (1, 2):  # dag_support.insert writes to `default`: two deltas of etl_db.by_database here
        AcidTable.load(ms, "etl_db.by_database").append([(number, "x")])
    _sql(ms, "ALTER TABLE by_request COMPACT 'major' POOL 'etl'")

    polled = dagbag.get_dag("acid_initiator").test(run_conf=INITIATOR)

    assert polled.state == "success"
    decisions = {d["partition"]: d for d in returned(polled, "poll", key="decisions")}
    assert {name: d["pool"] for name, d in decisions.items()} == {
        "default.by_table": "etl", "etl_db.by_database": "etl", "default.unlisted": "adhoc", "default.plain": "default",
        "default.by_request": None}  # already queued by the ALTER TABLE: skipped
    shown = {row["tabname"]: (row["compactionid"], row["poolname"]) for row in _sql(ms, "SHOW COMPACTIONS")}
    assert {name: pool for name, (_, pool) in shown.items()} == {
        "by_table": "etl", "by_database": "etl", "by_request": "etl", "unlisted": "adhoc", "plain": "default"}
    etl_ids = sorted(shown[name][0] for name in ("by_table", "by_database", "by_request"))
    assert sorted(row["compactionid"] for row in _sql(ms, "SHOW COMPACTIONS POOL 'etl'")) == etl_ids

    default_run = dagbag.get_dag("acid_worker").test(run_conf={"max_compactions": 100, "pool_timeout_seconds": 43200})

    default_ids = sorted(shown[name][0] for name in ("unlisted", "plain"))  # not etl's: it has a worker DAG
    assert returned(default_run, "list_compactions", key="waiting") == default_ids  # oldest first
    assert set(_airflow_pools_of(default_run).values()) == {"acid_compaction"}
    assert _submitted_pools(recording_spark_submit) == [["--other-than", "etl"]]
    # the recording spark-submit started nothing: the oldest is recorded failed, and the worker stopped there
    assert ms.compactions.get(default_ids[0]).state.display == "failed"
    assert {ms.compactions.get(i).state.display for i in etl_ids + default_ids[1:]} == {"initiated"}

    etl_run = dagbag.get_dag("acid_worker_etl").test(run_conf={"max_compactions": 100})

    assert returned(etl_run, "list_compactions", key="waiting") == etl_ids
    pools = _airflow_pools_of(etl_run)
    assert len(pools) == 1 and set(pools.values()) == {"acid_compaction_etl"}  # Airflow's record of the instance
    assert _submitted_pools(recording_spark_submit)[1:] == [["--pool", "etl"]]
    assert etl_run.state == "failed" and set(task_states(etl_run).values()) == {"success", "failed"}
    # the oldest etl entry is history, failed, keeping its pool; the others wait for a working spark-submit
    assert [(row["state"], row["poolname"]) for row in _sql(ms, "SHOW COMPACTIONS POOL 'etl'")
            if row["state"] == "failed"] == [("failed", "etl")]
    assert [ms.compactions.get(i).state.display for i in etl_ids] == ["failed", "initiated", "initiated"]


def test_the_pool_dags_parse_with_their_pools_and_a_bad_variable_is_an_import_error(dagbag, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    assert {task.pool for task in dagbag.get_dag("acid_worker_etl").tasks if task.task_id == "compact"} == {
        "acid_compaction_etl"}
    assert {task.pool for task in dagbag.get_dag("acid_worker").tasks if task.task_id == "compact"} == {
        "acid_compaction"}
    assert "pool_timeout_seconds" in dagbag.get_dag("acid_worker").params
    assert "pool_timeout_seconds" not in dagbag.get_dag("acid_worker_etl").params

    monkeypatch.setenv("ACID_COMPACTION_POOLS", "etl,etl pool")
    broken = DagBag(dag_folder=str(ROOT / "dags" / "acid_worker.py"), bundle_path=ROOT / "dags",
                    bundle_name="dags-folder")
    [error] = broken.import_errors.values()
    assert "environment variable ACID_COMPACTION_POOLS: compaction pool name 'etl pool' is not valid" in error
