"""Manual compaction requests (`ALTER TABLE t [PARTITION (...)] COMPACT ...`, the `acid_compact` DAG): which
partitions a request names, and what to say when it names one that does not exist.

One set of rules for `acid sql` and Airflow: a request without a partition on a partitioned table queues every
partition with something to compact, as Hive 4's `ALTER TABLE t COMPACT 'major'` does. Cost: one catalog read of
the table's partitions and one directory listing per partition (as the initiator lists a candidate).
"""

from __future__ import annotations

from collections.abc import Sequence

from acid_core.errors import NoSuchObjectError
from acid_core.locations import data_location
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.state import get_acid_state
from acid_core.validity import ValidWriteIdList

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
        NoSuchObjectError: it does not; the message lists the partitions that exist (the first PARTITIONS_SHOWN).
    """
    names = [p.name for p in metastore.catalog.list_partitions(table.database, table.name)]
    if name not in names:
        raise NoSuchObjectError(f"table {table.full_name} has no partition {name!r}; its partitions: "
                                f"{listed(names)}")
    return names
