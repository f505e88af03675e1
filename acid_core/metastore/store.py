"""`Metastore`: one handle on the metastore database and the stores over it; `default_warehouse`."""

from __future__ import annotations

import os
from pathlib import Path

from acid_core.metastore.catalog import Catalog
from acid_core.metastore.compactions import CompactionQueue
from acid_core.metastore.engine import DEFAULT_OUTAGE_SECONDS, Clock, Database, Identity, default_url
from acid_core.metastore.leases import ReaderLeases
from acid_core.metastore.locks import LockManager
from acid_core.metastore.streams import StreamCommits
from acid_core.metastore.txns import DEFAULT_MAX_OPEN_BATCH, DEFAULT_TXN_TIMEOUT_MS, TxnStore


def default_warehouse(acid_home: str | None = None) -> str:
    """`ACID_WAREHOUSE`, else `<ACID_HOME>/warehouse` (ACID_HOME defaults to `.acid-home`)."""
    if os.environ.get("ACID_WAREHOUSE"):
        location = os.environ["ACID_WAREHOUSE"]
        return location if "://" in location else os.path.abspath(location)
    return str(Path(acid_home or os.environ.get("ACID_HOME", ".acid-home")).resolve() / "warehouse")


class Metastore:
    """One handle on the metastore database and the stores over it."""

    def __init__(self, url: str | None = None, *, warehouse: str | None = None, clock: Clock | None = None,
                 identity: Identity | None = None, txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS,
                 max_open_batch: int = DEFAULT_MAX_OPEN_BATCH, pool_size: int = 5,
                 outage_seconds: float = DEFAULT_OUTAGE_SECONDS) -> None:
        self.db = Database(url or default_url(), clock=clock, identity=identity, pool_size=pool_size,
                           outage_seconds=outage_seconds)
        self.txns = TxnStore(self.db, txn_timeout_ms=txn_timeout_ms, max_open_batch=max_open_batch)
        self.locks = LockManager(self.db, self.txns)
        self.catalog = Catalog(self.db, warehouse or default_warehouse())
        self.compactions = CompactionQueue(self.db, self.catalog)
        self.leases = ReaderLeases(self.db, self.txns)
        self.streams = StreamCommits(self.db)

    @property
    def url(self) -> str:
        return self.db.url

    def init(self) -> int:
        """Create or upgrade the schema and the default database; idempotent. Returns the schema version."""
        version = self.db.init_schema()
        self.catalog.ensure_default_database()
        return version

    def close(self) -> None:
        self.db.dispose()
