"""A task's metastore waits out an outage and counts it: `acid.metastore_retries` reaches StatsD through Airflow's own
Stats when a task's `AcidMetastoreHook().metastore()` block retried an operation (PostgreSQL ended every connection
of the database under it, as a server restart does)."""

from __future__ import annotations

import json

import psycopg2
import pytest
import sqlalchemy as sa
from support.statsd_support import StatsdListener, metrics_to

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def statsd():
    listener = StatsdListener()
    with metrics_to(listener):
        yield listener
    listener.close()


def test_an_outage_waited_out_under_a_task_is_counted(airflow_db, postgres_url, postgres_server, tmp_path,
                                                      monkeypatch, caplog, statsd):
    from acid_plugin.hooks import AcidMetastoreHook

    monkeypatch.setenv("AIRFLOW_CONN_ACID_METASTORE", json.dumps(
        {"conn_type": "generic", "host": postgres_url, "extra": {"warehouse": str(tmp_path / "warehouse")}}))
    database = sa.engine.make_url(postgres_url).database
    retries_before = statsd.count("acid.metastore_retries")
    with caplog.at_level("WARNING", logger="acid_core.metastore"):
        with AcidMetastoreHook().metastore() as ms:
            ms.init()
            txn_id = ms.txns.open_txn()
            admin = psycopg2.connect(host="127.0.0.1", port=postgres_server.port, user="acid", dbname="postgres")
            admin.autocommit = True
            try:
                with admin.cursor() as cursor:  # every pooled connection of the task ends, as in a restart
                    cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                                   (database,))
            finally:
                admin.close()
            ms.txns.commit(txn_id)  # on a dead connection: retried on a new one, committed once
            assert ms.txns.show_transactions() == []
        assert statsd.count("acid.metastore_retries") >= retries_before + 1
        assert statsd.count("acid.metastore_unavailable") == 0
    messages = [r.getMessage() for r in caplog.records]
    assert any("metastore available again" in m for m in messages), messages
