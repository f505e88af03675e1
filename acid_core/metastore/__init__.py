"""The ACID metastore: transactions, write ids, locks, the compaction queue, reader leases, streaming queries' batches
and the table catalog.

`Metastore` (acid_core/metastore/store.py) bundles them over one database (PostgreSQL in production, SQLite
embedded). The schema lives in `sql/`.

The package's own names load when first used (PEP 562): a process that needs only the value types of a submodule
(`codes`, for example, in a Spark executor's Python worker running a compaction task) imports neither SQLAlchemy nor
the stores.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acid_core.metastore.engine import default_url
    from acid_core.metastore.store import Metastore, default_warehouse

_HOMES = {"Metastore": "acid_core.metastore.store", "default_warehouse": "acid_core.metastore.store",
          "default_url": "acid_core.metastore.engine"}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = ["Metastore", "default_url", "default_warehouse"]
