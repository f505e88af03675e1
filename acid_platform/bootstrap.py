"""The idempotent set-up of `make run`: airflow.cfg, Airflow's metadata DB, the connections `acid_metastore` and
`spark_default`, the pool `acid_compaction` (and `acid_compaction_<name>` for each compaction pool of
ACID_COMPACTION_POOLS) and the demo tables. It imports Airflow, so it runs in a process of its own
(`python -m acid_platform --setup-only`) that has the platform's environment before Airflow reads its
configuration."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from acid_core.errors import UsageError
from acid_core.metastore.engine import redact, split_credentials
from acid_platform.settings import (
    METASTORE_CONN_ID,
    POOL,
    SHADOWING_VARIABLES,
    SPARK_CONN_ID,
    SPARK_MASTER,
    Settings,
    platform_environment,
    prepare_home,
)


def _check_airflow_home(settings: Settings) -> None:
    if "airflow" in sys.modules:
        from airflow.configuration import AIRFLOW_HOME

        if Path(AIRFLOW_HOME).resolve() != settings.airflow_home.resolve():
            raise UsageError(f"Airflow was already imported with AIRFLOW_HOME={AIRFLOW_HOME}; run the set-up in a "
                             f"fresh process (python -m acid_platform --setup-only)")


def _upsert_connection(session, conn_id: str, *, conn_type: str, host: str, extra: dict, description: str,
                       login: str | None = None, password: str | None = None) -> None:
    """Create the connection or overwrite every field of the existing one (idempotent); a password goes in the
    password field (masked by Airflow), never in the host."""
    import sqlalchemy as sa
    from airflow.models import Connection

    connection = session.scalar(sa.select(Connection).where(Connection.conn_id == conn_id))
    if connection is None:
        connection = Connection(conn_id=conn_id)
        session.add(connection)
    connection.conn_type = conn_type
    connection.description = description
    connection.host = host
    connection.login, connection.password = login, password
    connection.schema = None
    connection.port = None
    connection.extra = json.dumps(extra)


def set_up(settings: Settings) -> dict:
    """Initialise Airflow's DB, the connections, the pool and the demo warehouse; idempotent. Returns a report.

    Applies `platform_environment` to this process first, so Airflow must not have been imported yet (or with the
    same AIRFLOW_HOME); run it in a process of its own (`python -m acid_platform --setup-only`).
    """
    os.environ.update(platform_environment(settings))
    for name in SHADOWING_VARIABLES:
        os.environ.pop(name, None)
    _check_airflow_home(settings)
    prepare_home(settings)

    from airflow.configuration import conf, write_default_airflow_configuration_if_needed

    write_default_airflow_configuration_if_needed()  # airflow.cfg with the fernet key and JWT secret, as `airflow` does
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
    from airflow.models import Pool
    from airflow.utils import db
    from airflow.utils.session import create_session

    db.upgradedb()  # `airflow db migrate`: creates a new DB from the ORM, upgrades an old one
    with create_session() as session:
        url, login, password = split_credentials(settings.metastore_url)
        _upsert_connection(session, METASTORE_CONN_ID, conn_type="generic", host=url, login=login, password=password,
                           extra={"warehouse": settings.warehouse},
                           description="ACID metastore (SQLAlchemy URL in host, credentials in login and password) "
                                       "and warehouse, made by make run")
        _upsert_connection(session, SPARK_CONN_ID, conn_type="spark", host=SPARK_MASTER,
                           extra={"deploy-mode": "client", "spark-binary": "spark-submit"},
                           description="Spark in local mode for the compaction jobs, made by make run")
        for name, slots in settings.airflow_pools.items():
            label = name[len(POOL) + 1:]  # a labelled compaction pool's name, "" for the default pool
            threads = f"hive.compactor.worker.{label}.threads" if label else "hive.compactor.worker.threads"
            Pool.create_or_update_pool(name, slots=slots, description=f"{threads}: at most {slots} compaction(s) "
                                       "at once", include_deferred=False, session=session)

    from acid_core.metastore import Metastore
    from acid_platform.demo import create_demo_tables

    store = Metastore(settings.metastore_url, warehouse=settings.warehouse)
    try:
        store.init()
        tables = create_demo_tables(store)
    finally:
        store.close()
    return {
        "airflow_home": str(settings.airflow_home),
        "airflow_db": conf.get("database", "sql_alchemy_conn"),
        "metastore_url": redact(settings.metastore_url),
        "warehouse": settings.warehouse,
        "connections": [METASTORE_CONN_ID, SPARK_CONN_ID],
        "pool": {"name": POOL, "slots": settings.worker_threads},
        "pools": settings.airflow_pools,
        "tables": tables,
        "passwords_file": SimpleAuthManager.get_generated_password_file(),
        "users": [user.username for user in SimpleAuthManager.get_users()],
        "all_admins": conf.getboolean("core", "simple_auth_manager_all_admins"),
    }
