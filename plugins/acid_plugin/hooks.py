"""`AcidMetastoreHook`: turn an Airflow connection into an `acid_core.metastore.Metastore`.

The database is named either by a whole SQLAlchemy URL in the connection's `host` without credentials
(`sqlite:////data/metastore.db`, `postgresql+psycopg2://db.example:5432/acid_metastore`), or by the connection's fields
(`host`, `port`, `schema` = the database, the driver in the extra's `driver`, default `postgresql+psycopg2`). Either
way the user name and password come from the connection's `login` and `password` fields, which Airflow masks; a host
URL that holds a password is refused (Airflow shows the host as it is, in the UI and the REST API). The warehouse
directory comes from the extra `{"warehouse": "..."}`, else from ACID_WAREHOUSE / ACID_HOME like the CLI.

A warehouse on S3 (or an S3-compatible store) takes its credentials from the Airflow connection named by the extra's
`aws_conn_id` (the amazon provider's `aws` type: login = access key id, password = secret access key, extra
`region_name`, `endpoint_url`, `aws_session_token`), else from the usual AWS chain of the process (environment,
profile, instance or pod role). They reach pyarrow through the task process's environment and spark-submit's, never
a command line, a URL or a log line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.hook import BaseHook

if TYPE_CHECKING:
    from acid_core.metastore import Metastore


class AcidMetastoreHook(BaseHook):
    """Builds a `Metastore` over the database named by an Airflow connection (default `acid_metastore`)."""

    conn_name_attr = "acid_metastore_conn_id"
    default_conn_name = "acid_metastore"
    conn_type = "generic"
    hook_name = "ACID metastore"

    def __init__(self, acid_metastore_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.acid_metastore_conn_id = acid_metastore_conn_id

    def get_url(self) -> str:
        """The SQLAlchemy URL, with the login and password of the connection's own fields (never logged).

        Raises:
            MetastoreError: the host is a URL that holds a password, or no URL can be made of the connection.
        """
        import sqlalchemy as sa

        from acid_core.errors import MetastoreError
        from acid_core.metastore.engine import with_credentials

        conn = self.get_connection(self.acid_metastore_conn_id)
        where = f"connection {self.acid_metastore_conn_id!r}"
        if conn.host and "://" in conn.host:
            try:
                return with_credentials(conn.host, conn.login, conn.password)
            except MetastoreError as exc:
                raise MetastoreError(f"{where}: {exc}") from None
        if not conn.host:
            raise MetastoreError(f"{where} names no database: set its host to a SQLAlchemy URL (sqlite:////path/"
                                 "metastore.db) or to the PostgreSQL server, with schema = the database name")
        driver = str(conn.extra_dejson.get("driver") or "postgresql+psycopg2")
        return sa.engine.URL.create(driver, username=conn.login or None, password=conn.password or None,
                                    host=conn.host, port=conn.port or None, database=conn.schema or None
                                    ).render_as_string(hide_password=False)

    def get_warehouse(self) -> str:
        """The extra's `warehouse`, else `acid_core.metastore.default_warehouse()` (ACID_WAREHOUSE / ACID_HOME)."""
        from acid_core.metastore import default_warehouse

        conn = self.get_connection(self.acid_metastore_conn_id)
        warehouse = conn.extra_dejson.get("warehouse")
        return str(warehouse) if warehouse else default_warehouse()

    def object_store_env(self) -> dict[str, str]:
        """The AWS environment of the connection named by the extra's `aws_conn_id` ({} without one): what pyarrow's
        S3 filesystem and spark-submit's driver read.

        Raises:
            MetastoreError: `aws_conn_id` names no usable connection, or one without both keys.
        """
        from acid_core.errors import MetastoreError

        conn = self.get_connection(self.acid_metastore_conn_id)
        aws_conn_id = conn.extra_dejson.get("aws_conn_id")
        if not aws_conn_id:
            return {}
        try:
            aws = self.get_connection(str(aws_conn_id))
        except Exception as exc:  # Airflow raises its own not-found error type, which differs between versions
            raise MetastoreError(f"connection {self.acid_metastore_conn_id!r}: its aws_conn_id {aws_conn_id!r} "
                                 f"names no connection ({type(exc).__name__})") from None
        extra = aws.extra_dejson
        key_id = aws.login or extra.get("aws_access_key_id")
        secret = aws.password or extra.get("aws_secret_access_key")
        if bool(key_id) != bool(secret):
            raise MetastoreError(f"connection {aws_conn_id!r}: give both the access key id (login) and the secret "
                                 "access key (password), or neither to use the instance's credentials")
        service = (extra.get("service_config") or {}).get("s3") or {}
        endpoint = extra.get("endpoint_url") or service.get("endpoint_url") or aws.host
        values = {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
                  "AWS_SESSION_TOKEN": extra.get("aws_session_token"),
                  "AWS_DEFAULT_REGION": extra.get("region_name"), "AWS_REGION": extra.get("region_name"),
                  "AWS_ENDPOINT_URL_S3": endpoint}
        return {name: str(value) for name, value in values.items() if value}

    def get_metastore(self, **options: Any) -> Metastore:
        """A new `Metastore` (`options` such as `txn_timeout_ms` go to it); the caller closes it. The connection's
        object-store credentials (`object_store_env`) are put in this process's environment first, where pyarrow and
        the spark-submit processes this task starts find them."""
        import os

        from acid_core.metastore import Metastore

        os.environ.update(self.object_store_env())
        return Metastore(self.get_url(), warehouse=self.get_warehouse(), **options)

    @contextlib.contextmanager
    def metastore(self, **options: Any) -> Iterator[Metastore]:
        """`with hook.metastore() as metastore:` — a new `Metastore`, closed when the block ends; the metastore
        outages it waited out meanwhile are counted (`acid.metastore_retries`, `acid.metastore_unavailable`)."""
        from acid_core.metastore.engine import outage_counts
        from acid_plugin.metrics import emit_metastore_outages

        before = outage_counts()
        store = self.get_metastore(**options)
        try:
            yield store
        finally:
            store.close()
            emit_metastore_outages(before)

    def get_conn(self) -> Metastore:
        """Same as `get_metastore()`, for Airflow's generic hook interface."""
        return self.get_metastore()
