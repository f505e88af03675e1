"""`make run` (`python -m acid_platform`) as real processes: the set-up, the demo writer, and the settings it refuses
before starting anything (the whole platform started and stopped: test_platform_cleanup.py).

Airflow reads its configuration once per process, at import (and tests/dags/conftest.py points this process's
AIRFLOW_HOME elsewhere), so everything touching Airflow runs in a child process with an environment of its own.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.platform_processes import ROOT, clean_environment, free_port

from acid_core.compaction.initiator import run_initiator
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionType
from acid_core.read.merge import read_snapshot
from acid_platform import load_settings, platform_environment

READ_BACK = """
import json
import sqlalchemy as sa
from airflow.models import Connection, Pool
from airflow.utils.db import check_migrations
from airflow.utils.session import create_session

check_migrations(timeout=5)  # raises unless the DB is at Airflow's head revision
with create_session() as session:
    connections = {c.conn_id: {"conn_type": c.conn_type, "host": c.host, "extra": c.extra_dejson}
                   for c in session.scalars(sa.select(Connection))}
    pools = {p.pool: {"slots": p.slots, "description": p.description} for p in session.scalars(sa.select(Pool))}
print(json.dumps({"connections": connections, "pools": pools}))
"""

SPOIL_CONNECTION = """
import sqlalchemy as sa
from airflow.models import Connection
from airflow.utils.session import create_session

with create_session() as session:
    session.scalar(sa.select(Connection).where(Connection.conn_id == "acid_metastore")).host = "sqlite:////elsewhere.db"
"""


def launcher(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "acid_platform", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def airflow_python(script: str, env: dict[str, str]) -> str:
    """Run `script` with the platform's Airflow environment (the one `make run` gives Airflow); returns its stdout."""
    airflow_env = platform_environment(load_settings(env), env)
    result = subprocess.run([sys.executable, "-c", script], env=airflow_env, cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# --- set-up ---------------------------------------------------------------------------------------------------------
@pytest.mark.airflow
def test_set_up_creates_airflow_db_connections_pool_and_demo_tables_idempotently(tmp_path):
    home = tmp_path / "home"
    env = clean_environment(home, ACID_WORKER_THREADS="3", ACID_COMPACTION_POOLS="etl:2,hot")
    first = launcher("--setup-only", env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]

    url = f"sqlite:///{home / 'warehouse' / 'metastore.db'}"
    state = json.loads(airflow_python(READ_BACK, env).strip().splitlines()[-1])
    assert state["connections"]["acid_metastore"] == {
        "conn_type": "generic", "host": url, "extra": {"warehouse": str(home / "warehouse")}}
    assert state["connections"]["spark_default"] == {
        "conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"}}
    assert state["pools"]["acid_compaction"]["slots"] == 3
    assert "hive.compactor.worker.threads" in state["pools"]["acid_compaction"]["description"]
    # a labelled compaction pool's Airflow pool: its own slots, else the worker threads (Hive's worker.<name>.threads)
    assert (state["pools"]["acid_compaction_etl"]["slots"], state["pools"]["acid_compaction_hot"]["slots"]) == (2, 3)
    assert "hive.compactor.worker.etl.threads" in state["pools"]["acid_compaction_etl"]["description"]
    assert (home / "airflow" / "airflow.cfg").is_file() and (home / "airflow" / "airflow.db").is_file()

    store = Metastore(url, warehouse=str(home / "warehouse"))
    try:
        events, sales = store.catalog.get_table("demo", "events"), store.catalog.get_table("demo", "sales")
        assert events.param("transactional") == sales.param("transactional") == "true"
        assert [key.name for key in events.partition_keys] == []
        assert [key.name for key in sales.partition_keys] == ["day"]
        created = (events.create_time_ms, sales.create_time_ms)
    finally:
        store.close()

    # The `acid` command with only the same ACID_HOME sees the same metastore.
    shown = subprocess.run([sys.executable, "-m", "acid_cli.main", "sql", "SHOW TABLES IN demo", "--format", "jsonl"],
                           env={**clean_environment(home)}, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert sorted(json.loads(line)["tab_name"] for line in shown.stdout.splitlines()) == ["events", "sales"]

    # Run again with another worker count after someone changed a connection: updated in place, nothing doubled.
    airflow_python(SPOIL_CONNECTION, env)
    second = launcher("--setup-only", env={**env, "ACID_WORKER_THREADS": "1"})
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    again = json.loads(airflow_python(READ_BACK, env).strip().splitlines()[-1])
    assert again["connections"]["acid_metastore"]["host"] == url
    assert sorted(again["connections"]) == sorted(state["connections"])
    assert sorted(again["pools"]) == sorted(state["pools"]) and again["pools"]["acid_compaction"]["slots"] == 1
    assert (again["pools"]["acid_compaction_etl"]["slots"], again["pools"]["acid_compaction_hot"]["slots"]) == (2, 1)
    store = Metastore(url, warehouse=str(home / "warehouse"))
    try:
        assert (store.catalog.get_table("demo", "events").create_time_ms,
                store.catalog.get_table("demo", "sales").create_time_ms) == created
    finally:
        store.close()


def test_platform_environment_puts_state_under_acid_home_and_keeps_the_users_choices(tmp_path):
    env = clean_environment(tmp_path / "home", ACID_INITIATOR_INTERVAL_SECONDS="120", AIRFLOW__API__PORT="8123",
                            AIRFLOW_CONN_ACID_METASTORE='{"conn_type": "generic", "host": "sqlite:////x.db"}',
                            AIRFLOW_HOME="/somewhere/else", PATH="/usr/bin")
    settings = load_settings(env)
    airflow_env = platform_environment(settings, env)
    home = tmp_path / "home"
    assert airflow_env["AIRFLOW_HOME"] == str(home / "airflow")
    assert airflow_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{home / 'airflow' / 'airflow.db'}"
    assert airflow_env["AIRFLOW__LOGGING__BASE_LOG_FOLDER"].startswith(str(home / "logs"))
    assert airflow_env["AIRFLOW__CORE__DAGS_FOLDER"] == str(ROOT / "dags")
    assert airflow_env["AIRFLOW__CORE__PLUGINS_FOLDER"] == str(ROOT / "plugins")
    assert airflow_env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert airflow_env["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] == "False"
    assert airflow_env["ACID_INITIATOR_INTERVAL_SECONDS"] == "120"  # the user's choice
    assert airflow_env["ACID_CLEANER_INTERVAL_SECONDS"] == "60"  # the demo's
    assert airflow_env["ACID_WORKER_INTERVAL_SECONDS"] == "60"
    assert airflow_env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:8123/execution/"
    assert "AIRFLOW_CONN_ACID_METASTORE" not in airflow_env  # would shadow the connection set-up stores
    assert airflow_env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert airflow_env["PYSPARK_PYTHON"] == sys.executable
    assert airflow_env["ACID_HOME"] == str(home)
    assert airflow_env["ACID_WAREHOUSE"] == str(home / "warehouse")
    assert airflow_env["ACID_METASTORE_URL"] == f"sqlite:///{home / 'warehouse' / 'metastore.db'}"


def test_settings_name_the_airflow_pool_of_each_compaction_pool(tmp_path):
    env = clean_environment(tmp_path / "home", ACID_WORKER_THREADS="2", ACID_COMPACTION_POOLS="etl:4, hot")
    settings = load_settings(env)
    assert settings.airflow_pools == {"acid_compaction": 2, "acid_compaction_etl": 4, "acid_compaction_hot": 2}
    airflow_env = platform_environment(settings, env)
    assert airflow_env["ACID_COMPACTION_POOLS"] == "etl:4, hot"  # the DAG processor makes acid_worker_<name> of it
    assert airflow_env["AIRFLOW__CORE__PARALLELISM"] == str(2 + 4 + 2 + 4)
    assert airflow_env["ACID_WORKER_THREADS"] == "2"  # acid_worker starts as many workers a run
    assert settings.demo_writer and not load_settings({**env, "ACID_DEMO_WRITER": "off"}).demo_writer


def test_the_metastore_password_reaches_the_platform_apart_from_its_url(tmp_path):
    env = clean_environment(tmp_path / "home", ACID_METASTORE_URL="postgresql+psycopg2://acid:s3cr%40t@db:5432/m")
    airflow_env = platform_environment(load_settings(env), env)
    assert airflow_env["ACID_METASTORE_URL"] == "postgresql+psycopg2://acid@db:5432/m"
    assert airflow_env["ACID_METASTORE_PASSWORD"] == "s3cr@t"
    apart = clean_environment(tmp_path / "home", ACID_METASTORE_URL="postgresql+psycopg2://acid@db:5432/m",
                              ACID_METASTORE_PASSWORD="s3cr@t")
    assert load_settings(apart).metastore_url == "postgresql+psycopg2://acid:s3cr%40t@db:5432/m"  # the connection's
    assert platform_environment(load_settings(apart), apart)["ACID_METASTORE_URL"] == airflow_env["ACID_METASTORE_URL"]
    sqlite = clean_environment(tmp_path / "home", ACID_METASTORE_PASSWORD="stale")
    assert "ACID_METASTORE_PASSWORD" not in platform_environment(load_settings(sqlite), sqlite)


# --- the demo writer ------------------------------------------------------------------------------------------------
def test_demo_writer_crosses_the_initiators_delta_threshold_and_keeps_days_small(tmp_path):
    env = clean_environment(tmp_path / "home")
    result = subprocess.run([sys.executable, "-m", "acid_platform.demo", "--rounds", "24", "--interval", "0"], env=env,
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "aborted" in result.stderr and "streamed a batch" in result.stderr
    store = Metastore(f"sqlite:///{tmp_path / 'home' / 'warehouse' / 'metastore.db'}",
                      warehouse=str(tmp_path / "home" / "warehouse"))
    try:
        decisions = {d.candidate.full_partition_name: d.compaction_type for d in run_initiator(store, dry_run=True)}
        assert decisions == {"demo.events": CompactionType.MAJOR, "demo.sales/day=2026-11-01": CompactionType.MAJOR}
    finally:
        store.close()

    # Two days of three batches each, written round twice: each day holds only its latest three batches.
    rotating = tmp_path / "rotating"
    result = subprocess.run([sys.executable, "-m", "acid_platform.demo", "--rounds", "24", "--interval", "0", "--days", "2",
                             "--batches-per-day", "3"], env=clean_environment(rotating), cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("rows of the day") == 2
    store = Metastore(f"sqlite:///{rotating / 'warehouse' / 'metastore.db'}", warehouse=str(rotating / "warehouse"))
    try:
        sales = store.catalog.get_table("demo", "sales")
        ids = store.txns.valid_write_ids("demo", "sales")
        assert sorted(p.name for p in store.catalog.list_partitions("demo", "sales")) == ["day=2026-11-01",
                                                                                        "day=2026-11-02"]
        for day in ("day=2026-11-01", "day=2026-11-02"):
            rows = read_snapshot(sales.partition_location(day), write_ids=ids).num_rows
            assert 3 * 4 * 3 <= rows <= 3 * 4 * 9  # three batches of four committed transactions of 3..9 rows
    finally:
        store.close()


def test_demo_writer_stops_on_sigterm_leaving_no_open_transaction(tmp_path):
    home = tmp_path / "home"
    log = tmp_path / "writer.log"
    writer = subprocess.Popen([sys.executable, "-m", "acid_platform.demo", "--interval", "0.2", "--log-file", str(log)],
                              env=clean_environment(home), cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not log.exists() or "demo.events:" not in log.read_text()):
            time.sleep(0.2)
        assert "demo.events:" in log.read_text()
        writer.send_signal(signal.SIGTERM)
        assert writer.wait(timeout=30) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert "stopped after" in log.read_text()
    store = Metastore(f"sqlite:///{home / 'warehouse' / 'metastore.db'}", warehouse=str(home / "warehouse"))
    try:
        assert [t.txn_id for t in store.txns.show_transactions() if t.state_name == "OPEN"] == []
    finally:
        store.close()


# --- settings refused before anything starts ----------------------------------------------------------------------
@pytest.mark.parametrize("port, message", [
    ("eighty", "AIRFLOW__API__PORT='eighty' is not a whole number"),
    ("70000", "AIRFLOW__API__PORT=70000 is out of range"),
    ("0", "AIRFLOW__API__PORT=0 is out of range"),
])
def test_bad_port_exits_2_before_starting_anything(tmp_path, port, message):
    home = tmp_path / "home"
    result = launcher(env=clean_environment(home, AIRFLOW__API__PORT=port), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert not home.exists()


def test_port_in_use_exits_2_naming_the_port(tmp_path):
    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = launcher(env=clean_environment(home, AIRFLOW__API__PORT=str(port)), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"port {port} is already in use" in result.stderr and f"AIRFLOW__API__PORT={port}" in result.stderr
    assert not home.exists()


@pytest.mark.parametrize("variable, value, message", [
    ("ACID_WORKER_THREADS", "0", "ACID_WORKER_THREADS=0 is out of range"),
    ("ACID_WORKER_THREADS", "two", "ACID_WORKER_THREADS='two' is not a whole number"),
    ("ACID_INITIATOR_INTERVAL_SECONDS", "soon", "ACID_INITIATOR_INTERVAL_SECONDS='soon' is not a whole number"),
    ("ACID_COMPACTION_POOLS", "etl pool:2", "ACID_COMPACTION_POOLS: compaction pool name 'etl pool' is not valid"),
    ("ACID_DEMO_WRITER", "maybe", "ACID_DEMO_WRITER must be on or off, got 'maybe'"),
])
def test_bad_numbers_exit_2(tmp_path, variable, value, message):
    result = launcher(env=clean_environment(tmp_path / "home", **{variable: value,
                                                                  "AIRFLOW__API__PORT": str(free_port())}))
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_unusable_acid_home_exits_2(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    home = blocker / "home"
    result = launcher(env=clean_environment(home, AIRFLOW__API__PORT=str(free_port())), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"ACID_HOME={home} is not usable" in result.stderr


def test_missing_java_exits_1_naming_it(tmp_path):
    env = clean_environment(tmp_path / "home", AIRFLOW__API__PORT=str(free_port()), PATH=str(tmp_path))
    env.pop("JAVA_HOME", None)
    result = launcher(env=env, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Spark needs Java 17" in result.stderr
    assert not (tmp_path / "home" / "airflow" / "airflow.db").exists()


def test_second_launcher_on_the_same_home_exits_2(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    with open(home / "platform.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("4242")
        lock.flush()
        result = launcher(env=clean_environment(home, AIRFLOW__API__PORT=str(free_port())), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is in use by another `make run` (pid 4242)" in result.stderr
