"""REBALANCE compaction (Hive 4) with the in-process runner, over real tables, transactions and files.

Hive's rules (AcidCompactionService, CompactionQueryBuilderForRebalance): refused on bucketed tables with Hive's
message; always enough to compact; EXCL_WRITE lock and a REBALANCE_COMPACTION transaction; every surviving row keeps
its write id and gets a new bucket and rowId; the result is a `base_<hwm>_v<txn>` of n bucket files (CLUSTERED INTO
n BUCKETS, else as many as the files have bucket ids). Ours on top: key-interval tasks that run at once, a
WRITE_SET record so an update that read the old ROW__IDs cannot commit after it, and no rebalance while a committed
delete sits above its high watermark.
"""

from __future__ import annotations

import collections
import os

import pytest
from support.compaction_tables import check_result_directory, directories, make_table, read_rows, write_history

from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import CompactionStateError, UsageError, WriteConflictError
from acid_core.metastore.codes import REBALANCE_BUCKETED_MESSAGE, CompactionState, CompactionType
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.metastore.txns import Operation

REBALANCE = CompactionType.REBALANCE


def rebalance(table, buckets=None, partition=None, **worker_options):
    enqueued = table.ms.compactions.enqueue("default", table.info.name, table.partition_name(partition), REBALANCE,
                                            number_of_buckets=buckets)
    assert enqueued.accepted, enqueued.message
    return enqueued.compaction_id, CompactionWorker(table.ms, **worker_options).run(enqueued.compaction_id)


def filled(store, *, writers=1, name="t"):
    """write_history's six write ids, then 8,000 rows in stripes of 1,000 and a delete of every 7th of them."""
    table = make_table(store, name, writers=writers, stripe_rows=200)
    write_history(table, None)
    with table.transaction() as txn:
        txn.insert([(i, f"big{i}") for i in range(1000, 9000)])
    with table.transaction(operation=Operation.DELETE) as txn:
        txn.delete(list(range(1000, 9000, 7)))
    return table


def values_by_write_id(rows: dict) -> collections.Counter:
    return collections.Counter((row_id[0], row) for row_id, row in rows.items())


def test_rebalance_spreads_one_bucket_over_n_and_keeps_every_row_and_write_id(store):
    table = filled(store)
    before = read_rows(table)
    assert {(row_id[1] >> 16) & 0xFFF for row_id in before} == {0}  # everything in bucket 0
    compaction_id, outcome = rebalance(table, 4)
    assert outcome.result == "compacted", outcome.message
    info = store.compactions.get(compaction_id)
    assert info.state is CompactionState.READY_FOR_CLEANING and info.type is REBALANCE
    assert info.number_of_buckets == 4
    after = read_rows(table)
    assert values_by_write_id(after) == values_by_write_id(before)  # same rows, each with its write id
    base = [d for d in directories(table.location()) if d.startswith("base_")]
    assert base == [f"base_0000008_v{info.txn_id:07d}"]
    events = check_result_directory(os.path.join(table.location(), base[0]), operation=0)
    per_bucket = collections.Counter((e["bucket"] >> 16) & 0xFFF for e in events)
    assert sorted(per_bucket) == [0, 1, 2, 3]
    assert max(per_bucket.values()) <= 2 * min(per_bucket.values()), per_bucket  # about equal
    for bucket in per_bucket:  # rowIds 0.. within each new bucket
        assert sorted(e["rowId"] for e in events if (e["bucket"] >> 16) & 0xFFF == bucket) == list(
            range(per_bucket[bucket]))


def test_without_clustered_into_a_rebalance_keeps_the_number_of_bucket_ids(store):
    table = filled(store, writers=2)
    before = read_rows(table)
    _, outcome = rebalance(table)
    assert outcome.result == "compacted", outcome.message
    after = read_rows(table)
    assert values_by_write_id(after) == values_by_write_id(before)
    assert {(row_id[1] >> 16) & 0xFFF for row_id in after} == {0, 1}
    assert "2 buckets" in outcome.message


def test_a_rebalance_of_a_bucketed_table_is_refused_with_hives_message(store):
    table = make_table(store, "b", buckets=2)
    write_history(table, None)
    compaction_id, outcome = rebalance(table, 4)
    assert outcome.result == "refused" and outcome.message == REBALANCE_BUCKETED_MESSAGE
    info = store.compactions.get(compaction_id)
    assert info.state is CompactionState.REFUSED and info.error_message == REBALANCE_BUCKETED_MESSAGE
    assert not [d for d in directories(table.location()) if d.startswith("base_")]


def test_number_of_buckets_is_a_rebalances_only_and_in_range(store):
    filled(store)
    with pytest.raises(UsageError, match="applies to a 'rebalance' compaction only, not 'major'"):
        store.compactions.enqueue("default", "t", None, CompactionType.MAJOR, number_of_buckets=4)
    for bad in (0, 4097, -1):
        with pytest.raises(UsageError, match=r"whole number in 1\.\.4096"):
            store.compactions.enqueue("default", "t", None, REBALANCE, number_of_buckets=bad)
    assert store.compactions.show() == []


def test_an_update_that_read_the_old_row_ids_cannot_commit_after_the_rebalance(store):
    table = filled(store)
    reader = store.txns.open_txn()  # began before: the ROW__IDs it deletes come from the old files
    store.txns.allocate_write_ids([reader], "default", "t")
    store.txns.add_components(reader, "default", "t", [None], Operation.DELETE)
    # a writer that has not locked yet: the rebalance takes EXCL_WRITE and commits first
    _, outcome = rebalance(table, 3)
    assert outcome.result == "compacted", outcome.message
    with pytest.raises(WriteConflictError, match="conflicts with the update committed by transaction"):
        store.txns.commit(reader)
    later = store.txns.open_txn()  # began after: it reads the new ROW__IDs and commits
    store.txns.allocate_write_ids([later], "default", "t")
    store.txns.add_components(later, "default", "t", [None], Operation.DELETE)
    store.txns.commit(later)


def test_a_rebalance_waits_for_open_writers_through_its_exclusive_lock(store):
    table = filled(store)
    writer = store.txns.open_txn()
    store.locks.acquire([LockComponent("default", "t", None, LockType.SHARED_WRITE)], txn_id=writer)
    enqueued = store.compactions.enqueue("default", "t", None, REBALANCE, number_of_buckets=2)
    with pytest.raises(Exception, match="lock"):
        CompactionWorker(store, lock_timeout_ms=200).run(enqueued.compaction_id)
    assert store.compactions.get(enqueued.compaction_id).state is CompactionState.FAILED
    store.txns.commit(writer)
    assert not [d for d in directories(table.location()) if d.startswith("base_")]


def test_a_committed_delete_above_the_watermark_stops_the_rebalance(store):
    table = filled(store)
    open_txn = store.txns.open_txn()  # holds write id 9 open: the compactor's watermark stops at 8
    store.txns.allocate_write_ids([open_txn], "default", "t")
    with table.transaction(operation=Operation.DELETE) as txn:  # write id 10, committed
        txn.delete([5])
    before = read_rows(table)
    enqueued = store.compactions.enqueue("default", "t", None, REBALANCE, number_of_buckets=2)
    with pytest.raises(CompactionStateError, match=r"delete_delta_0000010_0000010.* holds deletes above the "
                                                   r"compaction's high watermark 8 \(write id 9 is still open\)"):
        CompactionWorker(store).run(enqueued.compaction_id)
    assert store.compactions.get(enqueued.compaction_id).state is CompactionState.FAILED
    assert not [d for d in directories(table.location()) if d.startswith("base_")]
    assert read_rows(table) == before
    store.txns.abort(open_txn)
    _, outcome = rebalance(table, 2)
    assert outcome.result == "compacted", outcome.message
    assert values_by_write_id(read_rows(table)) == values_by_write_id(before)
