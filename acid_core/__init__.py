"""Hive-ACID-compatible storage core, in rooms that import only the rooms below them (import-linter's layers
contract in pyproject.toml checks this):

- `operations`: what operators look at and run beside compaction: health, metrics, alerts, housekeeping;
- `compaction`: Hive's initiator, worker, cleaner and their plans;
- `write`: the table handle (`write.table.AcidTable`), one write transaction (`write.table_write`), the one publish
  step (`write.publish`), the embedded and streaming writers;
- `read`: directory state, read plans, merge-on-read, partition pruning;
- `metastore`: transactions, write ids, locks, the compaction queue and its vocabulary, reader leases, the catalog
  and where a table's files live;
- `format`: Hive's names, ROW__IDs, validity lists, types, ORC event files and bucketing;
- `storage`: the file systems (local, HDFS, object stores).

`errors` and `settings` (the settings registry) serve every room. Engine- and orchestrator-agnostic: this package
imports neither pyspark nor airflow; Spark deployment (code shipping, job settings, the spark-submit launcher) is
`acid_deploy`.
"""
