"""Shared fixtures: one real PostgreSQL server per test run, a fresh database per test, and a metastore URL for both backends.

`tests/` has no `__init__.py`, so pytest (prepend import mode) puts it on `sys.path` before importing this file; that is how
`pg_server` here and `model` in the tests import as top-level modules.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import re
from collections.abc import Iterator

import pytest
from support.jvm_archive import options_with_archive
from support.pg_server import PostgresServer, PostgresServerError, find_bin_dir, not_found_message, ram_base_dir

# The tests' JVMs (spark-submit's, pyspark's, a standalone cluster's daemons) compile with C1 only and collect with the
# serial collector: a short-lived JVM then starts about twice as fast on two cores (a local session: 16-20 s -> 9 s
# with the other worker busy), and the heaviest JVM path here (the capped-memory jobs, 2.6 GB through Arrow) took the
# same time. Only the tests set it; deployments keep the JVM's defaults.
# The first test that may start a JVM has a class-data-sharing archive of Spark's classes made in the background;
# the tests' JVMs use it once it is there (support/jvm_archive.py).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_JVM_OPTIONS_OURS = "SPARK_SUBMIT_OPTS" not in os.environ or os.environ["SPARK_SUBMIT_OPTS"].startswith(TEST_JVM_OPTIONS)
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)
_JVM_MARKERS = ("spark", "airflow", "interop", "browser")

_database_numbers = itertools.count(1)
_find_bin_dir = functools.cache(find_bin_dir)


def _in_ci() -> bool:
    """CI is set (GitHub, GitLab and most others set CI=true); "0", "false" and "no" count as unset."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _postgres_unavailable() -> None:
    """Missing PostgreSQL binaries fail the test under CI, where every marked group must run, and skip it elsewhere."""
    message = not_found_message()
    if _in_ci():
        pytest.fail(f"CI is set and this test needs PostgreSQL: {message}", pytrace=False)
    pytest.skip(message)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before a test's fixtures are set up: decide for every `postgres`-marked test whether it can run, whether or not
    it asks for the server; and give the JVMs of a test that may start one the class archive (made once)."""
    if item.get_closest_marker("postgres") is not None and _find_bin_dir() is None:
        _postgres_unavailable()
    if _JVM_OPTIONS_OURS and any(item.get_closest_marker(name) is not None for name in _JVM_MARKERS):
        _use_jvm_archive()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put first the tests of modules that share an expensive module-scoped set-up (an `airflow standalone`, a
    2.6 GB table, a compiled Hive harness), then the `slow` ones, each in their order.

    Under work stealing (`make test`) a worker that runs out takes the last half of the other's queue: a module there
    could be split, and its set-up made on both workers (the browser tests' Airflow was started twice: 225 s instead
    of 79). The first worker starts with these and nobody takes them; the longest work first also evens out the end.
    Every worker sorts the same collection the same way, as pytest-xdist requires."""
    def shares_setup(item: pytest.Item) -> bool:
        info = getattr(item, "_fixtureinfo", None)
        module = item.nodeid.split("::", 1)[0]
        return info is not None and any(
            definition.scope in ("module", "class") and definition.baseid == module
            for definitions in info.name2fixturedefs.values() for definition in definitions)

    # stable: the order within each rank is kept
    items.sort(key=lambda item: 0 if shares_setup(item) else 1 if item.get_closest_marker("slow") else 2)


def _use_jvm_archive() -> None:
    """SPARK_SUBMIT_OPTS with the class archive once it is made (until then without it, and asked again)."""
    if os.environ["SPARK_SUBMIT_OPTS"] == TEST_JVM_OPTIONS:
        os.environ["SPARK_SUBMIT_OPTS"] = options_with_archive(TEST_JVM_OPTIONS)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole run, on 127.0.0.1 and a free port; stopped and removed at the end of the session.

    Its data directory is on a RAM file system where there is one (`ram_base_dir`): each PostgreSQL test's database
    is a copy of the metastore template, about 400 files, which cost 300 ms to create on this disk and 11 ms there.
    Only the server's files move; the tests' tables stay on the system's temporary directory."""
    bin_dir = _find_bin_dir()
    if bin_dir is None:
        _postgres_unavailable()
    server = PostgresServer(bin_dir=bin_dir, base_dir=ram_base_dir())
    try:
        server.start()
    except PostgresServerError as exc:
        pytest.fail(f"the PostgreSQL test server did not start: {exc}", pytrace=False)
    yield server
    server.stop()


def _test_database(server: PostgresServer, request: pytest.FixtureRequest, template: str | None = None) -> Iterator[str]:
    slug = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    name = f"t{next(_database_numbers)}_{slug}"[:63]
    yield server.create_database(name, template=template)
    server.drop_database(name)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """SQLAlchemy URL of a new, empty database for this test only; dropped afterwards (open connections are ended)."""
    yield from _test_database(postgres_server, request)


METASTORE_TEMPLATE = "acid_metastore_template"


@pytest.fixture(scope="session")
def postgres_metastore_template(postgres_server: PostgresServer) -> str:
    """A database holding the metastore schema (its DDL replayed once per run), which each test's metastore database
    copies instead of replaying the DDL."""
    from acid_core.metastore.engine import Database

    database = Database(postgres_server.create_database(METASTORE_TEMPLATE))
    try:
        database.init_schema()
    finally:
        database.dispose()  # a template must have no connections when it is copied
    return METASTORE_TEMPLATE


@pytest.fixture(params=[
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
])
def metastore_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """The test runs twice: on a SQLite file in `tmp_path`, and on a PostgreSQL database of its own that already holds
    the metastore schema (a copy of `postgres_metastore_template`; `init` finds it current), or an empty one for tests
    marked `empty_metastore` (those of the schema's creation)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/metastore.db"
        return
    server = request.getfixturevalue("postgres_server")
    empty = request.node.get_closest_marker("empty_metastore") is not None
    template = None if empty else request.getfixturevalue("postgres_metastore_template")
    yield from _test_database(server, request, template)


TEST_IDENTITY = ("tester", "testhost")


@pytest.fixture
def clock():
    """A clock that moves only when a test advances it (time-outs without sleeping)."""
    from acid_core.metastore.engine import ManualClock

    return ManualClock()


@pytest.fixture
def make_ms(metastore_url, clock, tmp_path):
    """Factory for initialised metastores on `metastore_url` (both databases), closed after the test."""
    from acid_core.metastore import Metastore
    from acid_core.metastore.engine import Identity

    made = []

    def make(**options):
        options.setdefault("clock", clock)
        options.setdefault("identity", Identity(*TEST_IDENTITY))
        options.setdefault("warehouse", str(tmp_path / "warehouse"))
        store = Metastore(metastore_url, **options)
        store.init()
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def ms(make_ms):
    """An initialised metastore with the test clock and identity, on SQLite and on PostgreSQL."""
    return make_ms()


@pytest.fixture
def store(tmp_path, clock):
    """An initialised metastore on a SQLite file only, with the test clock and identity, for the tests where the
    database does not matter (`ms` runs on both); tests/spark_jobs's own `store` replaces it there."""
    from acid_core.metastore import Metastore
    from acid_core.metastore.engine import Identity

    made = Metastore(f"sqlite:///{tmp_path}/metastore.db", warehouse=str(tmp_path / "warehouse"), clock=clock,
                     identity=Identity(*TEST_IDENTITY))
    made.init()
    yield made
    made.close()


_bucket_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One S3-compatible server (moto's, tests/s3_server.py) on loopback for the whole run, stopped at the end."""
    from support.s3_server import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3") / "s3-server.log")
    yield server
    server.stop()


@pytest.fixture
def s3_warehouse(s3_server, monkeypatch, request) -> str:
    """A new bucket of this test's own, as `s3://<bucket>/warehouse`, with this process's environment pointing
    pyarrow at the server (processes the test starts inherit it); the request counts start at zero."""
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    bucket = s3_server.make_bucket(f"t{next(_bucket_numbers)}-{slug}"[:63].rstrip("-"))
    s3_server.reset_counts()
    return f"{bucket}/warehouse"


@pytest.fixture(scope="session")
def spark(s3_server) -> Iterator[SparkSession]:  # noqa: F821  (pyspark is imported lazily, only when a Spark test runs)
    """One local Spark session for the whole run (Spark's testing guide), built as jobs build theirs; stopped at
    the end (the Spark and the interop tests share it). Its Python workers inherit the JVM's environment, which is
    this process's when the session starts: the S3 server's is put there first, so tests with the warehouse on S3
    (`s3_warehouse`) can share the session."""
    import os

    from spark_jobs.session import build_session

    os.environ.update(s3_server.environment)

    session = build_session("acid-tests", master="local[2]")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, when pytest has already
    # closed the captured stream it would write to ("--- Logging error ---" after the summary): keep it quiet.
    logging.getLogger("py4j").setLevel(logging.WARNING)
