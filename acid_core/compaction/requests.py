"""Manual compaction requests (`ALTER TABLE t [PARTITION (...)] COMPACT ...`, the `acid_compact` DAG): the checks
every front end makes (`check_request`), which partitions a request names, and what to say when it names one that
does not exist.

One set of rules for `acid sql` and Airflow (Hive's AlterTableCompactOperation): the table must be full ACID, the
type one a request may name, CLUSTERED INTO n BUCKETS a rebalance's only and a rebalance an unbucketed table's, the
partition one the table has; a request without a partition on a partitioned table queues every partition with
something to compact, as Hive 4's `ALTER TABLE t COMPACT 'major'` does. Cost: one catalog read of the table's
partitions and, without a partition, one directory listing per partition (as the initiator lists a candidate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from acid_core.errors import InvalidPropertyError, MetastoreError, NoSuchPartitionError, UsageError
from acid_core.format.layout import parse_partition_dir_name
from acid_core.format.validity import ValidWriteIdList
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.codes import REBALANCE_BUCKETED_MESSAGE, CompactionType, check_number_of_buckets
from acid_core.metastore.locations import data_location
from acid_core.metastore.pools import check_pool_name
from acid_core.metastore.properties import spark_conf_of
from acid_core.read.state import get_acid_state

PARTITIONS_SHOWN = 20  # how many of a table's partitions an "unknown partition" message lists


def partitions_to_compact(metastore: Metastore, table: TableInfo) -> list[str]:
    """The partitions of partitioned `table` with something to compact: more than one base or delta directory, or
    original (pre-ACID) files, whatever their write ids (Hive's ALTER TABLE ... COMPACT without a partition)."""
    names = []
    everything = ValidWriteIdList.parse(f"{table.full_name}:9223372036854775807:9223372036854775807::")
    for partition in metastore.catalog.list_partitions(table.database, table.name):
        where = data_location(table, partition.name)
        state = get_acid_state(where.path, write_ids=everything, missing_ok=True, fs=where.fs)
        if len(state.deltas) + (1 if state.base else 0) > 1 or state.original_files:
            names.append(partition.name)
    return names


def listed(names: Sequence[str], *, limit: int = PARTITIONS_SHOWN) -> str:
    """`a, b, c` or `a, b, ... and 7 more` (at most `limit` names), or `none`."""
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else shown


def require_partition(metastore: Metastore, table: TableInfo, name: str) -> list[str]:
    """Check that partition `name` (canonical, `TableInfo.partition_name`) of `table` exists; returns the table's
    partition names.

    Raises:
        NoSuchPartitionError: it does not; the message lists the partitions that exist (the first PARTITIONS_SHOWN),
            the error all of them.
    """
    names = [p.name for p in metastore.catalog.list_partitions(table.database, table.name)]
    if name not in names:
        raise NoSuchPartitionError(f"table {table.full_name} has no partition {name!r}; its partitions: "
                                   f"{listed(names)}", names)
    return names


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """A checked manual compaction request: what `CompactionQueue.enqueue` is called with for each of `targets` (the
    partitions to queue; `(None,)` for an unpartitioned table; empty when no partition has anything to compact)."""

    table: TableInfo
    compaction_type: CompactionType
    targets: tuple[str | None, ...]
    number_of_buckets: int | None = None
    pool: str | None = None
    properties: dict[str, str] | None = None


def check_request(metastore: Metastore, database: str, table: str, compaction_type: str | CompactionType, *,
                  partition: Mapping[str, object] | str | None = None, number_of_buckets: int | None = None,
                  pool: str | None = None, properties: Mapping[str, object] | None = None,
                  compaction_settings_only: bool = False) -> CompactionRequest:
    """A manual compaction request checked as every front end checks it, with the partitions it queues.

    Args:
        partition: a partition spec (`{key: value}`) or name (`k=v/...`, as Hive escapes values); None: the whole
            table.
        properties: the request's WITH OVERWRITE TBLPROPERTIES; `compactor.spark.<name>` and the job queue are
            checked (`spark_conf_of`); with `compaction_settings_only` any other key is refused too.

    Raises:
        UsageError: an unknown type, CLUSTERED INTO n BUCKETS out of range or for a type other than rebalance, a
            rebalance of a bucketed table, a pool name no pool may have (InvalidPoolNameError).
        InvalidPropertyError: a property the request may not set, or a value it may not have.
        NoSuchObjectError: an unknown database or table; NoSuchPartitionError: an unknown partition.
        NotTransactionalError, MetastoreError: not a full ACID table; a partition given for an unpartitioned table,
            or one that does not give the table's partition keys.
    """
    kind = compaction_type if isinstance(compaction_type, CompactionType) else CompactionType.parse(compaction_type)
    check_number_of_buckets(kind, number_of_buckets)
    if pool is not None:
        check_pool_name(pool)
    overwrite = {str(key): str(value) for key, value in (properties or {}).items()}
    for key, value in overwrite.items():
        if spark_conf_of(key, value, what="compaction request") is None and compaction_settings_only:
            raise InvalidPropertyError(f"compaction request property {key!r} is not a compaction setting "
                                       "(compactor.spark.<setting> or compactor.hive.compactor.job.queue)")
    info = metastore.catalog.require_transactional(database, table)
    if kind is CompactionType.REBALANCE and info.num_buckets > 0:
        raise UsageError(f"cannot rebalance {info.full_name}: {REBALANCE_BUCKETED_MESSAGE}")
    if partition is not None and not info.partition_keys:
        raise MetastoreError(f"table {info.full_name} is not partitioned, got partition "
                             f"{partition if isinstance(partition, str) else dict(partition)!r}")
    targets: tuple[str | None, ...]
    if partition is not None:
        spec = parse_partition_dir_name(partition) if isinstance(partition, str) else partition
        name = info.partition_name(spec)
        assert name is not None  # a partitioned table's (checked above) spec names a partition or raises
        require_partition(metastore, info, name)
        targets = (name,)
    elif info.partition_keys:
        targets = tuple(partitions_to_compact(metastore, info))
    else:
        targets = (None,)
    return CompactionRequest(info, kind, targets, number_of_buckets, pool, overwrite or None)
