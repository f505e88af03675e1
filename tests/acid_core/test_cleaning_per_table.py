"""Cleaning per table (Hive 4's MIN_HISTORY_WRITE_ID, HIVE-26704 / HIVE-29619) and no orphaned compactor transaction,
on SQLite and PostgreSQL, over real tables, compactions and files.

A long transaction on table A must not hold back the cleaning of table B; a reader of B opened before B's compaction
must; a transaction that named no table holds everything, as before. A compactor transaction is recorded on its queue
entry in the same database transaction that opens it, holds back its own partition only, and housekeeping aborts one
that no entry references.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from support.cleaner_tables import Table, quiet, state_of, three_writes

from acid_core.compaction.cleaner import clean
from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import TxnStateError
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.txns import TxnType
from acid_core.operations.health import table_health
from acid_core.operations.housekeeping import housekeep
from acid_core.write.table_write import TableWrite

MAJOR = CompactionType.MAJOR


def _compacted(ms: Metastore, name: str) -> tuple[Table, int]:
    table = three_writes(ms, name)
    return table, table.compact()


def _obsolete(table: Table) -> list[str]:
    return [d for d in table.dirs() if d.startswith("delta_")]


def test_a_long_transaction_on_a_does_not_hold_back_cleaning_of_b(ms):
    a = three_writes(ms, "a")
    reader_of_a = ms.txns.open_txn()
    ms.txns.snapshot([a.full_name], current_txn=reader_of_a)  # names table a only
    b, compaction = _compacted(ms, "b")
    assert _obsolete(b)

    results = clean(ms, log=quiet([]))

    assert [r.compaction_id for r in results if r.outcome == "cleaned"] == [compaction]
    assert state_of(ms, compaction) is CompactionState.SUCCEEDED
    assert not _obsolete(b)
    assert b.rows() == [(1, "a"), (2, "b"), (3, "c")]
    assert a.rows(ms.txns.snapshot([a.full_name], current_txn=reader_of_a)) == [(1, "a"), (2, "b"), (3, "c")]
    ms.txns.commit(reader_of_a)


def test_a_reader_of_b_opened_before_the_compaction_keeps_its_files_until_it_ends(ms):
    b = three_writes(ms, "b")
    reader = ms.txns.open_txn()
    snapshot = ms.txns.snapshot([b.full_name], current_txn=reader)
    compaction = b.compact()

    assert not [r for r in clean(ms, log=quiet([])) if r.outcome == "cleaned"]
    assert state_of(ms, compaction) is CompactionState.READY_FOR_CLEANING
    assert b.rows(snapshot) == [(1, "a"), (2, "b"), (3, "c")]  # its deltas are still there
    held = [h for p in table_health(ms, "default", "b").partitions for h in p.held_by]
    assert any(h.txn_id == reader and "reads default.b" in h.detail for h in held), held

    ms.txns.commit(reader)
    assert [r.compaction_id for r in clean(ms, log=quiet([])) if r.outcome == "cleaned"] == [compaction]
    assert not _obsolete(b)


def test_a_transaction_that_named_no_table_still_holds_everything(ms):
    anything = ms.txns.open_txn()
    b, compaction = _compacted(ms, "b")

    assert not [r for r in clean(ms, log=quiet([])) if r.outcome == "cleaned"]
    held = [h for p in table_health(ms, "default", "b").partitions for h in p.held_by]
    assert any(h.txn_id == anything and "named no table" in h.detail for h in held), held

    ms.txns.abort(anything)
    assert [r.compaction_id for r in clean(ms, log=quiet([])) if r.outcome == "cleaned"] == [compaction]


def test_a_writer_of_a_names_its_table_when_it_opens(ms):
    a = three_writes(ms, "a")
    write = TableWrite.open(ms, "default", "a", agent_info="a long ETL")  # open for hours: holds a's cleaning, not b's
    b, compaction = _compacted(ms, "b")
    assert [r.compaction_id for r in clean(ms, log=quiet([])) if r.outcome == "cleaned"] == [compaction]
    write.abort()
    assert a.rows() == [(1, "a"), (2, "b"), (3, "c")]


def test_naming_a_table_compacted_and_cleanable_since_the_transaction_opened_is_refused(ms):
    a = three_writes(ms, "a")
    txn = ms.txns.open_txn()
    ms.txns.snapshot([a.full_name], current_txn=txn)
    b, compaction = _compacted(ms, "b")  # committed while txn was open; txn does not hold b
    clean(ms, log=quiet([]))
    assert state_of(ms, compaction) is CompactionState.SUCCEEDED

    with pytest.raises(TxnStateError, match=rf"transaction {txn} cannot read default\.b: it named default\.a first, "
                                            rf"and compaction {compaction} of default\.b committed while it was open"):
        ms.txns.snapshot([b.full_name], current_txn=txn)
    ms.txns.commit(txn)
    assert b.rows() == [(1, "a"), (2, "b"), (3, "c")]


def test_naming_another_table_before_anything_of_it_was_compacted_holds_it_from_then_on(ms):
    a, b = three_writes(ms, "a"), three_writes(ms, "b")
    txn = ms.txns.open_txn()
    ms.txns.snapshot([a.full_name], current_txn=txn)
    snapshot = ms.txns.snapshot([b.full_name], current_txn=txn)  # nothing of b compacted since txn opened
    compaction = b.compact()

    assert not [r for r in clean(ms, log=quiet([])) if r.outcome == "cleaned"]
    assert b.rows(snapshot) == [(1, "a"), (2, "b"), (3, "c")]
    ms.txns.commit(txn)
    assert [r.compaction_id for r in clean(ms, log=quiet([])) if r.outcome == "cleaned"] == [compaction]


# --- the compactor's transaction -------------------------------------------------------------------------------------

def _partitioned(ms: Metastore) -> Table:
    info = ms.catalog.create_table("default", "p", (("id", "int"), ("name", "string")),
                                   partition_keys=(("ds", "string"),), params={"transactional": "true"})
    from support.committed_writes import insert

    for ds in ("d1", "d2"):
        for i in range(3):
            insert(ms, "p", ds, [(i, ds)])
    return info


def _open_and_die(url: str, compaction_id: int, now_ms: int) -> None:
    """A worker that claims a compaction, opens its transaction and is killed before anything else."""
    import os

    from acid_core.metastore import Metastore as Store
    from acid_core.metastore.engine import ManualClock

    store = Store(url, clock=ManualClock(now_ms))  # the test's time
    store.compactions.claim(worker_id="doomed-worker", compaction_id=compaction_id)
    store.compactions.open_compactor_txn(compaction_id, store.txns, worker_id="doomed-worker",
                                         txn_type=TxnType.COMPACTION, agent_info="compactor doomed-worker")
    os._exit(9)  # as SIGKILL: nothing after this runs


def test_a_killed_worker_holds_back_only_its_own_partition_and_its_transaction_is_recorded(ms):
    info = _partitioned(ms)
    doomed = ms.compactions.enqueue("default", "p", "ds=d1", MAJOR).compaction_id
    process = multiprocessing.get_context("spawn").Process(target=_open_and_die, args=(ms.db.url, doomed, ms.db.clock.now_ms()))
    process.start()
    process.join(60)
    assert process.exitcode == 9
    entry = ms.compactions.get(doomed)
    assert entry.state is CompactionState.WORKING and entry.txn_id is not None  # recorded with the transaction

    other = ms.compactions.enqueue("default", "p", "ds=d2", MAJOR).compaction_id
    CompactionWorker(ms).run(other)
    assert [r.compaction_id for r in clean(ms, log=quiet([])) if r.outcome == "cleaned"] == [other]
    d2 = [p.name for p in (Path(info.location) / "ds=d2").iterdir()]
    assert not [d for d in d2 if d.startswith("delta_")], d2

    # its transaction times out (no heartbeat): housekeeping puts the entry back at once, without the worker time-out
    ms.db.clock.advance(ms.txns.txn_timeout_ms + 1)
    report = housekeep(ms)
    assert entry.txn_id in report.timed_out_txns
    assert doomed in report.reverted_compactions
    assert ms.compactions.get(doomed).state is CompactionState.INITIATED


def test_housekeeping_aborts_a_compactor_transaction_no_entry_references(ms):
    three_writes(ms, "b")
    orphan = ms.txns.open_txn(txn_type=TxnType.COMPACTION, agent_info="compactor of an older version, killed")
    young = housekeep(ms)
    assert orphan not in young.aborted_compactor_txns  # its worker may be about to record it
    ms.db.clock.advance(31_000)
    report = housekeep(ms)
    assert orphan in report.aborted_compactor_txns
    assert orphan not in [t.txn_id for t in ms.txns.show_transactions() if t.state == "o"]
    # nothing of a live compaction is touched
    b, compaction = _compacted(ms, "c")
    assert state_of(ms, compaction) is CompactionState.READY_FOR_CLEANING
    assert [r.compaction_id for r in clean(ms, log=quiet([])) if r.outcome == "cleaned"] == [compaction]
