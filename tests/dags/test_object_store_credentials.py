"""A warehouse on S3 takes its credentials from an Airflow connection (the `aws` type, named by the `acid_metastore`
extra's `aws_conn_id`): they reach the compaction's spark-submit through its environment, never its command line.
The spark-submit here is a real executable first on PATH that records its arguments and environment and starts
nothing (so the task fails, as a job that died before its driver ran)."""

from __future__ import annotations

import json

import pytest
from support.dag_support import COLUMNS, insert

pytestmark = pytest.mark.airflow

SECRET = "s3cr3t-Access-Key-Value"


def _point_at_credentials(monkeypatch, metastore_url: str, warehouse: str, aws_conn_id: str) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ACID_METASTORE", json.dumps(
        {"conn_type": "generic", "host": metastore_url,
         "extra": {"warehouse": warehouse, "aws_conn_id": aws_conn_id}}))


def test_credentials_of_the_aws_connection_reach_spark_submit_by_environment_only(
        acid_connection, metastore_url, warehouse, make_ms, dagbag, recording_spark_submit, monkeypatch, caplog):
    from acid_core.metastore.codes import CompactionType

    monkeypatch.setenv("AIRFLOW_CONN_AWS_WAREHOUSE", json.dumps(
        {"conn_type": "aws", "login": "AKIATESTKEYID", "password": SECRET,
         "extra": {"region_name": "eu-west-3", "endpoint_url": "http://127.0.0.1:9"}}))
    _point_at_credentials(monkeypatch, metastore_url, warehouse, "aws_warehouse")
    ms = make_ms(warehouse=warehouse)
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"})
    insert(ms, "t", None, [(1, "a")])
    insert(ms, "t", None, [(2, "b")])
    ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR)

    dagbag.get_dag("acid_worker").test(run_conf={"max_compactions": 100})

    env = recording_spark_submit.env
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == ("AKIATESTKEYID", SECRET)
    assert (env["AWS_DEFAULT_REGION"], env["AWS_ENDPOINT_URL_S3"]) == ("eu-west-3", "http://127.0.0.1:9")
    assert not [arg for arg in recording_spark_submit.argv if SECRET in arg]
    assert SECRET not in caplog.text


def test_an_unknown_or_half_aws_connection_is_refused_by_name(acid_connection, metastore_url, warehouse,
                                                               monkeypatch):
    from acid_plugin.hooks import AcidMetastoreHook

    from acid_core.errors import MetastoreError

    _point_at_credentials(monkeypatch, metastore_url, warehouse, "aws_missing")
    with pytest.raises(MetastoreError, match="aws_conn_id 'aws_missing' names no connection"):
        AcidMetastoreHook().object_store_env()
    monkeypatch.setenv("AIRFLOW_CONN_AWS_HALF", json.dumps({"conn_type": "aws", "login": "AKIAONLYTHEID"}))
    _point_at_credentials(monkeypatch, metastore_url, warehouse, "aws_half")
    with pytest.raises(MetastoreError, match="connection 'aws_half': give both the access key id"):
        AcidMetastoreHook().object_store_env()
