"""One local Spark session for the whole run (Spark's testing guide), built as jobs build theirs; stopped at the end.

Spark tests use a SQLite metastore (`store`) rather than the parametrised `ms` of tests/conftest.py, so each runs once;
the one PostgreSQL test asks for `postgres_url` itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark(s3_server) -> Iterator[SparkSession]:  # noqa: F821  (pyspark is imported lazily, only when a Spark test runs)
    """The session's Python workers inherit the JVM's environment, which is this process's when the session starts:
    the S3 server's is put there first, so tests with the warehouse on S3 (`s3_warehouse`) can share the session."""
    import os

    from spark_jobs.session import build_session

    os.environ.update(s3_server.environment)

    session = build_session("acid-tests", master="local[2]")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, when pytest has already
    # closed the captured stream it would write to ("--- Logging error ---" after the summary): keep it quiet.
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture
def store(tmp_path):
    """An initialised metastore on a SQLite file, with the warehouse in `tmp_path`; closed after the test."""
    from acid_core.metastore import Metastore

    metastore = Metastore(f"sqlite:///{tmp_path}/metastore.db", warehouse=str(tmp_path / "warehouse"))
    metastore.init()
    yield metastore
    metastore.close()
