"""`AcidMetastoreHook`: turn an Airflow connection into an `acid_core.metastore.Metastore`.

The connection's `host` may hold a whole SQLAlchemy URL (`sqlite:////data/metastore.db`), otherwise the connection's
URI is used (`postgresql://user:password@host:5432/acid_metastore`). The warehouse directory comes from the extra
`{"warehouse": "..."}`, else from ACID_WAREHOUSE / ACID_HOME like the CLI.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator

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
        """The SQLAlchemy URL: the connection's `host` when it is a whole URL, else the connection's URI."""
        conn = self.get_connection(self.acid_metastore_conn_id)
        if conn.host and "://" in conn.host:
            return conn.host
        return conn.get_uri()

    def get_warehouse(self) -> str:
        """The extra's `warehouse`, else `acid_core.metastore.default_warehouse()` (ACID_WAREHOUSE / ACID_HOME)."""
        from acid_core.metastore import default_warehouse

        conn = self.get_connection(self.acid_metastore_conn_id)
        warehouse = conn.extra_dejson.get("warehouse")
        return str(warehouse) if warehouse else default_warehouse()

    def get_metastore(self, **options: Any) -> Metastore:
        """A new `Metastore` (`options` such as `txn_timeout_ms` go to it); the caller closes it."""
        from acid_core.metastore import Metastore

        return Metastore(self.get_url(), warehouse=self.get_warehouse(), **options)

    @contextlib.contextmanager
    def metastore(self, **options: Any) -> Iterator[Metastore]:
        """`with hook.metastore() as metastore:` — a new `Metastore`, closed when the block ends."""
        store = self.get_metastore(**options)
        try:
            yield store
        finally:
            store.close()

    def get_conn(self) -> Metastore:
        """Same as `get_metastore()`, for Airflow's generic hook interface."""
        return self.get_metastore()
