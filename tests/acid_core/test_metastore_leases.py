"""Reader leases: a transaction-less reader registers its snapshot; heartbeat, release and expiry with the clock; the
snapshot a lease returns is one consistent read even while other clients commit.
"""

from __future__ import annotations

import pytest

from acid_core.errors import MetastoreError
from acid_core.format.validity import LONG_MAX, ValidTxnList
from acid_core.metastore import Metastore
from acid_core.metastore.engine import Identity
from acid_core.metastore.txns import Operation

ME = Identity(user="tester", host="testhost")


def write(ms: Metastore, txn_id: int, table: str = "t") -> int:
    write_id = ms.txns.allocate_write_ids([txn_id], "default", table)[txn_id]
    ms.txns.add_components(txn_id, "default", table, [None], Operation.INSERT)
    return write_id


@pytest.fixture
def mixed(ms):
    """txn 1 committed, 2 aborted, 3 open, each with a write to default.t; txn 4 open, no writes."""
    ids = ms.txns.open_txns(4)
    for txn_id in ids[:3]:
        write(ms, txn_id)
    ms.txns.commit(1)
    ms.txns.abort(2)
    return ms


def test_acquire_returns_the_snapshot_a_reader_would_take(mixed, clock):
    lease = mixed.leases.acquire("Default", "T", owner="notebook-1")
    expected = mixed.txns.snapshot(["default.t"])
    assert (lease.database, lease.table) == ("default", "t")
    assert lease.snapshot == expected
    assert str(lease.snapshot.txns) == "4:3:3,4:2"
    assert str(lease.write_ids) == "default.t:3:3:3:2"
    [row] = mixed.leases.list()
    assert (row["RL_ID"], row["RL_DATABASE"], row["RL_TABLE"], row["RL_OWNER"], row["RL_HOST"], row["RL_STARTED"],
            row["RL_LAST_HEARTBEAT"], row["RL_NEXT_TXN_ID"]) == (
        lease.lease_id, "default", "t", "notebook-1", "testhost", clock.now_ms(), clock.now_ms(), 5)
    assert ValidTxnList.parse(row["RL_VALID_TXNS"]) == lease.snapshot.txns


def test_lease_of_an_empty_metastore(ms):
    lease = ms.leases.acquire("default", "t")
    assert str(lease.write_ids) == f"default.t:0:{LONG_MAX}::"
    assert lease.snapshot.txns.high_watermark == 0
    assert lease.snapshot.write_ids.keys() == {"default.t"}
    assert ms.leases.list()[0]["RL_OWNER"] == "tester"


def test_lease_ids_are_unique_and_list_filters(ms):
    first = ms.leases.acquire("default", "t")
    second = ms.leases.acquire("default", "u")
    third = ms.leases.acquire("sales", "t")
    assert len({first.lease_id, second.lease_id, third.lease_id}) == 3
    assert [r["RL_ID"] for r in ms.leases.list()] == [first.lease_id, second.lease_id, third.lease_id]
    assert [r["RL_ID"] for r in ms.leases.list(database="default")] == [first.lease_id, second.lease_id]
    assert [r["RL_ID"] for r in ms.leases.list(table="t")] == [first.lease_id, third.lease_id]
    assert [r["RL_ID"] for r in ms.leases.list(database="DEFAULT", table="U")] == [second.lease_id]


def test_heartbeat(ms, clock):
    lease = ms.leases.acquire("default", "t")
    clock.advance(250)
    ms.leases.heartbeat(lease.lease_id)
    [row] = ms.leases.list()
    assert row["RL_LAST_HEARTBEAT"] == clock.now_ms()
    assert row["RL_STARTED"] == clock.now_ms() - 250


def test_release(ms):
    lease = ms.leases.acquire("default", "t")
    other = ms.leases.acquire("default", "t")
    ms.leases.release(lease.lease_id)
    assert [r["RL_ID"] for r in ms.leases.list()] == [other.lease_id]
    with pytest.raises(MetastoreError) as info:
        ms.leases.heartbeat(lease.lease_id)
    assert f"reader lease {lease.lease_id}" in str(info.value)
    ms.leases.release(lease.lease_id)  # releasing twice is harmless


def test_expire_with_the_clock(ms, clock):
    idle = ms.leases.acquire("default", "t")
    busy = ms.leases.acquire("default", "t")
    clock.advance(1000)
    ms.leases.heartbeat(busy.lease_id)
    assert ms.leases.expire(1000) == []  # idle is exactly at the limit
    clock.advance(1)
    assert ms.leases.expire(1000) == [idle.lease_id]
    assert [r["RL_ID"] for r in ms.leases.list()] == [busy.lease_id]
    with pytest.raises(MetastoreError, match="released or expired"):
        ms.leases.heartbeat(idle.lease_id)
    clock.advance(1000)
    assert ms.leases.expire(1000) == [busy.lease_id]
    assert ms.leases.list() == []


def _commit_while_reading(reader: Metastore, writer: Metastore, txn_id: int, read) -> object:
    """Run `read` on `reader`; just before it first looks at TXN_TO_WRITE_ID, `writer` commits `txn_id`."""
    fired = []

    def before(statement, _parameters):
        if not fired and "TXN_TO_WRITE_ID" in statement:
            fired.append(True)
            writer.txns.commit(txn_id)

    # the snapshot's statements are plain ones, seen by the observers just before the driver runs them
    reader.db.statement_observers.append(before)
    try:
        result = read()
    finally:
        reader.db.statement_observers.remove(before)
    assert fired, "the interleaving hook never ran"
    return result


def _assert_consistent(snapshot, txn_id: int, write_id: int) -> None:
    write_ids = snapshot.write_ids["default.t"]
    assert snapshot.txns.is_valid(txn_id) == write_ids.is_valid(write_id), (
        f"txn list {snapshot.txns} and write-id list {write_ids} disagree about txn {txn_id} (write id {write_id})")


@pytest.fixture
def second_handle(ms, metastore_url, clock, tmp_path):
    other = Metastore(metastore_url, clock=clock, identity=ME, warehouse=str(tmp_path / "warehouse"))
    yield other
    other.close()


def test_snapshot_stays_consistent_while_a_writer_commits(ms, second_handle):
    """Control for the lease test below: TxnStore.snapshot reads under one database snapshot."""
    txn_id = ms.txns.open_txn()
    write_id = write(ms, txn_id)
    snapshot = _commit_while_reading(ms, second_handle, txn_id, lambda: ms.txns.snapshot(["default.t"]))
    _assert_consistent(snapshot, txn_id, write_id)
    assert not snapshot.txns.is_valid(txn_id)  # the commit came after the snapshot began


@pytest.mark.postgres
def test_lease_snapshot_stays_consistent_while_a_writer_commits(postgres_url, clock, tmp_path):
    """A writer commits between the lease's read of TXNS and its read of TXN_TO_WRITE_ID.

    The lease's txn list still says the writer is open; its write-id list must agree (the write id an open
    exception), or the reader would see rows of a transaction its own txn list calls invisible. PostgreSQL only:
    on SQLite the lease's write transaction holds the database lock, so the writer cannot commit in between.
    """
    reader = Metastore(postgres_url, clock=clock, identity=ME, warehouse=str(tmp_path / "warehouse"))
    writer = Metastore(postgres_url, clock=clock, identity=ME, warehouse=str(tmp_path / "warehouse"))
    try:
        reader.init()
        txn_id = writer.txns.open_txn()
        write_id = write(writer, txn_id)
        lease = _commit_while_reading(reader, writer, txn_id, lambda: reader.leases.acquire("default", "t"))
        _assert_consistent(lease.snapshot, txn_id, write_id)
    finally:
        reader.close()
        writer.close()
