"""The Airflow Assets that chain the maintenance DAGs (light: DAG files import this at parse time).

An `acid_initiator` poll that queued a compaction emits an event on `QUEUED`; the `acid_worker` DAG is scheduled on it
as well as on its timer, so a queued compaction starts soon after the poll (Hive's Initiator and Workers are separate
threads that meet only in the compaction queue). A compaction task that finishes (its queue entry is `ready for
cleaning`) emits an event on `COMPACTED`; the `acid_cleaner` DAG is scheduled on it as well as on its timer, so
obsolete directories go soon after a compaction. The same task emits, through the alias `COMPACTED_TABLES`, an event
on the table's own asset (`table_asset`), so a DAG can wait for one table: `schedule=[table_asset("demo", "sales")]`.
Both events carry `{"database", "table", "partition", "compaction_id", "type"}` in their `extra`.
"""

from airflow.sdk import Asset, AssetAlias

QUEUED = Asset(name="acid_compaction_queued", uri="acid://metastore/compactions/initiated", group="acid")
COMPACTED = Asset(name="acid_compacted", uri="acid://metastore/compactions/ready-for-cleaning", group="acid")
COMPACTED_TABLES = AssetAlias(name="acid_compacted_tables", group="acid")


def table_asset(database: str, table: str) -> Asset:
    """The asset of one table's compactions: name `acid_compacted.<db>.<table>`, URI
    `acid://metastore/tables/<db>.<table>` (names as the metastore stores them: lower case)."""
    database, table = database.lower(), table.lower()
    return Asset(name=f"acid_compacted.{database}.{table}", uri=f"acid://metastore/tables/{database}.{table}",
                 group="acid")
