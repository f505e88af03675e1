"""Tables for tests of the compaction queue's mechanics: the queue checks every entry against the catalog (an existing
full ACID table, a partition name of its keys), so these tests create the tables they queue compactions for."""

from __future__ import annotations

from acid_core.errors import NoSuchObjectError
from acid_core.format.layout import parse_partition_dir_name
from acid_core.metastore import Metastore

ACID = {"transactional": "true"}


def ensure_table(store: Metastore, database: str, table: str, partition: str | None) -> None:
    """Create `database.table` (and the database) unless it exists: partitioned by the keys of `partition`, if given."""
    try:
        store.catalog.get_table(database, table)
        return
    except NoSuchObjectError:
        pass
    store.catalog.create_database(database, if_not_exists=True)
    keys = [(key, "string") for key in parse_partition_dir_name(partition)] if partition else []
    store.catalog.create_table(database, table, [("id", "int")], partition_keys=keys, params=ACID, if_not_exists=True)


def creating_tables(store: Metastore) -> Metastore:
    """`store` whose `compactions.enqueue` first creates the table it names (see ensure_table)."""
    enqueue = store.compactions.enqueue

    def enqueue_creating(database, table, partition, *args, **kwargs):
        ensure_table(store, database, table, partition)
        return enqueue(database, table, partition, *args, **kwargs)

    store.compactions.enqueue = enqueue_creating
    return store
