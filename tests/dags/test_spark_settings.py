"""A compaction's Spark settings reach its spark-submit command: the request's, the table's and the database's
`compactor.spark.*` properties and Hive's job queue, through the real acid_worker DAG and AcidCompactionOperator. The
spark-submit here is a real executable first on PATH that records its arguments and starts nothing (so the entry is
never claimed and the task fails, as a job that died before its driver ran)."""

from __future__ import annotations

import json
import sys

import pytest
from support.dag_support import COLUMNS, insert, task_states

pytestmark = pytest.mark.airflow


def test_compactor_spark_properties_reach_the_spark_submit_command(acid_connection, make_ms, dagbag,
                                                                   recording_spark_submit):
    from acid_core.metastore.codes import CompactionType

    ms = make_ms()
    ms.catalog.set_database_params("default", {"hive.compactor.job.queue": "etl",
                                              "compactor.spark.executor.memory": "4g"})
    ms.catalog.create_table("default", "sales", COLUMNS, params={
        "transactional": "true", "compactor.spark.executor.memory": "8g", "compactor.spark.executor.cores": "2"})
    insert(ms, "sales", None, [(1, "a")])
    insert(ms, "sales", None, [(2, "b")])
    ms.compactions.enqueue("default", "sales", None, CompactionType.MAJOR,
                           properties={"compactor.spark.executor.cores": "3"})

    run = dagbag.get_dag("acid_worker").test(run_conf={"max_compactions": 100})

    argv, confs = recording_spark_submit.argv, recording_spark_submit.confs()
    assert confs["spark.executor.memory"] == "8g"  # the table's beats the database's
    assert confs["spark.executor.cores"] == "3"  # the request's beats the table's
    assert confs["spark.yarn.queue"] == "etl"  # Hive's job queue, from the database
    assert confs["spark.executor.pyspark.memory"] == "2g"
    assert not any("secret" in arg or "://" in arg for arg in argv if "metastore" in arg.lower())
    assert run.state == "failed" and "failed" in task_states(run).values()  # nothing ran the compaction: said so


def test_a_cluster_master_ships_the_code_and_names_the_executors_python_never_this_one(
        acid_connection, make_ms, dagbag, recording_spark_submit, monkeypatch, tmp_path):
    """spark_default naming a standalone master and a prebuilt environment: the command ships the code zip and that
    archive, and neither its settings nor spark-submit's environment give executors this worker's interpreter."""
    from acid_core.metastore.codes import CompactionType

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1:9",
        "extra": {"spark-binary": "spark3-submit", "acid-executor-env": "hdfs:///envs/acid.tar.gz"}}))
    monkeypatch.setenv("ACID_SHIP_DIR", str(tmp_path / "ship"))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # this worker's own setting must not reach executors
    ms = make_ms()
    ms.catalog.create_table("default", "sales", COLUMNS, params={"transactional": "true"})
    insert(ms, "sales", None, [(1, "a")])
    ms.compactions.enqueue("default", "sales", None, CompactionType.MAJOR)

    dagbag.get_dag("acid_worker").test(run_conf={"max_compactions": 100})

    confs = recording_spark_submit.confs()
    assert confs["spark.archives"] == "hdfs:///envs/acid.tar.gz#acid_env"
    assert confs["spark.pyspark.python"] == "./acid_env/bin/python"
    assert confs["spark.pyspark.driver.python"] == sys.executable
    assert confs["spark.submit.pyFiles"].startswith(str(tmp_path / "ship" / "acid-code-"))
    environment = recording_spark_submit.env
    assert environment["PYSPARK_PYTHON"] == "./acid_env/bin/python"
    assert not [value for key, value in confs.items() if sys.executable in value and key != "spark.pyspark.driver.python"]


def test_a_bad_executor_setting_fails_the_task_before_spark_submit(acid_connection, make_ms, dagbag,
                                                                   recording_spark_submit, monkeypatch):
    from acid_core.metastore.codes import CompactionState, CompactionType

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "yarn",
        "extra": {"spark-binary": "spark3-submit", "acid-executor-env": "sometimes"}}))
    ms = make_ms()
    ms.catalog.create_table("default", "sales", COLUMNS, params={"transactional": "true"})
    insert(ms, "sales", None, [(1, "a")])
    queued = ms.compactions.enqueue("default", "sales", None, CompactionType.MAJOR)

    run = dagbag.get_dag("acid_worker").test(run_conf={"max_compactions": 100})

    assert run.state == "failed" and not recording_spark_submit.exists()
    assert ms.compactions.get(queued.compaction_id).state is CompactionState.INITIATED  # nothing claimed it


MANUAL = {"database": "default", "table": "sales", "partition": None, "type": "major", "number_of_buckets": None,
          "pyspark_memory": None, "pool": None, "wait": True}


def test_the_manual_dags_properties_override_the_tables_for_one_run(acid_connection, make_ms, dagbag,
                                                                   recording_spark_submit):
    """acid_compact's `properties` param is this run's WITH OVERWRITE TBLPROPERTIES: it beats the table's settings
    and reaches spark-submit; the table keeps its own."""
    ms = make_ms()
    ms.catalog.create_table("default", "sales", COLUMNS, params={
        "transactional": "true", "compactor.spark.executor.memory": "8g", "compactor.spark.executor.cores": "2"})
    insert(ms, "sales", None, [(1, "a")])
    insert(ms, "sales", None, [(2, "b")])

    dagbag.get_dag("acid_compact").test(run_conf={**MANUAL, "properties": {
        "compactor.spark.executor.memory": "12g", "compactor.hive.compactor.job.queue": "adhoc"}})

    confs = recording_spark_submit.confs()
    assert confs["spark.executor.memory"] == "12g" and confs["spark.yarn.queue"] == "adhoc"
    assert confs["spark.executor.cores"] == "2"  # the table's, where the run says nothing
    assert ms.catalog.get_table("default", "sales").params["compactor.spark.executor.memory"] == "8g"


@pytest.mark.parametrize("properties, named", [
    ({"compactor.spark.master": "yarn"}, "spark.master is not a Spark setting a table may choose"),
    ({"transactional": "false"}, "'transactional' is not a compaction setting"),
])
def test_the_manual_dag_refuses_properties_that_are_not_compaction_settings(acid_connection, make_ms, dagbag,
                                                                          recording_spark_submit, properties, named,
                                                                          capfd):
    ms = make_ms()
    ms.catalog.create_table("default", "sales", COLUMNS, params={"transactional": "true"})
    insert(ms, "sales", None, [(1, "a")])

    run = dagbag.get_dag("acid_compact").test(run_conf={**MANUAL, "properties": properties})

    assert run.state == "failed" and task_states(run)["enqueue"] == "failed"
    output = capfd.readouterr()
    assert named in output.out + output.err  # the task's log
    assert ms.compactions.show() == [] and not recording_spark_submit.exists()  # nothing queued, nothing submitted
