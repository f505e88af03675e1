"""Locks (Hive's HIVE_LOCKS and checkLock): the compatibility matrix, overlap of database / table / partition locks,
FIFO queueing, release on commit and abort, txn-less locks with heartbeats and expiry, timeouts and SHOW LOCKS.
"""

from __future__ import annotations

import pytest

from acid_core.errors import LockTimeoutError, MetastoreError, NoSuchLockError, NoSuchTxnError, TxnAbortedError
from acid_core.metastore import Metastore
from acid_core.metastore.locks import LOCK_ACQUIRED, LOCK_WAITING, LockComponent, LockType, compatible

TIMEOUT_MS = 10_000
R, W, X, E = LockType.SHARED_READ, LockType.SHARED_WRITE, LockType.EXCL_WRITE, LockType.EXCLUSIVE

# Hive's lock matrix (TxnHandler's jumpTable / LockTypeComparator): may `requested` be granted beside `held`?
HIVE_MATRIX = {
    (R, R): True, (R, W): True, (R, X): True, (R, E): False,
    (W, R): True, (W, W): True, (W, X): False, (W, E): False,
    (X, R): True, (X, W): False, (X, X): False, (X, E): False,
    (E, R): False, (E, W): False, (E, X): False, (E, E): False,
}


@pytest.fixture
def ms(make_ms):
    return make_ms(txn_timeout_ms=TIMEOUT_MS)


def table(lock_type: LockType, name: str = "t", database: str = "default") -> LockComponent:
    return LockComponent(database, name, None, lock_type)


def partition(lock_type: LockType, name: str, table_name: str = "t") -> LockComponent:
    return LockComponent("default", table_name, name, lock_type)


def database(lock_type: LockType, name: str = "default") -> LockComponent:
    return LockComponent(name, None, None, lock_type)


def state_of(ms: Metastore, lock_id: int) -> str:
    states = {info.state for info in ms.locks.show_locks() if info.lock_id == lock_id}
    assert len(states) == 1, states
    return states.pop()


def test_compatible_follows_hives_matrix():
    assert {pair: compatible(*pair) for pair in HIVE_MATRIX} == HIVE_MATRIX


def test_matrix_on_one_table(ms):
    wrong = []
    for (requested, held), expected in HIVE_MATRIX.items():
        holder = ms.locks.lock([table(held)])
        assert holder.acquired
        response = ms.locks.lock([table(requested)])
        if response.acquired != expected:
            wrong.append(f"{requested.name} beside a held {held.name}: acquired={response.acquired}, Hive: {expected}")
        ms.locks.unlock(response.lock_id)
        ms.locks.unlock(holder.lock_id)
    assert not wrong, "\n".join(wrong)
    assert ms.locks.show_locks() == []


@pytest.mark.parametrize("held,requested,expected", [
    (database(E), table(R), False),
    (table(R), database(E), False),
    (database(R), table(E), False),
    (database(R), table(W), True),
    (database(E), table(R, database="other"), True),
    (database(E, "other"), database(R), True),
    (table(E), partition(R, "p=1"), False),
    (partition(E, "p=1"), table(R), False),
    (partition(X, "p=1"), table(W), False),
    (partition(E, "p=1"), partition(R, "p=2"), True),
    (partition(E, "p=1"), partition(E, "p=1", table_name="u"), True),
    (table(E), table(E, "u"), True),
    (database(E), partition(R, "p=1"), False),
], ids=lambda value: value.shown + ":" + value.lock_type.name if isinstance(value, LockComponent) else str(value))
def test_overlap(ms, held, requested, expected):
    assert ms.locks.lock([held]).acquired
    assert ms.locks.lock([requested]).acquired is expected


def test_fifo_a_compatible_request_waits_behind_a_waiting_exclusive(ms):
    reader = ms.locks.lock([table(R)])
    exclusive = ms.locks.lock([table(E)])
    late_reader = ms.locks.lock([table(R)])
    assert reader.acquired
    assert exclusive.state == LOCK_WAITING
    assert late_reader.state == LOCK_WAITING
    blocked = {info.lock_id: info.blocked_by_lock_id for info in ms.locks.show_locks()}
    assert blocked == {reader.lock_id: None, exclusive.lock_id: reader.lock_id, late_reader.lock_id: exclusive.lock_id}

    assert ms.locks.check_lock(late_reader.lock_id).state == LOCK_WAITING
    ms.locks.unlock(reader.lock_id)
    assert ms.locks.check_lock(late_reader.lock_id).state == LOCK_WAITING  # still behind the exclusive
    assert ms.locks.check_lock(exclusive.lock_id).acquired
    assert ms.locks.check_lock(late_reader.lock_id).state == LOCK_WAITING
    ms.locks.unlock(exclusive.lock_id)
    assert ms.locks.check_lock(late_reader.lock_id).acquired
    [info] = ms.locks.show_locks()
    assert info.blocked_by_lock_id is None and info.acquired_at_ms is not None


def test_a_request_with_several_components_is_granted_whole(ms):
    holder = ms.locks.lock([partition(E, "p=2")])
    request = ms.locks.lock([partition(W, "p=1"), partition(W, "p=2")])
    assert request.state == LOCK_WAITING
    assert {(info.partition, info.state) for info in ms.locks.show_locks() if info.lock_id == request.lock_id} == {
        ("p=1", LOCK_WAITING), ("p=2", LOCK_WAITING)}
    ms.locks.unlock(holder.lock_id)
    assert ms.locks.check_lock(request.lock_id).acquired
    assert {info.state for info in ms.locks.show_locks()} == {LOCK_ACQUIRED}


def test_a_transactions_own_locks_do_not_block_it(ms):
    txn_id = ms.txns.open_txn()
    assert ms.locks.lock([table(E)], txn_id=txn_id).acquired
    assert ms.locks.lock([table(R)], txn_id=txn_id).acquired
    assert ms.locks.lock([table(R)]).state == LOCK_WAITING


@pytest.mark.parametrize("finish", ["commit", "abort"])
def test_commit_and_abort_release_the_transactions_locks(ms, finish):
    txn_id = ms.txns.open_txn()
    ms.locks.lock([table(X), partition(W, "p=1", table_name="u")], txn_id=txn_id)
    waiter = ms.locks.lock([table(X)])
    assert waiter.state == LOCK_WAITING
    getattr(ms.txns, finish)(txn_id)
    assert [info.lock_id for info in ms.locks.show_locks()] == [waiter.lock_id]
    assert ms.locks.check_lock(waiter.lock_id).acquired


def test_lock_for_a_transaction_that_is_not_open(ms):
    aborted = ms.txns.open_txn()
    ms.txns.abort(aborted)
    with pytest.raises(TxnAbortedError) as info:
        ms.locks.lock([table(R)], txn_id=aborted)
    assert str(aborted) in str(info.value)
    with pytest.raises(NoSuchTxnError):
        ms.locks.lock([table(R)], txn_id=777)
    assert ms.locks.show_locks() == []
    assert ms.locks.lock([table(R)]).lock_id == 1  # the refused requests took no lock id


def test_bad_requests(ms):
    with pytest.raises(MetastoreError, match="at least one component"):
        ms.locks.lock([])
    with pytest.raises(MetastoreError, match="needs a table"):
        LockComponent("default", None, "p=1", R)
    with pytest.raises(ValueError):
        LockComponent("default", "t", None, "q")


def test_names_are_case_insensitive(ms):
    assert ms.locks.lock([LockComponent("Default", "T", None, E)]).acquired
    assert ms.locks.lock([table(R)]).state == LOCK_WAITING
    assert {(info.database, info.table) for info in ms.locks.show_locks()} == {("default", "t")}


# --- txn-less locks: unlock, heartbeat, expiry ----------------------------------------------------------------------

def test_unlock(ms):
    lock_id = ms.locks.lock([table(E)]).lock_id
    ms.locks.unlock(lock_id)
    assert ms.locks.show_locks() == []
    with pytest.raises(NoSuchLockError) as info:
        ms.locks.unlock(lock_id)
    assert str(lock_id) in str(info.value)
    with pytest.raises(NoSuchLockError):
        ms.locks.check_lock(lock_id)


def test_unlock_refuses_a_transactions_lock(ms):
    txn_id = ms.txns.open_txn()
    lock_id = ms.locks.lock([table(E)], txn_id=txn_id).lock_id
    with pytest.raises(MetastoreError) as info:
        ms.locks.unlock(lock_id)
    assert f"transaction {txn_id}" in str(info.value)
    assert [lock.lock_id for lock in ms.locks.show_locks()] == [lock_id]


def test_heartbeat_lock(ms, clock):
    lock_id = ms.locks.lock([table(R)]).lock_id
    clock.advance(300)
    ms.locks.heartbeat_lock(lock_id)
    [info] = ms.locks.show_locks()
    assert info.last_heartbeat_ms == clock.now_ms()
    with pytest.raises(NoSuchLockError) as caught:
        ms.locks.heartbeat_lock(lock_id + 1)
    assert str(lock_id + 1) in str(caught.value)


def test_txn_less_locks_expire_without_heartbeats(ms, clock):
    forgotten = ms.locks.lock([table(E)]).lock_id
    kept = ms.locks.lock([table(R, "u")]).lock_id
    waiter = ms.locks.lock([table(R)]).lock_id
    txn_id = ms.txns.open_txn()
    txn_lock = ms.locks.lock([table(R, "v")], txn_id=txn_id).lock_id
    clock.advance(TIMEOUT_MS)
    ms.locks.heartbeat_lock(kept)
    ms.locks.heartbeat_lock(waiter)
    ms.txns.heartbeat(txn_id)
    clock.advance(1)
    assert ms.txns.perform_timeouts() == []
    assert sorted(info.lock_id for info in ms.locks.show_locks()) == [kept, waiter, txn_lock]
    with pytest.raises(NoSuchLockError):
        ms.locks.heartbeat_lock(forgotten)
    assert ms.locks.check_lock(waiter).acquired


# --- waiting and timeouts -------------------------------------------------------------------------------------------

def test_lock_timeout_names_the_blocker_and_withdraws_the_request(ms):
    txn_id = ms.txns.open_txn()
    holder = ms.locks.lock([table(E)], txn_id=txn_id, agent_info="job-1").lock_id
    with pytest.raises(LockTimeoutError) as info:
        ms.locks.acquire([table(R)], timeout_ms=50)
    message = str(info.value)
    assert f"lock {holder}" in message
    assert "exclusive" in message and "held" in message
    assert f"transaction {txn_id}" in message and "tester@testhost" in message
    assert "withdrawn" in message
    assert [lock.lock_id for lock in ms.locks.show_locks()] == [holder]


def test_lock_timeout_behind_a_queued_request_names_it(ms):
    ms.locks.lock([table(R)])
    queued = ms.locks.lock([table(E)]).lock_id
    with pytest.raises(LockTimeoutError) as info:
        ms.locks.acquire([table(R)], timeout_ms=20)
    assert f"lock {queued}" in str(info.value) and "queued" in str(info.value)


def test_acquire_returns_at_once_when_free(ms):
    lock_id = ms.locks.acquire([table(E)], timeout_ms=0)
    assert state_of(ms, lock_id) == LOCK_ACQUIRED


# --- show locks ---------------------------------------------------------------------------------------------------

def test_show_locks_filters(ms, clock):
    txn_id = ms.txns.open_txn()
    on_db = ms.locks.lock([database(R, "sales")]).lock_id
    on_table = ms.locks.lock([table(W)], txn_id=txn_id, agent_info="agent").lock_id
    on_part = ms.locks.lock([partition(R, "p=1")]).lock_id
    on_other = ms.locks.lock([partition(R, "p=2", table_name="u")]).lock_id
    assert [i.lock_id for i in ms.locks.show_locks()] == [on_db, on_table, on_part, on_other]
    assert [i.lock_id for i in ms.locks.show_locks(database="sales")] == [on_db]
    assert [i.lock_id for i in ms.locks.show_locks(database="default")] == [on_table, on_part, on_other]
    assert [i.lock_id for i in ms.locks.show_locks(database="default", table="T")] == [on_table, on_part]
    assert [i.lock_id for i in ms.locks.show_locks(database="default", table="t", partition="p=1")] == [on_part]
    assert ms.locks.show_locks(database="nowhere") == []
    info = next(i for i in ms.locks.show_locks() if i.lock_id == on_table)
    assert (info.txn_id, info.database, info.table, info.partition, info.state, info.lock_type, info.user, info.host,
            info.agent_info, info.acquired_at_ms, info.last_heartbeat_ms) == (
        txn_id, "default", "t", None, LOCK_ACQUIRED, "w", "tester", "testhost", "agent", clock.now_ms(), clock.now_ms())
