"""Real tables for the ACID view's tests: a metastore with a partitioned and an unpartitioned table holding deltas,
an obsolete base waiting for the cleaner behind an open transaction, a failed and a queued compaction.

Shared by the TestClient tests and the browser test (which builds it before starting `airflow standalone`).
"""

from __future__ import annotations

from committed_writes import insert  # noqa: F401  (re-exported to the tests)

from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore import Metastore
from acid_core.metastore.compactions import CompactionType

COLUMNS = [("id", "int"), ("v", "string")]
TRACEBACK = ("Traceback (most recent call last):\n  File \"compact.py\", line 10, in main\n    run()\n"
             "acid_core.errors.FileSystemError: cannot read bucket_00000: disk on fire\n")


def build(url: str, warehouse: str) -> dict:
    """The tables and queue entries; returns the ids the tests check."""
    ms = Metastore(url, warehouse=warehouse)
    try:
        ms.init()
        ms.catalog.create_table("default", "sales", COLUMNS, partition_keys=[("ds", "string")],
                                params={"transactional": "true",
                                        "compactorthreshold.hive.compactor.delta.num.threshold": "2"})
        ms.catalog.create_table("default", "events", COLUMNS, params={"transactional": "true"})
        for number in range(3):
            insert(ms, "sales", "2026-01-01", [(number, f"a{number}")])
        insert(ms, "sales", "2026-01-02", [(10, "b")])
        for number in range(4):
            insert(ms, "events", None, [(number, f"e{number}")])
        queued = ms.compactions.enqueue("default", "sales", "ds=2026-01-01", CompactionType.MAJOR).compaction_id
        failed = ms.compactions.enqueue("default", "sales", "ds=2026-01-02", CompactionType.MINOR).compaction_id
        ms.compactions.claim(worker_id="host-airflow.acid_worker.compact[3].try1", compaction_id=failed)
        ms.compactions.mark_failed(failed, TRACEBACK)
        reader = ms.txns.open_txn(agent_info="ui test reader")  # holds what the events compaction makes obsolete
        compacted = ms.compactions.enqueue("default", "events", None, CompactionType.MAJOR).compaction_id
        CompactionWorker(ms).run(compacted)
        return {"queued": queued, "failed": failed, "compacted": compacted, "reader": reader}
    finally:
        ms.close()
