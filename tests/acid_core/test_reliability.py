"""Defects an outside harness found (kill -9 in the worker protocol, concurrent cleaning, hostile paths), each
reproduced for real and checked fixed, on SQLite and PostgreSQL where the metastore matters.

1. a worker killed between `mark_compacted` and its commit must not leave its partition uncleanable;
2. a snapshot read must not fail when the cleaner removes a directory the snapshot does not read;
3. a partition directory that is a symbolic link must not lead the worker, cleaner or writers outside the table;
4. the worker refuses a queued partition name that leaves the table (the queue refuses it too: see
   test_metastore_compactions.py);
5. a relative CREATE TABLE ... LOCATION is made absolute once (SQL) or refused (catalog API);
6. the cleaner's API refuses a relative trash directory;
7. a registered partition without a directory reads as empty and is compacted as nothing to do.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cleaner_tables import Table, quiet

from acid_cli.main import main as acid_main
from acid_core.compaction.cleaner import clean
from acid_core.compaction.worker import REFUSED_MESSAGE, CompactionWorker, local_runner
from acid_core.errors import CompactionStateError, FileSystemError, MetastoreError, PathOutsideTableError, UsageError
from acid_core.metastore import Metastore, schema
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.engine import Clock, Identity
from acid_core.metastore.txns import Operation, TxnType
from acid_core.operations.housekeeping import housekeep
from acid_core.read.merge import read_snapshot
from acid_core.storage.fs import FileSystem
from acid_core.write.writer import EmbeddedWriter

MAJOR = CompactionType.MAJOR
S = CompactionState
SPAWN = multiprocessing.get_context("spawn")


def _real_clock_store(make_ms, **options) -> Metastore:
    """A metastore on the wall clock: a killed child process and this test must agree on heartbeat times."""
    return make_ms(clock=Clock(), **options)


def _visible_dirs(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if not p.name.startswith((".", "_")))


# --- 1. killed between marking compacted and committing ---------------------------------------------------------------
def _compact_then_die_after_mark_compacted(url: str, warehouse: str, compaction_id: int) -> None:
    """Child process: run the worker and SIGKILL ourselves right after `mark_compacted` returns."""
    from acid_core.metastore.compactions import CompactionQueue

    original = CompactionQueue.mark_compacted

    def mark_then_die(self, compaction_id):
        original(self, compaction_id)
        os.kill(os.getpid(), signal.SIGKILL)

    CompactionQueue.mark_compacted = mark_then_die
    store = Metastore(url, warehouse=warehouse, identity=Identity("tester", "testhost"))
    CompactionWorker(store, worker_id="doomed-worker").run(compaction_id)


def test_a_worker_killed_after_marking_compacted_does_not_block_cleaning(make_ms, tmp_path):
    store = _real_clock_store(make_ms, txn_timeout_ms=1)
    table = Table(store, "t")
    table.write([(1, "a")])
    table.write([(2, "b")])
    first = store.compactions.enqueue("default", "t", None, MAJOR).compaction_id
    child = SPAWN.Process(target=_compact_then_die_after_mark_compacted,
                          args=(store.url, str(tmp_path / "warehouse"), first))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == -signal.SIGKILL
    killed = store.compactions.get(first)
    assert killed.state is S.READY_FOR_CLEANING and killed.next_txn_id is None  # marked, never committed
    [dead_output] = [name for name in _visible_dirs(table.location) if name.startswith("base_")]

    time.sleep(0.05)  # past the 1 ms hive.txn.timeout
    report = housekeep(store, worker_timeout_ms=1)
    assert killed.txn_id in report.timed_out_txns
    assert report.failed_compactions == (first,)
    failed = store.compactions.get(first)
    assert failed.state is S.FAILED and f"compactor transaction {killed.txn_id}" in failed.error_message

    table.write([(3, "c")])
    second = table.compact()
    for _ in range(5):
        clean(store, log=quiet([]))
    assert store.compactions.get(second).state is S.SUCCEEDED
    remaining = _visible_dirs(table.location)
    assert len(remaining) == 1 and remaining[0].startswith("base_0000003_v") and dead_output not in remaining
    assert table.rows() == [(1, "a"), (2, "b"), (3, "c")]


def _claimed_with_compactor_txn(store: Metastore, high_watermark: int = 0) -> tuple[int, int]:
    """A MAJOR of default.t claimed by a worker that opened and recorded its compactor transaction."""
    compaction_id = store.compactions.enqueue("default", "t", None, MAJOR).compaction_id
    store.compactions.claim(worker_id="w", compaction_id=compaction_id)
    txn_id = store.txns.open_txn(txn_type=TxnType.COMPACTION)
    store.compactions.set_compactor_txn(compaction_id, txn_id, high_watermark)
    return compaction_id, txn_id


def test_an_entry_whose_compactor_transaction_was_aborted_by_hand_is_failed_by_the_cleaner(ms):
    table = Table(ms, "t")
    table.write([(1, "a")])
    compaction_id, txn_id = _claimed_with_compactor_txn(ms, 1)
    ms.compactions.mark_compacted(compaction_id)
    ms.txns.abort_txns([txn_id])  # ABORT TRANSACTIONS
    lines: list[str] = []
    assert clean(ms, dry_run=True, log=lines.append) == [] and ms.compactions.get(compaction_id).state is S.READY_FOR_CLEANING
    clean(ms, log=lines.append)
    assert ms.compactions.get(compaction_id).state is S.FAILED
    assert any(f"compaction {compaction_id}" in line and "failed" in line for line in lines)


def test_mark_compacted_refuses_once_the_compactor_transaction_aborted(ms):
    Table(ms, "t")
    compaction_id, txn_id = _claimed_with_compactor_txn(ms)
    ms.txns.abort(txn_id)
    with pytest.raises(CompactionStateError, match=f"compactor transaction {txn_id} is no longer open"):
        ms.compactions.mark_compacted(compaction_id)
    assert ms.compactions.get(compaction_id).state is S.WORKING


def test_a_compaction_whose_transaction_times_out_mid_run_fails_and_leaves_nothing_visible(make_ms, monkeypatch):
    store = _real_clock_store(make_ms)
    table = Table(store, "t")
    table.write([(1, "a")])
    table.write([(2, "b")])
    compaction_id = store.compactions.enqueue("default", "t", None, MAJOR).compaction_id
    worker = CompactionWorker(store)
    real_runner = worker.runner

    def runner_whose_transaction_is_aborted(plan):
        results = real_runner(plan)
        store.txns.abort(plan.compactor_txn_id)  # what hive.txn.timeout does to a stalled worker
        return results

    worker.runner = runner_whose_transaction_is_aborted
    with pytest.raises(CompactionStateError, match="no longer open"):
        worker.run(compaction_id)
    assert store.compactions.get(compaction_id).state is S.FAILED
    assert _visible_dirs(table.location) == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000"]


def test_a_worker_presumed_dead_that_fails_later_leaves_the_new_attempt_alone(ms, clock):
    """A stalled worker is put back by housekeeping and the entry claimed again; when the stalled one finally fails,
    it removes its own output only, never the hidden output the new attempt is writing."""
    table = Table(ms, "t")
    table.write([(1, "a")])
    table.write([(2, "b")])
    compaction_id = ms.compactions.enqueue("default", "t", None, MAJOR).compaction_id
    newer: dict[str, Path] = {}

    def stalled_runner(plan):
        local_runner(plan)
        clock.advance(10)
        assert housekeep(ms, worker_timeout_ms=1).reverted_compactions == (compaction_id,)
        ms.compactions.claim(worker_id="new-worker", compaction_id=compaction_id)
        new_txn = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
        ms.compactions.set_compactor_txn(compaction_id, new_txn, 2)
        newer["hidden"] = table.location / f".base_0000002_v{new_txn:07d}.tmp-c{compaction_id}"
        (newer["hidden"] / "bucket_00000").mkdir(parents=True)
        raise RuntimeError("the stalled worker gives up")

    with pytest.raises(RuntimeError, match="gives up"):
        CompactionWorker(ms, worker_id="stalled-worker", runner=stalled_runner).run(compaction_id)
    assert newer["hidden"].is_dir()
    hidden = sorted(p.name for p in table.location.iterdir() if p.name.startswith(".base"))
    assert hidden == [newer["hidden"].name]  # the stalled attempt's own output is gone
    current = ms.compactions.get(compaction_id)
    assert (current.state, current.worker_id) == (S.WORKING, "new-worker")


def test_a_worker_presumed_dead_cannot_attach_its_transaction_to_the_new_attempt(ms):
    Table(ms, "t")
    compaction_id = ms.compactions.enqueue("default", "t", None, MAJOR).compaction_id
    ms.compactions.claim(worker_id="new-worker", compaction_id=compaction_id)
    stale_txn = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    with pytest.raises(CompactionStateError, match="worker 'new-worker' holds it now, not 'stalled-worker'"):
        ms.compactions.set_compactor_txn(compaction_id, stale_txn, 0, worker_id="stalled-worker")
    assert ms.compactions.get(compaction_id).txn_id is None


def test_a_minor_compaction_is_cleaned_after_a_later_major_one_committed(ms):
    """Found by the concurrency test: the cleaning of a MINOR compaction, waiting for a reader, must not fail its
    verification on the base a later MAJOR compaction committed meanwhile (and so hold back the partition)."""
    table = Table(ms, "t")
    for row in [(1, "a"), (2, "b"), (3, "c")]:
        table.write([row])
    reader = ms.txns.open_txn()  # open while the MINOR commits: its inputs must wait for it
    minor = ms.compactions.enqueue("default", "t", None, CompactionType.MINOR).compaction_id
    CompactionWorker(ms).run(minor)
    table.write([(4, "d")])
    table.write([(5, "e")])
    major = table.compact()
    assert clean(ms, log=quiet([])) == []  # both wait for the reader
    ms.txns.commit(reader)
    results = clean(ms, log=quiet([]))
    assert [(r.compaction_id, r.outcome) for r in results] == [(minor, "cleaned")]
    assert [(r.compaction_id, r.outcome) for r in clean(ms, log=quiet([]))] == [(major, "cleaned")]
    assert _visible_dirs(table.location) == [f"base_0000005_v{ms.compactions.get(major).txn_id:07d}"]
    assert table.rows() == [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]


# --- 2. reads while the cleaner removes what they do not read -----------------------------------------------------
def _compacted_table(ms: Metastore) -> Table:
    table = Table(ms, "t")
    for row in [(1, "a"), (2, "b"), (3, "c")]:
        table.write([row])
    table.compact()
    return table


def _remove_after_listing(monkeypatch, table: Table, victim: str) -> None:
    """Remove `victim` right after the partition directory is listed, as a concurrent cleaner would."""
    list_dir = FileSystem.list_dir

    def list_then_remove(fs, path, **options):
        entries = list_dir(fs, path, **options)
        if path.rstrip("/") == str(table.location) and (table.location / victim).exists():
            for child in (table.location / victim).iterdir():
                child.unlink()
            (table.location / victim).rmdir()
        return entries

    monkeypatch.setattr(FileSystem, "list_dir", list_then_remove)


def test_a_read_does_not_fail_when_an_obsolete_directory_vanishes_under_it(ms, monkeypatch):
    table = _compacted_table(ms)
    expected = table.rows()
    _remove_after_listing(monkeypatch, table, "delta_0000002_0000002_0000")
    assert table.rows() == expected == [(1, "a"), (2, "b"), (3, "c")]


def test_a_read_fails_loudly_when_a_directory_it_reads_vanishes(ms, monkeypatch):
    table = _compacted_table(ms)
    [base] = [name for name in _visible_dirs(table.location) if name.startswith("base_")]
    _remove_after_listing(monkeypatch, table, base)
    with pytest.raises(FileSystemError, match=f"{base}.*which this snapshot reads, does not exist any more"):
        table.rows()


def test_obsolete_directories_are_not_listed_at_all(ms, monkeypatch):
    table = _compacted_table(ms)
    listed: list[str] = []
    list_dir = FileSystem.list_dir
    monkeypatch.setattr(FileSystem, "list_dir",
                        lambda fs, path, **options: listed.append(path) or list_dir(fs, path, **options))
    table.rows()
    [base] = [name for name in _visible_dirs(table.location) if name.startswith("base_")]
    assert [Path(path).name for path in listed] == ["t", base]  # the partition, then only what the snapshot reads


# --- 3. symbolic links out of the table ----------------------------------------------------------------------------
def _partitioned(ms: Metastore) -> tuple[EmbeddedWriter, Path]:
    info = ms.catalog.create_table("default", "parted", [("id", "int")], partition_keys=[("ds", "string")],
                                   params={"transactional": "true"})
    writer = EmbeddedWriter(info.location, columns=info.columns, partition_keys=["ds"])
    for ds in ("a", "b"):
        for value in range(2):
            txn = ms.txns.open_txn()
            write_id = ms.txns.allocate_write_ids([txn], "default", "parted")[txn]
            ms.txns.add_components(txn, "default", "parted", [f"ds={ds}"], Operation.INSERT)
            writer.insert([(value,)], write_id=write_id, partition={"ds": ds})
            ms.txns.commit(txn)
        ms.catalog.add_partition("default", "parted", {"ds": ds})
    return writer, Path(info.location)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _link_partition_outside(location: Path, tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (location / "ds=b").rename(outside)
    (location / "ds=b").symlink_to(outside, target_is_directory=True)
    return outside


def test_a_partition_that_is_a_symbolic_link_is_not_compacted(ms, tmp_path):
    _, location = _partitioned(ms)
    outside = _link_partition_outside(location, tmp_path)
    before = _tree(outside)
    compaction_id = ms.compactions.enqueue("default", "parted", "ds=b", MAJOR).compaction_id
    with pytest.raises(PathOutsideTableError, match="symbolic link"):
        CompactionWorker(ms).run(compaction_id)
    assert ms.compactions.get(compaction_id).state is S.FAILED
    assert _tree(outside) == before


def test_the_cleaner_does_not_follow_a_partition_that_became_a_symbolic_link(ms, tmp_path):
    _, location = _partitioned(ms)
    compaction_id = ms.compactions.enqueue("default", "parted", "ds=b", MAJOR).compaction_id
    CompactionWorker(ms).run(compaction_id)
    outside = _link_partition_outside(location, tmp_path)
    before = _tree(outside)
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "error" and "symbolic link" in result.message
    assert _tree(outside) == before and len([n for n in before if n.startswith("delta_") and "/" not in n]) == 2


def test_writers_refuse_a_partition_that_is_a_symbolic_link(ms, tmp_path):
    writer, location = _partitioned(ms)
    outside = _link_partition_outside(location, tmp_path)
    before = _tree(outside)
    with pytest.raises(PathOutsideTableError, match="symbolic link"):
        writer.insert([(9,)], write_id=99, partition={"ds": "b"})
    from acid_core.write.streaming import StreamingConnection

    with pytest.raises(PathOutsideTableError, match="symbolic link"):
        StreamingConnection(ms, "default", "parted", partition={"ds": "b"})
    assert _tree(outside) == before


# --- 4. a partition name that leaves the table, queued before the queue checked names ---------------------------
def test_the_worker_refuses_a_queued_partition_name_that_leaves_the_table(ms, tmp_path):
    _, location = _partitioned(ms)
    outside = tmp_path / "outside" / "x"
    outside.mkdir(parents=True)
    for name in ("delta_0000001_0000001_0000", "delta_0000002_0000002_0000"):
        (outside / name).mkdir()
    compaction_id = ms.compactions.enqueue("default", "parted", "ds=a", MAJOR).compaction_id
    with ms.db.engine.begin() as connection:  # an entry written by an older client, or by hand
        connection.execute(schema.compaction_queue.update().where(schema.compaction_queue.c.CQ_ID == compaction_id)
                           .values(CQ_PARTITION="ds=b/../../outside/x"))
    with pytest.raises(MetastoreError, match=r"partition 'ds=b/\.\./\.\./outside/x' of default\.parted is not valid"):
        CompactionWorker(ms).run(compaction_id)
    assert ms.compactions.get(compaction_id).state is S.FAILED
    assert _tree(outside) == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000"]


# --- 5. relative LOCATION ----------------------------------------------------------------------------------------
def test_create_table_with_a_relative_location_stores_it_absolute(ms, tmp_path, monkeypatch, capsys):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    monkeypatch.chdir(one)
    run = ["sql", "--metastore", ms.url]
    assert acid_main(run + ["CREATE TABLE r (id int) STORED AS ORC LOCATION 'data/r' "
                            "TBLPROPERTIES ('transactional'='true')"]) == 0
    assert ms.catalog.get_table("default", "r").location == str(one / "data" / "r")
    assert acid_main(run + ["INSERT INTO r VALUES (1)"]) == 0
    monkeypatch.chdir(two)
    assert acid_main(run + ["INSERT INTO r VALUES (2)"]) == 0
    assert len(_visible_dirs(one / "data" / "r")) == 2 and not (two / "data").exists()
    assert sorted(read_snapshot(str(one / "data" / "r")).column("id").to_pylist()) == [1, 2]
    capsys.readouterr()


def test_the_catalog_refuses_a_relative_location(ms):
    with pytest.raises(MetastoreError, match="location 'data/r' is relative"):
        ms.catalog.create_table("default", "r", [("id", "int")], location="data/r")
    with pytest.raises(MetastoreError, match="location 'dbs/x' is relative"):
        ms.catalog.create_database("x", location="dbs/x")
    assert ms.catalog.list_tables("default") == [] and ms.catalog.list_databases() == ["default"]


# --- 6. relative trash directory ---------------------------------------------------------------------------------
@pytest.mark.parametrize("trash", ["trash", "./trash", "", "/tmp/../trash"])
def test_the_cleaner_refuses_a_relative_or_dotted_trash_directory(ms, tmp_path, monkeypatch, trash):
    table = _compacted_table(ms)
    before = _visible_dirs(table.location)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="trash directory"):
        clean(ms, trash_dir=trash, log=quiet([]))
    assert _visible_dirs(table.location) == before and not (tmp_path / "trash").exists()
    assert [entry.state for entry in ms.compactions.show()] == [S.READY_FOR_CLEANING]


# --- 7. a registered partition without a directory -----------------------------------------------------------------
def test_a_registered_partition_without_a_directory_reads_empty_and_compacts_as_nothing_to_do(ms):
    _, location = _partitioned(ms)
    ms.catalog.add_partition("default", "parted", {"ds": "c"})
    assert not (location / "ds=c").exists()
    compaction_id = ms.compactions.enqueue("default", "parted", "ds=c", MAJOR).compaction_id
    outcome = CompactionWorker(ms).run(compaction_id)
    assert (outcome.result, outcome.message) == ("refused", REFUSED_MESSAGE)
    assert ms.compactions.get(compaction_id).state is S.REFUSED
    assert read_snapshot(str(location / "ds=c"), missing_ok=True).num_rows == 0
    with pytest.raises(FileSystemError, match="does not exist"):
        read_snapshot(str(location / "ds=c"))  # a raw path that does not exist is still an error
    assert not (location / "ds=c").exists()


def test_housekeeping_counts_what_it_failed_in_its_summary(make_ms):
    store = _real_clock_store(make_ms, txn_timeout_ms=1)
    Table(store, "t")
    compaction_id, _ = _claimed_with_compactor_txn(store)
    store.compactions.mark_compacted(compaction_id)
    time.sleep(0.05)
    report = housekeep(store)
    assert report.failed_compactions == (compaction_id,) and report.changed
    assert "failed 1 compactions whose compactor transaction aborted" in report.summary()
    with store.db.engine.connect() as connection:
        assert connection.execute(sa.select(schema.compaction_queue)).all() == []


@pytest.mark.parametrize("took_effect", [True, False], ids=["committed", "rolled-back"])
def test_failing_abandoned_entries_survives_a_connection_lost_while_committing(ms, took_effect):
    """The sweep that fails abandoned entries loses its connection while committing (a metastore restart under the
    cleaner): whether or not that commit took effect, it is run again rather than raised, since it is a
    compare-and-swap sweep; each entry ends failed in the history exactly once."""
    Table(ms, "t")
    compaction_id, txn_id = _claimed_with_compactor_txn(ms)
    ms.compactions.mark_compacted(compaction_id)
    ms.txns.abort_txns([txn_id])
    fired = []

    def lose_the_commit(connection) -> None:
        if not fired:
            fired.append(True)
            dbapi = connection.connection.dbapi_connection
            if took_effect:
                dbapi.commit()  # the server committed; the reply never arrives
            dbapi.close()

    sa.event.listen(ms.db.engine, "commit", lose_the_commit)
    try:
        failed = ms.compactions.fail_abandoned()
    finally:
        sa.event.remove(ms.db.engine, "commit", lose_the_commit)
    assert fired
    assert [entry.id for entry in failed] == ([] if took_effect else [compaction_id])
    assert [(entry.id, entry.state) for entry in ms.compactions.show()] == [(compaction_id, S.FAILED)]
    with ms.db.engine.connect() as connection:
        assert connection.execute(sa.select(schema.compaction_queue)).all() == []


def test_a_compaction_whose_transaction_is_lost_stops_with_the_reason_and_changes_nothing(make_ms, caplog):
    """The compactor's transaction is aborted while its tasks run (an operator, or a time-out after the metastore was
    unreachable): the heartbeat notices, the attempt fails with one line saying why, and nothing becomes visible."""
    from support.committed_writes import insert

    ms = make_ms(txn_timeout_ms=4_000)  # heartbeats every second
    ms.catalog.create_table("default", "lost", (("id", "int"), ("name", "string")), params={"transactional": "true"})
    for i in range(3):
        insert(ms, "lost", None, [(i, "x")])
    compaction_id = ms.compactions.enqueue("default", "lost", None, CompactionType.MAJOR).compaction_id
    location = ms.catalog.get_table("default", "lost").location
    before = sorted(p.name for p in Path(location).iterdir())

    def runner(plan):
        ms.txns.abort(plan.compactor_txn_id)
        time.sleep(2.5)  # the heartbeat runs meanwhile
        return local_runner(plan)

    with caplog.at_level("ERROR", logger="acid_core.compaction"):
        with pytest.raises(CompactionStateError, match=r"^heartbeat lost: cannot heartbeat transaction \d+: it was aborted$"):
            CompactionWorker(ms, runner=runner).run(compaction_id)
    entry = ms.compactions.get(compaction_id)
    assert entry.state is CompactionState.FAILED and "heartbeat lost: cannot heartbeat transaction" in entry.error_message
    assert sorted(p.name for p in Path(location).iterdir()) == before
    assert any("heartbeat lost" in r.getMessage() for r in caplog.records)


def test_a_running_compaction_aborted_from_the_view_stops_and_commits_nothing(make_ms):
    """The ACID view's Abort on a `working` entry (beyond Hive's ABORT COMPACTIONS): the entry moves to history as
    aborted with who did it, its compactor transaction is aborted with it, and the worker stops without committing
    or recording a failure over the abort."""
    from support.committed_writes import insert

    ms = make_ms(txn_timeout_ms=4_000)  # heartbeats every second
    ms.catalog.create_table("default", "ab", (("id", "int"), ("name", "string")), params={"transactional": "true"})
    for i in range(3):
        insert(ms, "ab", None, [(i, "x")])
    compaction_id = ms.compactions.enqueue("default", "ab", None, CompactionType.MAJOR).compaction_id
    location = ms.catalog.get_table("default", "ab").location
    before = sorted(p.name for p in Path(location).iterdir())
    said = {}

    def runner(plan):
        said.update(ms.compactions.abort_compactions([compaction_id], by="admin from the ACID view", working=True))
        time.sleep(2.5)
        return local_runner(plan)

    with pytest.raises(CompactionStateError, match=r"^heartbeat lost: cannot heartbeat transaction \d+: it was aborted$"):
        CompactionWorker(ms, runner=runner).run(compaction_id)
    assert said == {compaction_id: "Successfully aborted compaction"}
    entry = ms.compactions.get(compaction_id)
    assert entry.state is CompactionState.ABORTED
    assert entry.error_message == "Compaction Aborted by admin from the ACID view."
    assert sorted(p.name for p in Path(location).iterdir()) == before
    assert [t.state for t in ms.txns.show_transactions() if t.txn_id == entry.txn_id] in ([], ["a"])
    # Hive's ABORT COMPACTIONS (acid sql) still takes initiated entries only
    again = ms.compactions.enqueue("default", "ab", None, CompactionType.MAJOR).compaction_id
    ms.compactions.claim(worker_id="w", compaction_id=again)
    assert ms.compactions.abort_compactions([again]) == {
        again: "Error while aborting compaction as compaction is in state-working"}
