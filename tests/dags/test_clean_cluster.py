"""A node with nothing but Spark and a plain Python runs every kind of job (issue 13): a Spark standalone master and a
worker on loopback, the worker started in a clean environment (its own working directory, no PYTHONPATH, no
PYSPARK_PYTHON, on PATH only a Python of the driver's version that cannot import acid_core or pyarrow), and on it a
compaction through AcidCompactionOperator in a real `dag.test()`, a Spark read through spark_jobs and through the
`hiveacid` data source (with an append and its change feed), and an `acid sql` UPDATE. The executors get the code zip
and the packed environment of `acid_deploy.shipping`; this run's own interpreter, although named by PYSPARK_PYTHON in
the drivers' environment, must not be what they run.

Where the executors' Python really ran is read from the worker's side: the worker's environment sets
PYTHONPYCACHEPREFIX, so every module an executor's Python compiled leaves its bytecode under a mirror of its source
path (the unpacked `acid_env` of each application, the plain Python's standard library), and the read job reports
its executor's `sys.prefix` itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.dag_support import COLUMNS, dirs, insert, returned
from support.processes import kill_session
from support.standalone_cluster import (
    build_executor_env,
    cannot_import,
    clean_environment,
    plain_python,
    shared_build_dir,
    standalone_cluster,
)

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]

MINOR = f"python{sys.version_info.major}.{sys.version_info.minor}"
COMPACT = {"database": "default", "table": "clean", "partition": None, "type": "major", "properties": {}, "wait": True}
READ_JOB = '''
import json, sys
from acid_core.metastore import Metastore
from spark_jobs.read import read_table
from spark_jobs.session import build_session

spark = build_session("acid-clean-read", master=sys.argv[1])
metastore = Metastore(sys.argv[2])
rows = sorted(tuple(row) for row in read_table(spark, metastore, "default", "clean").collect())

def where(_):
    import sys, acid_core, pyarrow
    yield {"prefix": sys.prefix, "executable": sys.executable, "version": list(sys.version_info[:3]),
           "acid_core": acid_core.__file__, "pyarrow": pyarrow.__file__}

[executor] = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()

# the hiveacid data source: read, append, and the append's changes, its tasks on the cluster too
def hiveacid():
    return spark.read.format("hiveacid").option("metastore", sys.argv[2])

through_source = sorted(tuple(row) for row in hiveacid().load("default.clean").collect())
before = metastore.txns.snapshot(["default.clean"]).write_ids["default.clean"].high_watermark
(spark.createDataFrame([(i, f"new-{i}") for i in range(200, 205)], "id int, name string").repartition(2)
 .write.format("hiveacid").option("metastore", sys.argv[2]).mode("append").save("default.clean"))
changes = sorted((row["_change_type"], row["id"])
                 for row in hiveacid().option("changesFrom", before).load("default.clean").collect())
print(json.dumps({"rows": rows, "source_rows": through_source, "changes": changes, "executor": executor}))
metastore.close()
spark.stop()
'''


@pytest.fixture(scope="module")
def shipping(tmp_path_factory):
    """The plain Python a node has, and the packed environment for it, built once for the run (and timed)."""
    plain = plain_python()
    build_dir = shared_build_dir(tmp_path_factory)
    archive, seconds = build_executor_env(build_dir, plain.prefix)
    print(f"\nexecutors' environment {archive.name} ({archive.stat().st_size / 2**20:.0f} MiB) ready in {seconds:.1f} s")
    return plain, build_dir


@pytest.fixture
def clean_cluster(tmp_path, shipping):
    plain, _ = shipping
    node = tmp_path / "node"
    cwd = node / "cwd"
    cwd.mkdir(parents=True)
    environment = clean_environment(node, plain.executable)
    environment["PYTHONPYCACHEPREFIX"] = str(node / "pycache")
    python3 = node / "bin" / "python3"
    assert cannot_import(python3, "acid_core", env=environment, cwd=cwd), "the node's Python imports acid_core"
    assert cannot_import(python3, "pyarrow", env=environment, cwd=cwd), "the node's Python imports pyarrow"
    assert not {"PYTHONPATH", "PYSPARK_PYTHON", "VIRTUAL_ENV"} & set(environment)
    with standalone_cluster(tmp_path, worker_environment=environment, worker_cwd=cwd) as cluster:
        yield cluster, node / "pycache"


def drivers_environment(master: str | None, plain, build_dir: Path) -> dict[str, str]:
    """Where the drivers run: this run's virtualenv, named by PYSPARK_PYTHON too (which must stay on this side)."""
    environment = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                       ACID_EXECUTOR_ENV="auto", ACID_SHIP_DIR=str(build_dir), SPARK_LOCAL_IP="127.0.0.1")
    environment.pop("ACID_EXECUTOR_PYTHON_PREFIX", None)
    if plain.prefix is not None:
        environment["ACID_EXECUTOR_PYTHON_PREFIX"] = plain.prefix
    if master is not None:
        environment["ACID_SPARK_MASTER"] = master
    return environment


def run_driver(command: list[str], environment: dict[str, str], cwd: Path, cluster) -> str:
    process = subprocess.Popen(command, env=environment, cwd=cwd, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        kill_session(process.pid)
    assert process.returncode == 0, f"{command[2:5]}: {stderr[-4000:]}\n{cluster.executor_logs()}"
    return stdout


def test_compaction_read_and_update_on_a_node_with_only_spark_and_python(
        clean_cluster, shipping, acid_connection, make_ms, dagbag, monkeypatch, tmp_path):
    from acid_core.metastore.codes import CompactionState

    cluster, pycache = clean_cluster
    plain, build_dir = shipping
    ms = make_ms()
    info = ms.catalog.create_table("default", "clean", COLUMNS, params={"transactional": "true"})
    for start in (0, 40, 80):
        insert(ms, "clean", None, [(i, f"name-{i}") for i in range(start, start + 40)])
    expected = sorted((i, f"name-{i}") for i in range(120))

    # (a) a compaction through AcidCompactionOperator, spark_default naming the cluster and automatic shipping
    extra = {"deploy-mode": "client", "spark-binary": "spark-submit", "acid-executor-env": "auto"}
    if plain.prefix is not None:
        extra["acid-executor-python-prefix"] = plain.prefix
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": cluster.master, "extra": extra}))
    monkeypatch.setenv("ACID_SHIP_DIR", str(build_dir))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # a worker's environment may say so: not for executors

    run = dagbag.get_dag("acid_compact").test(run_conf=COMPACT)

    assert run.state == "success", cluster.executor_logs()
    result = returned(run, "compact")
    assert (result["state"], result["type"]) == ("ready for cleaning", "MAJOR"), result
    assert ms.compactions.get(result["compaction_id"]).state is CompactionState.READY_FOR_CLEANING
    assert [name for name in dirs(info.location) if name.startswith("base_")]
    assert rows(ms, info) == expected

    # (b) a Spark read of the table through spark_jobs on the cluster (the driver here, in-process build_session)
    driver_cwd = tmp_path / "driver"
    driver_cwd.mkdir()
    job = driver_cwd / "read_job.py"
    job.write_text(READ_JOB)
    read = json.loads(run_driver([sys.executable, str(job), cluster.master, acid_connection],
                                 drivers_environment(None, plain, build_dir), driver_cwd, cluster).splitlines()[-1])
    assert [tuple(row) for row in read["rows"]] == [tuple(row) for row in read["source_rows"]] == expected
    assert [tuple(change) for change in read["changes"]] == [("insert", i) for i in range(200, 205)]
    expected += [(i, f"new-{i}") for i in range(200, 205)]
    assert rows(ms, info) == expected
    executor = read["executor"]
    assert Path(executor["prefix"]).name == "acid_env" and Path(executor["prefix"]).is_relative_to(cluster.work_dir)
    assert Path(executor["pyarrow"]).is_relative_to(executor["prefix"])
    assert ".zip" in executor["acid_core"], executor  # the shipped code, not this checkout
    assert executor["version"][:2] == list(sys.version_info[:2])

    # (c) an UPDATE through `acid sql` on the cluster
    run_driver([sys.executable, "-m", "acid_cli.main", "sql", "UPDATE clean SET name = 'updated' WHERE id < 10",
                "--metastore", acid_connection], drivers_environment(cluster.master, plain, build_dir), driver_cwd,
               cluster)
    assert rows(ms, info) == sorted((i, "updated" if i < 10 else name) for i, name in expected)

    # every job ran on the cluster, its executors on the shipped environment over the node's plain Python
    apps = cluster.completed_apps()
    assert sorted(apps) == sorted([f"acid-compaction-{result['compaction_id']}", "acid-clean-read", "acid-sql"])
    app_dirs = sorted(cluster.work_dir.glob("app-*"))
    assert len(app_dirs) == 3
    for app_dir in app_dirs:
        [unpacked] = app_dir.glob("*/acid_env")
        compiled = pycache / unpacked.relative_to("/") / "lib" / MINOR / "site-packages" / "pyarrow"
        assert compiled.is_dir(), f"no executor of {app_dir.name} imported pyarrow from {unpacked}"
    stdlib = Path(plain.prefix or sys.base_prefix, "lib", MINOR)
    assert (pycache / stdlib.relative_to("/")).is_dir()
    assert not (pycache / Path(sys.prefix).relative_to("/")).exists(), "an executor ran this run's virtualenv"
    assert not (pycache / Path(__file__).resolve().parents[2].relative_to("/")).exists(), "it imported the checkout"


def rows(ms, info) -> list[tuple]:
    """The table's rows under a snapshot taken now (acid_core's own reader, no Spark), sorted."""
    from acid_core.read.merge import read_snapshot

    snapshot = ms.txns.snapshot(["default.clean"])
    table = read_snapshot(info.location, write_ids=snapshot.write_ids["default.clean"], txns=snapshot.txns)
    return sorted(zip(table.column("id").to_pylist(), table.column("name").to_pylist()))
