"""Real tables for the ACID view's tests: a metastore with a partitioned and an unpartitioned table holding deltas,
an obsolete base waiting for the cleaner behind an open transaction, a failed and a queued compaction.

Shared by the TestClient tests and the browser test (which builds it before starting `airflow standalone`).
"""

from __future__ import annotations

from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionType
from support.committed_writes import insert  # noqa: F401  (re-exported to the tests)

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


HISTORY_TABLE = "clicks"
HOUR_MS = 3_600_000
MINUTE_MS = 60_000


def build_history(url: str, warehouse: str, *, now_ms: int | None = None) -> dict:
    """A table whose compactions ran over the last six hours (real compactions, run in this process on a clock that
    is moved as they go): a succeeded one, a failed one, a refused one, an aborted one, three queued at once and
    compacted one after another (the queue grows and drains), one left ready for cleaning (its inputs stay on disk as
    obsolete directories), a did-not-initiate entry, and partitions with many deltas left uncompacted. Returns the
    ids and the times the tests check; build it before `build` (whose open transaction holds back any cleaning)."""
    import time

    from acid_core.compaction.cleaner import clean
    from acid_core.compaction.worker import local_runner
    from acid_core.metastore.engine import ManualClock

    now = now_ms if now_ms is not None else int(time.time() * 1000)
    clock = ManualClock(now - 6 * HOUR_MS)
    ms = Metastore(url, warehouse=warehouse, clock=clock)

    def working_for(milliseconds: int):
        def runner(plan):
            clock.advance(milliseconds)
            return local_runner(plan)
        return runner

    def deltas(ds: str, count: int) -> None:
        for number in range(count):
            insert(ms, HISTORY_TABLE, ds, [(number, f"{ds}-{number}")])
            clock.advance(MINUTE_MS)

    def compact(ds: str, kind: CompactionType, *, wait_ms: int, work_ms: int) -> int:
        entry = ms.compactions.enqueue("default", HISTORY_TABLE, f"ds={ds}", kind).compaction_id
        clock.advance(wait_ms)
        CompactionWorker(ms, runner=working_for(work_ms)).run(entry)
        return entry

    try:
        ms.init()
        ms.catalog.create_table("default", HISTORY_TABLE, COLUMNS, partition_keys=[("ds", "string")],
                                params={"transactional": "true",
                                        "compactorthreshold.hive.compactor.delta.num.threshold": "4"})
        ids: dict = {"since_ms": clock.now_ms()}
        gap = 40 * MINUTE_MS
        deltas("2026-02-01", 5)
        ids["succeeded"] = compact("2026-02-01", CompactionType.MAJOR, wait_ms=4 * MINUTE_MS, work_ms=90_000)
        clock.advance(gap)
        deltas("2026-02-02", 3)
        failed = ms.compactions.enqueue("default", HISTORY_TABLE, "ds=2026-02-02", CompactionType.MINOR).compaction_id
        clock.advance(10 * MINUTE_MS)
        ms.compactions.claim(worker_id="host-airflow.acid_worker.compact[0].try1", compaction_id=failed)
        clock.advance(40_000)
        ms.compactions.mark_failed(failed, "acid_core.errors.FileSystemError: the disk filled up")
        ids["failed"] = failed
        clock.advance(gap)
        deltas("2026-02-03", 1)
        ids["refused"] = compact("2026-02-03", CompactionType.MINOR, wait_ms=MINUTE_MS, work_ms=5_000)
        clock.advance(gap)
        for ds in ("2026-02-04", "2026-02-05", "2026-02-06"):
            deltas(ds, 2)
        burst = [ms.compactions.enqueue("default", HISTORY_TABLE, f"ds={ds}", CompactionType.MAJOR).compaction_id
                 for ds in ("2026-02-04", "2026-02-05", "2026-02-06")]
        for entry, work_ms in zip(burst, (20_000, 45_000, 8 * MINUTE_MS)):
            clock.advance(5 * MINUTE_MS)
            CompactionWorker(ms, runner=working_for(work_ms)).run(entry)
        ids["burst"] = burst
        clean(ms, log=lambda line: None)  # every compaction so far ends succeeded
        clock.advance(gap)
        ids["ready"] = compact("2026-02-02", CompactionType.MAJOR, wait_ms=2 * MINUTE_MS, work_ms=3 * MINUTE_MS)
        clock.advance(gap)
        deltas("2026-02-05", 9)  # the partition with the most deltas, left uncompacted
        deltas("2026-02-06", 6)
        aborted = ms.compactions.enqueue("default", HISTORY_TABLE, "ds=2026-02-05", CompactionType.MAJOR).compaction_id
        clock.advance(3 * MINUTE_MS)
        ms.compactions.abort_compactions([aborted], by="ui test")
        ids["aborted"] = aborted
        clock.advance(gap)
        ids["did_not_initiate"] = ms.compactions.record_did_not_initiate(
            "default", HISTORY_TABLE, "ds=2026-02-06", CompactionType.MAJOR, "ui test: could not list the partition",
            initiator_id="ui-test")
        ids["until_ms"] = clock.now_ms()
        return ids
    finally:
        ms.close()
