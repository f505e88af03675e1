"""Transactions and write ids (Hive's TxnHandler): open in batches, commit, abort, heartbeat, snapshots, write ids,
first-committer-wins, timeouts, SHOW TRANSACTIONS and the compactor's commit stamp. Every test runs on SQLite and
PostgreSQL; time comes from a ManualClock.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.queue_tables import ensure_table

from acid_core.errors import (
    AcidError,
    MetastoreError,
    NoSuchTxnError,
    TxnAbortedError,
    TxnStateError,
    WriteConflictError,
)
from acid_core.format.validity import LONG_MAX, ValidTxnList, ValidWriteIdList
from acid_core.metastore import Metastore, schema
from acid_core.metastore.codes import CompactionType
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.metastore.txns import Operation, TxnType

TIMEOUT_MS = 10_000


@pytest.fixture
def ms(make_ms):
    return make_ms(txn_timeout_ms=TIMEOUT_MS, max_open_batch=50)


def rows(ms: Metastore, table: sa.Table) -> list[dict]:
    with ms.db.engine.connect() as connection:
        return [dict(r._mapping) for r in connection.execute(sa.select(table)).all()]


def write(ms: Metastore, txn_id: int, partition: str | None, operation: Operation, table: str = "t") -> int:
    """Allocate the write id of `txn_id` for default.<table> and record one component; returns the write id."""
    write_id = ms.txns.allocate_write_ids([txn_id], "default", table)[txn_id]
    ms.txns.add_components(txn_id, "default", table, [partition], operation)
    return write_id


# --- opening ------------------------------------------------------------------------------------------------------

def test_open_batches_get_consecutive_ids(ms):
    assert ms.txns.open_txns(5) == [1, 2, 3, 4, 5]
    assert ms.txns.open_txns(3) == [6, 7, 8]
    assert ms.txns.open_txn() == 9
    assert ms.txns.next_txn_id() == 10
    shown = ms.txns.show_transactions()
    assert [t.txn_id for t in shown] == list(range(1, 10))
    assert {(t.state, t.user, t.host) for t in shown} == {("o", "tester", "testhost")}


@pytest.mark.parametrize("count", [0, -1, 51])
def test_open_batch_outside_the_limit_is_refused_and_opens_nothing(ms, count):
    with pytest.raises(MetastoreError) as info:
        ms.txns.open_txns(count)
    assert str(count) in str(info.value)
    assert "hive.txn.max.open.batch" in str(info.value)
    assert ms.txns.show_transactions() == []
    assert ms.txns.next_txn_id() == 1


def test_open_records_type_agent_and_user(ms, clock):
    txn_id = ms.txns.open_txn(txn_type=TxnType.COMPACTION, agent_info="worker-7", user="hive")
    [info] = ms.txns.show_transactions()
    assert (info.txn_id, info.state_name, info.user, info.host, info.agent_info, info.txn_type) == (
        txn_id, "OPEN", "hive", "testhost", "worker-7", int(TxnType.COMPACTION))
    assert info.started_ms == info.last_heartbeat_ms == clock.now_ms()


# --- commit / abort -----------------------------------------------------------------------------------------------

def test_commit_forgets_the_transaction(ms):
    first, second = ms.txns.open_txns(2)
    ms.txns.commit(first)
    assert [t.txn_id for t in ms.txns.show_transactions()] == [second]
    with pytest.raises(NoSuchTxnError) as info:
        ms.txns.commit(first)
    assert str(first) in str(info.value)


def test_commit_moves_components_to_completed(ms, clock):
    txn_id = ms.txns.open_txn()
    write_id = write(ms, txn_id, "p=1", Operation.INSERT)
    ms.txns.add_components(txn_id, "default", "t", ["p=2"], Operation.UPDATE)
    ms.txns.commit(txn_id)
    assert rows(ms, schema.txn_components) == []
    completed = sorted(rows(ms, schema.completed_txn_components), key=lambda r: r["CTC_PARTITION"])
    assert [(r["CTC_TXNID"], r["CTC_DATABASE"], r["CTC_TABLE"], r["CTC_PARTITION"], r["CTC_WRITEID"],
             r["CTC_UPDATE_DELETE"], r["CTC_TIMESTAMP"]) for r in completed] == [
        (txn_id, "default", "t", "p=1", write_id, "N", clock.now_ms()),
        (txn_id, "default", "t", "p=2", write_id, "Y", clock.now_ms())]


def test_abort_and_what_an_aborted_transaction_refuses(ms):
    txn_id = ms.txns.open_txn()
    ms.txns.abort(txn_id)
    [info] = ms.txns.show_transactions()
    assert (info.txn_id, info.state, info.state_name) == (txn_id, "a", "ABORTED")
    for action in (ms.txns.commit, ms.txns.abort, ms.txns.heartbeat):
        with pytest.raises(TxnAbortedError) as caught:
            action(txn_id)
        assert f"transaction {txn_id}" in str(caught.value)
        assert "aborted" in str(caught.value)
    with pytest.raises(TxnAbortedError):
        ms.txns.allocate_write_ids([txn_id], "default", "t")


def test_unknown_transaction_errors_name_the_id(ms):
    for action in (ms.txns.commit, ms.txns.abort, ms.txns.heartbeat):
        with pytest.raises(NoSuchTxnError) as caught:
            action(4242)
        assert "4242" in str(caught.value)
        assert isinstance(caught.value, AcidError)
        assert not isinstance(caught.value, TxnAbortedError)


def test_error_classes_form_one_hierarchy():
    assert issubclass(WriteConflictError, TxnAbortedError)
    assert issubclass(TxnAbortedError, TxnStateError)
    assert issubclass(TxnStateError, MetastoreError)
    assert issubclass(NoSuchTxnError, MetastoreError)
    assert not issubclass(NoSuchTxnError, TxnStateError)


def test_abort_txns_reports_per_id(ms):
    first, second = ms.txns.open_txns(2)
    ms.txns.commit(second)
    results = ms.txns.abort_txns([first, second, 99])
    assert results[first] is None
    assert str(second) in results[second] and str(99) in results[99]
    assert [(t.txn_id, t.state) for t in ms.txns.show_transactions()] == [(first, "a")]


# --- heartbeats ---------------------------------------------------------------------------------------------------

def test_heartbeat_moves_the_last_heartbeat(ms, clock):
    txn_id = ms.txns.open_txn()
    clock.advance(1234)
    ms.txns.heartbeat(txn_id)
    [info] = ms.txns.show_transactions()
    assert info.last_heartbeat_ms == clock.now_ms()
    assert info.started_ms == clock.now_ms() - 1234


def test_heartbeat_of_a_committed_transaction_is_no_such_txn(ms):
    txn_id = ms.txns.open_txn()
    ms.txns.commit(txn_id)
    with pytest.raises(NoSuchTxnError) as info:
        ms.txns.heartbeat(txn_id)
    assert str(txn_id) in str(info.value)


def test_heartbeat_range_reports_aborted_and_unknown(ms, clock):
    first, second, third = ms.txns.open_txns(3)
    ms.txns.abort(second)
    ms.txns.commit(third)
    clock.advance(500)
    aborted, unknown = ms.txns.heartbeat_range(first, third + 2)
    assert aborted == [second]
    assert unknown == [third, third + 1, third + 2]
    shown = {t.txn_id: t for t in ms.txns.show_transactions()}
    assert shown[first].last_heartbeat_ms == clock.now_ms()
    assert shown[second].last_heartbeat_ms == clock.now_ms() - 500


# --- snapshots ----------------------------------------------------------------------------------------------------

@pytest.fixture
def mixed(ms):
    """txn 1 committed, 2 aborted, 3 and 4 open; each wrote default.t (write ids 1..4), txn 5 open without writes."""
    ids = ms.txns.open_txns(5)
    for txn_id in ids[:4]:
        write(ms, txn_id, None, Operation.INSERT)
    ms.txns.commit(1)
    ms.txns.abort(2)
    return ms


def test_valid_txns_for_a_reader_without_a_transaction(mixed):
    txns = mixed.txns.valid_txns()
    assert (txns.high_watermark, txns.open_ids, txns.aborted_ids, txns.min_open) == (5, (3, 4, 5), (2,), 3)
    assert str(txns) == "5:3:3,4,5:2"
    assert [txns.is_valid(t) for t in range(1, 7)] == [True, False, False, False, False, False]


def test_valid_txns_for_a_reader_in_a_transaction_see_its_own(mixed):
    txns = mixed.txns.valid_txns(current_txn=4)
    assert str(txns) == "4:3:3:2"
    assert txns.is_valid(4) and not txns.is_valid(5) and not txns.is_valid(3)
    lowest = mixed.txns.valid_txns(current_txn=3)
    assert str(lowest) == f"3:{LONG_MAX}::2"
    assert lowest.min_open_or_none is None


def test_valid_txns_string_round_trips(mixed):
    for current in (None, 3, 4, 5):
        txns = mixed.txns.valid_txns(current_txn=current)
        assert ValidTxnList.parse(str(txns)) == txns


def test_empty_metastore_snapshot(ms):
    assert str(ms.txns.valid_txns()) == f"0:{LONG_MAX}::"
    assert str(ms.txns.valid_write_ids("default", "t")) == f"default.t:0:{LONG_MAX}::"


def test_valid_write_ids_for_a_reader_without_a_transaction(mixed):
    write_ids = mixed.txns.valid_write_ids("default", "t")
    assert str(write_ids) == "default.t:4:3:3,4:2"
    assert (write_ids.min_open_or_none, write_ids.open_ids, write_ids.aborted_ids) == (3, (3, 4), (2,))
    assert [write_ids.is_valid(w) for w in range(1, 6)] == [True, False, False, False, False]
    assert ValidWriteIdList.parse(str(write_ids)) == write_ids


def test_a_transaction_sees_its_own_write_id(mixed):
    write_ids = mixed.txns.valid_write_ids("default", "t", current_txn=4)
    assert str(write_ids) == "default.t:4:3:3:2"
    assert write_ids.is_valid(4) and write_ids.is_valid(1)
    assert not write_ids.is_valid(3) and not write_ids.is_valid(2)
    lower = mixed.txns.valid_write_ids("default", "t", current_txn=3)
    assert str(lower) == f"default.t:3:{LONG_MAX}::2"


def test_write_id_of_a_later_transaction_allocated_first_is_open(ms):
    """Write ids follow allocation order, not txn order: txn 2 got write id 1, so txn 1's reader must skip it."""
    first, second = ms.txns.open_txns(2)
    assert write(ms, second, None, Operation.INSERT) == 1
    assert write(ms, first, None, Operation.INSERT) == 2
    write_ids = ms.txns.valid_write_ids("default", "t", current_txn=first)
    assert str(write_ids) == "default.t:2:1:1:"
    assert write_ids.is_valid(2) and not write_ids.is_valid(1)


def test_snapshot_of_several_tables_reads_once(mixed):
    write(mixed, 5, "p=1", Operation.INSERT, table="u")
    snapshot = mixed.txns.snapshot(["default.t", "default.u"])
    assert str(snapshot.txns) == "5:3:3,4,5:2"
    assert str(snapshot.write_ids["default.t"]) == "default.t:4:3:3,4:2"
    assert str(snapshot.write_ids["default.u"]) == "default.u:1:1:1:"


def test_min_open_txn(mixed):
    assert mixed.txns.min_open_txn() == 3
    for txn_id in (3, 4, 5):
        mixed.txns.commit(txn_id)
    assert mixed.txns.min_open_txn() is None


# --- write ids ----------------------------------------------------------------------------------------------------

def test_write_ids_are_allocated_in_txn_order_per_table_and_stable(ms):
    txns = ms.txns.open_txns(4)
    assert ms.txns.allocate_write_ids([txns[2], txns[0], txns[1]], "default", "t") == {
        txns[2]: 3, txns[0]: 1, txns[1]: 2}
    assert ms.txns.allocate_write_ids(txns[:3], "default", "t") == {txns[0]: 1, txns[1]: 2, txns[2]: 3}
    assert ms.txns.allocate_write_ids([txns[3], txns[0]], "DEFAULT", "T") == {txns[3]: 4, txns[0]: 1}
    assert ms.txns.allocate_write_ids([txns[1]], "default", "other") == {txns[1]: 1}
    assert sorted((r["T2W_TABLE"], r["T2W_WRITEID"], r["T2W_TXNID"]) for r in rows(ms, schema.txn_to_write_id)) == [
        ("other", 1, txns[1]), ("t", 1, txns[0]), ("t", 2, txns[1]), ("t", 3, txns[2]), ("t", 4, txns[3])]


def test_write_id_allocation_is_all_or_nothing(ms):
    """One committed transaction in the batch: nothing is allocated for the others either."""
    good, done = ms.txns.open_txns(2)
    ms.txns.commit(done)
    with pytest.raises(NoSuchTxnError):
        ms.txns.allocate_write_ids([good, done], "default", "t")
    assert rows(ms, schema.txn_to_write_id) == []
    assert ms.txns.allocate_write_ids([good], "default", "t") == {good: 1}


# --- first committer wins ------------------------------------------------------------------------------------------

def test_second_committer_of_an_update_to_the_same_partition_loses(ms):
    first, second = ms.txns.open_txns(2)
    write(ms, first, "p=1", Operation.UPDATE)
    write(ms, second, "p=1", Operation.UPDATE)
    ms.txns.commit(first)
    with pytest.raises(WriteConflictError) as info:
        ms.txns.commit(second)
    message = str(info.value)
    assert f"transaction {second}" in message and f"transaction {first}" in message
    assert "default.t/p=1" in message
    assert [(t.txn_id, t.state) for t in ms.txns.show_transactions()] == [(second, "a")]
    with pytest.raises(TxnAbortedError):
        ms.txns.heartbeat(second)
    # The loser's writes stay invisible: its write id is an aborted exception.
    assert ms.txns.valid_write_ids("default", "t").aborted_ids == (2,)


def test_the_loser_releases_its_locks(ms):
    first, second = ms.txns.open_txns(2)
    write(ms, first, "p=1", Operation.UPDATE)
    write(ms, second, "p=1", Operation.DELETE)
    ms.locks.lock([LockComponent("default", "t", "p=1", LockType.SHARED_WRITE)], txn_id=second)
    ms.txns.commit(first)
    with pytest.raises(WriteConflictError):
        ms.txns.commit(second)
    assert ms.locks.show_locks() == []
    assert rows(ms, schema.write_set) == [
        {"WS_DATABASE": "default", "WS_TABLE": "t", "WS_PARTITION": "p=1", "WS_TXNID": first, "WS_COMMIT_ID": 2,
         "WS_OPERATION_TYPE": "u"}]


@pytest.mark.parametrize("first_op,second_op", [
    (Operation.UPDATE, Operation.UPDATE), (Operation.UPDATE, Operation.DELETE),
    (Operation.DELETE, Operation.UPDATE), (Operation.DELETE, Operation.DELETE)])
def test_update_and_delete_conflict_with_each_other(ms, first_op, second_op):
    """Hive 4 counts U+U, U+D, D+U and D+D as conflicts (CommitTxnFunction.checkForWriteConflict)."""
    first, second = ms.txns.open_txns(2)
    write(ms, first, None, first_op)
    write(ms, second, None, second_op)
    ms.txns.commit(first)
    with pytest.raises(WriteConflictError):
        ms.txns.commit(second)


def test_different_partitions_do_not_conflict(ms):
    first, second = ms.txns.open_txns(2)
    write(ms, first, "p=1", Operation.UPDATE)
    write(ms, second, "p=2", Operation.UPDATE)
    ms.txns.commit(first)
    ms.txns.commit(second)
    assert ms.txns.show_transactions() == []


def test_different_tables_do_not_conflict(ms):
    first, second = ms.txns.open_txns(2)
    write(ms, first, "p=1", Operation.UPDATE, table="t")
    write(ms, second, "p=1", Operation.UPDATE, table="u")
    ms.txns.commit(first)
    ms.txns.commit(second)


@pytest.mark.parametrize("first_op,second_op", [(Operation.INSERT, Operation.UPDATE), (Operation.UPDATE, Operation.INSERT),
                                                (Operation.INSERT, Operation.INSERT)])
def test_insert_does_not_conflict(ms, first_op, second_op):
    first, second = ms.txns.open_txns(2)
    write(ms, first, "p=1", first_op)
    write(ms, second, "p=1", second_op)
    ms.txns.commit(first)
    ms.txns.commit(second)
    assert ms.txns.show_transactions() == []


def test_a_transaction_started_after_the_first_committed_does_not_conflict(ms):
    first = ms.txns.open_txn()
    write(ms, first, "p=1", Operation.UPDATE)
    ms.txns.commit(first)
    second = ms.txns.open_txn()
    write(ms, second, "p=1", Operation.UPDATE)
    ms.txns.commit(second)
    assert ms.txns.show_transactions() == []


def test_overlap_by_one_still_conflicts(ms):
    """[17,18] committed and [18,19] committing overlap (Hive's comment in CommitTxnFunction)."""
    first = ms.txns.open_txn()
    second = ms.txns.open_txn()  # opened while `first` was open
    write(ms, first, "p=1", Operation.UPDATE)
    ms.txns.commit(first)
    third = ms.txns.open_txn()
    write(ms, second, "p=1", Operation.UPDATE)
    write(ms, third, "p=1", Operation.UPDATE)
    with pytest.raises(WriteConflictError):
        ms.txns.commit(second)
    ms.txns.commit(third)


def test_the_first_committer_wins_whoever_opened_first(ms):
    older, younger = ms.txns.open_txns(2)
    write(ms, older, "p=1", Operation.UPDATE)
    write(ms, younger, "p=1", Operation.UPDATE)
    ms.txns.commit(younger)
    with pytest.raises(WriteConflictError):
        ms.txns.commit(older)


# --- timeouts -----------------------------------------------------------------------------------------------------

def test_perform_timeouts_aborts_stale_transactions_and_releases_their_locks(ms, clock):
    stale, alive = ms.txns.open_txns(2)
    ms.locks.lock([LockComponent("default", "t", None, LockType.SHARED_WRITE)], txn_id=stale)
    alive_lock = ms.locks.lock([LockComponent("default", "u", None, LockType.SHARED_WRITE)], txn_id=alive).lock_id
    clock.advance(TIMEOUT_MS // 2)
    ms.txns.heartbeat(alive)
    clock.advance(TIMEOUT_MS // 2 + 1)
    assert ms.txns.perform_timeouts() == [stale]
    assert [(t.txn_id, t.state) for t in ms.txns.show_transactions()] == [(stale, "a"), (alive, "o")]
    assert [lock.lock_id for lock in ms.locks.show_locks()] == [alive_lock]
    with pytest.raises(TxnAbortedError):
        ms.txns.commit(stale)
    ms.txns.commit(alive)


def test_perform_timeouts_keeps_a_transaction_exactly_at_the_limit(ms, clock):
    txn_id = ms.txns.open_txn()
    clock.advance(TIMEOUT_MS)
    assert ms.txns.perform_timeouts() == []
    clock.advance(1)
    assert ms.txns.perform_timeouts() == [txn_id]
    assert ms.txns.perform_timeouts() == []


def test_a_timed_out_transactions_write_id_becomes_aborted(ms, clock):
    txn_id = ms.txns.open_txn()
    write(ms, txn_id, None, Operation.INSERT)
    clock.advance(TIMEOUT_MS + 1)
    ms.txns.perform_timeouts()
    assert str(ms.txns.valid_write_ids("default", "t")) == f"default.t:1:{LONG_MAX}::1"


# --- show transactions and the compactor's commit -------------------------------------------------------------------

def test_show_transactions_lists_open_and_aborted_in_id_order(ms):
    ids = ms.txns.open_txns(4)
    ms.txns.commit(ids[0])
    ms.txns.abort(ids[2])
    assert [(t.txn_id, t.state_name) for t in ms.txns.show_transactions()] == [
        (ids[1], "OPEN"), (ids[2], "ABORTED"), (ids[3], "OPEN")]


def test_compactor_commit_stamps_next_txn_id_and_commit_time(ms, clock):
    writer = ms.txns.open_txn()
    write(ms, writer, "p=1", Operation.INSERT)
    ms.txns.commit(writer)
    ensure_table(ms, "default", "t", "p=1")
    compaction_id = ms.compactions.enqueue("default", "t", "p=1", CompactionType.MAJOR).compaction_id
    ms.compactions.claim(worker_id="w-1")
    compactor = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    ms.compactions.set_compactor_txn(compaction_id, compactor, 1)
    ms.compactions.mark_compacted(compaction_id)
    later = ms.txns.open_txn()  # opened while the compaction is not yet visible
    clock.advance(777)
    ms.txns.commit(compactor)
    info = ms.compactions.get(compaction_id)
    assert info.txn_id == compactor
    assert info.next_txn_id == later + 1 == ms.txns.next_txn_id()
    assert info.commit_ms == clock.now_ms()
    # The COMPACT component only served a possible abort; it does not become a completed write.
    assert [r["CTC_TXNID"] for r in rows(ms, schema.completed_txn_components)] == [writer]
    assert rows(ms, schema.txn_components) == []


def test_an_ordinary_commit_does_not_stamp_the_queue(ms):
    ensure_table(ms, "default", "t", None)
    compaction_id = ms.compactions.enqueue("default", "t", None, CompactionType.MINOR).compaction_id
    ms.compactions.claim(worker_id="w-1")
    ordinary = ms.txns.open_txn()
    ms.compactions.set_compactor_txn(compaction_id, ordinary, 0)
    ms.txns.commit(ordinary)
    info = ms.compactions.get(compaction_id)
    assert (info.next_txn_id, info.commit_ms) == (None, None)
