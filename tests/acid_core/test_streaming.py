"""Streaming ingest against a real metastore (SQLite and PostgreSQL) and real files."""

from __future__ import annotations

import os

import pytest

from acid_core.errors import AcidError, InvalidRowError, LockTimeoutError, NotTransactionalError, TxnStateError
from acid_core.metastore import Metastore
from acid_core.metastore.engine import ManualClock
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.read.merge import read_snapshot
from acid_core.write.streaming import StreamingConnection


@pytest.fixture
def metastore(metastore_url, tmp_path):
    store = Metastore(metastore_url, warehouse=str(tmp_path / "warehouse"), clock=ManualClock())
    store.init()
    store.catalog.create_table("default", "events", [("id", "int"), ("msg", "string")],
                               partition_keys=[("ds", "string")], params={"transactional": "true"})
    yield store
    store.close()


def _visible(store: Metastore, location: str) -> list[tuple]:
    snapshot = store.txns.snapshot(["default.events"])
    table = read_snapshot(location, write_ids=snapshot.write_ids["default.events"], txns=snapshot.txns,
                          order_by_row_id=True)
    return [(row["id"], row["msg"]) for row in table.to_pylist()]


def test_batch_writes_one_delta_with_side_file_while_open(metastore):
    location = metastore.catalog.get_table("default", "events").location + "/ds=a"
    with StreamingConnection(metastore, "default", "events", partition={"ds": "a"}, batch_size=5) as stream:
        for i in range(3):
            stream.begin_transaction()
            stream.write([(i, f"m{i}")])
            stream.commit_transaction()
        deltas = sorted(os.listdir(location))
        assert deltas == ["delta_0000001_0000005"]
        files = sorted(os.listdir(f"{location}/{deltas[0]}"))
        assert files == ["_orc_acid_version", "bucket_00000", "bucket_00000_flush_length"]
        assert _visible(metastore, location) == [(0, "m0"), (1, "m1"), (2, "m2")]
    # closing aborts the two unused transactions and finishes the file
    assert sorted(os.listdir(f"{location}/delta_0000001_0000005")) == ["_orc_acid_version", "bucket_00000"]
    assert [t.state for t in metastore.txns.show_transactions()] == ["a", "a"]
    assert _visible(metastore, location) == [(0, "m0"), (1, "m1"), (2, "m2")]
    assert metastore.catalog.list_partitions("default", "events")[0].name == "ds=a"


def test_aborted_and_open_transactions_are_invisible(metastore):
    location = metastore.catalog.get_table("default", "events").location + "/ds=b"
    stream = StreamingConnection(metastore, "default", "events", partition={"ds": "b"}, batch_size=3)
    stream.begin_transaction()
    stream.write([(1, "kept")])
    stream.commit_transaction()
    stream.begin_transaction()
    stream.write([(2, "aborted")])
    stream.abort_transaction()
    stream.begin_transaction()
    stream.write([(3, "open")])
    assert _visible(metastore, location) == [(1, "kept")]
    stream.commit_transaction()  # last of the batch: the file is completed before the commit
    assert _visible(metastore, location) == [(1, "kept"), (3, "open")]
    stream.begin_transaction()  # a new batch, a new delta
    stream.write([(4, "next")])
    stream.commit_transaction()
    stream.close()
    assert sorted(os.listdir(location)) == ["delta_0000001_0000003", "delta_0000004_0000006"]
    assert _visible(metastore, location) == [(1, "kept"), (3, "open"), (4, "next")]


def test_crashed_writer_leaves_only_committed_rows_and_times_out(metastore):
    location = metastore.catalog.get_table("default", "events").location + "/ds=c"
    stream = StreamingConnection(metastore, "default", "events", partition={"ds": "c"}, batch_size=4)
    stream.begin_transaction()
    stream.write([(1, "committed")])
    stream.commit_transaction()
    stream.begin_transaction()
    stream.write([(2, "in flight")])
    # the process dies here: no close(); housekeeping times the open transactions out
    metastore.db.clock.advance(metastore.txns.txn_timeout_ms + 1)
    assert sorted(metastore.txns.perform_timeouts()) == [2, 3, 4]
    assert _visible(metastore, location) == [(1, "committed")]


def test_heartbeat_keeps_the_batch_alive(metastore):
    stream = StreamingConnection(metastore, "default", "events", partition={"ds": "d"}, batch_size=2)
    stream.begin_transaction()
    metastore.db.clock.advance(metastore.txns.txn_timeout_ms - 1000)
    stream.heartbeat()
    metastore.db.clock.advance(2000)
    assert metastore.txns.perform_timeouts() == []
    stream.write([(1, "x")])
    stream.commit_transaction()
    stream.close()


def test_misuse_and_bad_rows(metastore):
    stream = StreamingConnection(metastore, "default", "events", partition={"ds": "e"}, batch_size=2)
    with pytest.raises(TxnStateError, match="begin_transaction"):
        stream.write([(1, "x")])
    stream.begin_transaction()
    with pytest.raises(TxnStateError, match="still open"):
        stream.begin_transaction()
    with pytest.raises(InvalidRowError, match="column 'id'"):
        stream.write([(1, "fine"), ("two", "bad")])
    stream.commit_transaction()
    stream.close()
    stream.close()
    with pytest.raises(Exception, match="closed"):
        stream.begin_transaction()


def _open(store: Metastore) -> list[tuple[int, str]]:
    return [(t.txn_id, t.agent_info) for t in store.txns.show_transactions() if t.state == "o"]


def test_a_transaction_whose_begin_fails_is_current_until_aborted_or_closed(metastore):
    """Its lock not granted (or the metastore lost) after the batch's next transaction was taken: that transaction is
    the current one, so the caller's abort (or close) ends it; before, it stayed open, unheart-beaten, until it timed
    out, and held back the cleaner for as long."""
    holder = metastore.txns.open_txn(agent_info="holder")
    metastore.locks.acquire([LockComponent("default", "events", "ds=f", LockType.EXCLUSIVE)], txn_id=holder)
    stream = StreamingConnection(metastore, "default", "events", partition={"ds": "f"}, batch_size=3,
                                 lock_timeout_ms=0)
    with pytest.raises(LockTimeoutError, match="not granted within 0 ms"):
        stream.begin_transaction()
    taken = stream.current_txn_id
    assert taken is not None and (taken, "acid-streaming") in _open(metastore)
    with pytest.raises(TxnStateError, match=f"transaction {taken} is still open"):
        stream.begin_transaction()
    stream.abort_transaction()
    assert stream.current_txn_id is None
    assert [txn for txn, agent in _open(metastore) if agent == "acid-streaming"] == [taken + 1, taken + 2]

    with pytest.raises(LockTimeoutError):
        stream.begin_transaction()
    stream.close()  # aborts the current one and the batch's last
    assert _open(metastore) == [(holder, "holder")]
    metastore.txns.commit(holder)

    with StreamingConnection(metastore, "default", "events", partition={"ds": "f"}, batch_size=1) as after:
        after.begin_transaction()
        after.write([(1, "after the lock")])
        after.commit_transaction()
    location = metastore.catalog.get_table("default", "events").location + "/ds=f"
    assert _visible(metastore, location) == [(1, "after the lock")]


def test_a_negative_lock_timeout_is_refused(metastore):
    with pytest.raises(AcidError, match="lock timeout -1 ms must not be negative"):
        StreamingConnection(metastore, "default", "events", partition={"ds": "g"}, lock_timeout_ms=-1)


def test_refuses_non_transactional_tables_and_bad_partitions(metastore):
    metastore.catalog.create_table("default", "plain", [("id", "int")])
    with pytest.raises(NotTransactionalError, match="default.plain"):
        StreamingConnection(metastore, "default", "plain")
    with pytest.raises(Exception, match="partition keys"):
        StreamingConnection(metastore, "default", "events", partition={"day": "x"})


def test_bucketed_table_writes_one_file_per_bucket(metastore):
    metastore.catalog.create_table("default", "bucketed", [("id", "int"), ("msg", "string")], bucket_columns=["id"],
                                   num_buckets=2, params={"transactional": "true"})
    location = metastore.catalog.get_table("default", "bucketed").location
    with StreamingConnection(metastore, "default", "bucketed", batch_size=1) as stream:
        stream.begin_transaction()
        stream.write([(i, "m") for i in range(20)])
        stream.commit_transaction()
    assert sorted(os.listdir(f"{location}/delta_0000001_0000001")) == ["_orc_acid_version", "bucket_00000",
                                                                       "bucket_00001"]
    snapshot = metastore.txns.snapshot(["default.bucketed"])
    rows = read_snapshot(location, write_ids=snapshot.write_ids["default.bucketed"], include_row_id=True).to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(20))
    assert {r["row__id"]["bucketid"] for r in rows} == {536870912, 536936448}
