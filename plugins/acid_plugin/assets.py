"""The Airflow Assets that chain the maintenance DAGs (light: DAG files import this at parse time).

An `acid_initiator` poll that queued a compaction emits an event on `QUEUED`; the `acid_worker` DAG is scheduled on it
as well as on its timer, so a queued compaction starts soon after the poll (Hive's Initiator and Workers are separate
threads that meet only in the compaction queue). A compaction task that finishes (its queue entry is `ready for
cleaning`) emits an event on `COMPACTED`; the `acid_cleaner` DAG is scheduled on it as well as on its timer, so
obsolete directories go soon after a compaction.
"""

from airflow.sdk import Asset

QUEUED = Asset(name="acid_compaction_queued", uri="acid://metastore/compactions/initiated", group="acid")
COMPACTED = Asset(name="acid_compacted", uri="acid://metastore/compactions/ready-for-cleaning", group="acid")
