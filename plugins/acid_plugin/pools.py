"""Hive's compaction pools on Airflow: the labelled pools a deployment runs (ACID_COMPACTION_POOLS), and the worker DAG
and Airflow pool of each.

Airflow cannot give mapped task instances different pools (apache/airflow#33657), so each labelled pool gets a worker
DAG of its own, `acid_worker_<name>`, whose `compact` tasks run in the Airflow pool `acid_compaction_<name>`; the
`acid_worker` DAG, in `acid_compaction`, serves the "default" pool and every pool not listed. Light: DAG files import
it at parse time (the environment only; no database).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from acid_core.errors import UsageError
from acid_core.metastore.pools import DEFAULT_POOL, POOLS_VARIABLE, PoolSetting, parse_pools
from acid_plugin.operators import COMPACTION_POOL

WORKER_DAG = "acid_worker"


def configured_pools(environ: Mapping[str, str] | None = None) -> tuple[PoolSetting, ...]:
    """The labelled pools of ACID_COMPACTION_POOLS (`name` or `name:slots`, comma-separated), in order.

    Raises:
        ValueError: naming the variable and the bad entry, so the DAG file's import error says what to fix.
    """
    environ = os.environ if environ is None else environ
    try:
        return parse_pools(environ.get(POOLS_VARIABLE))
    except UsageError as exc:
        raise ValueError(f"environment variable {exc}") from None


def airflow_pool(pool: str | None) -> str:
    """The Airflow pool a compaction of `pool` runs in: `acid_compaction` for the default pool (None or "default"),
    `acid_compaction_<name>` for a labelled one."""
    return COMPACTION_POOL if pool in (None, DEFAULT_POOL) else f"{COMPACTION_POOL}_{pool}"


def worker_dag_id(pool: str | None) -> str:
    """`acid_worker` for the default pool, `acid_worker_<name>` for a labelled one."""
    return WORKER_DAG if pool in (None, DEFAULT_POOL) else f"{WORKER_DAG}_{pool}"
