"""ACID view test set-up: Airflow's configuration for this process (a throw-away AIRFLOW_HOME with a SQLite database,
this repo's dags/ and plugins/, the SimpleAuthManager) unless tests/dags/conftest.py set one up already in this
run, and a TestClient on Airflow's own API server app (which mounts the plugin as production does).

Airflow reads its configuration once, at import, so this runs when the file is imported, before anything imports
Airflow.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_OWN_HOME: Path | None = None

if os.environ.get("AIRFLOW__CORE__UNIT_TEST_MODE") != "True":  # no other conftest configured Airflow in this run
    _OWN_HOME = Path(tempfile.mkdtemp(prefix="acid-ui-airflow-home-"))
    os.environ["AIRFLOW_HOME"] = str(_OWN_HOME)
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(ROOT / "dags")
    os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(ROOT / "plugins")
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_OWN_HOME}/airflow.db"
    os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
# a signing key long enough for HS512 (unit_tests.cfg's short one makes PyJWT warn, and warnings are errors)
os.environ.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_hex(64))
if str(ROOT / "plugins") not in sys.path:
    sys.path.insert(0, str(ROOT / "plugins"))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _OWN_HOME is not None:
        shutil.rmtree(_OWN_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def ui_airflow_db():
    """Airflow's database with this repo's DAGs serialized (what the DAG processor would write)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.utils import db

    db.initdb()
    DagBundlesManager().sync_bundles_to_db()  # the dags-folder bundle row the DAGs refer to
    bag = DagBag(dag_folder=str(ROOT / "dags"), bundle_path=ROOT / "dags", bundle_name="dags-folder")
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, "dags-folder", None)
    return bag


@pytest.fixture(scope="session")
def api_app(ui_airflow_db):
    """Airflow's API server app (core API, UI, auth manager and plugins), as `airflow api-server` builds it."""
    from airflow.api_fastapi.app import create_app

    return create_app()


@pytest.fixture
def tables(tmp_path, monkeypatch) -> dict:
    """A real metastore and warehouse (ui_tables.build), named by the `acid_metastore` connection."""
    from support import ui_tables
    url, warehouse = f"sqlite:///{tmp_path}/metastore.db", str(tmp_path / "warehouse")
    ids = ui_tables.build(url, warehouse)
    monkeypatch.setenv("AIRFLOW_CONN_ACID_METASTORE", json.dumps(
        {"conn_type": "generic", "host": url, "extra": {"warehouse": warehouse}}))
    return {**ids, "url": url, "warehouse": warehouse}


@pytest.fixture
def history_tables(tmp_path, monkeypatch) -> dict:
    """`tables`, after a table whose compactions ran over the last six hours (ui_tables.build_history)."""
    from support import ui_tables
    url, warehouse = f"sqlite:///{tmp_path}/metastore.db", str(tmp_path / "warehouse")
    history = ui_tables.build_history(url, warehouse)
    ids = ui_tables.build(url, warehouse)
    monkeypatch.setenv("AIRFLOW_CONN_ACID_METASTORE", json.dumps(
        {"conn_type": "generic", "host": url, "extra": {"warehouse": warehouse}}))
    return {**ids, "history": history, "url": url, "warehouse": warehouse}


@pytest.fixture
def client(api_app):
    from fastapi.testclient import TestClient

    with TestClient(api_app, base_url="http://localhost") as test_client:
        yield test_client


@pytest.fixture
def as_admin(client):
    from support.ui_auth import token_for

    client.headers["Authorization"] = f"Bearer {token_for('admin')}"
    return client


def _browser_missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    import importlib.util

    if not Path("/usr/bin/chromium").exists():
        return "Debian's chromium is not installed (/usr/bin/chromium): `make test` installs it (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright for Python is not installed: `make test` installs requirements.txt"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A `browser` test without chromium or Playwright fails under CI (every marked group must run there), as a
    PostgreSQL test does (tests/conftest.py), and is skipped elsewhere."""
    if item.get_closest_marker("browser") is None:
        return
    missing = _browser_missing()
    if missing is None:
        return
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"CI is set and this test needs a browser: {missing}", pytrace=False)
    pytest.skip(missing)
