"""Transaction, lock and compaction statements: SHOW TRANSACTIONS / LOCKS / COMPACTIONS, ABORT ..., ALTER TABLE COMPACT."""

from __future__ import annotations

import time

from acid_cli.hiveql import ast
from acid_cli.sql.results import result, shown
from acid_cli.sql.session import Session
from acid_core.compaction.requests import check_request
from acid_core.errors import MetastoreError, one_line
from acid_core.metastore.codes import PENDING_STATES, CompactionState, CompactionType
from acid_core.metastore.compaction_rows import CompactionInfo
from acid_core.metastore.locks import LOCK_ACQUIRED, LockType
from acid_core.metastore.txns import TXN_OPEN

COMPACTION_HEADERS = ("CompactionId", "Database", "Table", "Partition", "Type", "State", "Worker host", "Worker",
                      "Enqueue Time", "Start Time", "Duration(ms)", "HadoopJobId", "Error message", "Initiator host",
                      "Initiator", "Pool name", "TxnId", "Next TxnId", "Commit Time", "Highest WriteId")
COMPACTION_KEYS = ("compactionid", "dbname", "tabname", "partname", "type", "state", "workerhost", "workerid",
                   "enqueuetime", "starttime", "duration", "hadoopjobid", "errormessage", "initiatorhost",
                   "initiatorid", "poolname", "txnid", "nexttxnid", "committime", "hightestwriteid")
# Hive's SHOW LOCKS header (ShowLocksOperation.dumpLockInfo); the keys name the fields in --format jsonl
LOCK_HEADERS = ("Lock ID", "Database", "Table", "Partition", "State", "Blocked By", "Type", "Transaction ID",
                "Last Heartbeat", "Acquired At", "User", "Hostname", "Agent Info")
LOCK_KEYS = ("lockid", "database", "table", "partition", "lock_state", "blocked_by", "lock_type", "transaction_id",
             "last_heartbeat", "acquired_at", "user", "hostname", "agent_info")
_ORDER_ALIASES = {"id": "compactionid", "database": "dbname", "db": "dbname", "table": "tabname", "tablename": "tabname",
                  "partition": "partname", "partitionname": "partname", "enqueue_time": "enqueuetime",
                  "start_time": "starttime", "pool": "poolname", "highestwriteid": "hightestwriteid"}


def _split_id(identifier: str | None) -> tuple[str | None, str | None]:
    """Hive stores worker/initiator ids as `<host>-<thread>`; SHOW COMPACTIONS prints the two parts."""
    if not identifier:
        return None, None
    host, sep, thread = identifier.rpartition("-")
    return (host, thread) if sep else (identifier, None)


def _compaction_row(info: CompactionInfo) -> tuple:
    worker_host, worker = _split_id(info.worker_id)
    initiator_host, initiator = _split_id(info.initiator_id)
    duration = info.end_ms - info.start_ms if info.end_ms is not None and info.start_ms is not None else None
    values = (info.id, info.database, info.table, info.partition, info.type.display, info.state.display, worker_host,
              worker, info.enqueue_ms, info.start_ms, duration, info.hadoop_job_id, one_line(info.error_message),
              initiator_host, initiator, info.pool_name or "default", info.txn_id, info.next_txn_id, info.commit_ms,
              info.highest_write_id)
    return tuple(shown(v) for v in values)


def show_compactions(session: Session, statement: ast.ShowCompactions) -> None:
    catalog = session.metastore.catalog
    database = table = partition = None
    if statement.table is not None:
        database, table = session.qualify(statement.table)
        info = catalog.get_table(database, table)
        if statement.partition is not None:
            partition = info.partition_name(statement.partition.to_dict())
    elif statement.database is not None:
        database = statement.database
        catalog.get_database(database)
    kind = CompactionType.parse(statement.compaction_type) if statement.compaction_type else None
    state = CompactionState.parse(statement.status) if statement.status else None
    entries = session.metastore.compactions.show(compaction_id=statement.compaction_id, database=database, table=table,
                                                 partition=partition, pool=statement.pool, compaction_type=kind,
                                                 state=state)
    rows = [_compaction_row(e) for e in entries]
    for item in reversed(statement.order_by):
        key = _ORDER_ALIASES.get(item.column, item.column)
        if key not in COMPACTION_KEYS:
            raise MetastoreError(f"SHOW COMPACTIONS cannot order by {item.column!r}; columns are {list(COMPACTION_KEYS)}")
        position = COMPACTION_KEYS.index(key)
        rows.sort(key=lambda row: (row[position] == " --- ", str(row[position]) if not isinstance(row[position], int)
                                   else f"{row[position]:020d}"), reverse=item.descending)
    if statement.limit is not None:
        rows = rows[:statement.limit]
    session.show(result(COMPACTION_HEADERS, COMPACTION_KEYS, rows))


def show_transactions(session: Session, statement: ast.ShowTransactions) -> None:
    rows = [(t.txn_id, t.state_name, t.started_ms, t.last_heartbeat_ms, t.user, t.host)
            for t in session.metastore.txns.show_transactions()]
    session.show(result(["Transaction ID", "Transaction State", "Started Time", "Last Heartbeat Time", "User",
                         "Hostname"], ["txnid", "state", "startedtime", "lastheartbeattime", "user", "host"], rows))


def show_locks(session: Session, statement: ast.ShowLocks) -> None:
    database = table = partition = None
    if statement.table is not None:
        database, table = session.qualify(statement.table)
        info = session.metastore.catalog.get_table(database, table)
        if statement.partition is not None:
            partition = info.partition_name(statement.partition.to_dict())
    elif statement.database is not None:
        database = statement.database
    locks = session.metastore.locks.show_locks(database=database, table=table, partition=partition)
    rows = [(lock.lock_id if lock.internal_id == 1 else f"{lock.lock_id}.{lock.internal_id}", lock.database,
             shown(lock.table), shown(lock.partition), "ACQUIRED" if lock.state == LOCK_ACQUIRED else "WAITING",
             shown(f"{lock.blocked_by_lock_id}.{lock.blocked_by_internal_id}" if lock.blocked_by_lock_id else None),
             LockType(lock.lock_type).name, shown(lock.txn_id or None), lock.last_heartbeat_ms,
             shown(lock.acquired_at_ms), lock.user, lock.host, shown(lock.agent_info)) for lock in locks]
    session.show(result(LOCK_HEADERS, LOCK_KEYS, rows))


def abort_transactions(session: Session, statement: ast.AbortTransactions) -> None:
    """All named transactions must be open; then all are aborted (a failed statement changes nothing)."""
    states = {t.txn_id: t.state for t in session.metastore.txns.show_transactions()}
    not_open = [t for t in statement.txn_ids if states.get(t) != TXN_OPEN]
    if not_open:
        described = ", ".join(f"{t} ({'aborted' if states.get(t) == 'a' else 'not open'})" for t in not_open)
        raise MetastoreError(f"cannot abort transactions {described}; nothing was aborted")
    results = session.metastore.txns.abort_txns(statement.txn_ids)
    for txn_id, problem in results.items():
        session.say(f"Aborted transaction {txn_id}" if problem is None else problem)


def abort_compactions(session: Session, statement: ast.AbortCompactions) -> None:
    results = session.metastore.compactions.abort_compactions(statement.compaction_ids)
    session.show(result(["CompactionId", "Status", "Message"], ["compactionid", "status", "message"],
                        [(i, "Success" if m.startswith("Successfully") else "Error", m) for i, m in results.items()]))


def compact(session: Session, statement: ast.AlterTableCompact) -> None:
    """ALTER TABLE ... COMPACT: the request checked by the rules every front end applies (`check_request`), then
    queued for each partition it names."""
    database, name = session.qualify(statement.table)
    request = check_request(session.metastore, database, name, statement.compaction_type,
                            partition=statement.partition.to_dict() if statement.partition is not None else None,
                            number_of_buckets=statement.number_of_buckets, pool=statement.pool,
                            properties=dict(statement.properties))
    targets = request.targets
    if not targets:
        session.say(f"No partition of {request.table.full_name} has anything to compact")
        return
    queue = session.metastore.compactions
    ids = []
    for partition in targets:
        outcome = queue.enqueue(database, name, partition, request.compaction_type, pool=request.pool,
                                properties=request.properties, number_of_buckets=request.number_of_buckets)
        where = f" ({partition})" if partition and len(targets) > 1 else ""
        if outcome.accepted:
            session.say(f"Compaction enqueued with id {outcome.compaction_id}{where}")
            ids.append(outcome.compaction_id)  # AND WAIT waits for accepted requests only, as Hive does
        else:
            session.say(f"Compaction already enqueued with id {outcome.compaction_id}; State is "
                        f"{outcome.state.display}{where}")
    if statement.wait:
        for compaction_id in ids:
            _wait(session, compaction_id)


def _wait(session: Session, compaction_id: int) -> None:
    """Poll with doubling pauses, capped by hive.compactor.wait.timeout, until the compaction leaves the queue's
    initiated/working states."""
    deadline = time.monotonic() + session.wait_timeout_ms / 1000
    pause = session.wait_poll_s
    while True:
        info = session.metastore.compactions.get(compaction_id)
        if info is None or info.state not in PENDING_STATES:
            state = info.state.display if info else "unknown"
            session.say(f"Compaction with id {compaction_id} finished with status: {state}")
            return
        if time.monotonic() >= deadline:
            raise MetastoreError(f"compaction {compaction_id} is still {info.state.display} after "
                                 f"{session.wait_timeout_ms} ms (hive.compactor.wait.timeout); it stays queued")
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 60.0)
