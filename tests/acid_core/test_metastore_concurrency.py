"""The metastore under real concurrency: several OS processes (multiprocessing, 'spawn') on one SQLite file or one
PostgreSQL database. Ids never repeat or go missing, lock grants follow request order, first committer wins, and a
commit racing with an open cannot lose an update.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
import traceback

import pytest
import sqlalchemy as sa
from support.queue_tables import ensure_table

from acid_core.errors import WriteConflictError
from acid_core.metastore import Metastore
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.metastore.txns import Operation

# forkserver: a clean server process (no connection, no thread of the test's) imports the metastore once and forks
# each worker from it, instead of each worker starting a new interpreter and importing it again (spawn)
CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(["acid_core.metastore.store", "acid_core.metastore.locks", "sqlalchemy", "psycopg2"])
WAIT_SECONDS = 60
PROCESSES = 6


def _child(target, index: int, arguments: tuple, results) -> None:
    """Run one worker in a child process and report (index, 'ok', value) or (index, 'error', traceback)."""
    try:
        results.put((index, "ok", target(*arguments)))
    except BaseException:  # report everything: the parent asserts on it
        results.put((index, "error", traceback.format_exc()))


def run_processes(target, argument_lists: list[tuple]) -> list:
    """Start one process per argument tuple, wait for all, return their results in argument order."""
    results = CONTEXT.Queue()
    processes = [CONTEXT.Process(target=_child, args=(target, index, arguments, results))
                 for index, arguments in enumerate(argument_lists)]
    for process in processes:
        process.start()
    try:
        outcomes = dict((index, (status, value)) for index, status, value in
                        (results.get(timeout=WAIT_SECONDS) for _ in processes))
    finally:
        for process in processes:
            process.join(timeout=WAIT_SECONDS)
            if process.is_alive():
                process.kill()
                process.join()
    errors = [value for status, value in outcomes.values() if status == "error"]
    assert not errors, "a worker process failed:\n" + "\n".join(errors)
    return [outcomes[index][1] for index in range(len(argument_lists))]


def _metastore(url: str, warehouse: str) -> Metastore:
    return Metastore(url, warehouse=warehouse, pool_size=2)


@pytest.fixture
def ms(metastore_url, tmp_path):
    metastore = _metastore(metastore_url, str(tmp_path / "warehouse"))
    metastore.init()
    yield metastore
    metastore.close()


# --- txn ids ------------------------------------------------------------------------------------------------------

def _open_and_commit(url: str, warehouse: str, barrier, count: int) -> list[int]:
    metastore = _metastore(url, warehouse)
    try:
        barrier.wait(timeout=WAIT_SECONDS)
        ids = []
        for _ in range(count):
            txn_id = metastore.txns.open_txn()
            metastore.txns.commit(txn_id)
            ids.append(txn_id)
        return ids
    finally:
        metastore.close()


def test_txn_ids_from_concurrent_processes_are_exactly_one_to_n(ms, tmp_path):
    per_process = 200
    barrier = CONTEXT.Barrier(PROCESSES)
    results = run_processes(_open_and_commit, [(ms.url, str(tmp_path / "warehouse"), barrier, per_process)] * PROCESSES)
    everything = [txn_id for ids in results for txn_id in ids]
    total = PROCESSES * per_process
    assert len(everything) == len(set(everything)) == total
    assert sorted(everything) == list(range(1, total + 1))
    assert all(ids == sorted(ids) for ids in results)  # each process sees its own ids increase
    assert ms.txns.next_txn_id() == total + 1
    assert ms.txns.show_transactions() == []


# --- write ids ----------------------------------------------------------------------------------------------------

def _allocate_one_by_one(url: str, warehouse: str, barrier, txn_ids: list[int]) -> dict[int, int]:
    metastore = _metastore(url, warehouse)
    try:
        barrier.wait(timeout=WAIT_SECONDS)
        allocated = {}
        for txn_id in txn_ids:
            allocated.update(metastore.txns.allocate_write_ids([txn_id], "default", "t"))
        return allocated
    finally:
        metastore.close()


def test_concurrent_write_id_allocation_for_one_table(ms, tmp_path):
    """Many transactions of many processes take write ids of one new table: exactly 1..N, each once, stable."""
    txn_ids = ms.txns.open_txns(120)
    barrier = CONTEXT.Barrier(PROCESSES)
    results = run_processes(_allocate_one_by_one, [(ms.url, str(tmp_path / "warehouse"), barrier, txn_ids[i::PROCESSES])
                                                   for i in range(PROCESSES)])
    allocated = {txn: write_id for result in results for txn, write_id in result.items()}
    assert sorted(allocated) == txn_ids
    assert sorted(allocated.values()) == list(range(1, len(txn_ids) + 1))
    for result in results:  # within one process, later allocations get larger ids
        assert [result[t] for t in sorted(result, key=result.get)] == sorted(result.values())
    assert ms.txns.allocate_write_ids(txn_ids, "default", "t") == allocated
    assert ms.txns.allocate_write_ids([txn_ids[0]], "default", "u") == {txn_ids[0]: 1}


# --- compaction claims --------------------------------------------------------------------------------------------

def _claim_until_empty(url: str, warehouse: str, barrier, worker: str) -> list[int]:
    metastore = _metastore(url, warehouse)
    try:
        barrier.wait(timeout=WAIT_SECONDS)
        claimed = []
        while (info := metastore.compactions.claim(worker_id=worker)) is not None:
            claimed.append(info.id)
        return claimed
    finally:
        metastore.close()


def test_each_queued_compaction_is_claimed_by_exactly_one_worker(ms, tmp_path):
    from acid_core.metastore.codes import CompactionType

    ensure_table(ms, "default", "t", "p=0")
    queued = [ms.compactions.enqueue("default", "t", f"p={i}", CompactionType.MAJOR).compaction_id for i in range(60)]
    barrier = CONTEXT.Barrier(PROCESSES)
    results = run_processes(_claim_until_empty, [(ms.url, str(tmp_path / "warehouse"), barrier, f"worker-{i}")
                                                 for i in range(PROCESSES)])
    claimed = [compaction_id for ids in results for compaction_id in ids]
    assert sorted(claimed) == queued
    owners = {e.id: e.worker_id for e in ms.compactions.show()}
    for index, ids in enumerate(results):
        assert all(owners[compaction_id] == f"worker-{index}" for compaction_id in ids)


def _enqueue_same_partition(url: str, warehouse: str, barrier) -> tuple[bool, int, str]:
    from acid_core.metastore.codes import CompactionType

    metastore = _metastore(url, warehouse)
    try:
        barrier.wait(timeout=WAIT_SECONDS)
        result = metastore.compactions.enqueue("default", "t", "p=1", CompactionType.MAJOR)
        return result.accepted, result.compaction_id, result.message
    finally:
        metastore.close()


def test_concurrent_enqueues_of_one_partition_accept_exactly_one(ms, tmp_path):
    barrier = CONTEXT.Barrier(PROCESSES)
    ensure_table(ms, "default", "t", "p=1")
    results = run_processes(_enqueue_same_partition, [(ms.url, str(tmp_path / "warehouse"), barrier)] * PROCESSES)
    accepted = [result for result in results if result[0]]
    assert len(accepted) == 1
    winner = accepted[0][1]
    for ok, _, message in results:
        if not ok:
            assert message == f"Compaction is already scheduled with state='initiated' and id={winner}"
    assert [e.id for e in ms.compactions.show()] == [winner]


# --- lock order ---------------------------------------------------------------------------------------------------

def _queue_and_wait(url: str, warehouse: str, lock_type: str, go, requests, grants) -> int:
    """Request a lock when told to, report the request, wait for the grant, report it, hold briefly, unlock."""
    metastore = _metastore(url, warehouse)
    try:
        go.wait(timeout=WAIT_SECONDS)
        response = metastore.locks.lock([LockComponent("default", "t", None, LockType(lock_type))])
        requests.put(response.lock_id)
        metastore.locks.wait_for_lock(response.lock_id, timeout_ms=WAIT_SECONDS * 1000)
        grants.put(response.lock_id)
        time.sleep(0.05)
        metastore.locks.unlock(response.lock_id)
        return response.lock_id
    finally:
        metastore.close()


def test_lock_grants_follow_request_order_across_processes(ms, tmp_path):
    holder = ms.locks.lock([LockComponent("default", "t", None, LockType.EXCLUSIVE)]).lock_id
    kinds = ["x", "e", "x", "e"]  # pairwise incompatible: one holder at a time
    gates = [CONTEXT.Event() for _ in kinds]
    requests, grants, results = CONTEXT.Queue(), CONTEXT.Queue(), CONTEXT.Queue()
    processes = [CONTEXT.Process(target=_child, args=(
        _queue_and_wait, index, (ms.url, str(tmp_path / "warehouse"), kind, gates[index], requests, grants), results))
        for index, kind in enumerate(kinds)]
    for process in processes:
        process.start()
    try:
        requested = []
        for gate in gates:  # one request at a time, so the request order is known
            gate.set()
            requested.append(requests.get(timeout=WAIT_SECONDS))
        assert requested == sorted(requested)
        assert {info.lock_id: info.state for info in ms.locks.show_locks()} == {
            holder: "a", **{lock_id: "w" for lock_id in requested}}
        ms.locks.unlock(holder)
        granted = [grants.get(timeout=WAIT_SECONDS) for _ in kinds]
        outcomes = [results.get(timeout=WAIT_SECONDS) for _ in kinds]
    finally:
        for gate in gates:
            gate.set()
        for process in processes:
            process.join(timeout=WAIT_SECONDS)
            if process.is_alive():
                process.kill()
                process.join()
    assert all(status == "ok" for _, status, _ in outcomes), outcomes
    assert granted == requested
    assert ms.locks.show_locks() == []


def _exclusive_sections(url: str, warehouse: str, barrier, inside, rounds: int) -> int:
    """Take an exclusive lock `rounds` times; count how many holders were inside at once (must stay 1)."""
    metastore = _metastore(url, warehouse)
    try:
        barrier.wait(timeout=WAIT_SECONDS)
        worst = 0
        for _ in range(rounds):
            lock_id = metastore.locks.acquire([LockComponent("default", "t", None, LockType.EXCL_WRITE)],
                                              timeout_ms=WAIT_SECONDS * 1000)
            with inside.get_lock():
                inside.value += 1
                worst = max(worst, inside.value)
            time.sleep(0.01)
            with inside.get_lock():
                inside.value -= 1
            metastore.locks.unlock(lock_id)
        return worst
    finally:
        metastore.close()


def test_an_exclusive_lock_has_one_holder_at_a_time(ms, tmp_path):
    workers = 3
    barrier, inside = CONTEXT.Barrier(workers), CONTEXT.Value("i", 0)
    results = run_processes(_exclusive_sections, [(ms.url, str(tmp_path / "warehouse"), barrier, inside, 4)] * workers)
    assert results == [1] * workers
    assert ms.locks.show_locks() == []


# --- first committer wins -----------------------------------------------------------------------------------------

def _update_then_commit(url: str, warehouse: str, barrier) -> str:
    metastore = _metastore(url, warehouse)
    try:
        txn_id = metastore.txns.open_txn()
        metastore.txns.allocate_write_ids([txn_id], "default", "t")
        metastore.txns.add_components(txn_id, "default", "t", ["p=1"], Operation.UPDATE)
        barrier.wait(timeout=WAIT_SECONDS)  # every transaction is open before anyone commits
        try:
            metastore.txns.commit(txn_id)
            return "committed"
        except WriteConflictError:
            return "conflict"
    finally:
        metastore.close()


def test_exactly_one_of_concurrent_conflicting_committers_wins(ms, tmp_path):
    barrier = CONTEXT.Barrier(PROCESSES)
    outcomes = run_processes(_update_then_commit, [(ms.url, str(tmp_path / "warehouse"), barrier)] * PROCESSES)
    assert sorted(outcomes) == ["committed"] + ["conflict"] * (PROCESSES - 1)
    assert [t.state for t in ms.txns.show_transactions()] == ["a"] * (PROCESSES - 1)


# --- a commit racing with an open (threads, forced interleaving) ---------------------------------------------------

class _Outcome:
    """What a helper thread returned or raised."""

    def __init__(self) -> None:
        self.value = None
        self.error: BaseException | None = None


def _in_thread(function) -> tuple[threading.Thread, _Outcome]:
    outcome = _Outcome()

    def run() -> None:
        try:
            outcome.value = function()
        except BaseException as exc:  # handed to the test thread
            outcome.error = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_an_update_cannot_be_lost_when_its_commit_races_an_open(metastore_url, tmp_path):
    """Hive makes commitTxn mutex with openTxns (both lock NEXT_TXN_ID): a transaction opened while an update commits
    either sees that update or conflicts with it.

    Forced interleaving: A's commit pauses right after it read NEXT_TXN_ID for its commit id; meanwhile another client
    opens D and takes D's snapshot; then A finishes. D updates the same partition. If D's snapshot did not see A, D's
    commit must fail with a write conflict, else A's update is lost.
    """
    warehouse = str(tmp_path / "warehouse")
    committer, other = _metastore(metastore_url, warehouse), _metastore(metastore_url, warehouse)
    try:
        committer.init()
        first = committer.txns.open_txn()
        committer.txns.allocate_write_ids([first], "default", "t")
        committer.txns.add_components(first, "default", "t", ["p=1"], Operation.UPDATE)
        reached, go = threading.Event(), threading.Event()

        def after_execute(conn, cursor, statement, parameters, context, executemany):
            if not reached.is_set() and statement.lstrip().upper().startswith("SELECT") and "NTXN_NEXT" in statement:
                reached.set()
                go.wait(timeout=WAIT_SECONDS)

        sa.event.listen(committer.db.engine, "after_cursor_execute", after_execute)
        commit_thread, commit_outcome = _in_thread(lambda: committer.txns.commit(first))
        assert reached.wait(timeout=WAIT_SECONDS), "the commit never read NEXT_TXN_ID"

        def open_and_read():
            second = other.txns.open_txn()
            return second, other.txns.snapshot(["default.t"], current_txn=second)

        open_thread, open_outcome = _in_thread(open_and_read)
        open_thread.join(timeout=1.0)  # a correct metastore may make the open wait for the commit
        go.set()
        commit_thread.join(timeout=WAIT_SECONDS)
        open_thread.join(timeout=WAIT_SECONDS)
        sa.event.remove(committer.db.engine, "after_cursor_execute", after_execute)
        assert commit_outcome.error is None, commit_outcome.error
        assert open_outcome.error is None, open_outcome.error
        second, snapshot = open_outcome.value

        other.txns.allocate_write_ids([second], "default", "t")
        other.txns.add_components(second, "default", "t", ["p=1"], Operation.UPDATE)
        try:
            other.txns.commit(second)
            lost = not snapshot.txns.is_valid(first)
        except WriteConflictError:
            lost = False
        assert not lost, (f"txn {second} did not see txn {first}'s update (snapshot {snapshot.txns}) and still "
                          "committed its own update of the same partition: a lost update")
    finally:
        committer.close()
        other.close()
