"""The compaction queue and its history (COMPACTION_QUEUE, COMPLETED_COMPACTIONS): Hive's states, each move a
compare-and-swap; enqueue refusals; claiming; cleaning readiness (open transactions, reader leases, retention);
SHOW COMPACTIONS; history retention.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.queue_tables import creating_tables

from acid_core.errors import CompactionStateError, MetastoreError, UsageError
from acid_core.metastore import Metastore, schema
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.compaction_history import HistoryRetention
from acid_core.metastore.compactions import ABORTED_BY_REQUEST
from acid_core.metastore.txns import Operation, TxnType

MAJOR, MINOR = CompactionType.MAJOR, CompactionType.MINOR
S = CompactionState


@pytest.fixture
def ms(make_ms):
    """The metastore, creating each table a test queues a compaction for (the queue refuses unknown tables)."""
    return creating_tables(make_ms())


def rows(ms: Metastore, table: sa.Table) -> list[dict]:
    with ms.db.engine.connect() as connection:
        return [dict(r._mapping) for r in connection.execute(sa.select(table)).all()]


def commit_writes(ms: Metastore, table: str, partition: str | None, count: int = 1,
                  operation: Operation = Operation.INSERT) -> list[int]:
    """`count` committed transactions, each writing default.<table>/<partition>; returns their write ids."""
    write_ids = []
    for _ in range(count):
        txn_id = ms.txns.open_txn()
        write_ids.append(ms.txns.allocate_write_ids([txn_id], "default", table)[txn_id])
        ms.txns.add_components(txn_id, "default", table, [partition], operation)
        ms.txns.commit(txn_id)
    return write_ids


def compact(ms: Metastore, table: str, partition: str | None, *, compaction_type: CompactionType = MAJOR,
            commit: bool = True) -> tuple[int, int]:
    """Enqueue, claim, run (compactor txn at the current compactor high watermark) and mark compacted.

    Returns (compaction id, compactor txn id); the compactor txn is committed when `commit`.
    """
    compaction_id = ms.compactions.enqueue("default", table, partition, compaction_type).compaction_id
    ms.compactions.claim(worker_id="host-w1", compaction_id=compaction_id)
    txn_id = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    high = ms.txns.valid_write_ids("default", table, current_txn=txn_id)
    high_watermark = high.high_watermark if high.min_open_or_none is None else high.min_open_or_none - 1
    ms.compactions.set_compactor_txn(compaction_id, txn_id, high_watermark)
    ms.compactions.mark_compacted(compaction_id)
    if commit:
        ms.txns.commit(txn_id)
    return compaction_id, txn_id


def in_state(ms: Metastore, state: CompactionState, partition: str) -> int:
    """A compaction of default.t/<partition> brought to `state`; returns its id."""
    if state is S.DID_NOT_INITIATE:
        return ms.compactions.record_did_not_initiate("default", "t", partition, MAJOR, "no candidates")
    compaction_id = ms.compactions.enqueue("default", "t", partition, MAJOR).compaction_id
    if state is S.INITIATED:
        return compaction_id
    if state is S.ABORTED:
        ms.compactions.abort_compactions([compaction_id])
        return compaction_id
    if state is S.REFUSED:
        ms.compactions.mark_refused(compaction_id, "nothing to do")
        return compaction_id
    ms.compactions.claim(worker_id="w", compaction_id=compaction_id)
    if state is S.WORKING:
        return compaction_id
    if state is S.FAILED:
        ms.compactions.mark_failed(compaction_id, "boom")
        return compaction_id
    ms.compactions.mark_compacted(compaction_id)
    if state is S.READY_FOR_CLEANING:
        return compaction_id
    ms.compactions.mark_cleaned(compaction_id)
    assert state is S.SUCCEEDED
    return compaction_id


# --- enqueue ------------------------------------------------------------------------------------------------------

def test_enqueue(ms, clock):
    result = ms.compactions.enqueue("Default", "T", "p=1", MAJOR, properties={"compactor.mapreduce.map.memory.mb": "2048"})
    assert (result.compaction_id, result.accepted, result.state, result.message) == (
        1, True, S.INITIATED, "Compaction enqueued with id 1")
    info = ms.compactions.get(1)
    assert (info.database, info.table, info.partition, info.state, info.type, info.enqueue_ms, info.pool_name,
            info.initiator_id, info.run_as, info.end_ms) == (
        "default", "t", "p=1", S.INITIATED, MAJOR, clock.now_ms(), "default", "testhost-manual", "tester", None)
    assert "2048" in info.properties
    assert ms.compactions.enqueue("default", "t", "p=2", MINOR, pool="fast", initiator_id="init-9").compaction_id == 2
    assert (ms.compactions.get(2).pool_name, ms.compactions.get(2).initiator_id) == ("fast", "init-9")


@pytest.mark.parametrize("state", [S.INITIATED, S.WORKING])
def test_duplicate_enqueue_is_refused_with_hives_message(ms, state):
    compaction_id = in_state(ms, state, "p=1")
    refused = ms.compactions.enqueue("default", "t", "p=1", MINOR)
    assert not refused.accepted
    assert refused.message == f"Compaction is already scheduled with state='{state.display}' and id={compaction_id}"
    assert [e.id for e in ms.compactions.show()] == [compaction_id]
    assert ms.compactions.enqueue("default", "t", "p=2", MINOR).accepted
    assert ms.compactions.enqueue("default", "u", "p=1", MINOR).accepted


def test_duplicate_enqueue_of_an_unpartitioned_table(ms):
    first = ms.compactions.enqueue("default", "t", None, MAJOR)
    second = ms.compactions.enqueue("default", "t", None, MAJOR)
    assert first.accepted and not second.accepted
    assert second.message == f"Compaction is already scheduled with state='initiated' and id={first.compaction_id}"
    assert ms.compactions.enqueue("default", "u", None, MAJOR).accepted


@pytest.mark.parametrize("database, table, partition, message", [
    ("default", "parted", "ds=b/../../../outside/x", "partition 'ds=b/../../../outside/x' of default.parted is not valid"),
    ("default", "parted", "../x", "partition '../x' of default.parted is not valid"),
    ("default", "parted", "ds=b/", "partition 'ds=b/' of default.parted is not valid"),
    ("default", "parted", "/ds=b", "partition '/ds=b' of default.parted is not valid"),
    ("default", "parted", "other=b", "partition 'other=b' of default.parted is not valid"),
    ("default", "parted", "ds=a/b", "partition 'ds=a/b' of default.parted is not valid"),
    ("default", "parted", "ds=a:b", "partition 'ds=a:b' of default.parted is not valid"),
    ("default", "parted", None, "cannot compact default.parted as a whole: it is partitioned by ['ds']"),
    ("default", "flat", "ds=b", "table default.flat is not partitioned, got partition 'ds=b'"),
    ("default", "nosuch", None, "table default.nosuch does not exist"),
    ("default", "plain", None, "table default.plain is not a full ACID table"),
    ("default", "t; DROP TABLE x", None, "table name 't; DROP TABLE x' is not valid"),
    ("../etc", "parted", None, "database name '../etc' is not valid"),
])
def test_enqueue_refuses_what_is_not_a_partition_of_an_acid_table(make_ms, database, table, partition, message):
    """The queue's own API checks names against the catalog: no client can queue a path outside a table."""
    store = make_ms()
    store.catalog.create_table("default", "parted", [("id", "int")], partition_keys=[("ds", "string")],
                               params={"transactional": "true"})
    store.catalog.create_table("default", "flat", [("id", "int")], params={"transactional": "true"})
    store.catalog.create_table("default", "plain", [("id", "int")])
    with pytest.raises(MetastoreError) as caught:
        store.compactions.enqueue(database, table, partition, MAJOR)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert store.compactions.show() == []


def test_enqueue_refused_while_ready_for_cleaning_at_the_same_high_watermark(ms):
    """Hive's CompactFunction also refuses when a `ready for cleaning` entry has CQ_HIGHEST_WRITE_ID equal to the
    table's current compactor high watermark: the same work is done and only waits for the cleaner."""
    commit_writes(ms, "t", "p=1", 2)
    compaction_id, _ = compact(ms, "t", "p=1")
    assert ms.compactions.get(compaction_id).highest_write_id == 2
    again = ms.compactions.enqueue("default", "t", "p=1", MAJOR)
    assert not again.accepted
    assert again.message == f"Compaction is already scheduled with state='ready for cleaning' and id={compaction_id}"


def test_enqueue_accepted_while_ready_for_cleaning_after_new_writes(ms):
    commit_writes(ms, "t", "p=1", 2)
    compact(ms, "t", "p=1")
    commit_writes(ms, "t", "p=1", 1)
    assert ms.compactions.enqueue("default", "t", "p=1", MAJOR).accepted


@pytest.mark.parametrize("state", [S.SUCCEEDED, S.FAILED, S.REFUSED, S.ABORTED, S.DID_NOT_INITIATE])
def test_enqueue_after_a_finished_compaction_is_accepted(ms, state):
    in_state(ms, state, "p=1")
    assert ms.compactions.enqueue("default", "t", "p=1", MAJOR).accepted


def test_compaction_type_parse():
    assert CompactionType.parse(" MAJOR ") is MAJOR and CompactionType.parse("minor") is MINOR
    assert CompactionType.parse("Rebalance") is CompactionType.REBALANCE
    with pytest.raises(MetastoreError, match="'medium' is not 'major', 'minor' or 'rebalance'"):
        CompactionType.parse("medium")


# --- the state machine --------------------------------------------------------------------------------------------

def test_happy_path(ms, clock):
    commit_writes(ms, "t", "p=1", 3)
    compaction_id = ms.compactions.enqueue("default", "t", "p=1", MAJOR).compaction_id
    clock.advance(10)
    claimed = ms.compactions.claim(worker_id="host-w1", worker_version="4.0")
    assert (claimed.id, claimed.state, claimed.worker_id, claimed.start_ms, claimed.worker_version) == (
        compaction_id, S.WORKING, "host-w1", clock.now_ms(), "4.0")
    txn_id = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    ms.compactions.set_compactor_txn(compaction_id, txn_id, 3)
    assert [(r["TC_TXNID"], r["TC_PARTITION"], r["TC_OPERATION_TYPE"], r["TC_WRITEID"])
            for r in rows(ms, schema.txn_components)] == [(txn_id, "p=1", "c", 3)]
    ms.compactions.mark_compacted(compaction_id)
    ms.txns.commit(txn_id)
    ready = ms.compactions.get(compaction_id)
    assert (ready.state, ready.txn_id, ready.highest_write_id) == (S.READY_FOR_CLEANING, txn_id, 3)
    assert [e.id for e in ms.compactions.ready_to_clean()] == [compaction_id]
    clock.advance(10)
    ms.compactions.mark_cleaned(compaction_id)
    done = ms.compactions.get(compaction_id)
    assert (done.state, done.end_ms, done.txn_id, done.highest_write_id, done.worker_id) == (
        S.SUCCEEDED, clock.now_ms(), txn_id, 3, "host-w1")
    assert rows(ms, schema.compaction_queue) == []
    assert [r["CC_ID"] for r in rows(ms, schema.completed_compactions)] == [compaction_id]


ALLOWED = {
    "claim": {S.INITIATED},
    "set_compactor_txn": {S.WORKING},
    "mark_compacted": {S.WORKING},
    "mark_cleaned": {S.READY_FOR_CLEANING},
    "mark_failed": {S.INITIATED, S.WORKING, S.READY_FOR_CLEANING},
    "mark_refused": {S.INITIATED, S.WORKING, S.READY_FOR_CLEANING},
}


def _attempt(ms: Metastore, operation: str, compaction_id: int) -> None:
    if operation == "claim":
        ms.compactions.claim(worker_id="w2", compaction_id=compaction_id)
    elif operation == "set_compactor_txn":
        ms.compactions.set_compactor_txn(compaction_id, 999, 5)
    elif operation in ("mark_failed", "mark_refused"):
        getattr(ms.compactions, operation)(compaction_id, "message")
    else:
        getattr(ms.compactions, operation)(compaction_id)


def test_every_illegal_transition_is_refused_and_changes_nothing(ms):
    entries = {state: in_state(ms, state, f"p={index}") for index, state in enumerate(S)}
    before = (rows(ms, schema.compaction_queue), rows(ms, schema.completed_compactions), rows(ms, schema.txn_components))
    problems = []
    for operation, allowed in ALLOWED.items():
        for state, compaction_id in entries.items():
            if state in allowed:
                continue
            try:
                _attempt(ms, operation, compaction_id)
            except CompactionStateError as exc:
                message = str(exc)
                if str(compaction_id) not in message or state.display not in message:
                    problems.append(f"{operation} on a {state.display} entry: message {message!r} lacks id or state")
            else:
                problems.append(f"{operation} on a {state.display} entry was allowed")
    assert not problems, "\n".join(problems)
    after = (rows(ms, schema.compaction_queue), rows(ms, schema.completed_compactions), rows(ms, schema.txn_components))
    assert after == before


@pytest.mark.parametrize("operation", sorted(ALLOWED))
def test_unknown_compaction_id(ms, operation):
    with pytest.raises(CompactionStateError) as info:
        _attempt(ms, operation, 4711)
    assert "4711" in str(info.value) and "no such compaction" in str(info.value)


def test_mark_failed_keeps_the_message_in_history(ms, clock):
    for state in (S.INITIATED, S.WORKING, S.READY_FOR_CLEANING):
        compaction_id = in_state(ms, state, f"p={state.value}")
        ms.compactions.mark_failed(compaction_id, f"failed while {state.display}")
        info = ms.compactions.get(compaction_id)
        assert (info.state, info.error_message, info.end_ms) == (S.FAILED, f"failed while {state.display}",
                                                                  clock.now_ms())


def test_mark_refused(ms):
    for state in (S.INITIATED, S.WORKING):
        compaction_id = in_state(ms, state, f"p={state.value}")
        ms.compactions.mark_refused(compaction_id, "None of the compaction thresholds met, compaction request is refused!")
        info = ms.compactions.get(compaction_id)
        assert (info.state, info.state.display) == (S.REFUSED, "refused")
        assert info.error_message.startswith("None of the compaction thresholds met")
    assert rows(ms, schema.compaction_queue) == []


def test_record_did_not_initiate(ms, clock):
    ms.compactions.enqueue("default", "t", "p=1", MAJOR)
    compaction_id = ms.compactions.record_did_not_initiate("Default", "T", "p=1", MINOR, "too many failures",
                                                           initiator_id="init-1")
    assert compaction_id == 2  # the queue's id sequence
    info = ms.compactions.get(compaction_id)
    assert (info.database, info.table, info.state, info.type, info.error_message, info.initiator_id, info.end_ms) == (
        "default", "t", S.DID_NOT_INITIATE, MINOR, "too many failures", "init-1", clock.now_ms())
    assert info.state.display == "did not initiate"


def test_abort_compactions(ms):
    initiated = in_state(ms, S.INITIATED, "p=1")
    working = in_state(ms, S.WORKING, "p=2")
    ready = in_state(ms, S.READY_FOR_CLEANING, "p=3")
    succeeded = in_state(ms, S.SUCCEEDED, "p=4")
    results = ms.compactions.abort_compactions([initiated, working, ready, succeeded, 999])
    assert results == {
        initiated: "Successfully aborted compaction",
        working: "Error while aborting compaction as compaction is in state-working",
        ready: "Error while aborting compaction as compaction is in state-ready for cleaning",
        succeeded: "Error while aborting compaction as compaction is in state-succeeded",
        999: "No Such Compaction Id Available",
    }
    info = ms.compactions.get(initiated)
    assert (info.state, info.state.display, info.error_message) == (S.ABORTED, "aborted", ABORTED_BY_REQUEST)
    assert ms.compactions.abort_compactions([initiated]) == {
        initiated: "Error while aborting compaction as compaction is in state-aborted"}
    assert {e.id: e.state for e in ms.compactions.show()}[working] is S.WORKING


# --- claiming -----------------------------------------------------------------------------------------------------

def test_claim_takes_the_oldest_initiated_entry(ms, clock):
    first = ms.compactions.enqueue("default", "t", "p=1", MAJOR).compaction_id
    clock.advance(5)
    second = ms.compactions.enqueue("default", "t", "p=2", MAJOR).compaction_id
    clock.advance(5)
    third = ms.compactions.enqueue("default", "t", "p=3", MAJOR, pool="etl").compaction_id
    assert ms.compactions.claim(worker_id="a").id == first
    assert ms.compactions.claim(worker_id="b", pool="etl").id == third
    assert ms.compactions.claim(worker_id="c", pool="etl") is None
    assert ms.compactions.claim(worker_id="d").id == second
    assert ms.compactions.claim(worker_id="e") is None
    assert {e.id: e.worker_id for e in ms.compactions.show()} == {first: "a", second: "d", third: "b"}


def test_claim_by_id_skips_the_queue_order(ms):
    ms.compactions.enqueue("default", "t", "p=1", MAJOR)
    second = ms.compactions.enqueue("default", "t", "p=2", MAJOR).compaction_id
    assert ms.compactions.claim(worker_id="w", compaction_id=second).id == second
    with pytest.raises(CompactionStateError, match=f"cannot claim compaction {second}: it is working"):
        ms.compactions.claim(worker_id="w", compaction_id=second)


def test_set_compactor_txn(ms):
    compaction_id = in_state(ms, S.WORKING, "p=1")
    txn_id = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    ms.compactions.set_compactor_txn(compaction_id, txn_id, 7)
    info = ms.compactions.get(compaction_id)
    assert (info.txn_id, info.highest_write_id, info.state) == (txn_id, 7, S.WORKING)


def test_set_compactor_txn_with_an_unknown_txn_changes_nothing(ms):
    compaction_id = in_state(ms, S.WORKING, "p=1")
    with pytest.raises(MetastoreError) as info:
        ms.compactions.set_compactor_txn(compaction_id, 4242, 7)
    assert "4242" in str(info.value)
    current = ms.compactions.get(compaction_id)
    assert (current.txn_id, current.highest_write_id, current.state) == (None, None, S.WORKING)
    assert rows(ms, schema.txn_components) == []


def test_revert_timed_out_workers(ms, clock):
    stale = in_state(ms, S.WORKING, "p=1")
    compactor_txn = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    ms.compactions.set_compactor_txn(stale, compactor_txn, 7)
    worker = ms.compactions.get(stale).worker_id
    clock.advance(1000)
    fresh = in_state(ms, S.WORKING, "p=2")
    clock.advance(1)
    [reverted] = ms.compactions.revert_timed_out_workers(1000)
    # returned as it was when put back: the dead attempt's worker and compactor transaction, for the caller to abort
    assert (reverted.id, reverted.state, reverted.worker_id, reverted.txn_id) == (stale, S.WORKING, worker, compactor_txn)
    info = ms.compactions.get(stale)
    assert (info.state, info.worker_id, info.start_ms, info.txn_id, info.highest_write_id) == (
        S.INITIATED, None, None, None, None)
    assert ms.compactions.get(fresh).state is S.WORKING
    assert ms.compactions.claim(worker_id="again").id == stale


# --- cleaning -----------------------------------------------------------------------------------------------------

def test_mark_cleaned_forgets_completed_components_up_to_the_highest_write_id(ms):
    commit_writes(ms, "t", "p=1", 2)
    commit_writes(ms, "t", "p=2", 1)
    aborted = ms.txns.open_txn()
    ms.txns.allocate_write_ids([aborted], "default", "t")
    ms.txns.add_components(aborted, "default", "t", ["p=1"], Operation.INSERT)
    ms.txns.abort(aborted)
    compaction_id, _ = compact(ms, "t", "p=1")
    assert ms.compactions.get(compaction_id).highest_write_id == 4
    commit_writes(ms, "t", "p=1", 1)  # write id 5, after the compaction
    ms.compactions.mark_cleaned(compaction_id)
    remaining = sorted((r["CTC_PARTITION"], r["CTC_WRITEID"]) for r in rows(ms, schema.completed_txn_components))
    assert remaining == [("p=1", 5), ("p=2", 3)]
    assert rows(ms, schema.txn_components) == []  # the aborted write (id 4) is covered by the compaction


def test_mark_cleaned_of_an_unpartitioned_table_keeps_other_tables(ms):
    commit_writes(ms, "t", None, 2)
    commit_writes(ms, "u", None, 1)
    compaction_id, _ = compact(ms, "t", None)
    ms.compactions.mark_cleaned(compaction_id)
    assert [(r["CTC_TABLE"], r["CTC_WRITEID"]) for r in rows(ms, schema.completed_txn_components)] == [("u", 1)]


def test_ready_to_clean_waits_for_transactions_open_at_compaction_commit(ms):
    commit_writes(ms, "t", "p=1", 1)
    compaction_id, compactor = compact(ms, "t", "p=1", commit=False)
    reader = ms.txns.open_txn()  # open while the compaction is not yet visible: may read the old files
    ms.txns.commit(compactor)
    after = ms.txns.open_txn()  # opened after the commit: sees the compacted files
    assert ms.compactions.ready_to_clean() == []
    ms.txns.commit(reader)
    assert [e.id for e in ms.compactions.ready_to_clean()] == [compaction_id]
    assert ms.txns.min_open_txn() == after


def test_a_compactor_transaction_without_components_records_its_entry_at_commit(ms):
    """A compactor's transaction that recorded nothing yet (a worker that refuses the entry before it attaches its
    transaction) is not committed by the one-statement path of a transaction that wrote nothing: its commit still
    records the entry's CQ_NEXT_TXN_ID and commit time, on both databases."""
    compaction_id = ms.compactions.enqueue("default", "t", "p=1", MAJOR).compaction_id
    ms.compactions.claim(worker_id="host-w1", compaction_id=compaction_id)
    txn_id = ms.compactions.open_compactor_txn(compaction_id, ms.txns, worker_id="host-w1",
                                               txn_type=TxnType.COMPACTION, agent_info="test")
    ms.txns.commit(txn_id)
    [entry] = [r for r in rows(ms, schema.compaction_queue) if r["CQ_ID"] == compaction_id]
    assert entry["CQ_TXN_ID"] == txn_id and entry["CQ_NEXT_TXN_ID"] == txn_id + 1 and entry["CQ_COMMIT_TIME"]
    assert txn_id not in [r["TXN_ID"] for r in rows(ms, schema.txns)]


def test_ready_to_clean_waits_for_the_compactor_to_commit(ms):
    """An entry marked compacted whose compactor transaction is still open is not ready: the compaction may still
    abort, and the docstring promises that every transaction open at the compaction's commit has finished. (Hive's
    findReadyToClean query lets CQ_NEXT_TXN_ID IS NULL through, but its Cleaner then caps the snapshot at the lowest
    open transaction, so it sees no new base and deletes nothing.)"""
    commit_writes(ms, "t", "p=1", 1)
    compaction_id, compactor = compact(ms, "t", "p=1", commit=False)
    assert ms.compactions.ready_to_clean() == []
    ms.txns.commit(compactor)
    assert [e.id for e in ms.compactions.ready_to_clean()] == [compaction_id]


def test_a_reader_lease_from_before_the_commit_blocks_cleaning_of_its_table_only(ms):
    commit_writes(ms, "t", None, 1)
    commit_writes(ms, "u", None, 1)
    on_t, compactor_t = compact(ms, "t", None, commit=False)
    on_u, compactor_u = compact(ms, "u", None, commit=False)
    old_lease = ms.leases.acquire("default", "t")
    other_table_lease = ms.leases.acquire("default", "v")
    ms.txns.commit(compactor_t)
    ms.txns.commit(compactor_u)
    new_lease = ms.leases.acquire("default", "t")
    assert [e.id for e in ms.compactions.ready_to_clean()] == [on_u]
    ms.leases.release(old_lease.lease_id)
    assert [e.id for e in ms.compactions.ready_to_clean()] == [on_t, on_u]
    assert new_lease.lease_id != other_table_lease.lease_id


def test_the_lowest_highest_write_id_of_a_partition_is_cleaned_first(ms):
    commit_writes(ms, "t", "p=1", 2)
    first, _ = compact(ms, "t", "p=1")
    commit_writes(ms, "t", "p=1", 2)
    second, _ = compact(ms, "t", "p=1")
    commit_writes(ms, "t", "p=2", 1)
    other, _ = compact(ms, "t", "p=2")
    assert [(e.id, e.highest_write_id) for e in ms.compactions.ready_to_clean()] == [(first, 2), (other, 5)]
    ms.compactions.mark_cleaned(first)
    assert [e.id for e in ms.compactions.ready_to_clean()] == [second, other]


def test_retention_delays_cleaning(ms, clock):
    commit_writes(ms, "t", "p=1", 1)
    compaction_id, _ = compact(ms, "t", "p=1")
    clock.advance(999)
    assert ms.compactions.ready_to_clean(retention_ms=1000) == []
    clock.advance(2)
    assert [e.id for e in ms.compactions.ready_to_clean(retention_ms=1000)] == [compaction_id]
    assert [e.id for e in ms.compactions.ready_to_clean()] == [compaction_id]


def test_abort_txn_cleanup_entries_are_not_for_the_cleaner(ms):
    commit_writes(ms, "t", "p=1", 1)
    compaction_id = ms.compactions.enqueue("default", "t", "p=1", CompactionType.ABORT_TXN_CLEANUP).compaction_id
    ms.compactions.claim(worker_id="w", compaction_id=compaction_id)
    ms.compactions.mark_compacted(compaction_id)
    assert ms.compactions.ready_to_clean() == []


# --- compaction pools (Hive 4) ----------------------------------------------------------------------------------

def test_a_request_without_a_pool_takes_the_tables_then_the_databases_property(ms):
    from support.queue_tables import ensure_table

    for table in ("own", "inherits", "blank", "plain"):
        ensure_table(ms, "etl_db" if table != "plain" else "default", table, None)
    ms.catalog.set_database_params("etl_db", {"hive.compactor.worker.pool": "etl"})
    ms.catalog.set_table_params("etl_db", "own", {"hive.compactor.worker.pool": "hot"})
    ms.catalog.set_table_params("etl_db", "blank", {"hive.compactor.worker.pool": ""})

    def pool_of(database, table, **options):
        return ms.compactions.get(ms.compactions.enqueue(database, table, None, MAJOR, **options).compaction_id).pool_name

    assert pool_of("etl_db", "own") == "hot"
    assert pool_of("etl_db", "inherits") == "etl"
    assert pool_of("etl_db", "blank") == "etl"
    assert pool_of("default", "plain") == "default"
    ms.compactions.abort_compactions([e.id for e in ms.compactions.show()])
    assert pool_of("etl_db", "own", pool="adhoc") == "adhoc"  # POOL 'adhoc' beats every property
    assert pool_of("etl_db", "inherits", pool="default") == "default"


@pytest.mark.parametrize("pool", ["", "etl pool", "etl;drop", "a" * 129, "ünï", "p/q"])
def test_a_bad_pool_name_is_one_clear_error_and_queues_nothing(ms, pool):
    from acid_core.errors import InvalidPoolNameError

    with pytest.raises(InvalidPoolNameError, match=r"compaction pool name .* is not valid: use 1 to 128 letters"):
        ms.compactions.enqueue("default", "t", None, MAJOR, pool=pool)
    assert ms.compactions.show() == []


def test_a_bad_pool_property_is_refused_when_queued(ms):
    from support.queue_tables import ensure_table

    from acid_core.errors import InvalidPoolNameError

    ensure_table(ms, "default", "t", None)
    ms.catalog.set_table_params("default", "t", {"hive.compactor.worker.pool": "etl pool"})
    with pytest.raises(InvalidPoolNameError, match="table default.t: property 'hive.compactor.worker.pool' = "
                                                   "'etl pool' is not valid"):
        ms.compactions.enqueue("default", "t", None, MAJOR)
    assert ms.compactions.show() == []


def test_history_keeps_the_pool(ms):
    succeeded = ms.compactions.enqueue("default", "t", "p=1", MAJOR, pool="etl").compaction_id
    failed = ms.compactions.enqueue("default", "t", "p=2", MAJOR, pool="etl").compaction_id
    ms.compactions.claim(worker_id="w", compaction_id=succeeded)
    ms.compactions.mark_compacted(succeeded)
    ms.compactions.mark_cleaned(succeeded)
    ms.compactions.mark_failed(failed, "boom")
    history = {r["CC_ID"]: r["CC_POOL_NAME"] for r in rows(ms, schema.completed_compactions)}
    assert history == {succeeded: "etl", failed: "etl"}
    assert [e.id for e in ms.compactions.show(pool="etl", state=S.SUCCEEDED)] == [succeeded]


def test_initiated_lists_one_pool_or_all_but_some(ms, clock):
    default = ms.compactions.enqueue("default", "t", "p=1", MAJOR).compaction_id
    clock.advance(10)
    etl = ms.compactions.enqueue("default", "t", "p=2", MAJOR, pool="etl").compaction_id
    clock.advance(10)
    typo = ms.compactions.enqueue("default", "t", "p=3", MAJOR, pool="etl_typo").compaction_id
    clock.advance(10)
    hot = ms.compactions.enqueue("default", "t", "p=4", MAJOR, pool="hot").compaction_id
    ms.compactions.claim(worker_id="w", compaction_id=hot)  # working: listed by no one

    def ids(**which):
        return [e.id for e in ms.compactions.initiated(**which)]

    assert ids() == [default, etl, typo]
    assert ids(pool="etl") == [etl]
    assert ids(pool="default") == [default]
    assert ids(other_than=("etl", "hot")) == [default, typo]  # a pool without workers of its own is the default's
    assert ids(other_than=("etl",), limit=1) == [default]
    # Hive's hive.compactor.worker.pool.timeout: a labelled pool's entry waiting that long is the default's too
    assert ids(other_than=("etl", "hot"), pool_timeout_ms=15) == [default, etl, typo]  # waited 20 ms
    assert ids(other_than=("etl", "hot"), pool_timeout_ms=25) == [default, typo]
    with pytest.raises(UsageError, match="not both"):
        ms.compactions.initiated(pool="etl", other_than=("hot",))


# --- show ---------------------------------------------------------------------------------------------------------

def test_show_filters(ms):
    a = ms.compactions.enqueue("default", "t", "p=1", MAJOR).compaction_id
    b = ms.compactions.enqueue("default", "t", "p=2", MINOR, pool="etl").compaction_id
    c = ms.compactions.enqueue("default", "u", None, MAJOR).compaction_id
    d = ms.compactions.enqueue("sales", "t", None, MINOR).compaction_id
    ms.compactions.claim(worker_id="w", compaction_id=b)
    ms.compactions.mark_failed(c, "boom")

    def ids(**filters):
        return sorted(e.id for e in ms.compactions.show(**filters))

    assert ids() == [a, b, c, d]
    assert ids(compaction_id=c) == [c]
    assert ids(database="SALES") == [d]
    assert ids(database="default", table="t") == [a, b]
    assert ids(table="t") == [a, b, d]
    assert ids(database="default", table="t", partition="p=2") == [b]
    assert ids(pool="etl") == [b]
    assert ids(pool="default") == [a, c, d]
    assert ids(compaction_type=MINOR) == [b, d]
    assert ids(state=S.FAILED) == [c]
    assert ids(state=S.WORKING) == [b]
    assert ids(state=S.INITIATED, database="default") == [a]
    assert len(ms.compactions.show(limit=2)) == 2


def test_show_orders_by_latest_activity_then_enqueue_time(ms, clock):
    """Hive's ShowCompactHandler: most recent of (end, start, commit time) first, then enqueue time ascending."""
    started = ms.compactions.enqueue("default", "t", "p=1", MAJOR).compaction_id
    clock.advance(10)
    failed = ms.compactions.enqueue("default", "t", "p=2", MAJOR).compaction_id
    clock.advance(10)
    ms.compactions.claim(worker_id="w", compaction_id=started)      # start = +20
    clock.advance(10)
    ms.compactions.mark_failed(failed, "boom")                        # end = +30
    clock.advance(10)
    early = ms.compactions.enqueue("default", "t", "p=3", MAJOR).compaction_id     # enqueued +40
    clock.advance(5)
    late = ms.compactions.enqueue("default", "t", "p=4", MAJOR).compaction_id      # enqueued +45
    clock.advance(5)
    ms.compactions.claim(worker_id="w", compaction_id=late)                        # start = +50
    ms.compactions.claim(worker_id="w", compaction_id=early)                       # start = +50
    assert [e.id for e in ms.compactions.show()] == [early, late, failed, started]


def test_state_and_type_names():
    assert [state.display for state in S] == ["initiated", "working", "ready for cleaning", "failed", "succeeded",
                                              "did not initiate", "refused", "aborted"]
    assert S.parse("Ready For Cleaning") is S.READY_FOR_CLEANING and S.parse("succeeded") is S.SUCCEEDED
    with pytest.raises(MetastoreError):
        S.parse("done")
    assert [t.display for t in CompactionType] == ["MAJOR", "MINOR", "REBALANCE", "ABORT_TXN_CLEANUP"]


# --- history retention --------------------------------------------------------------------------------------------

def _history(ms: Metastore, partition: str, states: list[CompactionState], compaction_type: CompactionType = MAJOR):
    ids = []
    for state in states:
        if state is S.DID_NOT_INITIATE:
            ids.append(ms.compactions.record_did_not_initiate("default", "t", partition, compaction_type, "x"))
            continue
        compaction_id = ms.compactions.enqueue("default", "t", partition, compaction_type).compaction_id
        if state is S.FAILED:
            ms.compactions.mark_failed(compaction_id, "boom")
        elif state is S.REFUSED:
            ms.compactions.mark_refused(compaction_id, "nothing to do")
        else:
            ms.compactions.claim(worker_id="w", compaction_id=compaction_id)
            ms.compactions.mark_compacted(compaction_id)
            ms.compactions.mark_cleaned(compaction_id)
        ids.append(compaction_id)
    return ids


def test_purge_history_keeps_the_newest_per_state_and_partition(ms):
    p1 = _history(ms, "p=1", [S.SUCCEEDED] * 5 + [S.FAILED] * 5 + [S.DID_NOT_INITIATE] * 4 + [S.REFUSED] * 5)
    p2 = _history(ms, "p=2", [S.FAILED] * 2)
    aborted = in_state(ms, S.ABORTED, "p=3")
    assert ms.compactions.purge_history() == 8
    kept = sorted(r["CC_ID"] for r in rows(ms, schema.completed_compactions))
    assert kept == sorted(p1[2:5] + p1[7:10] + p1[12:14] + p1[16:19] + p2 + [aborted])
    assert ms.compactions.purge_history() == 0


def test_purge_history_since_looks_only_at_recently_changed_or_aging_partitions(ms, clock):
    quiet = _history(ms, "p=1", [S.SUCCEEDED] * 5)
    aging = _history(ms, "p=2", [S.FAILED])
    clock.advance(8 * 24 * 3600 * 1000)
    aging += _history(ms, "p=2", [S.SUCCEEDED])
    clock.advance(2 * 3600 * 1000)
    busy = _history(ms, "p=3", [S.SUCCEEDED] * 4)
    since = clock.now_ms() - 3600 * 1000
    assert ms.compactions.purge_history(since_ms=since) == 2  # p=3's oldest, and p=2's failure behind its success
    kept = {r["CC_ID"] for r in rows(ms, schema.completed_compactions)}
    assert kept == set(quiet) | {aging[1]} | set(busy[1:])
    assert ms.compactions.purge_history() == 2  # a full pass finds p=1 as well
    assert ms.compactions.purge_history(since_ms=since) == 0


def test_purge_history_custom_retention(ms):
    ids = _history(ms, "p=1", [S.SUCCEEDED] * 3 + [S.FAILED] * 3)
    assert ms.compactions.purge_history(HistoryRetention(succeeded=1, failed=0)) == 5
    assert [r["CC_ID"] for r in rows(ms, schema.completed_compactions)] == [ids[2]]


def test_purge_history_drops_old_failures_behind_a_newer_major_success(ms, clock):
    old_failed = _history(ms, "p=1", [S.FAILED, S.DID_NOT_INITIATE, S.REFUSED])
    clock.advance(8 * 24 * 3600 * 1000)
    [success] = _history(ms, "p=1", [S.SUCCEEDED])
    newer_failed = _history(ms, "p=1", [S.FAILED])
    other_partition = _history(ms, "p=2", [S.FAILED])
    assert ms.compactions.purge_history() == 3
    assert sorted(r["CC_ID"] for r in rows(ms, schema.completed_compactions)) == sorted(
        [success] + newer_failed + other_partition)
    assert not set(old_failed) & {r["CC_ID"] for r in rows(ms, schema.completed_compactions)}


def test_purge_history_a_minor_success_only_drops_old_minor_failures(ms, clock):
    major_failed = _history(ms, "p=1", [S.FAILED], MAJOR)
    minor_failed = _history(ms, "p=1", [S.FAILED], MINOR)
    clock.advance(8 * 24 * 3600 * 1000)
    minor_success = _history(ms, "p=1", [S.SUCCEEDED], MINOR)
    assert ms.compactions.purge_history() == 1
    assert sorted(r["CC_ID"] for r in rows(ms, schema.completed_compactions)) == sorted(major_failed + minor_success)
    assert minor_failed[0] not in {r["CC_ID"] for r in rows(ms, schema.completed_compactions)}


def test_purge_history_any_newer_major_success_counts_not_only_the_newest_success(ms, clock):
    """Hive's PurgeCompactionHistoryFunction walks newest first and remembers every success type it passed: an old
    failed MAJOR goes when a newer MAJOR succeeded, even if the newest success is a MINOR."""
    [old_failed_major] = _history(ms, "p=1", [S.FAILED], MAJOR)
    clock.advance(8 * 24 * 3600 * 1000)
    _history(ms, "p=1", [S.SUCCEEDED], MAJOR)
    _history(ms, "p=1", [S.SUCCEEDED], MINOR)
    assert ms.compactions.purge_history() == 1
    assert old_failed_major not in {r["CC_ID"] for r in rows(ms, schema.completed_compactions)}


def test_purge_history_keeps_recent_failures_even_behind_a_success(ms, clock):
    """Only failures that started before history.retention.timeout go early (Hive's timedOut uses CC_START)."""
    for partition in ("p=1", "p=1"):
        compaction_id = ms.compactions.enqueue("default", "t", partition, MAJOR).compaction_id
        ms.compactions.claim(worker_id="w", compaction_id=compaction_id)
        ms.compactions.mark_failed(compaction_id, "boom")
    clock.advance(1000)
    _history(ms, "p=1", [S.SUCCEEDED])
    assert ms.compactions.purge_history() == 0
