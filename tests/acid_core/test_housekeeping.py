"""housekeep(): each of Hive's housekeeping steps against a real metastore (SQLite and PostgreSQL) and the test clock."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.queue_tables import ensure_table

from acid_core.errors import UsageError
from acid_core.metastore import schema as s
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.compaction_history import HistoryRetention
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.metastore.txns import Operation, TxnType
from acid_core.operations.housekeeping import HousekeepingReport, housekeep

TXN_TIMEOUT_MS = 300_000
LONG_MAX = 2**63 - 1


def _txn_states(ms) -> dict[int, str]:
    return {info.txn_id: info.state for info in ms.txns.show_transactions()}


def _write_set_rows(ms) -> int:
    return ms.db.run("count", lambda conn: conn.execute(sa.select(sa.func.count()).select_from(s.write_set))
                     .scalar_one(), write=False)


def _assert_second_run_changes_nothing(ms, **options) -> None:
    again = housekeep(ms, **options)
    assert again == HousekeepingReport()
    assert not again.changed


def test_timed_out_txn_is_aborted_and_its_locks_released_heartbeated_one_survives(ms, clock):
    stale, alive = ms.txns.open_txns(2)
    ms.locks.acquire([LockComponent("default", "t", None, LockType.SHARED_READ)], txn_id=stale)
    clock.advance(TXN_TIMEOUT_MS // 2 + 1)
    ms.txns.heartbeat(alive)
    clock.advance(TXN_TIMEOUT_MS // 2 + 1)

    report = housekeep(ms)

    assert report.timed_out_txns == (stale,)
    assert ms.locks.show_locks() == []
    assert _txn_states(ms) == {alive: "o"}  # the stale one wrote nothing, so step 5 forgot it as well
    assert report.removed_aborted_txns == (stale,)
    _assert_second_run_changes_nothing(ms)


def test_aborted_txn_that_wrote_something_is_kept_and_its_write_id_stays_invalid(ms):
    with_write_id, empty, with_component = ms.txns.open_txns(3)
    write_id = ms.txns.allocate_write_ids([with_write_id], "default", "t")[with_write_id]
    ms.txns.add_components(with_component, "default", "u", [None], Operation.INSERT)
    for txn_id in (with_write_id, empty, with_component):
        ms.txns.abort(txn_id)

    report = housekeep(ms)

    assert report.removed_aborted_txns == (empty,)
    assert _txn_states(ms) == {with_write_id: "a", with_component: "a"}
    assert write_id in ms.txns.valid_write_ids("default", "t").aborted_ids
    _assert_second_run_changes_nothing(ms)


def test_an_aborted_write_id_with_nothing_on_disk_is_forgotten_after_the_txn_timeout(ms, clock):
    txn_id = ms.txns.open_txn()
    write_id = ms.txns.allocate_write_ids([txn_id], "default", "t")[txn_id]
    ms.txns.abort(txn_id)  # it never recorded a write (no TXN_COMPONENTS), so nothing of it is on disk
    assert housekeep(ms).removed_aborted_txns == ()  # a writer aborted just now may not have stopped yet
    clock.advance(TXN_TIMEOUT_MS + 1)
    report = housekeep(ms)
    assert report.removed_aborted_txns == (txn_id,)
    assert report.trimmed_write_id_rows == 1
    assert _txn_states(ms) == {}
    assert str(ms.txns.valid_write_ids("default", "t")) == f"default.t:{write_id}:{LONG_MAX}::"
    _assert_second_run_changes_nothing(ms)


def test_an_aborted_txn_with_staging_left_is_kept_until_its_staging_is_removed(ms, clock):
    ensure_table(ms, "default", "t", None)
    table = ms.catalog.get_table("default", "t")
    txn_id = ms.txns.open_txn()
    ms.txns.allocate_write_ids([txn_id], "default", "t")
    ms.txns.register_staging(txn_id, "default", "t", None)
    staging = Path(table.location) / f".delta_0000001_0000001_0000.tmp-t{txn_id}"
    staging.mkdir(parents=True)
    ms.txns.abort(txn_id)
    clock.advance(TXN_TIMEOUT_MS + 1)
    report = housekeep(ms)  # step 2 removes the staging, step 5 then forgets the transaction
    assert report.removed_staging == (str(staging),) and report.removed_aborted_txns == (txn_id,)
    assert not staging.exists()


def test_write_id_history_is_trimmed_below_the_lowest_open_or_aborted_txn(ms):
    first, pinned, later = [ms.txns.open_txn() for _ in range(3)]
    ids = {txn: ms.txns.allocate_write_ids([txn], "default", "t")[txn] for txn in (first, pinned, later)}
    ms.txns.commit(first)
    ms.txns.commit(later)
    before = str(ms.txns.valid_write_ids("default", "t"))
    assert housekeep(ms).trimmed_write_id_rows == 1  # `first` only: `pinned` is open
    assert str(ms.txns.valid_write_ids("default", "t")) == before == f"default.t:3:{ids[pinned]}:{ids[pinned]}:"
    ms.txns.commit(pinned)
    assert housekeep(ms).trimmed_write_id_rows == 2
    assert str(ms.txns.valid_write_ids("default", "t")) == f"default.t:3:{LONG_MAX}::"
    txn_id = ms.txns.open_txn()
    assert ms.txns.allocate_write_ids([txn_id], "default", "t")[txn_id] == 4  # NEXT_WRITE_ID: ids never repeat


def test_a_long_history_is_trimmed_in_batches(ms, monkeypatch):
    import acid_core.operations.housekeeping as module

    monkeypatch.setattr(module, "TRIM_BATCH", 4)
    for txn_id in ms.txns.open_txns(10):
        ms.txns.allocate_write_ids([txn_id], "default", "t")
        ms.txns.commit(txn_id)
    assert [housekeep(ms).trimmed_write_id_rows for _ in range(4)] == [4, 4, 2, 0]
    assert str(ms.txns.valid_write_ids("default", "t")) == f"default.t:10:{LONG_MAX}::"


def test_completed_components_of_a_partition_collapse_to_its_newest_write(ms, clock):
    def commit(operation, partition="p=1"):
        txn_id = ms.txns.open_txn()
        write_id = ms.txns.allocate_write_ids([txn_id], "default", "t")[txn_id]
        ms.txns.add_components(txn_id, "default", "t", [partition], operation)
        ms.txns.commit(txn_id)
        return write_id

    commit(Operation.UPDATE)
    commit(Operation.INSERT, "p=2")
    newest = commit(Operation.INSERT)
    rows = ms.db.run("read", lambda conn: conn.execute(sa.select(
        s.completed_txn_components.c.CTC_PARTITION, s.completed_txn_components.c.CTC_WRITEID,
        s.completed_txn_components.c.CTC_UPDATE_DELETE).order_by(s.completed_txn_components.c.CTC_PARTITION)).all(),
        write=False)
    assert [tuple(row) for row in rows] == [("p=1", newest, "Y"), ("p=2", 2, "N")]  # the update is passed on

    # rows that concurrent commits left (written here directly) collapse in housekeeping
    ms.db.run("insert", lambda conn: conn.execute(s.completed_txn_components.insert(), [
        {"CTC_TXNID": 90 + i, "CTC_DATABASE": "default", "CTC_TABLE": "t", "CTC_PARTITION": "p=2",
         "CTC_TIMESTAMP": clock.now_ms() + i, "CTC_WRITEID": 10 + i, "CTC_UPDATE_DELETE": "N"} for i in range(3)]))
    assert housekeep(ms).collapsed_completed_rows == 3
    _assert_second_run_changes_nothing(ms)


def test_empty_aborted_txns_are_kept_when_asked(ms):
    txn_id = ms.txns.open_txn()
    ms.txns.abort(txn_id)

    assert housekeep(ms, clean_empty_aborted=False).removed_aborted_txns == ()
    assert _txn_states(ms) == {txn_id: "a"}


def test_write_set_rows_go_once_no_open_txn_can_conflict(ms):
    older, updater = ms.txns.open_txns(2)
    ms.txns.allocate_write_ids([updater], "default", "t")
    ms.txns.add_components(updater, "default", "t", [None], Operation.UPDATE)
    ms.txns.commit(updater)
    assert _write_set_rows(ms) == 1

    assert housekeep(ms).removed_write_set_rows == 0  # `older` began before that commit: it may still conflict
    assert _write_set_rows(ms) == 1

    ms.txns.commit(older)
    assert housekeep(ms).removed_write_set_rows == 1
    assert _write_set_rows(ms) == 0
    _assert_second_run_changes_nothing(ms)


def _claimed_compaction(ms, partition: str, worker_id: str) -> tuple[int, int]:
    ensure_table(ms, "default", "t", partition)
    compaction_id = ms.compactions.enqueue("default", "t", partition, CompactionType.MAJOR).compaction_id
    ms.compactions.claim(worker_id=worker_id, compaction_id=compaction_id)
    txn_id = ms.txns.open_txn(txn_type=TxnType.COMPACTION, agent_info=f"compactor {worker_id}")
    ms.compactions.set_compactor_txn(compaction_id, txn_id, 1)
    return compaction_id, txn_id


def test_dead_worker_is_reverted_its_txn_aborted_and_only_its_result_dirs_removed(ms, clock):
    table = ms.catalog.create_table("default", "t", [("id", "int")], partition_keys=[("p", "string")],
                                    params={"transactional": "true"})
    worker_timeout_ms = 600_000
    dead, dead_txn = _claimed_compaction(ms, "p=1", "hung-worker")
    clock.advance(worker_timeout_ms // 2)
    live, live_txn = _claimed_compaction(ms, "p=2", "live-worker")
    part1, part2 = Path(table.partition_location("p=1")), Path(table.partition_location("p=2"))
    doomed = part1 / f".base_0000001_v{dead_txn:07d}.tmp-c{dead}"
    renamed = part1 / f"base_0000001_v{dead_txn:07d}"  # renamed before the worker died (or written in place on S3)
    kept = [part1 / "base_0000001", part1 / "delta_0000002_0000002_0000", part1 / f".base_0000001.tmp-c{live}",
            part2 / f".base_0000001_v{live_txn:07d}.tmp-c{live}",
            part2 / f".base_0000001.tmp-c{dead}",
            part1 / f".base_0000001_v{live_txn:07d}.tmp-c{dead}"]  # another attempt's: it carries another txn
    for directory in [doomed, renamed, *kept]:
        (directory / "bucket_00000").mkdir(parents=True)
    for _ in range(3):  # both workers' heartbeat threads keep their transactions alive
        clock.advance(worker_timeout_ms // 4)
        ms.txns.heartbeat(dead_txn)
        ms.txns.heartbeat(live_txn)

    report = housekeep(ms, worker_timeout_ms=worker_timeout_ms)

    assert report.timed_out_txns == ()
    assert report.reverted_compactions == (dead,)
    assert report.aborted_compactor_txns == (dead_txn,)
    assert report.removed_directories == (str(doomed), str(renamed))  # its transaction aborted: never visible
    assert not doomed.exists() and not renamed.exists() and all(directory.exists() for directory in kept)
    assert ms.compactions.get(dead).state is CompactionState.INITIATED
    assert ms.compactions.get(live).state is CompactionState.WORKING
    assert _txn_states(ms) == {dead_txn: "a", live_txn: "o"}  # the aborted one keeps its COMPACT component
    _assert_second_run_changes_nothing(ms, worker_timeout_ms=worker_timeout_ms)


def test_dead_worker_whose_txn_timed_out_is_reverted_and_its_hidden_dir_removed(ms, clock):
    table = ms.catalog.create_table("default", "t", [("id", "int")], params={"transactional": "true"})
    dead, dead_txn = _claimed_compaction(ms, None, "dead-worker")
    hidden = Path(table.location) / f".base_0000001_v{dead_txn:07d}.tmp-c{dead}"
    hidden.mkdir(parents=True)
    clock.advance(86_400_001)

    report = housekeep(ms)

    assert report.timed_out_txns == (dead_txn,)
    assert report.reverted_compactions == (dead,)
    assert report.aborted_compactor_txns == ()  # step 1 aborted it already
    assert report.removed_directories == (str(hidden),) and not hidden.exists()
    _assert_second_run_changes_nothing(ms)


def test_stale_reader_lease_expires_heartbeated_one_stays(ms, clock):
    stale = ms.leases.acquire("default", "t").lease_id
    alive = ms.leases.acquire("default", "t").lease_id
    clock.advance(200_000)
    ms.leases.heartbeat(alive)
    clock.advance(200_000)

    assert housekeep(ms, lease_timeout_ms=300_000).expired_leases == (stale,)
    assert [lease["RL_ID"] for lease in ms.leases.list()] == [alive]
    _assert_second_run_changes_nothing(ms, lease_timeout_ms=300_000)


def test_compaction_history_is_purged_to_the_retention(ms, clock):
    failed = []
    ensure_table(ms, "default", "t", None)
    for attempt in range(4):
        compaction_id = ms.compactions.enqueue("default", "t", None, CompactionType.MINOR).compaction_id
        ms.compactions.mark_failed(compaction_id, f"attempt {attempt}")
        failed.append(compaction_id)
        clock.advance(1_000)

    report = housekeep(ms, history=HistoryRetention(failed=2))

    assert report.purged_history == 2
    assert sorted(entry.id for entry in ms.compactions.show()) == failed[2:]
    _assert_second_run_changes_nothing(ms, history=HistoryRetention(failed=2))


def test_nothing_to_do_on_a_fresh_metastore(ms):
    report = housekeep(ms)
    assert report == HousekeepingReport() and not report.changed
    assert report.summary().startswith("timed out 0 transactions")


@pytest.mark.parametrize("option", ["worker_timeout_ms", "lease_timeout_ms"])
def test_non_positive_timeouts_are_refused(ms, option):
    with pytest.raises(UsageError, match=option):
        housekeep(ms, **{option: 0})
