"""The real-PostgreSQL test set-up: one server on loopback, a database per test, cleaned up however the run ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.pg_server import BIN_DIR_VARIABLE, RAM_DIR, PostgresServer, ram_base_dir

ROOT = Path(__file__).resolve().parents[2]


def _query(url: str, statement: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sa.text(statement))]
    finally:
        engine.dispose()


def _accepts_connections(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        return probe.connect_ex((host, port)) == 0


@pytest.mark.postgres
def test_server_accepts_sqlalchemy_connections_with_test_settings(postgres_url):
    assert postgres_url.startswith("postgresql+psycopg2://acid@127.0.0.1:")
    [(database, address, user)] = _query(postgres_url, "SELECT current_database(), host(inet_server_addr()), current_user")
    assert (database, address, user) == (postgres_url.rsplit("/", 1)[1], "127.0.0.1", "acid")
    settings = dict(_query(postgres_url, "SELECT name, setting FROM pg_settings WHERE name IN "
                                         "('fsync', 'synchronous_commit', 'full_page_writes', 'max_connections')"))
    assert settings == {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "200"}


@pytest.mark.postgres
def test_listens_only_on_loopback(postgres_server):
    assert _query(postgres_server.url(), "SHOW listen_addresses") == [("127.0.0.1",)]
    assert _query(postgres_server.url(), "SHOW unix_socket_directories") == [(str(postgres_server.socket_dir),)]
    assert postgres_server.socket_dir.is_relative_to(postgres_server.temp_dir)
    assert _accepts_connections("127.0.0.1", postgres_server.port)
    # Linux routes all of 127/8 to loopback: a server bound to 127.0.0.1 alone must refuse 127.0.0.2.
    assert not _accepts_connections("127.0.0.2", postgres_server.port)


@pytest.mark.postgres
@pytest.mark.parametrize("run", ["first", "second"])
def test_each_test_gets_an_empty_database_of_its_own(postgres_url, run):
    assert _query(postgres_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]
    engine = sa.create_engine(postgres_url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE marker (run text)"))
            connection.execute(sa.text("INSERT INTO marker VALUES (:run)"), {"run": run})
    finally:
        engine.dispose()
    assert _query(postgres_url, "SELECT run FROM marker") == [(run,)]


@pytest.mark.postgres
def test_databases_on_one_server_do_not_share_tables(postgres_server, postgres_url):
    other_url = postgres_server.create_database("isolation_other")
    try:
        assert other_url != postgres_url
        engine = sa.create_engine(postgres_url)
        try:
            with engine.begin() as connection:
                connection.execute(sa.text("CREATE TABLE only_here (id int)"))
        finally:
            engine.dispose()
        assert _query(other_url, "SELECT to_regclass('only_here') IS NULL") == [(True,)]
    finally:
        postgres_server.drop_database("isolation_other")


def test_metastore_url_yields_sqlite_and_postgres(metastore_url, request, tmp_path):
    kind = request.node.callspec.params["metastore_url"]
    assert (request.node.get_closest_marker("postgres") is not None) == (kind == "postgres")
    engine = sa.create_engine(metastore_url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE probe (id int)"))
        assert engine.dialect.name == {"sqlite": "sqlite", "postgres": "postgresql"}[kind]
    finally:
        engine.dispose()
    if kind == "sqlite":
        assert metastore_url == f"sqlite:///{tmp_path}/metastore.db"
        assert (tmp_path / "metastore.db").is_file()


@pytest.mark.postgres
def test_the_run_s_server_keeps_its_data_on_a_ram_file_system_where_there_is_one(postgres_server, tmp_path):
    assert ram_base_dir(tmp_path) is None  # a directory that is not a tmpfs mount
    assert ram_base_dir(tmp_path / "missing") is None
    if ram_base_dir() is not None:
        assert postgres_server.data_dir.is_relative_to(RAM_DIR)
        [(directory,)] = _query(postgres_server.url(), "SHOW data_directory")
        assert Path(directory).is_relative_to(RAM_DIR)
    else:
        assert not postgres_server.data_dir.is_relative_to(RAM_DIR)


@pytest.mark.postgres
def test_database_names_are_checked(postgres_server):
    with pytest.raises(ValueError, match="lower-case letters"):
        postgres_server.create_database('x"; DROP DATABASE postgres; --')


@pytest.mark.postgres
def test_stop_ends_the_server_and_removes_its_directory(postgres_server):
    server = PostgresServer(bin_dir=postgres_server.bin_dir).start()
    temp_dir, port = server.temp_dir, server.port
    assert _accepts_connections("127.0.0.1", port)
    server.stop()
    server.stop()  # idempotent
    assert not temp_dir.exists()
    assert not _accepts_connections("127.0.0.1", port)


@pytest.mark.postgres
def test_a_killed_test_run_does_not_leave_its_server_running(postgres_server):
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]); from support.pg_server import PostgresServer; "
              "s = PostgresServer(bin_dir=sys.argv[2]).start(); print(s.temp_dir, s.port, flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", script, str(ROOT / "tests"), str(postgres_server.bin_dir)],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        temp_dir, port = child.stdout.readline().split()
        assert _accepts_connections("127.0.0.1", int(port))
    finally:
        child.send_signal(signal.SIGKILL)  # no finalizer, no atexit: only the watchdog is left to clean up
        child.wait()
        child.stdout.close()
    deadline = time.monotonic() + 15
    while Path(temp_dir).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(temp_dir).exists()
    assert not _accepts_connections("127.0.0.1", int(port))


def test_missing_binaries_fail_under_ci_and_skip_elsewhere(tmp_path):
    target = f"{Path(__file__).relative_to(ROOT)}::test_listens_only_on_loopback"
    environment = {**os.environ, BIN_DIR_VARIABLE: str(tmp_path)}
    environment.pop("CI", None)

    def run(env: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", target], cwd=ROOT, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)

    outside_ci = run(environment)
    assert outside_ci.returncode == 0, outside_ci.stdout
    assert "1 skipped" in outside_ci.stdout
    in_ci = run({**environment, "CI": "true"})
    assert in_ci.returncode == 1, in_ci.stdout
    assert "CI is set and this test needs PostgreSQL" in in_ci.stdout
    assert f"${BIN_DIR_VARIABLE}" in in_ci.stdout
