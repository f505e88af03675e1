"""One launcher (issue 26): `acid_deploy.launch` is the only code that says what a compaction's spark-submit
is, and what it says keeps the metastore password off the command line. No Spark, no Airflow: the fast lane.

The Airflow task and `acid compact run` submitting the same command is tests/dags/test_launcher_parity.py."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from acid_core.metastore.engine import ENV_PASSWORD, ENV_URL
from acid_deploy import launch

ROOT = Path(__file__).resolve().parents[2]
CODE = ("acid_core", "acid_deploy", "acid_cli", "plugins", "dags", "spark_jobs", "acid_platform")
LAUNCHER = "acid_deploy/launch.py"
# spark-submit's own options, and the compaction job's (spark_jobs/compact.py): a list or tuple holding one of them
# is a command line being put together
SPARK_SUBMIT_OPTIONS = {"--master", "--conf", "--py-files", "--archives", "--files", "--jars", "--packages",
                        "--deploy-mode", "--name", "--class", "--queue", "--properties-file", "--driver-memory",
                        "--executor-memory", "--executor-cores", "--num-executors", "--total-executor-cores",
                        "--driver-class-path", "--proxy-user", "--keytab", "--principal", "--repositories",
                        "--exclude-packages", "--verbose"}
JOB_OPTIONS = {"--compaction-id", "--batch", "--worker-id", "--result-file", "--job-conf", "--launcher-conf",
               "--max-compactions", "--max-seconds", "--pool", "--other-than", "--pool-timeout-ms", "--metastore"}
BINARIES = {"spark-submit", "spark2-submit", "spark3-submit"}
PASSWORD = "s3cr3t-Pa55"
URL = f"postgresql+psycopg2://acid:{PASSWORD}@db.example:5432/acid_metastore"


def command_building(source: str) -> list[str]:
    """Where `source` puts a spark-submit command line together: a list or tuple literal holding spark-submit's or
    the job's options or a spark-submit binary, or a PATH lookup of that binary (`which("spark-submit")`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = {element.value for element in node.elts
                     if isinstance(element, ast.Constant) and isinstance(element.value, str)}
            found += [f"line {node.lineno}: {word}" for word in sorted(words & (SPARK_SUBMIT_OPTIONS | JOB_OPTIONS
                                                                                 | BINARIES))]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "which":
            found += [f"line {node.lineno}: which({arg.value!r})" for arg in node.args
                      if isinstance(arg, ast.Constant) and arg.value in BINARIES]
    return found


def test_only_the_launcher_builds_a_spark_submit_command():
    """A grep of the code for spark-submit command lines finds one builder; the Airflow operators hand its fields
    to the provider, and the CLI runs its `command()`."""
    found = {}
    for package in CODE:
        for path in sorted((ROOT / package).rglob("*.py")):
            places = command_building(path.read_text())
            if places:
                found[str(path.relative_to(ROOT))] = places
    assert LAUNCHER in found  # the scan sees the one that does
    assert {path: places for path, places in found.items() if path != LAUNCHER} == {}


@pytest.mark.parametrize("source", [
    'command = [submit, "--master", master, "--name", f"acid-compaction-{compaction_id}"]',
    'command += ["--conf", f"{key}={value}"]',
    'args = ("--py-files", zip_path)',
    'operator.application_args = ["--batch", *which, "--worker-id", worker_id]',
    'submit = shutil.which("spark-submit", path=bin_dir)',
    'subprocess.run(["spark3-submit", job], check=True)',
])
def test_the_scan_sees_a_command_built_elsewhere(source):
    assert command_building(source)


def test_argparse_options_and_connection_settings_are_not_command_building():
    assert command_building('parser.add_argument("--master", help="Spark master")\n'
                            'extra = {"spark-binary": "spark-submit"}\n') == []


def _submission(**parts):
    defaults = {"name": "acid-compaction-7", "master": "local[2]", "job_conf": {}, "shipped": {},
                "arguments": launch.compaction_arguments(7, worker_id="host-w", result_file="/tmp/r.json"),
                "environ": {"PATH": "/usr/bin"}}
    return launch.submission(**{**defaults, **parts})


def test_the_metastore_password_goes_by_the_environment_only():
    submission = _submission(metastore_url=URL)
    assert submission.environment[ENV_PASSWORD] == PASSWORD
    assert submission.environment[ENV_URL] == "postgresql+psycopg2://acid@db.example:5432/acid_metastore"
    shown = " ".join(submission.command()) + repr(submission)
    assert PASSWORD not in shown and ENV_PASSWORD not in shown


def test_the_command_names_the_job_its_arguments_and_settings_in_the_providers_order():
    submission = _submission(job_conf={"spark.executor.memory": "8g", "spark.executor.pyspark.memory": "2g"},
                             configured={"spark.executor.memory": "1g", "spark.ui.enabled": "false"},
                             shipped={"spark.submit.pyFiles": "/ship/code.zip"}, deploy_mode="client")
    application = launch.job_path()
    assert application == str(ROOT / "spark_jobs" / "compact.py") and os.path.isfile(application)
    log_config = ROOT / "spark_jobs" / "log4j2.properties"
    assert log_config.is_file()
    assert submission.command("spark-submit") == [
        "spark-submit", "--master", "local[2]",
        "--conf", f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:{log_config}",
        "--conf", "spark.executor.memory=8g",  # the compaction's beats the launcher's
        "--conf", "spark.executor.pyspark.memory=2g",
        "--conf", "spark.python.daemon.module=spark_jobs.python_daemon",  # a local master's Python workers
        "--conf", "spark.submit.pyFiles=/ship/code.zip",
        "--conf", "spark.ui.enabled=false",
        "--name", "acid-compaction-7", "--deploy-mode", "client",
        application, "--compaction-id", "7", "--worker-id", "host-w", "--result-file", "/tmp/r.json"]


def test_only_a_local_masters_python_workers_run_the_projects_daemon():
    assert _submission(master="local[*]").conf["spark.python.daemon.module"] == "spark_jobs.python_daemon"
    assert "spark.python.daemon.module" not in _submission(master="spark://m:7077").conf  # the code ships per task
    assert _submission(configured={"spark.python.daemon.module": "mine"}).conf["spark.python.daemon.module"] == "mine"


def test_the_launchers_own_java_options_and_file_lists_are_kept():
    submission = _submission(configured={"spark.driver.extraJavaOptions": "-Dmine=1",
                                         "spark.submit.pyFiles": "/mine.zip"},
                             shipped={"spark.submit.pyFiles": "/ship/code.zip"})
    assert submission.conf["spark.driver.extraJavaOptions"] == "-Dmine=1"
    assert submission.conf["spark.submit.pyFiles"] == "/ship/code.zip,/mine.zip"


def test_the_driver_runs_this_interpreter_and_the_executors_the_shipped_python():
    inherited = {"PATH": "/usr/bin", "PYSPARK_PYTHON": "/elsewhere/python", launch.MASTER_VARIABLE: "yarn"}
    local = _submission(environ=inherited, warehouse="/data/warehouse").environment
    assert local["PYSPARK_PYTHON"] == local["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert local["PATH"] == os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin"])
    assert local[launch.MASTER_VARIABLE] == ""  # spark-submit's --master decides, not the job
    assert local["ACID_WAREHOUSE"] == "/data/warehouse"
    cluster = _submission(master="spark://m:7077", environ=inherited,
                          shipped={"spark.pyspark.python": "./acid_env/bin/python"}).environment
    assert cluster["PYSPARK_PYTHON"] == "./acid_env/bin/python" and "SPARK_LOCAL_IP" not in cluster
    own = _submission(environ=inherited, own_environment={"PYSPARK_PYTHON": "/mine/python"}).environment
    assert own["PYSPARK_PYTHON"] == "/mine/python"  # the launcher's own variables win
    assert _submission(metastore_url=None).environment.keys().isdisjoint({ENV_URL, ENV_PASSWORD, "ACID_WAREHOUSE"})


def test_cluster_deploy_mode_is_refused():
    from acid_deploy.shipping import ExecutorOptions

    with pytest.raises(launch.LaunchError, match="deploy mode 'cluster' is not supported"):
        launch.shipped_conf("spark://m:7077", ExecutorOptions(), deploy_mode="cluster")
    assert launch.shipped_conf("local[2]", ExecutorOptions(), deploy_mode="client") == {}


@pytest.mark.parametrize("pool, other_than, timeout, which", [
    ("etl", (), 5000, ["--pool", "etl"]),
    (None, ("etl", "adhoc"), 5000, ["--other-than", "etl,adhoc", "--pool-timeout-ms", "5000"]),
    (None, ("etl",), 0, ["--other-than", "etl"]),
    (None, (), 0, []),
])
def test_batch_arguments(pool, other_than, timeout, which):
    arguments = launch.batch_arguments(pool=pool, other_than=other_than, pool_timeout_ms=timeout, worker_id="w",
                                       result_file="/r.jsonl", max_compactions=10, max_seconds=59.6,
                                       job_conf={"spark.executor.pyspark.memory": "2g", "spark.executor.cores": "2"},
                                       configured={"spark.executor.pyspark.memory": "3g", "spark.ui.enabled": "x"})
    assert arguments == ("--batch", *which, "--worker-id", "w", "--result-file", "/r.jsonl", "--max-compactions",
                         "10", "--max-seconds", "60", "--job-conf",
                         '{"spark.executor.cores": "2", "spark.executor.pyspark.memory": "2g"}',
                         "--launcher-conf", '{"spark.executor.pyspark.memory": "3g"}')


def test_no_spark_submit_on_path_is_a_launch_error(tmp_path):
    with pytest.raises(launch.LaunchError, match="spark-submit was not found: install pyspark"):
        launch.find_spark_submit({"PATH": str(tmp_path)})
