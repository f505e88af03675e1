"""Airflow test set-up: a throw-away AIRFLOW_HOME with its own SQLite database, this repo's dags/ and plugins/.

The environment is set when this file is imported, before anything imports Airflow (Airflow reads its configuration
once, at import). Each test points the `acid_metastore` connection at its own SQLite metastore through
`AIRFLOW_CONN_ACID_METASTORE` (a JSON connection), read whenever a task asks for the connection.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="acid-airflow-home-"))

os.environ["AIRFLOW_HOME"] = str(AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(ROOT / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(ROOT / "plugins")
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{AIRFLOW_HOME}/airflow.db"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
# The compaction tasks' spark-submit: local Spark with two threads, on loopback.
os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(
    {"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"}})
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
for _name in ("ACID_INITIATOR_INTERVAL_SECONDS", "ACID_WORKER_INTERVAL_SECONDS", "ACID_CLEANER_INTERVAL_SECONDS",
              "ACID_COMPACTION_POOLS"):  # the DAGs' defaults, as shipped (test_pool_dags.py sets its own)
    os.environ.pop(_name, None)
if str(ROOT / "plugins") not in sys.path:
    sys.path.insert(0, str(ROOT / "plugins"))


@pytest.fixture(scope="session")
def airflow_db():
    """Airflow's own database, created once per run from the ORM (no migrations replayed); removed at the end."""
    from airflow.models.pool import Pool
    from airflow.utils import db

    db.initdb()
    Pool.create_or_update_pool("acid_compaction", slots=1, description="hive.compactor.worker.threads",
                               include_deferred=False)
    return AIRFLOW_HOME


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the throw-away AIRFLOW_HOME (made at import, whether or not an Airflow test ran)."""
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture
def metastore_url(tmp_path) -> str:
    """A SQLite metastore file of this test's own."""
    return f"sqlite:///{tmp_path}/metastore.db"


@pytest.fixture
def warehouse(tmp_path) -> str:
    return str(tmp_path / "warehouse")


@pytest.fixture
def acid_connection(airflow_db, metastore_url, warehouse, monkeypatch) -> str:
    """Points the `acid_metastore` connection at this test's metastore and warehouse, forgets the initiator's cursor
    and the worker runs' listings (a new metastore has its own history and queue); returns the URL."""
    from airflow.models.variable import Variable

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION",
                 "AWS_REGION", "AWS_ENDPOINT_URL_S3"):  # tasks put a connection's credentials here: undone after
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
        else:
            monkeypatch.setenv(name, "")
            monkeypatch.delenv(name)
    extra = {"warehouse": warehouse}
    if warehouse.startswith("s3://"):  # the S3 server's credentials, from an `aws` connection as in production
        extra["aws_conn_id"] = "aws_acid_test"
        monkeypatch.setenv("AIRFLOW_CONN_AWS_ACID_TEST", json.dumps(
            {"conn_type": "aws", "login": os.environ["AWS_ACCESS_KEY_ID"],
             "password": os.environ["AWS_SECRET_ACCESS_KEY"],
             "extra": {"region_name": os.environ["AWS_DEFAULT_REGION"], "endpoint_url": os.environ["AWS_ENDPOINT_URL"]}}))
    monkeypatch.setenv("AIRFLOW_CONN_ACID_METASTORE", json.dumps(
        {"conn_type": "generic", "host": metastore_url, "extra": extra}))
    Variable.delete("acid_initiator_last_check_ms.acid_metastore")
    return metastore_url


@pytest.fixture
def clock():
    """Wall-clock time: Airflow's runs, the tasks' own metastores and the test's share it (tests/conftest.py's
    `make_ms` uses this clock)."""
    return None


@pytest.fixture(scope="module")
def dagbag(airflow_db):
    """This repo's DAGs, parsed once per test module (dag.test() keeps a run's params on the DAG object)."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags"), bundle_path=ROOT / "dags", bundle_name="dags-folder")


@pytest.fixture
def recording_spark_submit(tmp_path, monkeypatch):
    """spark_default pointed at a recording spark3-submit (dag_support.install_recording_spark_submit)."""
    from support.dag_support import install_recording_spark_submit

    return install_recording_spark_submit(tmp_path, monkeypatch)
