"""One launcher (issue 26): the Airflow task (the real acid_compact DAG, AcidCompactionOperator through the
apache-spark provider) and `acid compact run` submit the same spark-submit command with the same driver environment
for the same compaction, both built by `acid_deploy.launch`; the operator reads the Spark connection's
master from its public fields as the provider does. The spark-submit of the task is a real executable that records
its arguments and environment and starts nothing (support.dag_support.install_recording_spark_submit)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from support.dag_support import COLUMNS, insert

pytestmark = pytest.mark.airflow

# What the launcher sets in spark-submit's environment and that is the same for both (each names its own metastore)
SAME_VARIABLES = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PATH", "ACID_SPARK_MASTER", "SPARK_LOCAL_IP",
                  "ACID_METASTORE_PASSWORD")


def _comparable(argv: list[str]) -> list[str]:
    """`argv` without what differs between two runs by design: the task's worker id (the CLI lets the driver name
    itself) and the path of the driver's result file (a temporary directory of each)."""
    kept, skip = [], False
    for index, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--worker-id":
            skip = True
        else:
            kept.append("<result file>" if index and argv[index - 1] == "--result-file" else arg)
    return kept


def test_the_cli_and_the_airflow_task_submit_the_same_command(acid_connection, metastore_url, tmp_path, make_ms,
                                                              dagbag, recording_spark_submit, monkeypatch):
    from acid_cli import compact as compact_command
    from acid_core.metastore.codes import CompactionType

    ms = make_ms()
    ms.catalog.set_database_params("default", {"hive.compactor.job.queue": "etl"})
    ms.catalog.create_table("default", "sales", COLUMNS, params={
        "transactional": "true", "compactor.spark.executor.memory": "8g", "compactor.spark.executor.cores": "2"})
    insert(ms, "sales", None, [(1, "a")])
    insert(ms, "sales", None, [(2, "b")])
    queued = ms.compactions.enqueue("default", "sales", None, CompactionType.MAJOR,
                                    properties={"compactor.spark.executor.cores": "3"})
    cli_metastore = tmp_path / "cli-metastore.db"  # the same queue for the CLI: a copy taken now
    with sqlite3.connect(metastore_url.removeprefix("sqlite:///")) as source, sqlite3.connect(cli_metastore) as copy:
        source.backup(copy)

    run = dagbag.get_dag("acid_compact").test(run_conf={
        "database": "default", "table": "sales", "partition": None, "type": "major", "number_of_buckets": None,
        "pyspark_memory": None, "properties": {}, "pool": None, "wait": True})  # takes the queued one
    assert run.state == "failed"  # nothing ran the compaction: said so
    [task_command] = recording_spark_submit.commands()
    cli_commands = []

    def recording_run(command, **options):
        cli_commands.append({"argv": command[1:], "env": options["env"]})
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(compact_command.subprocess, "run", recording_run)
    assert compact_command.run(queued.compaction_id, metastore=f"sqlite:///{cli_metastore}", master="local[2]") == 1
    [cli_command] = cli_commands

    assert f"--compaction-id {queued.compaction_id} " in " ".join(cli_command["argv"])
    assert "spark.executor.cores=3" in cli_command["argv"] and "spark.yarn.queue=etl" in cli_command["argv"]
    assert _comparable(cli_command["argv"]) == _comparable(task_command["argv"])
    assert ({name: cli_command["env"].get(name) for name in SAME_VARIABLES}
            == {name: task_command["env"].get(name) for name in SAME_VARIABLES})
    assert cli_command["env"]["ACID_METASTORE_URL"] == f"sqlite:///{cli_metastore}"
    assert task_command["env"]["ACID_METASTORE_URL"] == metastore_url


@pytest.mark.parametrize("connection", [
    {"conn_type": "spark", "host": "local[2]"},
    {"conn_type": "spark", "host": "local[*]", "extra": {"deploy-mode": "client"}},
    {"conn_type": "spark", "host": "spark://127.0.0.1:9"},
    {"conn_type": "spark", "host": "spark://m1:7077,m2:7077"},
    {"conn_type": "spark", "host": "spark://master", "port": 7077},
    {"conn_type": "spark", "host": "master", "port": 7077},
    {"conn_type": "spark", "host": "yarn"},
    "spark://master:7077",
    "yarn://resource-manager",
])
def test_the_operators_master_is_the_one_the_provider_submits_to(monkeypatch, connection):
    """`acid_plugin.operators.spark_master` reads the connection's public fields; the provider's own reading is
    private, so this test (and only this test) looks at it to hold the two equal."""
    from acid_plugin.operators import spark_master
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_PARITY", connection if isinstance(connection, str)
                       else json.dumps(connection))
    provider = SparkSubmitHook(conn_id="spark_parity")._connection["master"]
    assert spark_master(SparkSubmitHook.get_connection("spark_parity")) == provider


def test_killing_the_task_stops_its_spark_submit(tmp_path, monkeypatch):
    """on_kill reaches the running spark-submit through the provider hook's public on_kill."""
    from acid_plugin.operators import AcidCompactionOperator

    from acid_deploy import launch

    started = tmp_path / "started"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "spark3-submit"
    script.write_text(f"#!{sys.executable}\nimport time\nopen({str(started)!r}, 'w').close()\ntime.sleep(120)\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_SLOW", json.dumps(
        {"conn_type": "spark", "host": "local[1]", "extra": {"spark-binary": "spark3-submit"}}))
    operator = AcidCompactionOperator(task_id="compact", compaction_id=1, conn_id="spark_slow")
    submission = launch.submission(name="acid-compaction-1", arguments=launch.compaction_arguments(1),
                                   master="local[1]", job_conf={}, shipped={})
    outcome = []
    runner = threading.Thread(target=lambda: outcome.append(operator._spark_submit(submission)))
    runner.start()
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists()
    killed_at = time.monotonic()
    operator.on_kill()
    runner.join(30)
    assert not runner.is_alive() and time.monotonic() - killed_at < 30
    assert "Error code is: -9" in str(outcome[0])
