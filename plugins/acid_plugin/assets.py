"""The Airflow Assets that chain the maintenance DAGs (light: DAG files import this at parse time).

A compaction task that finishes (its queue entry is `ready for cleaning`) emits an event on `COMPACTED`; the
`acid_cleaner` DAG is scheduled on it as well as on its timer, so obsolete directories go soon after a compaction.
"""

from airflow.sdk import Asset

COMPACTED = Asset(name="acid_compacted", uri="acid://metastore/compactions/ready-for-cleaning", group="acid")
