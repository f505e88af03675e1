"""Faults: a connection lost in the middle of an operation, a database that cannot be reached, URLs that make no
sense, and bad input. Each raises an AcidError that says what happened, and none leaves half an operation behind.
"""

from __future__ import annotations

import threading
import time

import psycopg2
import pytest
import sqlalchemy as sa
from support.pg_server import PostgresServer

from acid_core.errors import (
    AcidError,
    MetastoreError,
    MetastoreUnavailableError,
    NoSuchObjectError,
    NoSuchTxnError,
    NotTransactionalError,
    TxnAbortedError,
)
from acid_core.metastore import Metastore, schema
from acid_core.metastore.engine import Identity, outage_counts
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.metastore.txns import Operation

ME = Identity(user="tester", host="testhost")
WAIT_SECONDS = 30


def everything(ms: Metastore) -> dict[str, list]:
    """Every row of every metastore table, to compare before and after a failed call."""
    with ms.db.engine.connect() as connection:
        return {table.name: sorted(map(tuple, connection.execute(sa.select(table)).all()), key=repr)
                for table in schema.metadata.sorted_tables}


def txn_with_work(ms: Metastore) -> int:
    """An open transaction that wrote (an update of default.t/p=1) and holds a lock: its commit touches every table."""
    txn_id = ms.txns.open_txn()
    ms.txns.allocate_write_ids([txn_id], "default", "t")
    ms.txns.add_components(txn_id, "default", "t", ["p=1"], Operation.UPDATE)
    ms.locks.lock([LockComponent("default", "t", "p=1", LockType.SHARED_WRITE)], txn_id=txn_id)
    return txn_id


def assert_still_open_and_intact(ms: Metastore, txn_id: int, before: dict[str, list]) -> None:
    assert everything(ms) == before
    assert [(t.txn_id, t.state) for t in ms.txns.show_transactions()] == [(txn_id, "o")]


# --- a connection lost mid-operation ------------------------------------------------------------------------------

def _close_before_deleting_the_txn_row():
    """A `before_cursor_execute` hook that closes the client's connection just before a commit deletes its TXNS row
    (once); and the list of statements it fired on."""
    fired: list[str] = []

    def before_execute(conn, cursor, statement, parameters, context, executemany):
        if not fired and statement.lstrip().upper().startswith("DELETE") and '"TXNS"' in statement:
            fired.append(statement)
            conn.connection.dbapi_connection.close()

    return fired, before_execute


def test_connection_closed_under_a_commit_rolls_it_back(make_ms):
    """The client's connection dies just before the commit's last statement (both databases), with outage retries
    off: the commit fails as a whole."""
    ms = make_ms(outage_seconds=0)
    txn_id = txn_with_work(ms)
    before = everything(ms)
    fired, before_execute = _close_before_deleting_the_txn_row()
    sa.event.listen(ms.db.engine, "before_cursor_execute", before_execute)
    try:
        with pytest.raises(MetastoreUnavailableError) as info:
            ms.txns.commit(txn_id)
    finally:
        sa.event.remove(ms.db.engine, "before_cursor_execute", before_execute)
    assert fired
    message = str(info.value)
    assert f"commit transaction {txn_id}" in message and "lost the connection" in message
    assert_still_open_and_intact(ms, txn_id, before)
    ms.txns.commit(txn_id)  # the handle recovers with a new connection
    assert ms.txns.show_transactions() == [] and ms.locks.show_locks() == []


def _backend_waiting_on_a_lock(admin, database: str) -> int | None:
    with admin.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock' "
                       "AND pid <> pg_backend_pid()", (database,))
        row = cursor.fetchone()
    return row[0] if row else None


@pytest.mark.postgres
def test_backend_terminated_during_a_commit(postgres_url, postgres_server, clock, tmp_path):
    """pg_terminate_backend on the connection of a commit that waits on a row lock, after it has already moved the
    components: the client gets MetastoreUnavailableError and the transaction is still open with all its work."""
    ms = Metastore(postgres_url, clock=clock, identity=ME, warehouse=str(tmp_path / "warehouse"), outage_seconds=0)
    database = sa.engine.make_url(postgres_url).database
    blocker = psycopg2.connect(host="127.0.0.1", port=postgres_server.port, user="acid", dbname=database)
    admin = psycopg2.connect(host="127.0.0.1", port=postgres_server.port, user="acid", dbname="postgres")
    admin.autocommit = True
    try:
        ms.init()
        txn_id = txn_with_work(ms)
        before = everything(ms)
        with blocker.cursor() as cursor:  # the commit will block when it deletes this lock row
            cursor.execute('SELECT 1 FROM "HIVE_LOCKS" WHERE "HL_TXNID" = %s FOR UPDATE', (txn_id,))
        outcome: dict[str, BaseException | None] = {}

        def commit() -> None:
            try:
                ms.txns.commit(txn_id)
                outcome["error"] = None
            except BaseException as exc:  # handed to the test thread
                outcome["error"] = exc

        thread = threading.Thread(target=commit, daemon=True)
        thread.start()
        deadline = time.monotonic() + WAIT_SECONDS
        pid = None
        while pid is None and time.monotonic() < deadline:
            pid = _backend_waiting_on_a_lock(admin, database)
            time.sleep(0.02)
        assert pid is not None, "the commit never blocked on the held row lock"
        with admin.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", (pid,))
        thread.join(timeout=WAIT_SECONDS)
        blocker.rollback()
        error = outcome["error"]
        assert isinstance(error, MetastoreUnavailableError), repr(error)
        assert f"commit transaction {txn_id}" in str(error) and "lost the connection" in str(error)
        assert_still_open_and_intact(ms, txn_id, before)
        ms.txns.commit(txn_id)
        assert ms.txns.show_transactions() == []
    finally:
        blocker.close()
        admin.close()
        ms.close()


@pytest.mark.postgres
def test_a_lock_request_whose_connection_dies_as_it_commits(postgres_url, clock, tmp_path):
    """A lock request's connection dies as its commit is sent (a metastore restart under a streaming writer): a
    transaction's request is sent again and granted; one without a transaction is not repeated (a duplicate would
    block others until it expired) and the error says the outcome is unknown."""
    ms = Metastore(postgres_url, clock=clock, identity=ME, warehouse=str(tmp_path / "warehouse"), outage_seconds=5)
    ms.init()
    closed: list[bool] = []

    def close_as_it_commits(connection):
        if not closed:
            closed.append(True)
            connection.connection.dbapi_connection.close()

    partition = [LockComponent("default", "t", "p=1", LockType.SHARED_WRITE)]
    txn_id = ms.txns.open_txn()
    sa.event.listen(ms.db.engine, "commit", close_as_it_commits)
    try:
        assert ms.locks.lock(partition, txn_id=txn_id).acquired
        assert closed
        closed.clear()
        with pytest.raises(MetastoreUnavailableError, match="whether this commit was is unknown"):
            ms.locks.lock(partition)
        assert closed
    finally:
        sa.event.remove(ms.db.engine, "commit", close_as_it_commits)
    assert {lock.txn_id for lock in ms.locks.show_locks()} == {txn_id}
    ms.txns.commit(txn_id)
    assert ms.locks.show_locks() == []
    ms.close()


@pytest.mark.postgres
def test_pooled_connections_killed_while_idle(postgres_url, postgres_server, clock, tmp_path):
    """Connections ended while idle in the pool (a server restart, a proxy timeout), with outage retries off: a read
    retries on a fresh connection; a write fails once with MetastoreUnavailableError, having done nothing, and the
    next one works."""
    ms = Metastore(postgres_url, clock=clock, identity=ME, warehouse=str(tmp_path / "warehouse"), outage_seconds=0)
    database = sa.engine.make_url(postgres_url).database
    admin = psycopg2.connect(host="127.0.0.1", port=postgres_server.port, user="acid", dbname="postgres")
    admin.autocommit = True
    try:
        ms.init()
        txn_id = ms.txns.open_txn()
        ms.txns.show_transactions()
        with admin.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,))
        time.sleep(0.2)  # let the backends go
        assert [t.txn_id for t in ms.txns.show_transactions()] == [txn_id]
        before = everything(ms)
        committed = False
        for _ in range(3):
            try:
                ms.txns.commit(txn_id)
                committed = True
                break
            except MetastoreUnavailableError as exc:
                assert "lost the connection" in str(exc)
                assert everything(ms) == before
        assert committed
        assert ms.txns.show_transactions() == []
        assert ms.txns.open_txn() == txn_id + 1
    finally:
        admin.close()
        ms.close()


@pytest.mark.postgres
def test_server_stopped_under_an_open_transaction(clock, tmp_path):
    """A dedicated server goes away: every call says the metastore is unreachable (not a raw driver error)."""
    server = PostgresServer.start_new(base_dir=None)
    try:
        url = server.create_database("faults")
        ms = Metastore(url, clock=clock, identity=ME, warehouse=str(tmp_path / "warehouse"), outage_seconds=0.5)
        try:
            ms.init()
            txn_id = ms.txns.open_txn()
            server.stop()
            for call in (lambda: ms.txns.commit(txn_id), lambda: ms.txns.open_txn(), ms.txns.show_transactions):
                with pytest.raises(MetastoreUnavailableError) as info:
                    call()
                assert "metastore" in str(info.value) and "retried" in str(info.value)  # waited out 0.5 s
        finally:
            ms.close()
    finally:
        server.stop()


def test_a_connection_lost_before_the_commit_is_retried_and_logged(ms, caplog):
    """Outage retries on (the default): the commit whose connection died before it was sent runs again from the
    start on a new connection, once, and the log says what failed and that it recovered."""
    txn_id = txn_with_work(ms)
    fired, before_execute = _close_before_deleting_the_txn_row()
    sa.event.listen(ms.db.engine, "before_cursor_execute", before_execute)
    before = outage_counts()
    try:
        with caplog.at_level("WARNING", logger="acid_core.metastore"):
            ms.txns.commit(txn_id)
    finally:
        sa.event.remove(ms.db.engine, "before_cursor_execute", before_execute)
    assert fired
    assert ms.txns.show_transactions() == [] and ms.locks.show_locks() == []
    with ms.db.engine.connect() as connection:  # committed exactly once
        assert connection.execute(sa.select(sa.func.count()).select_from(schema.completed_txn_components).where(
            schema.completed_txn_components.c.CTC_TXNID == txn_id)).scalar_one() == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"commit transaction {txn_id} failed" in m for m in messages), messages
    assert any(f"commit transaction {txn_id} succeeded after 1 retries" in m for m in messages), messages
    after = outage_counts()
    assert after["failures"] == before["failures"] + 1 and after["recoveries"] == before["recoveries"] + 1


# --- unreachable and malformed URLs -------------------------------------------------------------------------------

def _closed_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_unreachable_postgres_url_is_unavailable_and_hides_the_password():
    ms = Metastore(f"postgresql+psycopg2://acid:s3cret@127.0.0.1:{_closed_port()}/metastore")
    try:
        with pytest.raises(MetastoreUnavailableError) as info:
            ms.init()
        message = str(info.value)
        assert "127.0.0.1" in message and "s3cret" not in message
    finally:
        ms.close()


def test_sqlite_file_that_cannot_be_created(tmp_path):
    """The SQLite file's directory cannot exist (its parent is a regular file)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    with pytest.raises(MetastoreUnavailableError) as info:
        ms = Metastore(f"sqlite:///{blocker}/sub/metastore.db")
        try:
            ms.init()
        finally:
            ms.close()
    assert "not-a-directory" in str(info.value)


def test_sqlite_file_that_is_not_a_database(tmp_path):
    path = tmp_path / "metastore.db"
    path.write_bytes(b"this is not an sqlite database, just some bytes" * 100)
    ms = Metastore(f"sqlite:///{path}")
    try:
        with pytest.raises(MetastoreError) as info:
            ms.init()
        assert "not a database" in str(info.value)
    finally:
        ms.close()


@pytest.mark.parametrize("url,complaint", [
    ("not a url", "not a SQLAlchemy URL"),
    ("mysql://user@host/db", "only postgresql and sqlite"),
    ("oracle+cx_oracle://user@host/db", "only postgresql and sqlite"),
    ("postgresql+psycopg2://acid@127.0.0.1:notaport/metastore", "notaport"),
    ("postgresql+nosuchdriver://acid@127.0.0.1/metastore", "nosuchdriver"),
])
def test_malformed_urls_are_metastore_errors(url, complaint):
    with pytest.raises(MetastoreError) as info:
        Metastore(url).init()
    assert complaint in str(info.value)


def test_a_postgresql_url_without_a_driver_works_or_says_what_to_install():
    """`postgresql://` makes SQLAlchemy pick its default driver; if that is not installed, say so as a MetastoreError."""
    try:
        ms = Metastore(f"postgresql://acid@127.0.0.1:{_closed_port()}/metastore")
    except MetastoreError as exc:
        assert "psycopg" in str(exc)
        return
    try:
        with pytest.raises(MetastoreUnavailableError):
            ms.init()
    finally:
        ms.close()


def test_in_memory_sqlite_works_or_is_refused_clearly():
    """`sqlite://` (in memory) would give every connection its own empty database."""
    try:
        ms = Metastore("sqlite://")
        try:
            ms.init()
            txn_id = ms.txns.open_txn()
            assert [t.txn_id for t in ms.txns.show_transactions()] == [txn_id]
        finally:
            ms.close()
    except MetastoreError as exc:
        assert "memory" in str(exc), str(exc)


# --- bad input leaves the metastore as it was ---------------------------------------------------------------------

def test_bad_input_changes_nothing(ms):
    ms.catalog.create_table("default", "plain", [("id", "int")])
    ms.catalog.create_table("default", "acid", [("id", "int")], params={"transactional": "true"})
    live = txn_with_work(ms)
    aborted = ms.txns.open_txn()
    ms.txns.abort(aborted)
    before = everything(ms)
    attempts = [
        (NoSuchObjectError, lambda: ms.catalog.require_transactional("default", "ghost")),
        (NoSuchObjectError, lambda: ms.catalog.require_transactional("nowhere", "acid")),
        (NotTransactionalError, lambda: ms.catalog.require_transactional("default", "plain")),
        (NoSuchTxnError, lambda: ms.txns.commit(999)),
        (NoSuchTxnError, lambda: ms.txns.abort(999)),
        (TxnAbortedError, lambda: ms.txns.commit(aborted)),
        (TxnAbortedError, lambda: ms.txns.allocate_write_ids([live, aborted], "default", "acid")),
        (NoSuchTxnError, lambda: ms.txns.add_components(999, "default", "acid", ["p=1"], Operation.UPDATE)),
        (NoSuchTxnError, lambda: ms.locks.lock([LockComponent("default", "acid")], txn_id=999)),
        (MetastoreError, lambda: ms.txns.open_txns(0)),
        (AcidError, lambda: ms.catalog.create_table("default", "bad", [("id", "nonsense")])),
        (MetastoreError, lambda: ms.catalog.create_table("default", "x;drop table TXNS", [("id", "int")])),
    ]
    for error, attempt in attempts:
        with pytest.raises(AcidError) as info:
            attempt()
        assert isinstance(info.value, error), repr(info.value)
    assert everything(ms) == before
    ms.txns.commit(live)



def _hold_sqlite_write_lock(path, seconds: float, held: threading.Event,
                            released: threading.Event) -> threading.Thread:
    """Another connection (another writer, as another process would be) holding SQLite's write lock for `seconds`;
    `released` is set just before it commits."""
    import sqlite3

    def hold():
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            held.set()
            time.sleep(seconds)
            released.set()
            other.execute("COMMIT")
        finally:
            other.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert held.wait(10)
    return thread


def test_a_sqlite_write_waits_for_another_writer_and_a_read_does_not(tmp_path):
    path = tmp_path / "metastore.db"
    ms = Metastore(f"sqlite:///{path}", warehouse=str(tmp_path / "warehouse"))
    try:
        ms.init()
        ms.catalog.create_table("default", "t", [("id", "int")], params={"transactional": "true"})
        held, released = threading.Event(), threading.Event()
        holder = _hold_sqlite_write_lock(path, 0.5, held, released)
        assert ms.catalog.list_tables("default") == ["t"]
        assert not released.is_set()  # under WAL the read went on while the other writer held the lock
        txn = ms.txns.open_txn()  # a write: it starts once the other writer commits
        assert released.is_set()
        holder.join(10)
        ms.txns.commit(txn)
        assert txn not in {t.txn_id for t in ms.txns.show_transactions() if t.state == "o"}
    finally:
        ms.close()
