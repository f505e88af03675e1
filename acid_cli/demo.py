"""`make run` until the Airflow platform lands: a demo warehouse and metastore under ACID_HOME.

It creates (or reuses) `demo.events` (unpartitioned) and `demo.sales` (partitioned by day) with `acid sql`, streams
transaction batches into them (some transactions aborted), deletes a row in its own transaction, runs a major
compaction of `demo.events` through `acid compact run` (spark-submit on local Spark), and shows what `acid sql` and
`acid read` report. Re-running adds more transactions. The `acid` command run with the same ACID_HOME
sees the same metastore and warehouse.
"""

from __future__ import annotations

import io
import random
import sys

from acid_cli.main import main as acid
from acid_cli.sql import run_script
from acid_core.merge import read_snapshot
from acid_core.metastore import Metastore
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.metastore.txns import Operation
from acid_core.rowid import RowId
from acid_core.streaming import StreamingConnection
from acid_core.writer import EmbeddedWriter

SETUP = """
CREATE DATABASE IF NOT EXISTS demo;
CREATE TABLE IF NOT EXISTS demo.events (id bigint, customer string, amount double)
  STORED AS ORC TBLPROPERTIES ('transactional'='true');
CREATE TABLE IF NOT EXISTS demo.sales (id bigint, customer string, amount double) PARTITIONED BY (day string)
  STORED AS ORC TBLPROPERTIES ('transactional'='true')
"""


def _stream(store: Metastore, table: str, partition: dict | None, rng: random.Random) -> None:
    with StreamingConnection(store, "demo", table, partition=partition, batch_size=5) as stream:
        for number in range(5):
            stream.begin_transaction()
            stream.write([(rng.randrange(1_000_000), f"user-{rng.randrange(100):03d}", round(rng.uniform(1, 500), 2))
                          for _ in range(rng.randrange(3, 10))])
            if number == 3:
                stream.abort_transaction()
            else:
                stream.commit_transaction()


def _delete_one(store: Metastore, table: str, rng: random.Random) -> None:
    """Delete one visible row of demo.<table> in its own transaction, as a DELETE statement would."""
    info = store.catalog.get_table("demo", table)
    txn = store.txns.open_txn(agent_info="demo delete")
    try:
        snapshot = store.txns.snapshot([info.full_name], current_txn=txn)
        rows = read_snapshot(info.location, write_ids=snapshot.write_ids[info.full_name], txns=snapshot.txns,
                             include_row_id=True).column("row__id").to_pylist()
        write_id = store.txns.allocate_write_ids([txn], "demo", table)[txn]
        store.locks.acquire([LockComponent("demo", table, None, LockType.SHARED_WRITE)], txn_id=txn)
        store.txns.add_components(txn, "demo", table, [None], Operation.DELETE)
        victim = rng.choice(rows)
        EmbeddedWriter(info.location, columns=info.columns).delete(
            [RowId(victim["writeid"], victim["bucketid"], victim["rowid"])], write_id=write_id)
        store.txns.commit(txn)
    except BaseException:
        store.txns.abort(txn)
        raise


def main() -> int:
    store = Metastore()
    store.init()
    run_script(SETUP, metastore=store, out=io.StringIO())
    rng = random.Random()
    _stream(store, "events", None, rng)
    for day in ("2026-11-01", "2026-11-02"):
        _stream(store, "sales", {"day": day}, rng)
    _delete_one(store, "events", rng)
    events = store.catalog.get_table("demo", "events").location
    print(f"Metastore: {store.url}\nWarehouse: {store.catalog.warehouse}\n")
    for statement in ("SHOW TABLES IN demo", "SHOW PARTITIONS demo.sales", "SHOW TRANSACTIONS"):
        print(f"$ acid sql \"{statement}\"")
        run_script(statement, metastore=store)
        print()
    print('$ acid sql "ALTER TABLE demo.events COMPACT \'major\'"')
    run_script("ALTER TABLE demo.events COMPACT 'major'", metastore=store)
    queued = [c for c in store.compactions.show(database="demo", table="events") if c.state.value == "i"]
    for entry in queued:
        print(f"\n$ acid compact run {entry.id}   (spark-submit, local Spark)")
        acid(["compact", "run", str(entry.id), "--metastore", store.url])
    print('\n$ acid sql "SHOW COMPACTIONS"')
    run_script("SHOW COMPACTIONS", metastore=store)
    ids = store.txns.valid_write_ids("demo", "events")
    print(f"\n$ acid inspect {events} --write-ids {ids}")
    acid(["inspect", events, "--write-ids", str(ids)])
    print(f"\n$ acid read {events} --write-ids {ids} --row-id")
    acid(["read", events, "--write-ids", str(ids), "--row-id"])
    print("\nRun `make run` again to add more transactions; the Airflow DAGs (initiator, cleaner) arrive with the next "
          "issue.")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
