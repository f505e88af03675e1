"""Hive 4's compaction pools: which pool a compaction request belongs to, and the names a pool may have.

Hive's rules (Initiator and CompactorUtil.getPoolName, AlterTableCompactOperation): a request made with `ALTER TABLE
... COMPACT ... POOL 'name'` is in that pool; any other request is in the pool named by the table property
`hive.compactor.worker.pool`, else by the database property of that name, else in the "default" pool. A labelled
pool's workers take only its requests; the default pool's workers take the rest (`hive.compactor.worker.<name>
.threads` / `hive.compactor.worker.threads`). Here a deployment names its labelled pools in ACID_COMPACTION_POOLS
and each gets a worker DAG and an Airflow pool of its own.

Names are checked (letters, digits, `_`, `-`, `.`; 1 to 128 characters, CQ_POOL_NAME's width) so that a pool can
name an Airflow DAG and pool. Imports nothing heavy: DAG files use it at parse time. Cost: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from acid_core import settings
from acid_core.errors import InvalidPoolNameError, UsageError

DEFAULT_POOL = "default"  # Hive's implicit pool of requests without one
# the registry gives these settings a property key, an environment variable and an upper bound
assert settings.COMPACTION_POOL.property_key is not None and settings.COMPACTION_POOLS.env_var is not None
assert settings.WORKER_THREADS.bounds is not None and settings.WORKER_THREADS.bounds.maximum is not None
# table or database property (Hive's Constants.HIVE_COMPACTOR_WORKER_POOL)
POOL_PROPERTY: str = settings.COMPACTION_POOL.property_key
# the labelled pools a deployment runs workers for: "etl,hot:4"
POOLS_VARIABLE: str = settings.COMPACTION_POOLS.env_var
MAX_POOL_NAME = settings.COMPACTION_POOL.max_length  # COMPACTION_QUEUE.CQ_POOL_NAME
MAX_POOL_SLOTS = int(settings.WORKER_THREADS.bounds.maximum)  # a pool's slots are worker threads
# Hive's pool timeout (metastore.compactor.worker.pool.timeout): a labelled pool's request still waiting after this
# long is taken by the default pool's workers too, so a stopped or starved pool does not hold it for ever.
POOL_TIMEOUT_MS = settings.POOL_TIMEOUT.default_ms
# What a pool name may be (unanchored): the one rule `check_pool_name` applies and the DAGs' trigger forms use.
POOL_NAME_PATTERN = rf"[A-Za-z0-9_.-]{{1,{MAX_POOL_NAME}}}"
_NAME = re.compile(POOL_NAME_PATTERN)


@dataclass(frozen=True, slots=True)
class PoolSetting:
    """A labelled pool of ACID_COMPACTION_POOLS and its slots (None: the deployment's worker-thread count)."""

    name: str
    slots: int | None = None


def check_pool_name(name: object, *, what: str = "compaction pool name") -> str:
    """`name` when it may name a compaction pool; returns it unchanged (pool names are case-sensitive, as Hive's).

    Raises:
        InvalidPoolNameError: not 1 to 128 letters, digits, `_`, `-` or `.` (the message names the value).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidPoolNameError(f"{what} {name!r} is not valid: use 1 to {MAX_POOL_NAME} letters, digits, "
                                   "'_', '-' or '.'")
    return name


def _find(params: Mapping[str, str], key: str) -> str | None:
    return next((value for name, value in params.items() if name.lower() == key), None)


def pool_of(table_params: Mapping[str, str], database_params: Mapping[str, str] | None = None, *,
            table: str = "table") -> str | None:
    """Hive's getPoolName: the table's non-blank `hive.compactor.worker.pool`, else the database's; None (the
    default pool) when neither has one. Keys match case-insensitively, as the catalog's do.

    Raises:
        InvalidPoolNameError: the property chosen holds a name no pool may have (naming `table` and the value).
    """
    for what, params in ((f"table {table}", table_params), ("its database", database_params or {})):
        value = _find(params, POOL_PROPERTY)
        if value is not None and value.strip():
            return check_pool_name(value, what=f"{what}: property {POOL_PROPERTY!r} =")
    return None


def parse_pools(text: str | None, *, variable: str = POOLS_VARIABLE) -> tuple[PoolSetting, ...]:
    """The labelled pools of a comma-separated list of `name` or `name:slots` (ACID_COMPACTION_POOLS), in order.

    Raises:
        UsageError: a malformed entry, an invalid or repeated name, the name "default" (the default pool is always
            there), or slots outside 1..1024; the message names `variable` and the entry.
    """
    found: list[PoolSetting] = []
    for entry in (text or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, colon, slots_text = entry.partition(":")
        name = name.strip()
        try:
            check_pool_name(name)
        except InvalidPoolNameError as exc:
            raise UsageError(f"{variable}: {exc}") from None
        if name == DEFAULT_POOL:
            raise UsageError(f"{variable}: {name!r} is the default pool, which acid_worker always serves; list only "
                             "labelled pools")
        if any(pool.name == name for pool in found):
            raise UsageError(f"{variable}: pool {name!r} is listed twice")
        slots = None
        if colon:
            slots_text = slots_text.strip()
            if not (slots_text.isascii() and slots_text.isdigit()) or not 1 <= int(slots_text) <= MAX_POOL_SLOTS:
                raise UsageError(f"{variable}: the slots of pool {name!r} must be a whole number in "
                                 f"1..{MAX_POOL_SLOTS}, got {slots_text!r}")
            slots = int(slots_text)
        found.append(PoolSetting(name, slots))
    return tuple(found)
