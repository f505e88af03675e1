"""The Spark tests' metastore (the local Spark session, `spark`, is tests/conftest.py's).

Spark tests use a SQLite metastore (`store`) rather than the parametrised `ms` of tests/conftest.py, so each runs once;
the one PostgreSQL test asks for `postgres_url` itself.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def store(tmp_path):
    """An initialised metastore on a SQLite file, with the warehouse in `tmp_path`; closed after the test."""
    from acid_core.metastore import Metastore

    metastore = Metastore(f"sqlite:///{tmp_path}/metastore.db", warehouse=str(tmp_path / "warehouse"))
    metastore.init()
    yield metastore
    metastore.close()
