"""Transactional tables written through acid_core's embedded writer, and acid_core's own read of them: what the Spark
read tests (tests/spark_jobs/test_read.py, test_datasource_read.py) compare Spark's rows with.

`Table` creates `default.<name>` and writes it one metastore transaction at a time (committed, aborted as a killed
writer's transaction is, or left open); `expected_rows` reads every partition with `acid_core.read.merge.read_snapshot`
under the snapshot `read_table` would take, as Spark rows (`spark_rows`) read (Hive's default partition as NULL).
Imported as `support.read_tables`.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from acid_core.format.layout import DEFAULT_PARTITION_NAME
from acid_core.format.rowid import RowId
from acid_core.metastore import Metastore
from acid_core.read.merge import read_snapshot
from acid_core.write.table import AcidTable

COLUMNS = [("id", "bigint"), ("name", "string"), ("amount", "double")]
_KEY_TYPES = {"int": int, "bigint": int, "string": str}


class Table:
    """A transactional table in the catalog, written through acid_core's embedded writer in metastore transactions."""

    def __init__(self, store: Metastore, name: str, columns=COLUMNS, *, partition_keys=(), bucket_columns=(),
                 num_buckets=None, stripe_rows=1_000_000) -> None:
        self.store = store
        self.info = store.catalog.create_table("default", name, columns, partition_keys=partition_keys,
                                               bucket_columns=bucket_columns, num_buckets=num_buckets,
                                               params={"transactional": "true"})
        self.stripe_rows = stripe_rows

    @contextmanager
    def transaction(self, outcome: str = "commit", partition=None):
        """Yields one write (`AcidTable.new_write`); then commits it, aborts it as a killed writer's transaction is
        aborted (its files stay) or (outcome "open") leaves it open."""
        write = AcidTable(self.store, self.info).new_write(agent_info="test writer", partition=partition,
                                                           stripe_rows=self.stripe_rows)
        self.last_txn_id = write.txn_id
        yield write
        if outcome == "commit":
            write.commit()
        elif outcome == "abort":
            self.store.txns.abort(write.txn_id)

    def insert(self, rows, *, partition=None, outcome="commit", writer_id=0) -> int:
        with self.transaction(outcome, partition) as write:
            write.insert(rows, partition=partition, writer_id=writer_id)
        return write.write_id

    def delete(self, ids, *, partition=None, outcome="commit") -> int:
        row_ids = list(self.row_ids(ids, partition).values())
        with self.transaction(outcome, partition) as write:
            write.delete(row_ids, partition=partition)
        return write.write_id

    def update(self, new_rows, *, partition=None) -> int:
        by_id = self.row_ids([row[0] for row in new_rows], partition)
        row_ids = [by_id[row[0]] for row in new_rows]
        with self.transaction("commit", partition) as write:
            write.update(row_ids, new_rows, partition=partition)
        return write.write_id

    def row_ids(self, ids, partition=None) -> dict[int, RowId]:
        """ROW__IDs of the rows with these ids that the current snapshot sees."""
        wanted = set(ids)
        return {r["id"]: RowId(r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"])
                for r in expected_rows(self.store, self.info.name, partition=partition) if r["id"] in wanted}


def expected_rows(store: Metastore, name: str, *, partition=None, txn_id=None, lease=None,
                  include_row_id=True) -> list[dict]:
    """acid_core's own read of every (matching) partition under the snapshot read_table takes, as Spark rows read."""
    info = store.catalog.get_table("default", name)
    snapshot = lease.snapshot if lease else store.txns.snapshot([info.full_name], current_txn=txn_id)
    parts = ([(p.location, p.spec) for p in store.catalog.list_partitions("default", name)]
             if info.partition_keys else [(info.location, {})])
    wanted = {k: str(v) for k, v in (partition or {}).items()}
    rows = []
    for location, spec in parts:
        if any(spec.get(k) != v for k, v in wanted.items()) or not Path(location).exists():
            continue
        table = read_snapshot(location, write_ids=snapshot.write_ids[info.full_name], txns=snapshot.txns,
                              include_row_id=include_row_id, column_names=[c.name for c in info.columns])
        values = {k.name: None if spec[k.name] == DEFAULT_PARTITION_NAME else _KEY_TYPES[k.type](spec[k.name])
                  for k in info.partition_keys}
        rows.extend({**row, **values} for row in table.to_pylist())
    return rows


def spark_rows(df) -> list[dict]:
    return [row.asDict(recursive=True) for row in df.collect()]
