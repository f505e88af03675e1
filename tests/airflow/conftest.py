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
if str(ROOT / "plugins") not in sys.path:
    sys.path.insert(0, str(ROOT / "plugins"))


@pytest.fixture(scope="session")
def airflow_db():
    """Airflow's own database, created once per run from the ORM (no migrations replayed); removed at the end."""
    from airflow.utils import db

    db.initdb()
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
    """Points the `acid_metastore` connection at this test's metastore and warehouse; returns the URL."""
    monkeypatch.setenv("AIRFLOW_CONN_ACID_METASTORE", json.dumps(
        {"conn_type": "generic", "host": metastore_url, "extra": {"warehouse": warehouse}}))
    return metastore_url


@pytest.fixture
def make_ms(metastore_url, warehouse):
    """Factory for initialised metastores on this test's database (options go to `Metastore`); closed afterwards."""
    from acid_core.metastore import Metastore

    made = []

    def make(**options):
        store = Metastore(metastore_url, warehouse=warehouse, **options)
        store.init()
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
