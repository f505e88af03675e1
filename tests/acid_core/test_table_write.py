"""TableWrite, the one write transaction (SQLite and PostgreSQL): open -> write id -> staging record -> lock ->
components -> publish -> commit, or abort removing what it staged; and housekeeping removing a killed write's staging."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.pg_server import PostgresServer

from acid_core.errors import (
    InvalidNameError,
    LockTimeoutError,
    MetastoreUnavailableError,
    UsageError,
    WriteConflictError,
)
from acid_core.format.layout import (
    WriteStaging,
    compaction_staging_name,
    delta_dir_name,
    parse_write_staging_name,
    write_staging_name,
)
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.engine import Clock, Identity
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.metastore.txns import Operation
from acid_core.operations.housekeeping import HousekeepingReport, housekeep
from acid_core.write.table_write import TableWrite, strongest

SPAWN = multiprocessing.get_context("spawn")
COLUMNS = (("id", "bigint"), ("name", "string"))


def _tables(ms) -> None:
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"}, if_not_exists=True)
    ms.catalog.create_table("default", "p", COLUMNS, partition_keys=(("k", "string"),),
                            params={"transactional": "true"}, if_not_exists=True)


def _staging_rows(ms) -> list[tuple]:
    ts = s.txn_staging.c
    return ms.db.run("read", lambda conn: [tuple(row) for row in conn.execute(
        sa.select(ts.TS_TXNID, ts.TS_TABLE, ts.TS_PARTITION).order_by(ts.TS_TXNID)).all()], write=False)


def _components(ms, txn_id: int) -> list[tuple]:
    tc = s.txn_components.c
    return ms.db.run("read", lambda conn: [tuple(row) for row in conn.execute(
        sa.select(tc.TC_TABLE, tc.TC_PARTITION, tc.TC_OPERATION_TYPE).where(tc.TC_TXNID == txn_id)
        .order_by(tc.TC_OPERATION_TYPE)).all()], write=False)


def _hidden(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.startswith(".")) if path.exists() else []


def _visible(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if not p.name.startswith((".", "_"))) if path.exists() else []


def _rows(ms, table: str, partition: str | None = None) -> list:
    with TableWrite.open(ms, "default", table, partition=partition, agent_info="reader") as write:
        rows = write.read(partition).to_pylist()
        write.abort()
    return sorted((r["id"], r["name"]) for r in rows)


# --- names ----------------------------------------------------------------------------------------------------------
def test_staging_names_carry_the_transaction_and_nothing_else_parses_as_one():
    assert write_staging_name("delta_0000005_0000005_0000", 12) == ".delta_0000005_0000005_0000.tmp-t12"
    assert write_staging_name("delta_0000005_0000005_0000", 12, attempt="0a1b") == \
        ".delta_0000005_0000005_0000.tmp-t12-0a1b"
    for name in (".delta_0000005_0000005_0000.tmp-t12", ".delta_0000005_0000005_0000.tmp-t12-0a1b"):
        assert parse_write_staging_name(name) == WriteStaging("delta_0000005_0000005_0000", 12)
    for other in (compaction_staging_name("base_0000003_v0000009", 4), ".delta_1_1_0000.tmp-0123456789ab",
                  "delta_0000005_0000005_0000", ".delta_1_1.tmp-t", ".delta_1_1.tmp-tx1", ".x.tmp-t1-XYZ"):
        assert parse_write_staging_name(other) is None, other
    with pytest.raises(InvalidNameError, match="hexadecimal"):
        write_staging_name("delta_1_1", 3, attempt="../x")


def test_strongest_operation_of_a_partition():
    i, u, d = Operation.INSERT, Operation.UPDATE, Operation.DELETE
    assert [strongest(None, i), strongest(i, i), strongest(i, d), strongest(d, i), strongest(d, u), strongest(u, i)] \
        == [i, i, d, d, u, u]
    assert strongest(d, d) is d and strongest(i, u) is u


# --- the transaction ------------------------------------------------------------------------------------------------
def test_a_partition_insert_stages_beside_its_delta_and_commits_in_hive_order(ms):
    _tables(ms)
    with TableWrite.open(ms, "default", "p", partition={"k": "a"}, agent_info="test") as write:
        assert _staging_rows(ms) == [(write.txn_id, "p", "k=a")]  # recorded before any file is written
        assert [lock.partition for lock in ms.locks.show_locks()] == ["k=a"]
        result = write.insert([(1, "x"), (2, "y")], partition={"k": "a"})
        assert _components(ms, write.txn_id) == [("p", "k=a", "i")]  # before commit, as Hive records at lock time
        assert ms.catalog.list_partitions("default", "p") == []  # the partition appears with the commit
    part = Path(ms.catalog.get_table("default", "p").location) / "k=a"
    assert result.inserted == 2 and _visible(part) == [delta_dir_name(write.write_id, write.write_id, statement_id=0)]
    assert _hidden(part) == [] and _staging_rows(ms) == [] and ms.locks.show_locks() == []
    assert [p.name for p in ms.catalog.list_partitions("default", "p")] == ["k=a"]
    assert _rows(ms, "p", "k=a") == [(1, "x"), (2, "y")]


def test_a_failing_block_aborts_and_its_rows_stay_invisible(ms):
    _tables(ms)
    with pytest.raises(RuntimeError, match="boom"):
        with TableWrite.open(ms, "default", "t", agent_info="test") as write:
            write.insert([(1, "x")])
            raise RuntimeError("boom")
    assert [(info.txn_id, info.state) for info in ms.txns.show_transactions()] == [(write.txn_id, "a")]
    assert _components(ms, write.txn_id) == [("t", None, "i")]  # so the cleaner removes the aborted delta
    assert _staging_rows(ms) == [] and ms.locks.show_locks() == [] and _rows(ms, "t") == []


@pytest.mark.postgres
def test_an_abort_that_finds_the_metastore_down_can_be_repeated_once_it_is_back(tmp_path):
    """The metastore is restarted under a write's abort (a dedicated server halted, then resumed): the abort raises
    that the metastore is unreachable and the write is not ended; aborting it again, once the server is back,
    aborts the transaction, forgets its staging record and releases its lock, its files gone."""
    server = PostgresServer.start_new(base_dir=None)
    try:
        store = Metastore(server.create_database("abort_again"), warehouse=str(tmp_path / "warehouse"),
                          outage_seconds=0.5)
        try:
            store.init()
            _tables(store)
            write = TableWrite.open(store, "default", "p", partition={"k": "a"}, agent_info="test")
            write.insert([(1, "x")], partition={"k": "a"})
            part = Path(store.catalog.get_table("default", "p").location) / "k=a"
            assert _visible(part) and _staging_rows(store) == [(write.txn_id, "p", "k=a")]
            server.halt()
            with pytest.raises(MetastoreUnavailableError):
                write.abort()
            server.resume()
            assert [(info.txn_id, info.state) for info in store.txns.show_transactions()] == [(write.txn_id, "o")]
            write.abort()
            assert [(info.txn_id, info.state) for info in store.txns.show_transactions()] == [(write.txn_id, "a")]
            assert _visible(part) == [] and _hidden(part) == [] and _staging_rows(store) == []
            assert store.locks.show_locks() == []
            write.abort()  # ended: quiet
        finally:
            store.close()
    finally:
        server.stop()


def test_a_write_outside_its_locked_partition_or_table_shape_is_refused(ms):
    _tables(ms)
    with TableWrite.open(ms, "default", "p", partition="k=a", agent_info="test") as write:
        with pytest.raises(UsageError, match="locked default.p partition k=a only, not k=b"):
            write.insert([(1, "x")], partition={"k": "b"})
        with pytest.raises(UsageError, match="is partitioned"):
            write.record(None, Operation.INSERT)
        write.abort()
    with TableWrite.open(ms, "default", "t", agent_info="test") as write:
        with pytest.raises(Exception, match="not partitioned"):
            write.insert([(1, "x")], partition={"k": "a"})
        write.abort()
    assert ms.locks.show_locks() == [] and _staging_rows(ms) == []


def test_a_lock_timeout_aborts_the_transaction_it_opened(ms):
    _tables(ms)
    holder = ms.txns.open_txn()
    ms.locks.acquire([LockComponent("default", "t", None, LockType.EXCLUSIVE)], txn_id=holder)
    with pytest.raises(LockTimeoutError):
        TableWrite.open(ms, "default", "t", agent_info="blocked", lock_timeout_ms=0)
    states = {info.txn_id: info.state for info in ms.txns.show_transactions()}
    assert states == {holder: "o", holder + 1: "a"} and _staging_rows(ms) == []


def test_a_write_conflict_at_commit_removes_what_the_loser_staged_and_published(ms):
    _tables(ms)
    root = Path(ms.catalog.get_table("default", "t").location)
    first = TableWrite.open(ms, "default", "t", agent_info="first")
    second = TableWrite.open(ms, "default", "t", agent_info="second")
    first.record(None, Operation.DELETE)
    second.record(None, Operation.DELETE)
    first.commit()
    staged = []
    for name in (delta_dir_name(second.write_id, second.write_id, statement_id=0),
                 delta_dir_name(second.write_id, second.write_id, statement_id=0, delete=True)):
        hidden = root / second.staging_name(name)
        hidden.mkdir(parents=True)
        (hidden / "bucket_00000").write_bytes(b"orc")
        second.staged(str(hidden), str(root / name))
        staged.append(hidden)
    with pytest.raises(WriteConflictError, match="conflicts with the delete committed by transaction"):
        second.commit()
    assert not any(path.exists() for path in staged) and _visible(root) == [] and _staging_rows(ms) == []


# --- killed writes: housekeeping removes their staging --------------------------------------------------------------
def _insert_then_die_before_publishing(url: str, warehouse: str) -> None:
    """Child process: an INSERT whose process is SIGKILLed once its files are staged, before they are renamed."""
    from acid_core.write.publish import Publication

    def die(*_args, **_kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    Publication.publish = die
    store = Metastore(url, warehouse=warehouse, identity=Identity("tester", "testhost"))
    with TableWrite.open(store, "default", "p", partition="k=a", agent_info="doomed writer") as write:
        write.insert([(1, "x"), (2, "y")], partition={"k": "a"})


def test_a_killed_insert_leaves_staging_that_housekeeping_removes(make_ms, tmp_path):
    store = make_ms(clock=Clock(), txn_timeout_ms=1)  # the wall clock: the child's heartbeat times must agree
    _tables(store)
    child = SPAWN.Process(target=_insert_then_die_before_publishing, args=(store.url, str(tmp_path / "warehouse")))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == -signal.SIGKILL
    part = Path(store.catalog.get_table("default", "p").location) / "k=a"
    [leftover] = _hidden(part)
    (dead_txn,) = [info.txn_id for info in store.txns.show_transactions()]
    assert parse_write_staging_name(leftover).txn_id == dead_txn and _visible(part) == []
    assert _staging_rows(store) == [(dead_txn, "p", "k=a")]

    time.sleep(0.05)  # past the 1 ms hive.txn.timeout
    report = housekeep(store)
    assert report.timed_out_txns == (dead_txn,) and report.removed_staging == (str(part / leftover),)
    assert _hidden(part) == [] and _staging_rows(store) == [] and report.problems == ()
    assert "removed 1 staging directories of killed writes" in report.summary()
    assert housekeep(store).removed_staging == ()


def test_housekeeping_removes_only_the_staging_of_transactions_no_longer_open(ms):
    """A write staging table-wide (partitions found while writing, as Spark's) whose transaction was aborted
    elsewhere (ABORT TRANSACTIONS, a time-out) loses its staging in every partition; an open write's staging,
    another transaction's and a compaction's stay."""
    _tables(ms)
    root = Path(ms.catalog.get_table("default", "p").location)
    gone = TableWrite.open(ms, "default", "p", agent_info="gone")
    live = TableWrite.open(ms, "default", "p", agent_info="live")
    final = delta_dir_name(gone.write_id, gone.write_id, statement_id=0)
    doomed = [root / "k=a" / gone.staging_name(final), root / "k=b" / gone.staging_name(final)]
    kept = [root / "k=a" / live.staging_name(final), root / "k=b" / compaction_staging_name("base_0000001", 3),
            root / "k=b" / write_staging_name(final, 99_999), root / f".{final}.tmp-0123456789ab"]
    for path in doomed + kept:
        path.mkdir(parents=True)
    ms.txns.abort(gone.txn_id)  # the writer is gone: nothing ran its clean-up
    report = housekeep(ms)
    assert sorted(report.removed_staging) == sorted(str(p) for p in doomed)
    assert not any(p.exists() for p in doomed) and all(p.exists() for p in kept)
    assert _staging_rows(ms) == [(live.txn_id, "p", None)]
    assert housekeep(ms) == HousekeepingReport()
    live.abort()
    assert _staging_rows(ms) == [] and (root / "k=a" / live.staging_name(final)).exists()  # its own dirs only


def test_a_dropped_table_forgets_its_staging_records(ms):
    _tables(ms)
    write = TableWrite.open(ms, "default", "t", agent_info="test")
    ms.txns.abort(write.txn_id)
    ms.catalog.drop_table("default", "t")
    assert _staging_rows(ms) == []
    assert housekeep(ms).problems == ()
